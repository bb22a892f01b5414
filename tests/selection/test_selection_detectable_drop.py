"""Issue #46 "What the gate can detect", selection runs: the minimum detectable drop of accuracy
(selection/power.py) against the exact McNemar gate it describes, simulated in this test from per-unit outcomes;
the p-values equal scipy.stats.binomtest; a comparison whose pass^3 tests cannot be significant at 5 tasks says so
in one line in compare, table and the gate."""

from __future__ import annotations

import contextlib
import io
import json
import shutil

import numpy as np
import pytest
import yaml
from helpers.selection_runs import pattern, write_answers
from scipy.stats import binomtest

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.selection.compare import (
    WORSE,
    McNemarComparison,
    finish_comparison,
    finish_with_power,
    mcnemar_exact,
)
from pytest_pstbench.selection.power import pvalues

PROTOCOL = load_protocol("vab")
ALPHA = 0.05


def test_vectorised_pvalues_are_scipy_binomtest():
    """issue #46: the simulation's exact McNemar p-values equal scipy.stats.binomtest(min(b, c), b + c, 1/2), and
    the kit's `mcnemar_exact`, for every (b, c) up to 60."""
    b, c = np.meshgrid(np.arange(61), np.arange(61))
    b, c = b.ravel(), c.ravel()
    want = np.array([1.0 if x + y == 0 else binomtest(int(min(x, y)), int(x + y), 0.5).pvalue for x, y in zip(b, c)])
    np.testing.assert_allclose(pvalues(b, c), np.minimum(want, 1.0), rtol=1e-12, atol=0)
    assert [mcnemar_exact(int(x), int(y)) for x, y in zip(b[:200], c[:200])] == pytest.approx(
        np.minimum(want[:200], 1.0), rel=1e-12
    )


def _row(metric, outcome, n, b, c, both_right):
    return McNemarComparison(
        metric=metric,
        outcome=outcome,
        baseline="base",
        candidate="cand",
        n=n,
        b=b,
        c=c,
        both_right=both_right,
        both_wrong=n - b - c - both_right,
        acc_baseline=(both_right + c) / n,
        acc_candidate=(both_right + b) / n,
        diff=(b - c) / n,
        pvalue=mcnemar_exact(b, c),
    )


def _draw(rng, x: np.ndarray, q_b: float, q_c: float):
    """One candidate against the fixed baseline outcomes `x` (0/1 per unit): a right unit is lost with probability
    q_c / p, a wrong one won with probability q_b / (1 - p) (p the baseline's accuracy): (b, c, both right)."""
    p = x.mean()
    u = rng.random(x.size)
    lost = (x == 1) & (u < q_c / p)
    won = (x == 0) & (u < q_b / (1 - p))
    return int(won.sum()), int(lost.sum()), int(((x == 1) & ~lost).sum())


def _planted(delta, disc, p):
    """The docstring's drop: discordance moved from won to lost (q_c = max((psi + delta) / 2, delta))."""
    q_c = min(max((disc + delta) / 2, delta), p)
    return max(0.0, min(q_c - delta, 1 - p)), q_c


@pytest.mark.parametrize("n, accuracy, won, lost", [(300, 0.6, 30, 30), (90, 0.8, 6, 3)])
def test_gate_fails_at_the_reported_drop_in_80_percent_and_rarely_without(n, accuracy, won, lost):
    """issue #46, done when: candidates drawn unit by unit from a fixed baseline, with the reported drop planted in
    one of six cells (the other five without a drop), fail the kit's gate (its McNemar p, Holm over the six tests,
    the verdict) in 80% +- 5 points of 2000 repetitions; without a drop in at most alpha."""
    x = np.zeros(n, dtype=int)
    x[: round(accuracy * n)] = 1
    cells = [(m, o) for m in ("top1", "bot1", "tb1") for o in ("pass^3", "ap@1")]
    observed = [_row(m, o, n, won, lost, int(x.sum()) - lost) for m, o in cells]
    comp = finish_with_power(observed, PROTOCOL)
    info = comp.rows[0].detectable
    assert info["tests"] == 6 and info["power"] == 0.8 and info["simulations"] == 2000  # docs/protocol.md defaults
    mde, disc = info["mde"], (won + lost) / n
    assert 0 < mde < accuracy

    def fail_rate(delta: float, seed: int) -> float:
        rng = np.random.default_rng(seed)
        fails = 0
        for _ in range(2000):
            rows = [
                _row(m, o, n, *_draw(rng, x, *_planted(delta if i == 0 else 0.0, disc, accuracy)))
                for i, (m, o) in enumerate(cells)
            ]
            fails += any(r.verdict == WORSE for r in finish_comparison(rows, PROTOCOL).rows)
        return fails / 2000

    assert abs(fail_rate(mde, 11) - 0.80) <= 0.05
    assert fail_rate(0.0, 12) <= ALPHA
    assert fail_rate(mde * 0.7, 13) < 0.75  # the reported drop is the smallest that reaches the target


def _variant(tmp_path, power: dict, name="vab-power.yaml"):
    data = yaml.safe_load(PROTOCOL.path.read_text())
    data["comparison"]["power"] = power
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path


