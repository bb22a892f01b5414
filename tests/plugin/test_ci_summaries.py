"""The kit in a method repository's CI (issue #24, the gate's part): Markdown summaries for the CI page
($GITHUB_STEP_SUMMARY, --pstbench-summary), `pstbench compare --fail-on-worse`, and
--pstbench-update-baseline (written whole, never silently)."""

from __future__ import annotations

import pytest
from helpers.tracks import make_outputs

from pytest_pstbench.cli import main as cli_main

FAILED = pytest.ExitCode.TESTS_FAILED
RUN_FILES = ("metrics.csv", "summary.json", "run.json")


@pytest.fixture
def setup(gated_track):
    return gated_track


def _tables(markdown: str) -> list[list[list[str]]]:
    """The Markdown (GitHub) tables of a text: rows of cells, the separator row dropped."""
    tables, current = [], []
    for line in markdown.splitlines() + [""]:
        if line.startswith("|") and line.endswith("|"):
            cells = [c.strip() for c in line[1:-1].split("|")]
            if not all(set(c) <= set("-:") for c in cells):
                current.append(cells)
        elif current:
            tables.append(current)
            current = []
    return tables


def test_github_step_summary_and_summary_file(pytester, setup, monkeypatch):
    s = setup
    worse = make_outputs(s.manifest, pytester.path / "worse", strength=0.3)
    step = pytester.path / "step.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    r = pytester.runpytest_subprocess(
        *s.base,
        f"--pstbench-outputs={worse}",
        "--pstbench-name=cand",
        f"--pstbench-baseline={s.baseline}",
        "--pstbench-summary=out/summary.md",
    )
    assert r.ret == FAILED
    text = step.read_text()
    assert text.startswith("earlier step\n## pstbench: track `small`\n")  # appended, as GitHub Actions expects
    assert (pytester.path / "out" / "summary.md").read_text() + "\n" == text[len("earlier step\n") :]
    results, comparison, *worst = _tables(text)  # then, per failing metric, its worst pairs (issue #45 item 9)
    assert results[0] == ["method", "PSNR↑", "SSIM↑", "ΔE00↓", "H-Corr(gt)↑", "H-Corr(style)↑"]
    assert [row[0] for row in results[1:]] == ["cand"]  # (no Identity run in results/ here)
    assert comparison[0][:3] == ["metric", "baseline", "candidate"]
    assert {row[0] for row in comparison[1:]} == {"PSNR↑", "SSIM↑", "ΔE00↓", "H-Corr(gt)↑"}
    assert all(row[-1] == "worse" for row in comparison[1:] if row[0] == "PSNR↑")
    assert worst and all(w[0][:4] == ["pair", "baseline value", "candidate value", "loss"] for w in worst)
    assert "**Gate: FAILED**" in text
    assert "- PSNR↑ (psnr) is significantly worse than baseline run baseline" in text
    assert "Run files: `results/small/cand` (8 of 8 pairs scored)" in text


def test_summary_of_a_passed_gate_and_an_unwritable_summary(pytester, setup, monkeypatch):
    s = setup
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    r = pytester.runpytest_subprocess(
        *s.base,
        f"--pstbench-outputs={s.good}",
        "--pstbench-name=cand",
        f"--pstbench-baseline={s.baseline}",
        "--pstbench-summary=summary.md",
    )
    assert r.ret == 0
    text = (pytester.path / "summary.md").read_text()
    assert (
        "**Gate: passed** (all 8 pairs of track small scored; 4 tests against baseline run baseline, none "
        "significantly worse; the worse shifts this comparison can detect are not known from these runs: the per-pair "
        "differences have no spread (identical outputs?)" in text  # issue #53 item 4: identical outputs
    )
    assert "MDE (80% power)" in text  # issue #46: what the gate could have found, in the step summary too
    (pytester.path / "taken").write_text("a file")
    r = pytester.runpytest_subprocess(
        *s.base,
        f"--pstbench-outputs={s.good}",
        "--pstbench-name=cand",
        f"--pstbench-baseline={s.baseline}",
        "--pstbench-summary=taken/summary.md",
    )
    assert r.ret == FAILED
    r.stdout.fnmatch_lines(
        [
            "pstbench: error: --pstbench-summary taken/summary.md: cannot write the summary (*); "
            "fix: give a writable path; the previous file (if any) is unchanged"
        ]
    )


