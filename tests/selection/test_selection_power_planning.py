"""Issue #53 (12): `pstbench power` plans selection gates: per cell (metric, outcome) the minimum detectable drop of
accuracy and the tasks a given drop needs under the exact McNemar test, from a candidate's observed discordance or
an assumption its first line names (--discordance, else judges erring independently). Checked against a hand
simulation with scipy.stats.binomtest and Connor's (1987) normal-approximation sample size."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
from helpers.selection_runs import GOOD, pattern, score
from scipy.stats import binomtest, norm

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.protocol import load_protocol


def _cli(*args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_main(list(args))
        except SystemExit as exc:
            code = exc.code
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def judge(tmp_path_factory):
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.tracks import resolve_selection_track

    root = tmp_path_factory.mktemp("plan_sel")
    params = SelectionParams.of(load_protocol("vab"))
    demo = resolve_selection_track("vab-demo")
    return score(root, "good", demo, params, pattern(1, GOOD)), score(root, "other", demo, params, pattern(4, GOOD))


def _hand_power(n: int, p: float, psi: float, drop: float, tests: int, reps: int = 3000, seed: int = 5) -> float:
    """Units drawn one multinomial at a time (lost w.p. (psi + drop) / 2, won w.p. (psi - drop) / 2), tested with
    scipy.stats.binomtest; detected when tests * p < 0.05 and more were lost."""
    rng = np.random.default_rng(seed)
    qc, qb = (psi + drop) / 2, (psi - drop) / 2
    hits = 0
    for _ in range(reps):
        b, c, _ = rng.multinomial(n, [qb, qc, 1 - qb - qc])
        if b + c and c > b and tests * binomtest(int(c), int(b + c), 0.5).pvalue < 0.05:
            hits += 1
    return hits / reps


def test_tasks_needed_for_a_drop_match_a_hand_simulation_and_connor(judge):
    """`power RUN --discordance 0.2 --effect top1=0.05`: the tasks needed, with one test per cell, reach 80% power in
    a hand simulation (and one task in ten fewer does not reach it by much), and agree with Connor's formula."""
    good, _ = judge
    code, out, err = _cli(
        "power", str(good), "--metrics", "top1", "--discordance", "0.2", "--effect", "top1=0.05", "--json"
    )
    assert code == 0, err
    data = json.loads(out)
    assert "--discordance" in data["discordance_source"]
    cells = {c["outcome"]: c for c in data["cells"]}
    cell = cells["pass^3"]
    need, tests = cell["tasks_needed"], cell["tests"]
    assert tests == 2 and need is not None
    per_task = cell["n"] / cell["tasks"]
    n = round(need * per_task)
    assert 0.76 <= _hand_power(n, cell["accuracy"], 0.2, 0.05, tests) <= 0.86
    a, b = norm.ppf(1 - 0.05 / (2 * tests)), norm.ppf(0.8)
    connor = (a * np.sqrt(0.2) + b * np.sqrt(0.2 - 0.05**2)) ** 2 / 0.05**2
    assert abs(n / connor - 1) < 0.1, (n, connor)
    ap = cells["ap@1"]
    assert ap["tasks_needed"] == pytest.approx(need / 3, abs=2)  # ap@1: three trials per task


def test_first_line_names_the_discordance_and_a_candidate_gives_the_observed_one(judge):
    good, other = judge
    code, out, _ = _cli("power", str(good), "--metrics", "top1")
    assert code == 0 and out.splitlines()[0].startswith("discordance: ASSUMING the two judges err independently")
    assert "minimum detectable drop of accuracy" in out
    code, out, _ = _cli("power", str(good), str(other), "--json", "--metrics", "top1", "--pairs", "400")
    cells = json.loads(out)["cells"]
    from pytest_pstbench.selection.compare import SELECTION_RUNS, compare_two

    rows = compare_two(SELECTION_RUNS.load(good), SELECTION_RUNS.load(other), load_protocol("vab"), ["top1"])
    assert [c["discordance"] for c in cells] == [(r.b + r.c) / r.n for r in rows]
    assert all(c["mde_at_tasks"] < (c["mde"] or 1) for c in cells)
    code, _, err = _cli("power", str(good), "--correlation", "0.5")
    assert code == 2 and "plans paired runs" in err
