"""What a pytest session writes: never over its own baseline, never a partial run over a complete one.

Found by issue #11 (a number the kit prints is right or absent): each test reproduces one case of the issue
(its number in the test's docstring) and checks the fixed behaviour."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.protocols import protocol_without_lpips
from helpers.run_files import snapshot
from helpers.tracks import make_outputs, make_track


def test_a_baseline_that_is_the_runs_own_folder_is_refused_before_scoring(pytester):
    """Issue #11 case 01."""
    manifest = make_track(pytester.path / "track")
    good = make_outputs(manifest, pytester.path / "good", strength=0.9)
    bad = make_outputs(manifest, pytester.path / "bad", strength=0.1)
    proto = protocol_without_lpips(pytester.path / "proto.yaml")
    base = ("-p", "no:cacheprovider", f"--pstbench-track={manifest}", f"--pstbench-protocol={proto}")
    pytester.runpytest_subprocess(*base, f"--pstbench-outputs={good}", "--pstbench-name=same").assert_outcomes(passed=4)
    run_dir = pytester.path / "results" / "small" / "same"
    before = {f: (run_dir / f).read_bytes() for f in ("metrics.csv", "summary.json", "run.json")}
    r = pytester.runpytest_subprocess(
        *base, f"--pstbench-outputs={bad}", "--pstbench-name=same", "--pstbench-baseline=results/small/same/"
    )
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    err = r.stderr.str()
    assert (
        "pstbench: --pstbench-baseline results/small/same: is the folder this run writes (results/small/same); "
        "the run would replace its own baseline; fix: give the run another --pstbench-name or compare with another baseline"
        in err
    )
    assert "Traceback" not in err + r.stdout.str()
    assert {f: (run_dir / f).read_bytes() for f in before} == before  # the baseline is untouched


def test_a_partial_session_does_not_replace_a_complete_run(pytester):
    """Issue #11 case 04."""
    manifest = make_track(pytester.path / "track")
    outputs = make_outputs(manifest, pytester.path / "out")
    proto = protocol_without_lpips(pytester.path / "proto.yaml")
    base = (
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={manifest}",
        f"--pstbench-protocol={proto}",
        f"--pstbench-outputs={outputs}",
        "--pstbench-name=full",
    )
    pytester.runpytest_subprocess(*base).assert_outcomes(passed=4)
    run_dir = pytester.path / "results" / "small" / "full"
    before = snapshot(run_dir)
    r = pytester.runpytest_subprocess(*base, "-k", "p01")
    r.assert_outcomes(passed=1, deselected=3)
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.stdout.fnmatch_lines(
        [
            "pstbench: error: results/small/full: holds a complete run, and this session scored 1 of 4 pairs (the others "
            "were not run, e.g. deselected with -k), so it was not written there and the complete run is kept; "
            "fix: run every pair, or give this partial run another name (--pstbench-name / --name)"
        ]
    )
    assert snapshot(run_dir) == before
    # under another name the partial run is written, and says it is partial
    r = pytester.runpytest_subprocess(*base, "-k", "p01", "--pstbench-name=part")
    assert json.loads((pytester.path / "results" / "small" / "part" / "run.json").read_text())["complete"] is False


def test_a_partial_selection_session_does_not_replace_a_complete_run(pytester):
    """Issue #11 case 04."""
    from pytest_pstbench.selection.demo import build_vab_demo

    vab = build_vab_demo(pytester.path / "vab-demo", size=(32, 24))
    judges = Path(__file__).resolve().parents[2] / "examples" / "judges" / "no_reference.py"
    base = (
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={vab}",
        f"--pstbench-judge={judges}:sharpness",
        "--pstbench-name=j",
    )
    r = pytester.runpytest_subprocess(*base)
    assert r.ret == 0
    run_dir = pytester.path / "results" / "vab-demo" / "j"
    before = snapshot(run_dir, ("per_task.csv", "summary.json", "run.json"))
    r = pytester.runpytest_subprocess(*base, "-k", "vd-01")
    r.stdout.fnmatch_lines(
        [
            "pstbench: error: results/vab-demo/j: holds a complete run, and this session scored 1 of 30 "
            "tasks (the others were not run, e.g. deselected with -k), so it was not written there*"
        ]
    )
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    assert snapshot(run_dir, ("per_task.csv", "summary.json", "run.json")) == before
