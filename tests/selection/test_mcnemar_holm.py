"""Comparing judges on selection tracks: exact McNemar tests + Holm (`pstbench compare`, the pytest
baseline gate, the pstbench_compare fixture) and two fixes (`pstbench score` / `pstbench_pair` on a
selection track).

Expected values come from hand-derived binomial sums (math.comb, fractions), a brute-force
enumeration of all 2^n sign sequences, and counts taken directly from the answer patterns the runs
were scored from; never from the code under test."""

from __future__ import annotations

import csv
import itertools
import json
import math
import shutil
import xml.etree.ElementTree as ET
from fractions import Fraction
from pathlib import Path

import pytest
import yaml
from helpers.selection_runs import BAD, GOOD, pattern, score, set_key, write_answers

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.selection.compare import compare_selection_paths, mcnemar_exact
from pytest_pstbench.selection.protocol import SelectionParams, comparison_params
from pytest_pstbench.selection.tracks import resolve_selection_track

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

METRICS = ("top1", "bot1", "tb1")
TRIALS = 3


@pytest.fixture(scope="module")
def params():
    return SelectionParams.of(load_protocol("vab"))


@pytest.fixture(scope="module")
def demo():
    return resolve_selection_track("vab-demo")


# ---- independent references ------------------------------------------------------------------------
def exact_p(b: int, c: int) -> Fraction:
    """Hand formula: p = min(1, 2 P(X <= min(b, c))), X ~ Bin(b + c, 1/2); b + c = 0 -> 1."""
    n = b + c
    if n == 0:
        return Fraction(1)
    tail = Fraction(sum(math.comb(n, i) for i in range(min(b, c) + 1)), 2**n)
    return min(Fraction(1), 2 * tail)


def brute_p(b: int, c: int) -> Fraction:
    """All 2^(b+c) equally likely sign sequences: the share at least as far from n/2 as b."""
    n = b + c
    if n == 0:
        return Fraction(1)
    far = sum(1 for seq in itertools.product((0, 1), repeat=n) if abs(2 * sum(seq) - n) >= abs(2 * b - n))
    return Fraction(far, 2**n)


def holm_reference(p: list[float]) -> list[float]:
    """Holm by its definition: adj_(i) = max_{j <= i} min(1, (m - j) p_(j)) over the sorted p-values."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out = [0.0] * m
    for rank, i in enumerate(order):
        out[i] = max(min(1.0, (m - j) * p[order[j]]) for j in range(rank + 1))
    return out


# ---- runs scored from answer patterns ---------------------------------------------------------------
def expected_outcomes(track, correct) -> dict[str, dict[str, list[bool]]]:
    """What the kit must score: TB-1 for k = 2 is derived from pick_best (the issue's rule)."""
    out = {m: {} for m in METRICS}
    for task in track.tasks:
        for m in METRICS:
            src = "top1" if (m == "tb1" and task.k == 2) else m
            out[m][task.id] = [correct(task.id, t, src) for t in range(TRIALS)]
    return out


WORSE_BOT1 = {"top1": 1.0, "bot1": 0.2, "tb1": 1.0}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, demo, params):
    root = tmp_path_factory.mktemp("sel_runs")
    pats = {"good": pattern(1, GOOD), "bad": pattern(2, BAD), "good2": pattern(3, GOOD)}
    dirs = {name: score(root, name, demo, params, p) for name, p in pats.items()}
    return root, dirs, pats


# ---- the test itself --------------------------------------------------------------------------------
def test_mcnemar_hand_derived_values():
    assert mcnemar_exact(1, 6) == pytest.approx(0.125, rel=1e-12)  # 2 * (1 + 7) / 128
    assert mcnemar_exact(6, 1) == pytest.approx(0.125, rel=1e-12)
    assert mcnemar_exact(0, 5) == pytest.approx(0.0625, rel=1e-12)  # 2 / 32
    assert mcnemar_exact(2, 9) == pytest.approx(134 / 2048, rel=1e-12)  # 2 * (1 + 11 + 55) / 2^11
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 3) == 1.0
    assert mcnemar_exact(0, 1) == 1.0


