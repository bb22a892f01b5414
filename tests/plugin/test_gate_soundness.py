"""The gate cannot be fooled (issue #23): each way a session could end green, or a run claim to be
complete, without a complete, validated comparison; reproduced first, then held.

Each pytest session below runs in a subprocess on a small local track (8 pairs, the protocol without
LPIPS); `gate_setup` scores the baseline once per test.
Found by the gate audit (#23).
"""

from __future__ import annotations

import json
import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track
from PIL import Image

from pytest_pstbench.cli import main as cli_main

FAILED = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def gate_setup(gated_track):
    return gated_track


def _gate_lines(result) -> list[str]:
    return [ln for ln in result.stdout.lines if ln.startswith("pstbench gate")]


# ---- 1. no pstbench item ran: the gate was not evaluated -> the session fails ----------------------


def test_case1_gated_session_whose_pairs_are_all_deselected_fails(pytester, gate_setup):
    s = gate_setup
    pytester.makepyfile(test_own="def test_own():\n    pass\n")
    r = pytester.runpytest_subprocess(
        *s.base,
        f"--pstbench-outputs={s.good}",
        "--pstbench-name=cand",
        f"--pstbench-baseline={s.baseline}",
        "-k",
        "test_own",
    )
    r.assert_outcomes(passed=1, deselected=8)
    assert r.ret == FAILED
    assert _gate_lines(r) == [
        "pstbench gate FAILED: no pair of track small was scored in this session (8 of the track's 8 pairs were "
        "deselected (-k, -m, --deselect, --lf, --sw or a plugin)), so the gate was not evaluated; fix: run every pair "
        "of the track, or run without --pstbench-baseline/--pstbench-min/--pstbench-max (and their ini keys)"
    ]
    assert not (pytester.path / "results" / "small" / "cand").exists()


def test_case1_deselected_under_xdist_fails(pytester, gate_setup):
    s = gate_setup
    pytester.makepyfile(test_own="def test_own():\n    pass\n")
    r = pytester.runpytest_subprocess(
        *s.base,
        f"--pstbench-outputs={s.good}",
        "--pstbench-name=cand",
        f"--pstbench-baseline={s.baseline}",
        "-k",
        "test_own",
        "-n",
        "2",
    )
    assert r.ret == FAILED
    assert _gate_lines(r) == [
        "pstbench gate FAILED: no pair of track small was scored in this session (the xdist workers ran none of the "
        "track's 8 pairs (deselected with -k, -m, --deselect, --lf or a plugin, or stopped early)), so the gate was not "
        "evaluated; fix: run every pair of the track, or run without --pstbench-baseline/--pstbench-min/--pstbench-max "
        "(and their ini keys)"
    ]


def test_case1_last_failed_rerun_of_a_project_test_fails_the_gate(pytester, gate_setup):
    """`--lf` after a project test failed reruns only that test: no pair runs, so the gate fails."""
    s = gate_setup
    flag = pytester.path / "fail-once"
    flag.write_text("x")
    pytester.makepyfile(test_own=f"import os\ndef test_own():\n    assert not os.path.exists({str(flag)!r})\n")
    base = s.base[2:]  # with the cache provider: --lf needs it
    r = pytester.runpytest_subprocess(
        *base, f"--pstbench-outputs={s.good}", "--pstbench-name=cand", f"--pstbench-baseline={s.baseline}"
    )
    r.assert_outcomes(passed=8, failed=1)
    flag.unlink()
    r = pytester.runpytest_subprocess(
        *base, f"--pstbench-outputs={s.good}", "--pstbench-name=cand", f"--pstbench-baseline={s.baseline}", "--lf"
    )
    r.assert_outcomes(passed=1, deselected=8)
    assert r.ret == FAILED
    assert (
        len(_gate_lines(r)) == 1
        and "no pair of track small was scored in this session (8 of the track's 8 pairs were deselected"
        in _gate_lines(r)[0]
    )


