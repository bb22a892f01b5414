"""Issue #46 part 4: a judge placed among the experts (selection.agreement), from summary.json's overall cell
and its human row. The percentile equals scipy.stats.percentileofscore (kind="mean"), its bootstrap interval a
plain loop over the same resamples, the kappa a hand value; `vab score` prints the table on vab-demo (which has
votes) and `pstbench table` a note per judge."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.selection_runs import pattern, score
from scipy.stats import percentileofscore

from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.selection.agreement import among_experts
from pytest_pstbench.selection.protocol import SelectionParams
from pytest_pstbench.selection.tracks import resolve_selection_track

PARAMS = SelectionParams.of(load_protocol("vab"))


def _summary(judge: dict[str, float], experts: list[float]) -> dict:
    entry = lambda v: {"mean": v, "ci_low": v - 0.1, "ci_high": v + 0.05, "pm": 0.075, "random": 0.25}  # noqa: E731
    return {
        "cells": [{"group": "overall", "value": "all", "metrics": {m: {"ap@1": entry(v)} for m, v in judge.items()}}],
        "human": {
            "per_expert": [
                {"expert": f"e{i}", "metrics": {m: {"ap@1": v} for m in judge}} for i, v in enumerate(experts)
            ]
        },
    }


def test_percentile_interval_and_kappa_equal_independent_computations():
    """issue #46 case 4: ties count half (scipy's kind="mean"); the interval is the protocol's percentile
    bootstrap over experts; kappa = (p_o - p_e) / (1 - p_e) with the cell's random baseline."""
    experts = [0.70, 0.75, 0.75, 0.8, 0.85, 0.9, 0.9, 0.95]
    rows = among_experts(_summary({"top1": 0.75, "bot1": 0.92, "tb1": 0.5}, experts), PARAMS)
    boot = PARAMS.bootstrap
    for r, judge in zip(rows, (0.75, 0.92, 0.5)):
        assert r["percentile"] == pytest.approx(percentileofscore(experts, judge, kind="mean"), abs=1e-12)
        rng = np.random.default_rng(int(boot["seed"]))
        idx = rng.integers(0, len(experts), size=(int(boot["resamples"]), len(experts)))
        pcts = [percentileofscore([experts[i] for i in row], judge, kind="mean") for row in idx[:2000]]
        full = np.asarray(experts)[idx]
        loop = [100.0 * (np.sum(s < judge) + 0.5 * np.sum(s == judge)) / len(s) for s in full]
        assert loop[:2000] == pytest.approx(pcts, abs=1e-9)
        a = (1 - float(boot["confidence"])) / 2
        assert r["percentile_ci"] == pytest.approx([np.quantile(loop, a), np.quantile(loop, 1 - a)], abs=1e-12)
        assert r["kappa"] == pytest.approx((judge - 0.25) / 0.75)
        assert r["kappa_ci"] == pytest.approx([(judge - 0.1 - 0.25) / 0.75, (judge + 0.05 - 0.25) / 0.75])
        assert r["expert_median"] == pytest.approx(0.825) and r["experts"] == 8
    assert rows[2]["percentile"] == 0 and rows[1]["percentile"] == pytest.approx(87.5)
    assert among_experts({"cells": _summary({"top1": 0.5}, [])["cells"]}, PARAMS) is None  # no human row: nothing


def test_vab_score_and_table_place_the_judge(tmp_path, capsys):
    """issue #46 case 4: on vab-demo (votes: 10 experts) a judge right on 90% of trials is printed among them."""
    from pytest_pstbench.selection.paper_table import build_selection_table

    demo = resolve_selection_track("vab-demo")
    run = score(tmp_path, "good", demo, PARAMS, pattern(1, {"top1": 0.9, "bot1": 0.85, "tb1": 0.8}), "-v")
    out = capsys.readouterr().out
    assert "the judge among the experts" in out and "free-marginal kappa" in out
    notes = build_selection_table([run], metrics=None, against="best", protocol_spec=None).notes
    assert any(
        n.startswith("good among the experts on track vab-demo") and "percentile of 10 experts" in n for n in notes
    )