def test_mcnemar_against_comb_formula_and_brute_force():
    for n in range(1, 13):
        for b in range(n + 1):
            want = exact_p(b, n - b)
            assert brute_p(b, n - b) == want  # the two independent references agree exactly
            assert mcnemar_exact(b, n - b) == pytest.approx(float(want), rel=1e-10, abs=1e-15)
    for b, c in [(0, 30), (5, 40), (17, 23), (60, 41)]:  # larger n: comb formula only
        assert mcnemar_exact(b, c) == pytest.approx(float(exact_p(b, c)), rel=1e-9, abs=1e-300)


# ---- compare on scored runs ---------------------------------------------------------------------------
def test_compare_counts_p_holm_and_verdicts(runs, demo):
    root, dirs, pats = runs
    comp, protocol, _ = compare_selection_paths([dirs["good"], dirs["bad"]])
    cfg = protocol.data["comparison"]
    assert [(r.metric, r.outcome) for r in comp.rows] == [(m, o) for m in METRICS for o in cfg["outcomes"]]
    base, cand = expected_outcomes(demo, pats["good"]), expected_outcomes(demo, pats["bad"])
    ids = demo.task_ids
    for r in comp.rows:
        if r.outcome == "pass^3":
            x = [all(base[r.metric][t]) for t in ids]
            y = [all(cand[r.metric][t]) for t in ids]
        else:
            x = [v for t in ids for v in base[r.metric][t]]
            y = [v for t in ids for v in cand[r.metric][t]]
        b = sum(1 for u, v in zip(x, y) if v and not u)
        c = sum(1 for u, v in zip(x, y) if u and not v)
        assert (r.n, r.b, r.c) == (len(x), b, c), (r.metric, r.outcome)
        assert r.both_right == sum(1 for u, v in zip(x, y) if u and v)
        assert r.both_wrong == sum(1 for u, v in zip(x, y) if not u and not v)
        assert r.acc_baseline == pytest.approx(sum(x) / len(x)) and r.acc_candidate == pytest.approx(sum(y) / len(y))
        assert r.diff == pytest.approx(sum(y) / len(y) - sum(x) / len(x))
        assert r.pvalue == pytest.approx(float(exact_p(b, c)), rel=1e-10)
    assert [r.p_holm for r in comp.rows] == pytest.approx(holm_reference([r.pvalue for r in comp.rows]))
    for r in comp.rows:
        want = "no significant difference" if r.p_holm >= 0.05 else ("better" if r.b > r.c else "worse")
        assert r.verdict == want
    verdicts = {(r.metric, r.outcome): r.verdict for r in comp.rows}
    assert verdicts[("top1", "ap@1")] == "worse"  # 0.9 -> 0.3 per trial over 90 trials
    assert "no significant difference" in verdicts.values()  # bot1/tb1 barely change
    assert [r.metric for r in comp.worse] and not comp.better
    # the accuracies are the overall means the run's own summary reports
    summary = json.loads((dirs["bad"] / "summary.json").read_text())
    overall = summary["cells"][0]
    for r in comp.rows:
        assert r.acc_candidate == pytest.approx(overall["metrics"][r.metric][r.outcome]["mean"])


