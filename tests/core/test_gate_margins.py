"""Gate margins (non-inferiority): `pstbench compare --margin`, `--pstbench-gate-margin`.

The one-sided test of the margin-shifted differences is checked against `scipy.stats.wilcoxon` called
directly on differences shifted and tied by hand; margin 0 against a golden `compare --json` output
written before margins existed."""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
import yaml
from helpers.paired_runs import scores_from, write_run
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track
from PIL import Image

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.gate import margins_to_apply, parse_margins
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.core.stats import holm
from pytest_pstbench.paired.compare import BETTER, WITHIN_MARGIN, WORSE_BEYOND_MARGIN, compare_runs
from pytest_pstbench.paired.runs import load_run

GOLDEN = Path(__file__).parent / "golden" / "compare_margin0.json"
PROTOCOL = load_protocol()


def golden_runs(root: Path) -> list[Path]:
    """The three runs tests/core/golden/compare_margin0.json was made from (before margins existed)."""
    rng = np.random.default_rng(7)
    n = 14
    pa = rng.normal(25, 2, n)
    lp = rng.uniform(0.1, 0.3, n)
    de = rng.uniform(3, 8, n)
    ss = rng.uniform(0.5, 0.9, n)
    a = write_run(root, "a", scores_from({"psnr": pa, "lpips": lp, "delta_e00": de, "ssim": ss}, n))
    b = write_run(
        root,
        "b",
        scores_from(
            {
                "psnr": pa - rng.normal(0.3, 0.4, n),
                "lpips": lp + rng.normal(0.01, 0.01, n),
                "delta_e00": de + rng.normal(0, 0.2, n),
                "ssim": ss,
            },
            n,
        ),
    )
    c = write_run(
        root, "c", scores_from({"psnr": pa + 0.5, "lpips": lp - 0.002, "delta_e00": de, "ssim": ss - 0.01}, n)
    )
    return [a, b, c]


def _cli(*args) -> tuple[int, str]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = cli_main(list(args))
    return code, buf.getvalue()


def _before_power(out: tuple[int, str]) -> tuple[int, str]:
    """compare's JSON without the rows' `detectable` (issue #46, added after the golden file): the rest byte for byte."""
    data = json.loads(out[1])
    for row in data["tests"]:
        keys = set(row.pop("detectable"))  # issue #53: `unknown` where the differences have no spread
        assert keys - {"unknown"} == {"mde", "power", "simulations", "seed", "tests"}
    return out[0], json.dumps(data, indent=2) + "\n"


def test_margin_zero_is_byte_identical_to_before(tmp_path):
    runs = [str(r) for r in golden_runs(tmp_path)]
    golden = GOLDEN.read_text()
    assert _before_power(_cli("compare", *runs, "--json")) == (0, golden)
    assert _before_power(_cli("compare", *runs, "--json", "--margin", "psnr=0", "--margin", "lpips=0")) == (0, golden)
    plain = _cli("compare", *runs)
    assert plain[0] == 0 and "margin" not in plain[1]
    assert _cli("compare", *runs, "--margin", "psnr=0") == plain


def _shifted_reference(d, margin, higher_is_better, threshold, alternative_expected):
    s = d + margin if higher_is_better else d - margin
    s = s.copy()
    s[np.abs(s) < threshold] = 0.0
    return scipy.stats.wilcoxon(s, zero_method="wilcox", method="auto", alternative=alternative_expected)