@pytest.mark.parametrize(
    "how, why",
    [
        (
            "no-outputs",
            "no --pstbench-outputs folder was given and no test scored a pair with the pstbench_score fixture",
        ),
        ("collect-only", "--collect-only ran none of the track's 8 pairs"),
        (
            "bound-only",
            "no --pstbench-outputs folder was given and no test scored a pair with the pstbench_score fixture",
        ),
    ],
)
def test_case1_gate_or_bound_without_any_scored_pair_fails(pytester, gate_setup, how, why):
    s = gate_setup
    pytester.makepyfile(test_own="def test_own():\n    pass\n")
    args = {
        "no-outputs": [f"--pstbench-baseline={s.baseline}"],
        "collect-only": [f"--pstbench-outputs={s.good}", f"--pstbench-baseline={s.baseline}", "--co"],
        "bound-only": ["--pstbench-min", "psnr=1"],
    }[how]
    r = pytester.runpytest_subprocess(*s.base, "--pstbench-name=cand", *args)
    assert r.ret == FAILED
    assert _gate_lines(r) == [
        f"pstbench gate FAILED: no pair of track small was scored in this session ({why}), so the "
        "gate was not evaluated; fix: run every pair of the track, or run without "
        "--pstbench-baseline/--pstbench-min/--pstbench-max (and their ini keys)"
    ]


def test_case1_partial_run_says_how_many_pairs_and_why(pytester, gate_setup):
    s = gate_setup
    r = pytester.runpytest_subprocess(
        *s.base,
        f"--pstbench-outputs={s.good}",
        "--pstbench-name=cand",
        f"--pstbench-baseline={s.baseline}",
        "-k",
        "p01 or p02",
    )
    r.assert_outcomes(passed=2, deselected=6)
    assert r.ret == FAILED
    assert _gate_lines(r) == [
        "pstbench gate FAILED: the run is incomplete (2 of 8 pairs scored; 6 of the track's 8 pairs "
        "were deselected (-k, -m, --deselect, --lf, --sw or a plugin)), so the gate could not be "
        "evaluated"
    ]


def test_case1_exitfirst_stops_before_the_pairs_fails(pytester, gate_setup):
    s = gate_setup
    pytester.makepyfile(test_aaa="def test_first():\n    assert False\n")
    r = pytester.runpytest_subprocess(
        *s.base,
        f"--pstbench-outputs={s.good}",
        "--pstbench-name=cand",
        f"--pstbench-baseline={s.baseline}",
        "-x",
        "-p",
        "no:randomly",
    )
    assert r.ret == FAILED
    gate = _gate_lines(r)
    assert len(gate) == 1 and gate[0].startswith("pstbench gate FAILED: no pair of track small was scored")


def test_case1_passed_gate_states_what_it_rests_on(pytester, gate_setup):
    s = gate_setup
    r = pytester.runpytest_subprocess(
        *s.base,
        f"--pstbench-outputs={s.good}",
        "--pstbench-name=cand",
        f"--pstbench-baseline={s.baseline}",
        "--pstbench-max",
        "delta_e00=100",
    )
    assert r.ret == 0
    # 4 tests: the ranked metrics psnr, ssim, delta_e00, hcorr_gt (LPIPS is not in this protocol)
    lines = _gate_lines(r)
    assert len(lines) == 1 and lines[0].startswith(
        "pstbench gate passed: all 8 pairs of track small scored; 4 tests against baseline run baseline, none significantly "
        "worse; 1 bound met; the worse shifts this comparison can detect are not known from these runs: the per-pair "
        "differences have no spread (identical outputs?); plan them with `pstbench power BASELINE --noise-from RUN_A "
        "RUN_B` or --correlation R"
    )  # issue #46; identical outputs: never a tie threshold read as a detectable shift (issue #53 item 4)


# ---- 2. a baseline is validated as strictly as a new run ------------------------------------------


def _edited_copy(src: Path, dst: Path, edit) -> Path:
    shutil.copytree(src, dst)
    edit(dst)
    return dst