def test_power_settings_are_the_protocols(tmp_path):
    """The target, simulation count and seed come from a selection protocol's `comparison.power` (the shipped vab.yaml
    has none: the documented defaults); a bad one is refused when the protocol loads, naming the key."""
    rows = lambda: [_row("top1", "pass^3", 200, 20, 20, 100)]  # noqa: E731
    base = finish_with_power(rows(), PROTOCOL).rows[0].detectable
    high = (
        finish_with_power(rows(), load_protocol(_variant(tmp_path, {"target": 0.95, "simulations": 500, "seed": 3})))
        .rows[0]
        .detectable
    )
    assert (high["power"], high["simulations"], high["seed"]) == (0.95, 500, 3) and high["mde"] > base["mde"]
    with pytest.raises(UserError, match=r"vab-bad.yaml: invalid selection protocol: comparison.power.simulations"):
        load_protocol(_variant(tmp_path, {"simulations": 5}, "vab-bad.yaml"))
    with pytest.raises(UserError, match=r"comparison.power.baseline_correlation plans paired runs only"):
        load_protocol(_variant(tmp_path, {"baseline_correlation": 0.5}, "vab-bad.yaml"))


# ---- five tasks: pass^3 cannot be significant -----------------------------------------------------------------
@pytest.fixture(scope="module")
def five(tmp_path_factory):
    """Two judges' runs on a local five-task track (copied from vab-demo): the baseline right everywhere, the
    candidate wrong everywhere."""
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.tracks import resolve_selection_track

    root = tmp_path_factory.mktemp("five")
    demo = resolve_selection_track("vab-demo")
    tasks = []
    for task in demo.tasks[:5]:
        names = []
        for i, c in enumerate(task.candidates):
            name = f"imgs/{task.id}-{i}.png"
            (root / "imgs").mkdir(exist_ok=True)
            shutil.copyfile(c, root / name)
            names.append(name)
        tasks.append({"id": task.id, "candidates": names, "best": task.best, "worst": task.worst})
    (root / "track.yaml").write_text(yaml.safe_dump({"kind": "selection", "id": "five", "tasks": tasks}))
    track = resolve_selection_track(str(root))
    params = SelectionParams.of(PROTOCOL)
    runs = {}
    for name, rate in (("right", 1.0), ("wrong", 0.0)):
        answers = write_answers(
            root / f"{name}.jsonl", track, params, pattern(0, dict.fromkeys(("top1", "bot1", "tb1"), rate))
        )
        assert (
            cli_main(
                [
                    "vab",
                    "score",
                    "--track",
                    str(root),
                    "--answers",
                    str(answers),
                    "--name",
                    name,
                    "--results",
                    str(root / "results"),
                ]
            )
            == 0
        )
        runs[name] = root / "results" / "five" / name
    return runs


def _cli(*args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(list(args))
    return code, out.getvalue(), err.getvalue()


def _one_line(text: str) -> str:
    lines = [
        line
        for line in text.splitlines()
        if "no difference can be significant here in 3 of the 6 tests" in line.lower()
    ]
    assert len(lines) == 1, text
    assert "(Top-1 pass^3, Bot-1 pass^3, TB-1 pass^3)" in lines[0] and "0.0625" in lines[0] and "fix:" in lines[0]
    return lines[0]


def test_five_tasks_say_pass3_cannot_be_significant(five):
    """issue #46: at 5 tasks the smallest exact McNemar p of a pass^3 test is 2 / 2^5 = 0.0625: compare (stderr),
    table (a note) and the gate (a note) say in one line that those tests cannot be significant; their MDE is none."""
    assert mcnemar_exact(0, 5) == binomtest(0, 5, 0.5).pvalue == 0.0625
    code, out, err = _cli("compare", str(five["right"]), str(five["wrong"]))
    assert code == 0 and "none at this n" in out
    _one_line(err)
    code, out, err = _cli("compare", str(five["right"]), str(five["wrong"]), "--json")
    tests = json.loads(out)["tests"]
    assert [t["detectable"]["mde"] is None for t in tests] == [True, False] * 3
    code, out, err = _cli("table", str(five["right"]), str(five["wrong"]))
    assert code == 0
    _one_line(out + err)

    from pytest_pstbench.selection.gate import evaluate_selection_gate

    result = evaluate_selection_gate(five["wrong"], PROTOCOL, baselines=[five["right"]], metrics=None)
    _one_line("\n".join(result.notes))
    assert result.failed  # the ap@1 tests (15 trials) still detect the loss
    assert any(
        b.startswith("drops of accuracy detectable with 80% power") and "pass^3 none at this n (n=5)" in b
        for b in result.basis
    )


def test_pytest_gate_shows_the_drop_in_the_table_junit_and_verdict(pytester, five):
    """The selection gate in pytest: the comparison table's MDE column (terminal), each test's `mde` in the JUnit
    properties, the passed gate's verdict with the detectable drops, and the note on the pass^3 tests."""
    r = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={five['right'].parent.parent.parent}",
        f"--pstbench-answers={five['right'].parent.parent.parent / 'right.jsonl'}",
        f"--pstbench-baseline={five['right']}",
        "--pstbench-name=again",
        "--junitxml=j.xml",
    )
    out = r.stdout.str()
    assert r.ret == 0, out
    assert "MDE drop (80% power)" in out and "none at this n" in out
    assert (
        "drops of accuracy detectable with 80% power (exact McNemar, Holm over 6 tests): Top-1 pass^3 none at this n (n=5)"
        in out
    )
    _one_line(out)
    junit = (pytester.path / "j.xml").read_text()
    assert 'value="no significant difference; b 0; c 0; p 1; p_holm 1; mde none at this n"' in junit
    assert junit.count("; mde 0.") == 3  # the three ap@1 tests (15 trials) have a drop
