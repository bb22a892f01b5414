"""The pytest plugin on selection tracks, end to end with pytester (each run in a subprocess).

These runs use the full vab-demo track, built once into the test session's PSTBENCH_CACHE."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.selection.protocol import SelectionParams
from pytest_pstbench.selection.tracks import load_selection_manifest, resolve_selection_track

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

JUDGES = Path(__file__).resolve().parents[2] / "examples" / "judges" / "no_reference.py"


def _run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


@pytest.fixture
def demo_track():
    return resolve_selection_track("vab-demo")


def test_judge_option_one_item_per_task_same_numbers_as_cli(pytester, demo_track, monkeypatch):
    result = _run(pytester, "--pstbench-track=vab-demo", f"--pstbench-judge={JUDGES}:sharpness", "-v")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=len(demo_track.tasks))
    result.stdout.fnmatch_lines(["*pstbench-vab-demo::vd-01 PASSED*"])
    result.stdout.fnmatch_lines(
        [
            f"*track: vab-demo   protocol: vab   dataset: vab-demo@{demo_track.revision}   n=30 tasks   judge: *no_reference.py:sharpness",
            "ap@1 (mean ± half the 95% bootstrap CI; [[]random baseline[]])",
            "cell*n*Top-1*Bot-1*TB-1",
            "overall*30*±*[[]0.290[]]*",
            "pass^3 (mean ± half the 95% bootstrap CI; [[]random baseline[]])",
            "run files: results/vab-demo/sharpness",
        ]
    )
    monkeypatch.chdir(pytester.path)
    assert cli_main(["vab", "score", "--track", "vab-demo", "--judge", f"{JUDGES}:sharpness", "--results", "cli"]) == 0
    a, b = pytester.path / "results" / "vab-demo" / "sharpness", pytester.path / "cli" / "vab-demo" / "sharpness"
    for name in ("per_task.csv", "summary.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    run = json.loads((a / "run.json").read_text())
    assert run["complete"] is True and run["command"].startswith("pytest ") and run["judge"]["function"] == "sharpness"


def test_answers_file_and_xdist_identical(pytester, demo_track):
    params = SelectionParams.of(load_protocol("vab"))
    from pytest_pstbench.selection.permutations import orders_for

    lines = []
    for task in demo_track.tasks:
        for t, order in enumerate(orders_for(task, params)):
            b, w = params.labels[order.index(task.best)], params.labels[order.index(task.worst)]
            text = {
                "pick_best": f"BEST: {b}",
                "pick_worst": f"WORST: {w}",
                "pick_best_and_worst": f"BEST: {b}\nWORST: {w}",
            }
            for ptype in params.prompt_types_for(task.k):
                if task.id == "vd-03" and t == 2 and ptype == "pick_worst":
                    continue  # one missing answer
                lines.append(
                    json.dumps({"task_id": task.id, "trial": t, "prompt_type": ptype, "response": text[ptype]})
                )
    answers = pytester.path / "model-x.jsonl"
    answers.write_text("\n".join(lines) + "\n")
    r1 = _run(pytester, "--pstbench-track=vab-demo", f"--pstbench-answers={answers}")
    r2 = _run(
        pytester, "--pstbench-track=vab-demo", f"--pstbench-answers={answers}", "--pstbench-results=xd", "-n", "2"
    )
    r1.assert_outcomes(passed=30)
    r2.assert_outcomes(passed=30)
    # vab counts a missing answer as the official summary does (no record): Bot-1 ap@1 stays 1.000 (trial 2 has
    # 29 counted records), and vd-03 fails Bot-1 pass^3 (3 counted trials needed): 29/30
    r1.stdout.fnmatch_lines(
        [
            "overall*1.000 ± 0.000*1.000 ± 0.000*",
            "overall*1.000 ± 0.000*0.967 ± *",
            "answers: 1 missing, 0 unparseable and 0 API errors of 252 (counted as the protocol's answers.records says; listed in run.json answers.problems)",
        ]
    )
    a, b = pytester.path / "results" / "vab-demo" / "model-x", pytester.path / "xd" / "vab-demo" / "model-x"
    for name in ("per_task.csv", "summary.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    run = json.loads((b / "run.json").read_text())
    assert run["answers"]["problems"] == [
        {"task": "vd-03", "trial": 2, "prompt_type": "pick_worst", "status": "missing", "detail": "no answer"}
    ]


def test_bad_answers_file_is_a_usage_error(pytester):
    bad = pytester.path / "answers.jsonl"
    bad.write_text('{"task_id": "vd-01", "trial": 0, "prompt_type": "pick_best", "response": "BEST: A"}\n{oops\n')
    result = _run(pytester, "--pstbench-track=vab-demo", f"--pstbench-answers={bad}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"*pstbench: {bad}:2: not valid JSON (Expecting property name enclosed in double quotes); fix: write one JSON object per line"
        ]
    )
    assert "Traceback" not in result.stderr.str()
    assert not (pytester.path / "results").exists()


def test_judge_fixture_in_conftest(pytester):
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture(scope="session")
        def pstbench_judge():
            def brightness(image):
                return float(image.mean())
            brightness.num_trials = 2
            return brightness
        """
    )
    pytester.makepyfile(test_user="def test_own():\n    pass\n")
    result = _run(pytester, "--pstbench-track=vab-demo", "--pstbench-name=fx")
    result.assert_outcomes(passed=31)
    result.stdout.fnmatch_lines(["*judge: fixture pstbench_judge", "overall*30*"])
    run = json.loads((pytester.path / "results" / "vab-demo" / "fx" / "run.json").read_text())
    assert run["judge"] == {
        "kind": "fixture",
        "fixture": "pstbench_judge",
        "module": "conftest",
        "qualname": "pstbench_judge.<locals>.brightness",
        "num_trials": 2,
    }
    assert run["complete"] is True