def _set_cell(run_dir: Path, pair: str, metric: str, value: str) -> None:
    lines = (run_dir / "metrics.csv").read_text().splitlines()
    header = lines[0].split(",")
    for i, ln in enumerate(lines):
        cells = ln.split(",")
        if cells[0] == pair:
            cells[header.index(metric)] = value
            lines[i] = ",".join(cells)
    (run_dir / "metrics.csv").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda d: _set_cell(d, "p03", "psnr", "nan"),
            "metrics.csv: pair p03 psnr is nan, not a finite number, in a run that says complete: true",
        ),
        (lambda d: _set_cell(d, "p03", "ssim", "inf"), "metrics.csv: pair p03 ssim is inf, not a finite number"),
        (lambda d: _set_cell(d, "p03", "psnr", "99.5"), "summary.json: psnr mean is "),
        (
            lambda d: (d / "metrics.csv").write_text(
                (d / "metrics.csv").read_text() + (d / "metrics.csv").read_text().splitlines()[1] + "\n"
            ),
            "metrics.csv: pair p01 appears twice",
        ),
    ],
)
def test_case2_damaged_baseline_is_refused_by_the_gate_and_compare(pytester, gate_setup, edit, message, capsys):
    s = gate_setup
    bad_base = _edited_copy(s.baseline, pytester.path / "edited" / "baseline", edit)
    worse = make_outputs(s.manifest, pytester.path / "worse", strength=0.2)
    r = pytester.runpytest_subprocess(
        *s.base, f"--pstbench-outputs={worse}", "--pstbench-name=cand", f"--pstbench-baseline={bad_base}"
    )
    assert r.ret == FAILED
    gate = _gate_lines(r)
    assert len(gate) == 1 and gate[0].startswith(f"pstbench gate FAILED: baseline refused: {bad_base}"), gate
    assert message in gate[0] and "; fix: score th" in gate[0]
    capsys.readouterr()
    assert cli_main(["compare", str(bad_base), str(pytester.path / "results" / "small" / "cand")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pstbench: error: ") and message in err and "\n" not in err


def test_case2_summary_of_another_run_is_refused(pytester, gate_setup):
    s = gate_setup
    other = make_outputs(s.manifest, pytester.path / "other", strength=0.5)
    r = pytester.runpytest_subprocess(*s.base, f"--pstbench-outputs={other}", "--pstbench-name=other")
    assert r.ret == 0

    def swap(d):
        shutil.copy(pytester.path / "results" / "small" / "other" / "summary.json", d / "summary.json")

    bad_base = _edited_copy(s.baseline, pytester.path / "edited" / "baseline", swap)
    r = pytester.runpytest_subprocess(
        *s.base, f"--pstbench-outputs={s.good}", "--pstbench-name=cand", f"--pstbench-baseline={bad_base}"
    )
    assert r.ret == FAILED
    assert "summary.json: name is 'other' but run.json and metrics.csv say 'baseline'" in _gate_lines(r)[0]


# ---- 3. the same baseline given twice is one baseline ------------------------------------------------


def test_case3_duplicate_baselines_are_counted_once(pytester, gate_setup):
    s = gate_setup
    copy = pytester.path / "copy" / "baseline"
    shutil.copytree(s.baseline, copy)
    link = pytester.path / "link"
    os.symlink(s.baseline, link)
    worse = make_outputs(s.manifest, pytester.path / "worse", strength=0.6)

    def verdicts(*baselines, name):
        r = pytester.runpytest_subprocess(
            *s.base,
            f"--pstbench-outputs={worse}",
            f"--pstbench-name={name}",
            *[f"--pstbench-baseline={b}" for b in baselines],
            f"--junitxml={name}.xml",
        )
        props = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / f"{name}.xml").iter("property")}
        return r, {k: v for k, v in props.items() if k.startswith("pstbench_")}

    r1, once = verdicts(s.baseline, name="once")
    r3, thrice = verdicts(s.baseline, link, copy, name="thrice")
    assert once == thrice  # the same tests, the same Holm-adjusted p-values, the same verdict
    assert once["pstbench_gate"] == "failed" and r1.ret == r3.ret == FAILED
    notes = [ln for ln in r3.stdout.lines if ln.startswith("pstbench gate: ")]
    assert notes == [
        f"pstbench gate: baseline {link} is the same run as {s.baseline} (same metrics.csv): counted once",
        f"pstbench gate: baseline {copy} is the same run as {s.baseline} (same metrics.csv): counted once",
    ]


# ---- 4. one result per pair per run -------------------------------------------------------------------


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]])
def test_case4_outputs_and_fixture_scoring_the_same_pairs_write_nothing(pytester, gate_setup, xdist):
    s = gate_setup
    pytester.makepyfile(
        test_fixture="""
        import numpy as np
        from PIL import Image

        def test_score(pstbench_pair, pstbench_score):
            pstbench_score(np.asarray(Image.open(pstbench_pair.content).convert("RGB")))
    """
    )
    r = pytester.runpytest_subprocess(*s.base, f"--pstbench-outputs={s.good}", "--pstbench-name=twice", *xdist)
    assert r.ret == FAILED
    errors = [ln for ln in r.stdout.lines if ln.startswith("pstbench: error:")]
    assert len(errors) == 1
    assert errors[0].startswith("pstbench: error: track small: pair p0")
    assert (
        "was scored twice in this session (and 7 more pairs); a run holds one result per pair, so no run files "
        "were written; fix: score each pair once" in errors[0]
    )
    assert not (pytester.path / "results" / "small" / "twice").exists()


