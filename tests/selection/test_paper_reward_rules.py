"""The scoring rules of the paper's reward models that no package provides (issue #43, "the paper's six reward
models, listed"; §H.4): Q-Instruct's logit difference, PEAS's expected value of a 10-bin distribution,
RealQA's text parse with its second constrained prompt. Each is checked on given logits, distributions and
texts against a hand computation; docs/selection.md's table lists all six."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pytest_pstbench.selection.paper_rewards import (
    MISSING,
    MODELS,
    peas_score,
    qinstruct_score,
    realqa_parse,
    realqa_score,
)


def test_qinstruct_is_the_logit_of_good_minus_that_of_poor():
    assert qinstruct_score(3.25, -1.5) == 4.75
    assert qinstruct_score(-2.0, 1.0) == -3.0
    with pytest.raises(ValueError, match="finite"):
        qinstruct_score(float("inf"), 0.0)


def test_peas_is_the_expected_bin_of_its_10_bin_distribution():
    dist = [0, 0, 0.1, 0.2, 0.4, 0.2, 0.1, 0, 0, 0]
    assert peas_score(dist) == pytest.approx(3 * 0.1 + 4 * 0.2 + 5 * 0.4 + 6 * 0.2 + 7 * 0.1, rel=1e-12)
    assert peas_score([1] * 10) == pytest.approx(5.5, rel=1e-12)  # unnormalised: divided by the sum
    assert peas_score([0] * 9 + [1]) == 10.0 and peas_score([1] + [0] * 9) == 1.0
    for bad in ([0.1] * 9, [0] * 10, [-0.1] + [0.2] * 9, [math.nan] * 10):
        with pytest.raises(ValueError):
            peas_score(bad)


@pytest.mark.parametrize(
    "text, score",
    [
        ("7.5", 7.5),
        ("Score: 8/10", 8.0),
        ("I would rate this image 6 out of 10.", 6.0),
        ("10.0", 10.0),
        ("0", 0.0),
        ("The aesthetic quality is high.", None),
        ("85 out of 100", None),
        ("-3", None),
        ("v2.7 model says 4", 4.0),
    ],
)
def test_realqa_text_parses_to_a_score_in_0_10(text, score):
    assert realqa_parse(text) == score


def test_realqa_asks_the_constrained_prompt_only_when_the_first_answer_fails():
    asked = []

    def ask():
        asked.append(1)
        return "5.5"

    assert realqa_score("Score: 9", ask) == 9.0 and asked == []
    assert realqa_score("a lovely picture", ask) == 5.5 and asked == [1]
    with pytest.raises(ValueError, match=r"no score in \[0, 10\]"):
        realqa_score("lovely", lambda: "very lovely")


def test_docs_table_lists_the_six_models_and_what_is_missing():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "selection.md").read_text(encoding="utf-8")
    table = doc.split("### The paper's reward models", 1)[1].split("\n\n", 2)[1]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(rows) == 6 == len(MODELS)
    for name in MODELS:
        assert sum(f"`vab-paper:{name}`" in row for row in rows) == 1, name
    assert set(MISSING) == set(MODELS) - {"qalign"}
