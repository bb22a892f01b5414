"""Issue #53 item 9: sections on demand. `vab score` on vab-demo prints the headline table, one line per other section
and the cost in at most ~35 lines; `-v` prints every section in full (every cell row, the human row per cell, the
position-bias table, the judge among the experts), `--show SECTION` one of them; an incomplete run's human row never
reads "30 of 23" tasks."""

from __future__ import annotations

import random

from helpers.selection_runs import score

from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.selection.protocol import SelectionParams
from pytest_pstbench.selection.tables import human_tables
from pytest_pstbench.selection.tracks import resolve_selection_track

PARAMS = SelectionParams.of(load_protocol("vab"))


def _score(tmp_path, capsys, *extra) -> list[str]:
    rng = random.Random(3)
    tmp_path.mkdir(parents=True, exist_ok=True)
    score(tmp_path, "j", resolve_selection_track("vab-demo"), PARAMS, lambda *_a: rng.random() < 0.6, *extra)
    return capsys.readouterr().out.splitlines()


def test_default_output_is_short_and_every_section_is_one_line(tmp_path, capsys):
    out = _score(tmp_path, capsys)
    assert len(out) <= 35
    text = "\n".join(out)
    assert "overall" in text and "domain=" not in text and "k=2 " not in text
    assert any(x.startswith("cells: ") and "--show cells" in x for x in out)
    assert any(x.startswith("position bias: ") and "alpha 0.05" in x for x in out)
    assert any(x.startswith("judge among the experts: below every expert") for x in out)
    assert "position bias (picked rate" not in text and "free-marginal kappa" not in text


def test_verbose_prints_every_section_and_show_one(tmp_path, capsys):
    out = "\n".join(_score(tmp_path / "v", capsys, "-v"))
    for piece in ("domain=photography", "k=6 ", "position bias (picked rate", "free-marginal kappa"):
        assert piece in out
    assert out.count("domain=photography") == 3  # ap@1, pass^3 and the human row
    shown = "\n".join(_score(tmp_path / "s", capsys, "--show", "bias"))
    assert "position bias (picked rate" in shown and "domain=" not in shown and "free-marginal kappa" not in shown
    assert any(x.startswith("judge among the experts: ") for x in shown.splitlines())


def test_an_incomplete_runs_human_row_never_covers_more_than_its_total():
    summary = {
        "cells": [{"group": "overall", "value": "all", "n": 23}],
        "human": {
            "label": "Human",
            "cells": [
                {
                    "group": "overall",
                    "value": "all",
                    "n_tasks": 30,
                    "n_experts": 10,
                    "metrics": {m: {a: {"mean": 0.9, "pm": 0.1} for a in PARAMS.aggregations} for m in PARAMS.metrics},
                }
            ],
            "judgments": 300,
            "experts": 10,
            "tasks": 30,
            "track_tasks": 30,
            "excluded_no_consensus": 0,
            "tasks_without_votes": [],
            "label_disagreements": [],
        },
    }
    text = human_tables(summary, PARAMS)
    assert "30 of 23" not in text and " 30 " in text