def test_cli_table_json_against_first_and_metrics(runs, capsys):
    root, dirs, _ = runs
    a, b, c = (str(dirs[n]) for n in ("good", "bad", "good2"))
    assert cli_main(["compare", a, b, c, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "selection" and out["test"] == "mcnemar_exact" and out["alpha"] == 0.05
    assert [(t["baseline"], t["candidate"]) for t in out["tests"][::6]] == [
        ("good", "bad"),
        ("good", "good2"),
        ("bad", "good2"),
    ]
    assert len(out["tests"]) == 18
    p = [t["pvalue"] for t in out["tests"]]
    assert [t["p_holm"] for t in out["tests"]] == pytest.approx(holm_reference(p))  # Holm over all 18 tests
    assert cli_main(["compare", a, b, c, "--against-first", "--metrics", "tb1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(t["baseline"], t["candidate"], t["metric"], t["outcome"]) for t in out["tests"]] == [
        ("good", "bad", "tb1", "pass^3"),
        ("good", "bad", "tb1", "ap@1"),
        ("good", "good2", "tb1", "pass^3"),
        ("good", "good2", "tb1", "ap@1"),
    ]
    assert [t["p_holm"] for t in out["tests"]] == pytest.approx(holm_reference([t["pvalue"] for t in out["tests"]]))
    assert cli_main(["compare", a, b]) == 0
    text = capsys.readouterr().out
    assert text.startswith("track: vab-demo   protocol: vab   dataset revision: ")
    assert "test: exact McNemar, Holm over 6 tests   alpha=0.05" in text
    for word in ("metric", "outcome", "b/c", "both right/wrong", "acc base", "acc cand", "p (Holm)", "verdict"):
        assert word in text
    top = [line for line in text.splitlines() if line.startswith("Top-1")]
    assert len(top) == 2 and "ap@1" in top[1] and top[1].rstrip().endswith("worse")
    assert "trials of a task are not independent" in text
    assert cli_main(["compare", a, b, "--metrics", "psnr"]) == 2
    assert "metric(s) 'psnr' not in protocol vab (metrics: top1, bot1, tb1)" in capsys.readouterr().err


def test_identical_runs_no_difference(runs):
    _, dirs, _ = runs
    comp, _, _ = compare_selection_paths([dirs["good"], dirs["good"]])
    assert all(
        r.b == 0 and r.c == 0 and r.pvalue == 1.0 and r.verdict == "no significant difference" for r in comp.rows
    )


# ---- refusals -------------------------------------------------------------------------------------------
def _copy(src: Path, dest: Path, edit=None, csv_edit=None) -> Path:
    shutil.copytree(src, dest)
    if edit:
        run = json.loads((dest / "run.json").read_text())
        edit(run)
        (dest / "run.json").write_text(json.dumps(run))
    if csv_edit:
        lines = (dest / "per_task.csv").read_text().splitlines(keepends=True)
        (dest / "per_task.csv").write_text("".join(csv_edit(lines)))
    return dest


@pytest.mark.parametrize(
    "edit,message",
    [
        (set_key("protocol.sha256", "0" * 64), "run.json protocol.sha256 is '000"),
        (set_key("protocol.id", "vab2"), "run.json protocol.id is 'vab2' but"),
        (set_key("track", "other"), "run.json track is 'other' but"),
        (set_key("dataset.id", "other"), "run.json dataset.id is 'other' but"),
        (set_key("dataset.revision", "r0"), "run.json dataset.revision is 'r0' but"),
        (set_key("complete", False), "run.json says complete: false"),
    ],
)
def test_refusals_name_the_field(runs, tmp_path, capsys, edit, message):
    _, dirs, _ = runs
    other = _copy(dirs["bad"], tmp_path / "other", edit=edit)
    assert cli_main(["compare", str(dirs["good"]), str(other)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pstbench: error: ") and message in err
    assert "Traceback" not in err


def test_refusals_task_set_bad_csv_missing_files(runs, tmp_path, capsys):
    _, dirs, _ = runs
    fewer = _copy(dirs["bad"], tmp_path / "fewer", csv_edit=lambda lines: lines[:-1])
    assert cli_main(["compare", str(dirs["good"]), str(fewer)]) == 2
    err = capsys.readouterr().err
    assert "per_task.csv has another set of tasks" in err and "only in the first: ['vd-" in err
    broken = _copy(dirs["bad"], tmp_path / "broken")
    rows = list(csv.DictReader((broken / "per_task.csv").open()))
    rows[0]["top1_t1"] = ""  # as for a task that was not scored
    with (broken / "per_task.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    assert cli_main(["compare", str(dirs["good"]), str(broken)]) == 2
    assert f"per_task.csv: task {rows[0]['task_id']}: top1_t1 is '', expected 0, 1 or -" in capsys.readouterr().err
    gone = _copy(dirs["bad"], tmp_path / "gone")
    (gone / "per_task.csv").unlink()
    assert cli_main(["compare", str(dirs["good"]), str(gone)]) == 2
    assert "not a complete selection run folder (missing per_task.csv)" in capsys.readouterr().err
    assert cli_main(["compare", str(dirs["good"])]) == 2
    assert "at least two run folders" in capsys.readouterr().err


def _paired_run(d: Path) -> Path:
    """A paired run folder in its documented format (metrics.csv, no `kind`)."""
    d.mkdir(parents=True)
    (d / "metrics.csv").write_text("pair_id,psnr\np01,20.0\n")
    (d / "summary.json").write_text(json.dumps({"track": "t", "protocol": "pstbench", "name": "paired"}))
    (d / "run.json").write_text(json.dumps({"protocol": {"id": "pstbench"}, "track": "t", "complete": True}))
    return d


def test_mixing_paired_and_selection_runs_is_refused(runs, tmp_path, capsys):
    _, dirs, _ = runs
    paired = _paired_run(tmp_path / "paired")
    for order in ([paired, dirs["good"]], [dirs["good"], paired]):
        assert cli_main(["compare", *map(str, order)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert f"{paired} is a paired run (metrics.csv) but {dirs['good']} is a selection run (per_task.csv)" in err


def test_comparison_section_is_data(runs, demo, params, tmp_path, capsys):
    """The protocol's comparison section decides the outcomes and alpha; a bad one is a one-line error."""
    data = yaml.safe_load(load_protocol("vab").path.read_text())
    data["comparison"]["outcomes"] = ["ap@1"]
    data["comparison"]["alpha"] = 1e-12
    proto = tmp_path / "vab-strict.yaml"
    proto.write_text(yaml.safe_dump(data, sort_keys=False))
    _, _, pats = runs
    a = score(tmp_path, "good", demo, params, pats["good"], "--protocol", str(proto))
    b = score(tmp_path, "bad", demo, params, pats["bad"], "--protocol", str(proto))
    capsys.readouterr()
    assert cli_main(["compare", str(a), str(b), "--json", "--protocol", str(proto)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["alpha"] == 1e-12 and [t["outcome"] for t in out["tests"]] == ["ap@1"] * 3
    assert [t["p_holm"] for t in out["tests"]] == pytest.approx(holm_reference([t["pvalue"] for t in out["tests"]]))
    for t in out["tests"]:
        want = "no significant difference" if t["p_holm"] >= 1e-12 else ("better" if t["b"] > t["c"] else "worse")
        assert t["verdict"] == want
    assert any(1e-12 <= t["p_holm"] < 0.05 for t in out["tests"])  # the protocol's alpha changed this verdict
    for key, value, message in [
        ("outcomes", ["pass^5"], "comparison.outcomes must be a non-empty list"),
        ("alpha", 2, "comparison.alpha must be a number between 0 and 1"),
        ("test", "chi2", "comparison.test must be mcnemar_exact"),
        ("correction", "bonferroni", "comparison.correction must be holm"),
    ]:
        bad = {**data, "comparison": {**data["comparison"], key: value}}
        proto.write_text(yaml.safe_dump(bad, sort_keys=False))
        with pytest.raises(UserError, match="invalid selection protocol: " + message.replace("(", r"\(")):
            comparison_params(load_protocol(proto))
    del data["comparison"]
    proto.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(UserError, match="missing 'comparison' section"):
        comparison_params(load_protocol(proto))


# ---- fixes -------------------------------------------------------------------------------------------
def test_score_on_a_selection_track_says_how(tmp_path, capsys, demo):
    for track in ("vab-demo", str(demo.manifest)):
        for extra in ([], ["--outputs", str(tmp_path)]):
            assert cli_main(["score", "--track", track, *extra]) == 2
            err = capsys.readouterr().err
            assert err == (
                f"pstbench: error: --track {track}: a selection track (best/worst judgment), not a paired track; "
                f"fix: pstbench vab score --track {track} --judge MODULE:FUNCTION|--answers FILE\n"
            )
    assert cli_main(["score", "--track", "demo"]) == 2
    assert "--outputs is required to score paired track demo" in capsys.readouterr().err


# ---- pytest: the gate, the fixture, pstbench_pair -------------------------------------------------------
def _run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


@pytest.fixture
def gate_setup(pytester, demo, params):
    """A perfect baseline run (in-process CLI) and answers files for candidates, in pytester's folder."""
    perfect = pattern(0, {"top1": 1.0, "bot1": 1.0, "tb1": 1.0})
    baseline = score(pytester.path, "base", demo, params, perfect)
    worse_bot1 = pattern(5, WORSE_BOT1)  # Bot-1 only (TB-1 of k = 2 tasks derives from pick_best)
    files = {
        "same": write_answers(pytester.path / "same.jsonl", demo, params, perfect),
        "worse": write_answers(pytester.path / "worse.jsonl", demo, params, worse_bot1),
    }
    return baseline, files


def test_gate_fails_when_candidate_is_worse(pytester, gate_setup):
    baseline, files = gate_setup
    r = _run(
        pytester,
        "--pstbench-track=vab-demo",
        f"--pstbench-answers={files['worse']}",
        f"--pstbench-baseline={baseline}",
        "--junitxml=report.xml",
    )
    r.assert_outcomes(passed=30)  # every task scored ...
    assert r.ret == pytest.ExitCode.TESTS_FAILED  # ... but the gate fails the session
    r.stdout.fnmatch_lines(
        [
            "*baseline gate (exact McNemar, Holm, alpha 0.05):*",
            "metric*outcome*baseline*candidate*n*b/c*verdict",
            "Top-1*pass^3*base*worse*30*0/0*no significant difference",
            "*",
            "Bot-1*pass^3*base*worse*30*0/*worse",
            "*",
            "TB-1*pass^3*base*worse*30*0/0*no significant difference",
            "*",
            "*pstbench gate FAILED: bot1 pass^3 is significantly worse than baseline run base: accuracy *",
            "*pstbench gate FAILED: bot1 ap@1 is significantly worse than baseline run base: accuracy *",
        ]
    )
    assert "FAILED: top1" not in r.stdout.str() and "FAILED: tb1" not in r.stdout.str()
    props = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "report.xml").iter("property")}
    assert props["pstbench_gate"] == "failed"
    assert props["pstbench_verdict[base][bot1 ap@1]"].startswith("worse; b 0; c ")
    assert props["pstbench_verdict[base][top1 pass^3]"].startswith("no significant difference; b 0; c 0;")


def test_gate_passes_and_gate_metrics_restrict(pytester, gate_setup):
    baseline, files = gate_setup
    r = _run(
        pytester, "--pstbench-track=vab-demo", f"--pstbench-answers={files['same']}", f"--pstbench-baseline={baseline}"
    )
    assert r.ret == 0
    r.stdout.fnmatch_lines(["TB-1*ap@1*base*same*90*0/0*no significant difference", "*pstbench gate passed*"])
    # worse on Bot-1 only; gating Top-1 and TB-1 passes, and only their tests are run
    r = _run(
        pytester,
        "--pstbench-track=vab-demo",
        f"--pstbench-answers={files['worse']}",
        f"--pstbench-baseline={baseline}",
        "--pstbench-gate-metrics=top1,tb1",
    )
    assert r.ret == 0
    out = r.stdout.str()
    assert "pstbench gate passed" in out
    tests = [line.split()[:2] for line in out.splitlines() if line.startswith(("Top-1 ", "Bot-1 ", "TB-1 "))]
    assert tests == [["Top-1", "pass^3"], ["Top-1", "ap@1"], ["TB-1", "pass^3"], ["TB-1", "ap@1"]]
    r = _run(
        pytester, "--pstbench-track=vab-demo", f"--pstbench-answers={files['same']}", "--pstbench-gate-metrics=psnr"
    )
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--pstbench-gate-metrics: unknown metric(s) psnr; protocol vab has top1, bot1, tb1*"])


def test_gate_refuses_baselines_with_the_reason(pytester, gate_setup):
    baseline, files = gate_setup
    paired = _paired_run(pytester.path / "paired")
    r = _run(
        pytester, "--pstbench-track=vab-demo", f"--pstbench-answers={files['same']}", f"--pstbench-baseline={paired}"
    )
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.stdout.fnmatch_lines(
        [f"*pstbench gate FAILED: baseline refused: {paired} is a paired run (metrics.csv) but *is a selection run*"]
    )
    other = _copy(baseline, pytester.path / "other", edit=set_key("dataset.revision", "r0"))
    r = _run(
        pytester, "--pstbench-track=vab-demo", f"--pstbench-answers={files['same']}", f"--pstbench-baseline={other}"
    )
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.stdout.fnmatch_lines(["*pstbench gate FAILED: baseline refused: *run.json dataset.revision is * but * has 'r0'*"])


def test_pstbench_compare_fixture_on_selection_runs(pytester, gate_setup, demo, params):
    baseline, files = gate_setup
    worse = score(pytester.path, "worse", demo, params, pattern(5, WORSE_BOT1))
    pytester.makepyfile(
        test_cmp=f"""
        def test_worse(pstbench_compare):
            result = pstbench_compare(candidate=r"{worse}", baseline=r"{baseline}")
            assert [(r.metric, r.outcome) for r in result.worse] == [("bot1", "pass^3"), ("bot1", "ap@1")]

        def test_same(pstbench_compare):
            assert not pstbench_compare(r"{baseline}", r"{baseline}").worse
    """
    )
    _run(pytester, "test_cmp.py").assert_outcomes(passed=2)


def test_pstbench_pair_and_paired_bounds_on_a_selection_track_are_usage_errors(pytester):
    judges = Path(__file__).resolve().parents[2] / "examples" / "judges" / "no_reference.py"
    pytester.makepyfile(test_x="def test_x(pstbench_pair):\n    pass\n")
    r = _run(pytester, "--pstbench-track=vab-demo", f"--pstbench-judge={judges}:sharpness")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    err = r.stderr.str()
    assert "ERROR: pstbench: test_x.py::test_x: uses pstbench_pair, but track vab-demo is a selection track" in err
    assert "Traceback" not in err + r.stdout.str() and "INTERNALERROR" not in err + r.stdout.str()
    assert not (pytester.path / "results").exists()
    # a paired-style key (a bare metric) is not a selection bound key: one line naming the valid keys
    r = _run(pytester, "--pstbench-track=vab-demo", f"--pstbench-judge={judges}:sharpness", "--pstbench-min=top1=0.5")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--pstbench-min 'top1=0.5': unknown key 'top1'; protocol vab has top1.ap@1, *"])


def test_paired_gate_refuses_a_selection_baseline(pytester, gate_setup):
    from helpers.protocols import protocol_without_lpips
    from helpers.tracks import make_outputs, make_track

    baseline, _ = gate_setup
    manifest = make_track(pytester.path / "track", n=2)
    outputs = make_outputs(manifest, pytester.path / "out")
    proto = protocol_without_lpips(pytester.path / "proto.yaml")
    r = _run(
        pytester,
        f"--pstbench-track={manifest}",
        f"--pstbench-protocol={proto}",
        f"--pstbench-outputs={outputs}",
        f"--pstbench-baseline={baseline}",
    )
    r.assert_outcomes(passed=2)
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.stdout.fnmatch_lines(
        [
            f"*pstbench gate FAILED: baseline refused: * is a paired run (metrics.csv) but {baseline} is a selection run (per_task.csv)*"
        ]
    )


def test_missing_folder_beside_a_selection_run_is_not_called_paired(runs, tmp_path, capsys):
    _, dirs, _ = runs
    assert cli_main(["compare", str(dirs["good"]), str(tmp_path / "nope")]) == 2
    assert f"{tmp_path / 'nope'}: run folder not found" in capsys.readouterr().err


# ---- bounds on the overall means of a selection run (--pstbench-min / --pstbench-max) ----------------------
def _overall(run_dir: Path) -> dict:
    """summary.json's overall cell, read directly from the file."""
    cells = json.loads((run_dir / "summary.json").read_text())["cells"]
    (cell,) = [c for c in cells if c["group"] == "overall"]
    return cell["metrics"]


def _expected_means(track, correct) -> dict[tuple[str, str], Fraction]:
    """Overall means from the answer pattern alone: (metric, aggregation) -> exact mean over tasks."""
    out = expected_outcomes(track, correct)
    n = len(track.tasks)
    return {
        **{(m, "pass^3"): Fraction(sum(all(v) for v in out[m].values()), n) for m in METRICS},
        **{(m, "ap@1"): Fraction(sum(sum(v) for v in out[m].values()), n * TRIALS) for m in METRICS},
    }


def test_selection_bounds_pass_fail_and_combine_with_the_baseline(pytester, gate_setup, demo):
    baseline, files = gate_setup
    want = _expected_means(demo, pattern(5, WORSE_BOT1))
    # what the bounds below rely on, from the pattern alone
    assert want[("top1", "pass^3")] == want[("top1", "ap@1")] == 1 and want[("tb1", "ap@1")] >= Fraction(1, 2)
    assert want[("bot1", "pass^3")] < Fraction(1, 2) and want[("bot1", "ap@1")] <= Fraction(1, 2)
    # bounds that hold: Top-1 is always right, Bot-1 mostly wrong
    r = _run(
        pytester,
        "--pstbench-track=vab-demo",
        f"--pstbench-answers={files['worse']}",
        "--pstbench-min=top1.pass^3=0.9",
        "--pstbench-max=bot1.ap@1=0.5",
    )
    assert r.ret == 0, r.stdout.str()
    r.stdout.fnmatch_lines(["*pstbench gate passed*"])
    run_dir = pytester.path / "results" / "vab-demo" / "worse"
    overall = _overall(run_dir)
    for (m, agg), value in want.items():  # the run's summary.json says what the answer pattern implies
        assert overall[m][agg]["mean"] == pytest.approx(float(value), abs=1e-12), (m, agg)
    assert overall["top1"]["pass^3"]["mean"] >= 0.9 and overall["bot1"]["ap@1"]["mean"] <= 0.5
    # broken bounds fail the session (every task still passes), beside the baseline gate's own reasons
    r = _run(
        pytester,
        "--pstbench-track=vab-demo",
        f"--pstbench-answers={files['worse']}",
        "--pstbench-min=bot1.pass^3=0.5",
        "--pstbench-max=top1.ap@1=0.99",
        "--pstbench-min=tb1.ap@1=0.5",
        f"--pstbench-baseline={baseline}",
        "--junitxml=report.xml",
    )
    r.assert_outcomes(passed=30)
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    overall = _overall(run_dir)
    bot1, top1 = overall["bot1"]["pass^3"]["mean"], overall["top1"]["ap@1"]["mean"]
    assert bot1 < 0.5 and top1 > 0.99 and overall["tb1"]["ap@1"]["mean"] >= 0.5
    reasons = [
        f"bot1 pass^3 mean {bot1:.6g} is below the minimum 0.5 (--pstbench-min)",
        f"top1 ap@1 mean {top1:.6g} is above the maximum 0.99 (--pstbench-max)",
    ]
    r.stdout.fnmatch_lines(
        [
            f"*pstbench gate FAILED: {reasons[0]}",
            f"*pstbench gate FAILED: {reasons[1]}",
            "*pstbench gate FAILED: bot1 pass^3 is significantly worse than baseline run base*",
        ]
    )
    assert "FAILED: tb1 ap@1 mean" not in r.stdout.str()  # a bound that holds gives no reason
    props = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "report.xml").iter("property")}
    assert props["pstbench_gate"] == "failed"
    assert [props["pstbench_gate_reason_1"], props["pstbench_gate_reason_2"]] == reasons
    # bounds equal to the mean hold (inclusive), from the ini file too
    mean = overall["bot1"]["ap@1"]["mean"]
    pytester.makeini(
        f"[pytest]\npstbench_min = bot1.ap@1={mean!r}\npstbench_max =\n    bot1.ap@1={mean!r}\n    tb1.pass^3=1\n"
    )
    r = _run(pytester, "--pstbench-track=vab-demo", f"--pstbench-answers={files['worse']}")
    assert r.ret == 0, r.stdout.str()
    r.stdout.fnmatch_lines(["*pstbench gate passed*"])


def test_selection_bounds_with_a_judge_function(pytester):
    judges = Path(__file__).resolve().parents[2] / "examples" / "judges" / "no_reference.py"
    r = _run(
        pytester,
        "--pstbench-track=vab-demo",
        f"--pstbench-judge={judges}:sharpness",
        "--pstbench-min=tb1.ap@1=0",
        "--pstbench-max=tb1.ap@1=0",
        "--pstbench-max=bot1.pass^3=1",
    )
    r.assert_outcomes(passed=30)
    mean = _overall(pytester.path / "results" / "vab-demo" / "sharpness")["tb1"]["ap@1"]["mean"]
    assert mean > 0  # sharpness picks some best/worst pairs right on vab-demo
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    failed = [line for line in r.stdout.str().splitlines() if "pstbench gate FAILED" in line]
    assert failed == [f"pstbench gate FAILED: tb1 ap@1 mean {mean:.6g} is above the maximum 0 (--pstbench-max)"]


@pytest.mark.parametrize(
    "option,message",
    [
        (
            "--pstbench-max=tb1.pass3=0.3",
            "--pstbench-max 'tb1.pass3=0.3': unknown key 'tb1.pass3'; protocol vab has {keys}; did you mean tb1.pass^3?",
        ),
        (
            "--pstbench-min=TB-1.pass^3=0.3",
            "--pstbench-min 'TB-1.pass^3=0.3': unknown key 'TB-1.pass^3'; protocol vab has {keys}; did you mean tb1.pass^3?",
        ),
        (
            "--pstbench-min=tb1.pass^3",
            "--pstbench-min 'tb1.pass^3': expected METRIC.AGGREGATION=VALUE, e.g. tb1.pass^3=0.3",
        ),
        (
            "--pstbench-min=tb1.pass^3=30",
            "--pstbench-min 'tb1.pass^3=30': '30' is outside [0, 1], the range of these means",
        ),
        ("--pstbench-max=tb1.pass^3=high", "--pstbench-max 'tb1.pass^3=high': 'high' is not a number"),
        ("--pstbench-max=tb1.pass^3=nan", "--pstbench-max 'tb1.pass^3=nan': 'nan' is not a finite number"),
    ],
)
def test_selection_bound_errors_are_one_line_usage_errors(pytester, option, message):
    proto = yaml.safe_load(load_protocol("vab").path.read_text())  # the valid keys, from the protocol file itself
    keys = ", ".join(f"{m}.{a}" for m in proto["metrics"] for a in proto["aggregations"])
    judges = Path(__file__).resolve().parents[2] / "examples" / "judges" / "no_reference.py"
    r = _run(pytester, "--pstbench-track=vab-demo", f"--pstbench-judge={judges}:sharpness", option)
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    lines = [line for line in r.stderr.str().splitlines() if line.strip()]
    assert lines == [f"ERROR: pstbench: {message.format(keys=keys)}"]
    assert not (pytester.path / "results").exists()