def test_case4_fixture_called_twice_in_one_test(pytester, gate_setup):
    s = gate_setup
    pytester.makepyfile(
        test_fixture="""
        import numpy as np
        from PIL import Image

        def test_score(pstbench_pair, pstbench_score):
            image = np.asarray(Image.open(pstbench_pair.content).convert("RGB"))
            pstbench_score(image)
            pstbench_score(image[:, ::-1].copy())
    """
    )
    r = pytester.runpytest_subprocess(*s.base, "--pstbench-name=twice", "-k", "p01")
    assert r.ret == FAILED
    r.stdout.fnmatch_lines(
        [
            "pstbench: error: track small: pair p01 (by test_fixture.py::test_score[[]p01[]] and "
            "test_fixture.py::test_score[[]p01[]]) was scored twice in this session; *"
        ]
    )
    assert not (pytester.path / "results" / "small" / "twice").exists()


# ---- 5. the Identity row is the kit's ---------------------------------------------------------------


def _identity_claiming_outputs(tmp_path, manifest, folder, method):
    out = make_outputs(manifest, tmp_path / "claims" / folder, strength=0.9)
    if method is not None:
        (out / "method.yaml").write_text(yaml.safe_dump({"method": method}))
    return out


@pytest.mark.parametrize(
    "folder, method, expected",
    [
        ("identity", "identity", "method.yaml: method 'identity' is reserved for the kit's Identity run"),
        ("mine", "Identity ", "method.yaml: method 'Identity ' is reserved for the kit's Identity run"),
        ("Identity", None, "--name Identity: reserved for the Identity run"),  # the run would be named after the folder
    ],
)
def test_case5_outputs_cannot_replace_the_identity_run(tmp_path, capsys, folder, method, expected):
    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    out = _identity_claiming_outputs(tmp_path, manifest, folder, method)
    code = cli_main(
        [
            "score",
            "--track",
            str(manifest),
            "--outputs",
            str(out),
            "--results",
            str(tmp_path / "results"),
            "--protocol",
            str(proto),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and expected in err, err
    assert not (tmp_path / "results" / "small" / "identity").exists()


def test_case5_method_info_cannot_claim_identity(tmp_path, capsys):
    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    out = make_outputs(manifest, tmp_path / "mine")
    code = cli_main(
        [
            "score",
            "--track",
            str(manifest),
            "--outputs",
            str(out),
            "--results",
            str(tmp_path / "results"),
            "--protocol",
            str(proto),
            "--method-info",
            "method=IDENTITY",
        ]
    )
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        "pstbench: error: --method-info: method 'IDENTITY' is reserved for the kit's Identity run (the track's content "
        "images, scored by the kit itself); these outputs are not scored as Identity; fix: score Identity with --outputs "
        "identity, or name this method otherwise"
    )


def test_case5_pytest_outputs_claiming_identity_is_a_usage_error(pytester):
    manifest = make_track(pytester.path / "track")
    proto = protocol_without_lpips(pytester.path / "proto.yaml")
    out = _identity_claiming_outputs(pytester.path, manifest, "identity", "identity")
    r = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={manifest}",
        f"--pstbench-protocol={proto}",
        f"--pstbench-outputs={out}",
    )
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*method.yaml: method 'identity' is reserved for the kit's Identity run*"])
    assert not (pytester.path / "results" / "small" / "identity").exists()


# ---- 7. judges: scores that are no finite real number fail that task ---------------------------------


def _task(tmp_path, k=2):
    paths = []
    for i in range(k):
        p = tmp_path / f"c{i}.png"
        Image.fromarray(np.full((8, 8, 3), 40 * i, np.uint8)).save(p)
        paths.append(p)
    return SimpleNamespace(id="t1", candidates=paths)


@pytest.mark.parametrize(
    "value, trials, message",
    [
        (
            10**400,
            1,
            "judge j returned a number too large for a float for task t1 candidate 0; fix: return a finite "
            "number within the float range (higher = better)",
        ),
        (
            1.5e308,
            3,
            "judge j: the mean of its 3 scores for task t1 candidate 0 is not a finite number (the scores are too "
            "large); fix: return scores well within the float range",
        ),
        (
            np.complex128(1 + 2j),
            1,
            "judge j returned complex128 for task t1 candidate 0; fix: return one number "
            "(int or float, higher = better), not a string or bool (nor a complex number)",
        ),
        (1 + 0j, 1, "judge j returned complex for task t1 candidate 0; fix: return one number"),
    ],
)
def test_case7_judge_scores_that_are_not_finite_reals_fail_the_task(tmp_path, value, trials, message):
    from pytest_pstbench.selection.judges import JudgeFailure, judge_from_callable, score_candidates

    judge = judge_from_callable(lambda image: value, spec="j", default_num_trials=trials)
    with pytest.raises(JudgeFailure) as exc:
        score_candidates(_task(tmp_path), judge)
    assert str(exc.value).startswith(message)


