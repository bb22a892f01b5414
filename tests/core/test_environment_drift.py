"""Issue #46 part 5: environment drift. A baseline computed in another environment than the candidate is named,
with the fields that differ, in `pstbench compare` (one line; JSON `environment_drift`) and in the gate's verdict
(a note); `compare --strict-environment` and `--pstbench-strict-environment` (or the ini key) make it a failure.
Runs in the same environment say nothing; the comparison's verdicts are unchanged either way."""

from __future__ import annotations

import io
import json
import shutil
from contextlib import redirect_stderr, redirect_stdout

import pytest
from helpers.selection_runs import pattern, score

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.drift import drift, drift_line
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.selection.protocol import SelectionParams
from pytest_pstbench.selection.tracks import resolve_selection_track

PERFECT = {"top1": 1.0, "bot1": 1.0, "tb1": 1.0}


def _cli(*args):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli_main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def test_drift_names_the_fields_that_move_values():
    """issue #46 case 5: versions, device, thread count and the weights' digest are compared; where the weights
    lie, python and the platform are not; a field one run does not record is named as not recorded."""
    base = {
        "python": "3.11",
        "numpy": "2.0",
        "torch": "2.3.0",
        "device": "cpu",
        "torch_threads": 4,
        "lpips_weights": {"path": "/a/alex.pth", "digest": "a" * 64},
    }
    same = {**base, "python": "3.12", "platform": "x", "lpips_weights": {"path": "/b/alex.pth", "digest": "a" * 64}}
    assert drift(base, same) == []
    other = {
        **base,
        "torch": "2.4.1",
        "torch_threads": 8,
        "lpips_weights": {"path": "/a", "digest": "b" * 64},
        "pyiqa": "0.1",
    }
    fields = drift(base, other)
    assert [f[0] for f in fields] == ["torch", "pyiqa", "torch_threads", "lpips_weights"]
    line = drift_line("b", "c", fields)
    assert "\n" not in line and "torch 2.3.0 (baseline) vs 2.4.1 (candidate)" in line
    assert "pyiqa not recorded (baseline) vs 0.1 (candidate)" in line and "aaaaaaaaaaaa" in line
    assert drift(None, base) == []


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("drift")
    demo = resolve_selection_track("vab-demo")
    params = SelectionParams.of(load_protocol("vab"))
    base = score(root, "base", demo, params, pattern(0, PERFECT))
    cand = score(root, "cand", demo, params, pattern(0, PERFECT))
    drifted = root / "drifted"
    shutil.copytree(base, drifted)
    run = json.loads((drifted / "run.json").read_text())
    run["environment"]["numpy"] = "1.0.0"
    run["environment"]["device"] = "cuda"
    (drifted / "run.json").write_text(json.dumps(run))
    return {"base": base, "cand": cand, "drifted": drifted, "root": root}


def test_compare_names_a_baseline_from_another_environment(runs):
    """issue #46 case 5: one line naming numpy and device; exit 0 (the verdicts unchanged) unless
    --strict-environment, which exits 1 with the line on stderr; runs from one environment: no line."""
    code, out, _ = _cli("compare", runs["base"], runs["cand"])
    assert code == 0 and "environment drift" not in out
    code, out, _ = _cli("compare", runs["drifted"], runs["cand"])
    lines = [x for x in out.splitlines() if x.startswith("environment drift:")]
    assert code == 0 and len(lines) == 1
    assert (
        "numpy, device differ" in lines[0]
        and "numpy 1.0.0 (baseline) vs" in lines[0]
        and "device cuda (baseline) vs not recorded (candidate)" in lines[0]
    )
    code, out, err = _cli("compare", runs["drifted"], runs["cand"], "--strict-environment")
    assert code == 1 and "pstbench compare: FAILED: environment drift" in err and "--strict-environment" in err
    code, out, _ = _cli("compare", runs["drifted"], runs["cand"], "--json")
    assert code == 0 and len(json.loads(out)["environment_drift"]) == 1
    code, out, _ = _cli("compare", runs["base"], runs["cand"], "--json")
    assert "environment_drift" not in json.loads(out)


def test_gate_notes_drift_and_the_strict_option_fails(pytester, runs):
    """issue #46 case 5: the gate's verdict carries the drift note and passes; --pstbench-strict-environment
    (and the ini key pstbench_strict_environment) fail it, naming the fields."""
    from helpers.selection_runs import write_answers

    demo = resolve_selection_track("vab-demo")
    params = SelectionParams.of(load_protocol("vab"))
    answers = write_answers(pytester.path / "same.jsonl", demo, params, pattern(0, PERFECT))
    args = (
        "-p",
        "no:cacheprovider",
        "--pstbench-track=vab-demo",
        f"--pstbench-answers={answers}",
        f"--pstbench-baseline={runs['drifted']}",
    )
    r = pytester.runpytest_subprocess(*args)
    assert r.ret == 0
    r.stdout.fnmatch_lines(
        [
            "*environment drift: baseline *drifted was computed in another environment than this run "
            "(numpy, device differ*",
            "*pstbench gate passed*",
        ]
    )
    r = pytester.runpytest_subprocess(*args, "--pstbench-strict-environment")
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.stdout.fnmatch_lines(
        ["*pstbench gate FAILED: environment drift: *numpy, device differ*--pstbench-strict-environment*"]
    )
    pytester.makeini("[pytest]\npstbench_strict_environment = true\n")
    assert pytester.runpytest_subprocess(*args).ret == pytest.ExitCode.TESTS_FAILED