def test_shifted_one_sided_wilcoxon_equals_scipy(tmp_path):
    rng = np.random.default_rng(11)
    n = 20
    psnr_a = rng.normal(25, 2, n)
    psnr_d = rng.normal(-0.3, 0.4, n)
    psnr_d[:2] = [-0.2 + 0.0004, -0.2 - 0.0007]  # shifted by 0.2 these fall under the 0.001 tie threshold
    lp_a = rng.uniform(0.1, 0.3, n)
    lp_d = rng.normal(0.004, 0.006, n)
    a = write_run(tmp_path, "a", scores_from({"psnr": psnr_a, "lpips": lp_a}, n))
    b = write_run(tmp_path, "b", scores_from({"psnr": psnr_a + psnr_d, "lpips": lp_a + lp_d}, n))
    runs = [load_run(a), load_run(b)]
    comp = compare_runs(runs, margins={"psnr": 0.2, "lpips": 0.002})
    rows = {r.metric: r for r in comp.rows}
    # the differences exactly as the engine reads them back (metrics.csv holds repr floats)
    dp = np.array([runs[1].scores[p]["psnr"] - runs[0].scores[p]["psnr"] for p in runs[0].scores])
    dl = np.array([runs[1].scores[p]["lpips"] - runs[0].scores[p]["lpips"] for p in runs[0].scores])
    ref_p = _shifted_reference(dp, 0.2, True, 0.001, "less")  # PSNR higher is better: worse = d < -0.2
    ref_l = _shifted_reference(dl, 0.002, False, 0.001, "greater")  # LPIPS lower is better: worse = d > 0.002
    assert rows["psnr"].pvalue == pytest.approx(ref_p.pvalue, rel=1e-12)
    assert rows["psnr"].statistic == pytest.approx(ref_p.statistic)
    assert rows["lpips"].pvalue == pytest.approx(ref_l.pvalue, rel=1e-12)
    assert rows["lpips"].statistic == pytest.approx(ref_l.statistic)
    assert rows["psnr"].margin == 0.2 and rows["lpips"].margin == 0.002 and rows["ssim"].margin is None
    # metrics without a margin: the protocol's two-sided test, unchanged
    assert rows["ssim"].pvalue == 1.0 and rows["ssim"].verdict == "no significant difference"
    # the mean difference and W/T/L stay those of the unshifted differences
    assert rows["psnr"].mean_diff == pytest.approx(dp.mean())
    assert rows["psnr"].ties == int((np.abs(dp) < 0.001).sum())
    # Holm over all tests of the call
    assert [r.p_holm for r in comp.rows] == pytest.approx(holm([r.pvalue for r in comp.rows]))
    for r in (rows["psnr"], rows["lpips"]):
        assert r.verdict in (WORSE_BEYOND_MARGIN, WITHIN_MARGIN, BETTER)
        assert (r.verdict == WORSE_BEYOND_MARGIN) == (r.p_holm < 0.05)


@pytest.mark.parametrize("hib_metric, sign", [("psnr", -1.0), ("delta_e00", +1.0)])
def test_within_and_beyond_margin_verdicts(tmp_path, hib_metric, sign):
    """Every pair worse by 0.1..0.3 (a known shift): margin 0.5 passes, margin 0.05 fails."""
    n = 12
    base = np.linspace(20, 30, n)
    worse_by = np.linspace(0.1, 0.3, n)
    a = write_run(tmp_path, "a", scores_from({hib_metric: base}, n))
    b = write_run(tmp_path, "b", scores_from({hib_metric: base + sign * worse_by}, n))
    runs = [load_run(a), load_run(b)]
    plain = {r.metric: r for r in compare_runs(runs).rows}[hib_metric]
    assert plain.verdict == "worse"
    within = {r.metric: r for r in compare_runs(runs, margins={hib_metric: 0.5}).rows}[hib_metric]
    assert within.verdict == WITHIN_MARGIN and within.pvalue == pytest.approx(
        1.0
    )  # every shifted diff on the good side
    beyond = compare_runs(runs, margins={hib_metric: 0.05})
    row = {r.metric: r for r in beyond.rows}[hib_metric]
    assert row.verdict == WORSE_BEYOND_MARGIN and row.pvalue == pytest.approx(1 / 2**n)  # exact one-sided
    assert beyond.worse == [row]
    # a candidate better on every pair, with a margin: "better" (its mean difference's CI excludes 0)
    c = write_run(tmp_path, "c", scores_from({hib_metric: base - sign * worse_by}, n))
    better = {r.metric: r for r in compare_runs([runs[0], load_run(c)], margins={hib_metric: 0.05}).rows}[hib_metric]
    assert better.verdict == BETTER