def test_case7_mean_of_large_finite_scores_is_kept_when_finite(tmp_path):
    """The check is on the mean, not a stand-in: 3 trials of 1e308 overflow, of 5e307 do not."""
    from pytest_pstbench.selection.judges import judge_from_callable, score_candidates

    judge = judge_from_callable(lambda image: 5e307, spec="j", default_num_trials=3)
    assert score_candidates(_task(tmp_path), judge) == [(5e307 + 5e307 + 5e307) / 3] * 2


# ---- 8. a damaged data lock file: one line naming it and the fix --------------------------------------


@pytest.mark.parametrize(
    "lock, problem",
    [
        ("{not json", "unreadable lock file"),
        ({"format": 1, "files": {"a.png": 3}}, "damaged lock file (dataset is None, expected a non-empty string)"),
        (
            {"format": 1, "dataset": "pst50", "repo_id": "o/r", "revision": "a" * 40, "files": {"a.png": 3}},
            "damaged lock file (files['a.png'] is int, expected an object)",
        ),
        (
            {
                "format": 1,
                "dataset": "pst50",
                "repo_id": "o/r",
                "revision": "a" * 40,
                "files": {"a.png": {"size": "12", "sha256": "0" * 64}},
            },
            "damaged lock file (files['a.png'].size is '12', expected a whole number of bytes)",
        ),
        (
            {
                "format": 1,
                "dataset": "pst50",
                "repo_id": "o/r",
                "revision": "a" * 40,
                "files": {"a.png": {"size": 12, "sha256": "0" * 64}},
                "pairs": {"content_709": {"p1": "b.png"}},
            },
            "damaged lock file (pairs['content_709']['p1'] is 'b.png', not a file of the lock's files)",
        ),
        (
            {"format": 1, "dataset": "pst50", "repo_id": "o/r", "revision": None, "files": {}},
            "damaged lock file (revision is None, expected a non-empty string)",
        ),
    ],
)
@pytest.mark.parametrize(
    "command",
    [
        ["data", "verify", "pst50"],
        ["data", "list"],  # the table goes on: that row's status is the one-line error
        ["data", "fetch", "pst50"],
        ["score", "--track", "pst50-paired", "--outputs", "out"],
    ],
)
def test_case8_damaged_lock_file_is_one_line(tmp_path, monkeypatch, capsys, lock, problem, command):
    monkeypatch.setenv("PSTBENCH_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    path = tmp_path / "data" / "pst50" / "pstbench-lock.json"
    path.parent.mkdir(parents=True)
    path.write_text(lock if isinstance(lock, str) else json.dumps(lock))
    code = cli_main(command)
    out, err = capsys.readouterr()
    err = err.strip()
    if command == ["data", "list"]:
        assert code == 0 and f"bad lock file: {path}: {problem}" in out
        return
    assert code != 0
    assert err.startswith(f"pstbench: error: {path}: {problem}") and "\n" not in err, err
    assert "fix: delete it and run `pstbench data fetch pst50` again" in err


# ---- 6. a bound or gate on a selection run rests on every task ---------------------------------------


def _perfect_answers(path: Path, track, only=None) -> Path:
    """Right answers for every task (or only the tasks in `only`), one JSON line per trial and prompt."""
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection.permutations import orders_for
    from pytest_pstbench.selection.protocol import SelectionParams

    params = SelectionParams.of(load_protocol("vab"))
    lines = []
    for task in track.tasks:
        if only is not None and task.id not in only:
            continue
        for t, order in enumerate(orders_for(task, params)):
            b, w = params.labels[order.index(task.best)], params.labels[order.index(task.worst)]
            text = {
                "pick_best": f"BEST: {b}",
                "pick_worst": f"WORST: {w}",
                "pick_best_and_worst": f"BEST: {b}\nWORST: {w}",
            }
            for ptype in params.prompt_types_for(task.k):
                lines.append(
                    json.dumps({"task_id": task.id, "trial": t, "prompt_type": ptype, "response": text[ptype]})
                )
    path.write_text("\n".join(lines) + "\n")
    return path


def test_case6_selection_bound_on_one_answered_task_fails(pytester):
    from pytest_pstbench.selection.tracks import resolve_selection_track

    track = resolve_selection_track("vab-demo")
    n = len(track.tasks)
    one = _perfect_answers(pytester.path / "one.jsonl", track, only={track.tasks[0].id})
    r = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--pstbench-track=vab-demo",
        f"--pstbench-answers={one}",
        "--pstbench-min",
        "tb1.pass^3=0.9",
    )
    assert r.ret == FAILED
    # the official numbers: the one answered task is right in every trial (pass^3 1.0 over 1 counted task) ...
    summary = json.loads((pytester.path / "results" / "vab-demo" / "one" / "summary.json").read_text())
    overall = next(c for c in summary["cells"] if c["group"] == "overall")
    assert overall["metrics"]["tb1"]["pass^3"]["mean"] == 1.0 and overall["metrics"]["tb1"]["pass^3"]["n"] == 1
    # ... but the other tasks have no answer at all, so the run is incomplete and the gate fails (issue #44 case 6:
    # completeness is what the files show; a value counting fewer tasks of a complete run fails the coverage check)
    assert _gate_lines(r) == [
        f"pstbench gate FAILED: the run is incomplete (1 of {n} tasks scored), so the gate could not be evaluated"
    ]
    every = _perfect_answers(pytester.path / "every.jsonl", track)
    r = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--pstbench-track=vab-demo",
        f"--pstbench-answers={every}",
        "--pstbench-min",
        "tb1.pass^3=0.9",
    )
    assert r.ret == 0
    assert _gate_lines(r) == [
        f"pstbench gate passed: all {n} tasks of track vab-demo scored; 1 bound met; the gated "
        f"values count {n} of the track's {n} tasks or more"
    ]