def test_compare_fail_on_worse(pytester, setup, capsys):
    s = setup
    for name, outputs in (("same", s.good), ("worse", make_outputs(s.manifest, pytester.path / "worse", strength=0.3))):
        assert (
            pytester.runpytest_subprocess(*s.base, f"--pstbench-outputs={outputs}", f"--pstbench-name={name}").ret == 0
        )
    runs = pytester.path / "results" / "small"
    capsys.readouterr()
    assert cli_main(["compare", str(runs / "baseline"), str(runs / "same"), "--fail-on-worse"]) == 0
    assert capsys.readouterr().err == ""
    assert cli_main(["compare", str(runs / "baseline"), str(runs / "worse")]) == 0  # without the flag: a report
    assert cli_main(["compare", str(runs / "baseline"), str(runs / "worse"), "--fail-on-worse"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err and all(line.startswith("pstbench compare: FAILED: ") for line in err)
    assert (
        "pstbench compare: FAILED: PSNR↑ (psnr) is significantly worse than baseline run baseline: mean diff" in err[0]
    )
    assert cli_main(["compare", str(runs / "baseline"), str(runs / "worse"), "--fail-on-worse", "--json"]) == 1


def test_update_baseline_writes_it_whole_and_fails_the_session(pytester, setup):
    s = setup
    target = pytester.path / "ci-baseline"
    r = pytester.runpytest_subprocess(
        *s.base, f"--pstbench-outputs={s.good}", "--pstbench-name=cand", f"--pstbench-baseline={target}"
    )
    assert r.ret == FAILED  # a missing baseline says how to make one
    r.stdout.fnmatch_lines(
        [
            f"pstbench gate FAILED: baseline {target} does not exist; fix: make it from a run you "
            "trust: run once with --pstbench-update-baseline *"
        ]
    )
    r = pytester.runpytest_subprocess(
        *s.base,
        f"--pstbench-outputs={s.good}",
        "--pstbench-name=cand",
        f"--pstbench-baseline={target}",
        "--pstbench-update-baseline",
    )
    assert r.ret == FAILED  # never silent
    r.stdout.fnmatch_lines(
        [
            f"pstbench: baseline {target} updated from this run (results/small/cand, 8 pairs); the "
            "session fails so that a baseline is never updated silently: review and commit it, then run "
            "without --pstbench-update-baseline"
        ]
    )
    run = pytester.path / "results" / "small" / "cand"
    assert all((target / f).read_bytes() == (run / f).read_bytes() for f in RUN_FILES)
    r = pytester.runpytest_subprocess(
        *s.base, f"--pstbench-outputs={s.good}", "--pstbench-name=cand2", f"--pstbench-baseline={target}"
    )
    assert r.ret == 0
    r = pytester.runpytest_subprocess(
        *s.base,
        f"--pstbench-outputs={s.good}",
        "--pstbench-name=cand",
        f"--pstbench-baseline={target}",
        f"--pstbench-baseline={s.baseline}",
        "--pstbench-update-baseline",
    )
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(
        [
            "*--pstbench-update-baseline: needs exactly one baseline folder to write (--pstbench-baseline "
            "DIR or the ini key pstbench_baseline), got 2; fix: name the one folder to replace"
        ]
    )


def test_update_baseline_of_an_incomplete_run_writes_nothing(pytester, setup):
    s = setup
    before = {f: (s.baseline / f).read_bytes() for f in RUN_FILES}
    r = pytester.runpytest_subprocess(
        *s.base,
        f"--pstbench-outputs={s.good}",
        "--pstbench-name=part",
        f"--pstbench-baseline={s.baseline}",
        "--pstbench-update-baseline",
        "-k",
        "p01",
    )
    assert r.ret == FAILED
    r.stdout.fnmatch_lines(
        [
            f"pstbench gate FAILED: baseline {s.baseline} not updated: the run is incomplete (1 of 8 pairs "
            "scored); fix: score every pair, then update"
        ]
    )
    assert {f: (s.baseline / f).read_bytes() for f in RUN_FILES} == before


def test_update_baseline_killed_mid_write_keeps_the_old_one(pytester, setup):
    """A process killed while the new baseline is being written leaves the old baseline byte for byte (and the
    next write clears the half-built staging folder)."""
    s = setup
    before = {f: (s.baseline / f).read_bytes() for f in RUN_FILES}
    worse = make_outputs(s.manifest, pytester.path / "worse", strength=0.3)
    pytester.makeconftest("""
        import os
        import pytest_pstbench.core.store.folder as runs

        real = runs.write_new

        def killed(path, text):
            if ".baseline.build-" in str(path) and path.name == "summary.json":
                os._exit(9)  # a kill: no cleanup, no finally
            real(path, text)

        runs.write_new = killed
    """)
    r = pytester.runpytest_subprocess(
        *s.base,
        f"--pstbench-outputs={worse}",
        "--pstbench-name=cand",
        f"--pstbench-baseline={s.baseline}",
        "--pstbench-update-baseline",
    )
    assert r.ret == 9
    assert {f: (s.baseline / f).read_bytes() for f in RUN_FILES} == before
    assert list(s.baseline.parent.glob(".baseline.build-*"))  # the half-built one is there ...
    (pytester.path / "conftest.py").unlink()
    r = pytester.runpytest_subprocess(
        *s.base,
        f"--pstbench-outputs={worse}",
        "--pstbench-name=cand",
        f"--pstbench-baseline={s.baseline}",
        "--pstbench-update-baseline",
    )
    assert r.ret == FAILED
    assert not list(s.baseline.parent.glob(".baseline.build-*"))  # ... and cleared by the next write
    assert (s.baseline / "metrics.csv").read_bytes() == (
        pytester.path / "results" / "small" / "cand" / "metrics.csv"
    ).read_bytes()