def test_cli_margin_table_json_and_errors(tmp_path, capsys):
    n = 12
    base = np.linspace(20, 30, n)
    a = write_run(tmp_path, "a", scores_from({"psnr": base}, n))
    b = write_run(tmp_path, "b", scores_from({"psnr": base - np.linspace(0.1, 0.3, n)}, n))
    assert cli_main(["compare", str(a), str(b), "--margin", "psnr=0.5"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("metric"))
    assert "margin" in header
    psnr_line = next(line for line in out.splitlines() if line.startswith("PSNR"))
    assert " 0.5 " in psnr_line and "within margin" in psnr_line and "-0.200" in psnr_line
    assert cli_main(["compare", str(a), str(b), "--margin", "psnr=0.05", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    psnr = next(t for t in data["tests"] if t["metric"] == "psnr")
    assert psnr["margin"] == 0.05 and psnr["verdict"] == "worse beyond margin"
    assert all("margin" not in t for t in data["tests"] if t["metric"] != "psnr")
    for bad, message in (
        ("psnr=-1", "a margin must be a finite number >= 0"),
        ("psnr=nan", "a margin must be a finite number >= 0"),
        ("psnr", "expected METRIC=DELTA"),
        ("psnr=big", "'big' is not a number"),
        ("nonesuch=1", "unknown metric 'nonesuch'"),
        ("hcorr_style=0.1", "hcorr_style is not among the tested metrics"),
    ):
        assert cli_main(["compare", str(a), str(b), "--margin", bad]) == 2, bad
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err and "Traceback" not in err and "fix:" in err, err
    # with --metrics the margin's metric must be among them
    assert cli_main(["compare", str(a), str(b), "--metrics", "ssim", "--margin", "psnr=0.1"]) == 2
    assert "psnr is not among the tested metrics (ssim)" in capsys.readouterr().err


def test_margin_refused_for_selection_runs(tmp_path, capsys):
    for name in ("a", "b"):
        d = tmp_path / name
        d.mkdir()
        (d / "run.json").write_text(json.dumps({"kind": "selection"}))
    assert cli_main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--margin", "top1=0.1"]) == 2
    err = capsys.readouterr().err
    assert "--margin top1=0.1: margins are implemented for paired runs (Wilcoxon), not for selection runs" in err
    assert err.count("\n") == 1
    import pytest_pstbench as pst  # the API refuses with the same message, its own option named

    with pytest.raises(UserError) as exc:
        pst.compare(baseline=tmp_path / "a", candidate=tmp_path / "b", margins={"top1": 0.1})
    assert str(exc.value) == (
        "compare(margins=...): margins are implemented for paired runs (Wilcoxon), not for "
        "selection runs (McNemar); fix: drop margins"
    )


def test_parse_margins_duplicates():
    assert parse_margins(["psnr=0.1", "psnr=0.1"], PROTOCOL) == {"psnr": 0.1}
    with pytest.raises(UserError, match="two margins for psnr"):
        parse_margins(["psnr=0.1", "psnr=0.2"], PROTOCOL)


def test_one_margin_path_for_the_cli_the_plugin_and_the_api():
    """`margins_to_apply`: METRIC=DELTA items (CLI, plugin) or a {metric: delta} mapping (API), checked by
    `parse_margins`, margin 0 dropped (the test without a margin)."""
    assert margins_to_apply(["psnr=0.1", "lpips=0"], PROTOCOL) == {"psnr": 0.1}
    assert margins_to_apply({"psnr": 0.1, "lpips": 0.0}, PROTOCOL) == {"psnr": 0.1}
    assert margins_to_apply(None, PROTOCOL) == {}
    with pytest.raises(UserError, match=r"^compare\(margins=\.\.\.\) 'psnr=-1': a margin must be a finite number >= 0"):
        margins_to_apply({"psnr": -1}, PROTOCOL, option="compare(margins=...)")
    with pytest.raises(UserError, match=r"^--margin 'psnr=1': psnr is not among the tested metrics \(ssim\)"):
        margins_to_apply(["psnr=1"], PROTOCOL, option="--margin", tested=["ssim"])


# ---- the pytest gate on a local track with outputs shifted by a known amount --------------------------


def _brighten(src: Path, out: Path, by: int) -> Path:
    out.mkdir(parents=True)
    for f in sorted(src.glob("*.png")):
        arr = np.asarray(Image.open(f), dtype=np.int16)
        Image.fromarray(np.clip(arr + by, 0, 255).astype(np.uint8)).save(out / f.name)
    return out


def _per_pair(run_dir: Path, metric: str) -> dict[str, float]:
    with open(run_dir / "metrics.csv", newline="") as fh:
        return {row["pair_id"]: float(row[metric]) for row in csv.DictReader(fh)}


def test_gate_margin_on_brightened_outputs(pytester):
    manifest = make_track(pytester.path / "track", n=8)
    good = make_outputs(manifest, pytester.path / "good", strength=0.9)
    bright = _brighten(good, pytester.path / "bright", 4)  # every output brightened by 4 grey levels
    proto = protocol_without_lpips(pytester.path / "proto.yaml")
    results = pytester.path / "results"
    for outputs, name in ((good, "baseline"), (bright, "bright")):
        assert cli_main(
            [
                "score",
                "--track",
                str(manifest),
                "--outputs",
                str(outputs),
                "--name",
                name,
                "--results",
                str(results),
                "--protocol",
                str(proto),
                "--no-cache",
            ]
        ) in (0,)
    baseline, cand = results / "small" / "baseline", results / "small" / "bright"
    a, b = _per_pair(baseline, "delta_e00"), _per_pair(cand, "delta_e00")
    d = np.array([b[p] - a[p] for p in a])
    assert (d > 0).all()  # brighter is worse in ΔE00 (lower is better) on every pair
    small, large = float(d.min()) / 2, float(d.max()) * 1.5  # beyond every pair's loss / above every pair's loss
    base = (
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={manifest}",
        f"--pstbench-protocol={proto}",
        f"--pstbench-outputs={bright}",
        f"--pstbench-baseline={baseline}",
        "--pstbench-gate-metrics=delta_e00",
        "--pstbench-name=cand",
    )
    r = pytester.runpytest_subprocess(*base, f"--pstbench-gate-margin=delta_e00={large:.6g}")
    assert r.ret == 0, r.stdout.str()
    r.stdout.fnmatch_lines(
        [
            f"*baseline gate (paired Wilcoxon, Holm, alpha 0.05; one-sided beyond the margins delta_e00={float(f'{large:.6g}'):g})*",
            "*margin*mean diff*",
            "*ΔE00↓*baseline*cand*within margin*",
            "*pstbench gate passed*",
        ]
    )
    r = pytester.runpytest_subprocess(*base, f"--pstbench-gate-margin=delta_e00={small:.6g}")
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.stdout.fnmatch_lines(
        [
            "*ΔE00↓*baseline*cand*worse beyond margin*",
            "*pstbench gate FAILED: ΔE00↓ (delta_e00) is significantly worse than baseline run baseline by more than the margin*",
        ]
    )
    # without a margin the same candidate fails as before
    r = pytester.runpytest_subprocess(*base)
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    r.stdout.fnmatch_lines(["*ΔE00↓*baseline*cand*worse*"])
    # the gate's p-value is scipy's on the shifted differences (read back through compare --json)
    code, out = _cli(
        "compare",
        str(baseline),
        str(results / "small" / "cand"),
        "--metrics",
        "delta_e00",
        "--margin",
        f"delta_e00={small:.6g}",
        "--json",
        "--protocol",
        str(proto),
    )
    assert code == 0
    row = json.loads(out)["tests"][0]
    thr = yaml.safe_load(proto.read_text())["comparison"]["tie_threshold"]["delta_e00"]
    a2, b2 = _per_pair(baseline, "delta_e00"), _per_pair(results / "small" / "cand", "delta_e00")
    s = np.array([b2[p] - a2[p] for p in a2]) - float(f"{small:.6g}")
    s[np.abs(s) < thr] = 0.0
    ref = scipy.stats.wilcoxon(s, zero_method="wilcox", alternative="greater")
    assert row["pvalue"] == pytest.approx(ref.pvalue, rel=1e-12) and row["pvalue"] == pytest.approx(1 / 2**8)
    # bad margins are one-line usage errors; selection tracks refuse the option
    r = pytester.runpytest_subprocess(*base, "--pstbench-gate-margin=delta_e00=-1")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--pstbench-gate-margin 'delta_e00=-1': a margin must be a finite number >= 0*"])
    assert "Traceback" not in r.stderr.str()
    # the ini key: one METRIC=DELTA per line
    ini = pytester.makeini(f"[pytest]\npstbench_gate_margin =\n    delta_e00={large:.6g}\n")
    r = pytester.runpytest_subprocess(*base)
    assert r.ret == 0, r.stdout.str()
    r.stdout.fnmatch_lines(["*ΔE00↓*baseline*cand*within margin*", "*pstbench gate passed*"])
    # the pstbench_compare fixture takes the same margins
    ini.unlink()
    pytester.makepyfile(
        test_cmp=f"""
        def test_margins(pstbench_compare):
            cand, base = r"{cand}", r"{baseline}"
            assert not pstbench_compare(candidate=cand, baseline=base, metrics=["delta_e00"], margins={{"delta_e00": {large!r}}}).worse
            worse = pstbench_compare(candidate=cand, baseline=base, metrics=["delta_e00"], margins={{"delta_e00": {small!r}}}).worse
            assert [(r.metric, r.verdict) for r in worse] == [("delta_e00", "worse beyond margin")]
    """
    )
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "test_cmp.py").assert_outcomes(passed=1)


def test_gate_margin_refused_on_a_selection_track(pytester):
    judges = Path(__file__).resolve().parents[2] / "examples" / "judges" / "no_reference.py"
    r = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--pstbench-track=vab-demo",
        f"--pstbench-judge={judges}:sharpness",
        "--pstbench-gate-margin=top1=0.1",
    )
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(
        [
            "*--pstbench-gate-margin: not supported for selection tracks (margins are implemented for "
            "the paired Wilcoxon gate, not for McNemar tests of judges); fix: drop the option*"
        ]
    )
    assert "Traceback" not in r.stderr.str() + r.stdout.str()