# ---- beyond the list: a baseline gate too small to ever fail -------------------------------------------


@pytest.mark.parametrize("n", [4, 5, 6, 7, 8, 10])
def test_smallest_wilcoxon_pvalue_is_the_hand_derived_one(n):
    """Exact signed-rank test, every pair worse: two-sided p = 2 / 2^n, one-sided (a margin) 1 / 2^n."""
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.paired.compare import MetricComparison, _smallest_pvalue

    proto = load_protocol()
    row = MetricComparison("psnr", "a", "b", n, True, *[0.0] * 11)
    assert _smallest_pvalue(row, proto) == 2 / 2**n
    row.margin = 0.5
    assert _smallest_pvalue(row, proto) == 1 / 2**n


def test_gate_that_cannot_detect_a_worse_run_fails(pytester):
    """6 pairs, 4 gated metrics: the smallest p is 2/64, Holm makes it 4 x 2/64 = 0.125 >= 0.05, so no run
    could ever be found worse; gating one metric (2/64 < 0.05) can."""
    manifest = make_track(pytester.path / "track", n=6)
    good = make_outputs(manifest, pytester.path / "good", strength=0.9)
    proto = protocol_without_lpips(pytester.path / "proto.yaml")
    base = ("-p", "no:cacheprovider", f"--pstbench-track={manifest}", f"--pstbench-protocol={proto}")
    assert pytester.runpytest_subprocess(*base, f"--pstbench-outputs={good}", "--pstbench-name=baseline").ret == 0
    baseline = pytester.path / "results" / "small" / "baseline"
    r = pytester.runpytest_subprocess(
        *base, f"--pstbench-outputs={good}", "--pstbench-name=cand", f"--pstbench-baseline={baseline}"
    )
    assert r.ret == FAILED
    assert _gate_lines(r) == [
        "pstbench gate FAILED: the baseline comparison cannot detect a worse run: with 6 pairs per test the smallest "
        "p-value a test can give is 0.03125, and Holm's correction over its 4 tests makes that 0.125, not below alpha "
        "0.05; fix: gate on a track with more items, on fewer metrics (--pstbench-gate-metrics), or with bounds "
        "(--pstbench-min/--pstbench-max) instead of a baseline"
    ]
    r = pytester.runpytest_subprocess(
        *base,
        f"--pstbench-outputs={good}",
        "--pstbench-name=cand",
        f"--pstbench-baseline={baseline}",
        "--pstbench-gate-metrics=psnr",
    )
    assert r.ret == 0, r.stdout.str()