def test_failing_judge_fails_items_with_one_line(pytester):
    judge = pytester.makepyfile(bad_judge="def score(image):\n    raise ValueError('no model loaded')\n")
    result = _run(pytester, "--pstbench-track=vab-demo", f"--pstbench-judge={judge}:score")
    result.assert_outcomes(failed=30)
    out = result.stdout.str()
    assert f"judge {judge}:score raised ValueError: no model loaded (task vd-01, candidate 0: c0.png)" in out
    assert "Traceback" not in out
    assert "pstbench: error: track vab-demo: no task was scored" not in out
    run = json.loads((pytester.path / "results" / "vab-demo" / "score" / "run.json").read_text())
    assert run["complete"] is False and len(run["failures"]) == 30 and run["n_scored"] == 0


def test_no_judge_explains_and_bad_judge_spec_is_a_usage_error(pytester):
    result = _run(pytester, "--pstbench-track=vab-demo")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(
        ["*track vab-demo is a selection track and no judge was given; fix: pass --pstbench-answers FILE*"]
    )
    result = _run(pytester, "--pstbench-track=vab-demo", "--pstbench-judge=nocolon")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*pstbench: --judge nocolon: expected module:function, path/to/file.py:function or pyiqa:METRIC*"]
    )


def test_local_selection_manifest_from_ini(pytester, demo_track):
    src = demo_track.manifest.parent
    local = pytester.path / "sel"
    local.mkdir()
    data = {"kind": "selection", "id": "mini", "tasks": []}
    for task in demo_track.tasks[:4]:
        files = []
        for c in task.candidates:
            dest = local / f"{task.id}_{c.name}"
            dest.write_bytes(c.read_bytes())
            files.append(dest.name)
        data["tasks"].append(
            {
                "id": task.id,
                "domain": task.domain,
                "topic": task.topic,
                "candidates": files,
                "best": task.best,
                "worst": task.worst,
            }
        )
    import yaml

    (local / "track.yaml").write_text(yaml.safe_dump(data))
    pytester.makeini(f"[pytest]\npstbench_track = sel/track.yaml\npstbench_judge = {JUDGES}:colourfulness\n")
    result = _run(pytester)
    result.assert_outcomes(passed=4)
    summary = json.loads((pytester.path / "results" / "mini" / "colourfulness" / "summary.json").read_text())
    assert summary["n"] == 4 and summary["complete"] is True and summary["track"] == "mini"
    assert load_selection_manifest(local / "track.yaml").revision == summary["dataset_revision"]
    assert src.is_dir()


def test_paired_only_options_are_refused(pytester):
    result = _run(
        pytester, "--pstbench-track=vab-demo", "--pstbench-outputs=out", f"--pstbench-judge={JUDGES}:sharpness"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*pstbench: --pstbench-outputs: not supported for selection tracks (a selection track is scored from --pstbench-answers or --pstbench-judge); fix: drop the option"
        ]
    )
