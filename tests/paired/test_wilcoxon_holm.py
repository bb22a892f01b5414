"""Paired comparison: Wilcoxon + Holm against independent scipy calls and hand-derived values."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import scipy.stats
from helpers.paired_runs import scores_from, write_run

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.core.stats import holm
from pytest_pstbench.paired.compare import BETTER, NO_DIFF, WORSE, compare_runs
from pytest_pstbench.paired.runs import load_run

PROTOCOL = load_protocol()
METRICS = PROTOCOL.metric_names


def test_holm_hand_derived():
    # sorted: .005*4=.02, .01*3=.03, .03*2=.06, .04*1=.04 -> monotone max .06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == [1.0, 1.0]
    assert holm([0.2]) == [0.2]


def test_holm_against_definition():
    rng = np.random.default_rng(3)
    p = rng.uniform(0, 0.2, 7).tolist()
    m = len(p)
    order = np.argsort(p)
    expected = np.empty(m)
    for k, i in enumerate(order):
        expected[i] = min(1.0, max((m - j) * p[order[j]] for j in range(k + 1)))
    assert holm(p) == pytest.approx(expected.tolist())


def test_wilcoxon_and_holm_match_scipy_with_ties(tmp_path):
    rng = np.random.default_rng(0)
    n = 12
    psnr_a = rng.normal(25, 2, n)
    psnr_b = psnr_a + rng.normal(0.8, 0.6, n)
    psnr_b[:3] = psnr_a[:3] + np.array([0.0004, -0.0009, 0.0])  # ties under the 0.001 threshold
    lp_a = rng.uniform(0.1, 0.3, n)
    lp_b = lp_a + rng.normal(0.0, 0.02, n)
    a = write_run(tmp_path, "a", scores_from({"psnr": psnr_a, "lpips": lp_a}, n))
    b = write_run(tmp_path, "b", scores_from({"psnr": psnr_b, "lpips": lp_b}, n))
    comp = compare_runs([load_run(a), load_run(b)])
    rows = {r.metric: r for r in comp.rows}
    assert [r.metric for r in comp.rows] == PROTOCOL.ranked_metrics
    # independent computation: threshold ties by hand, scipy's wilcoxon with zero_method='wilcox'
    d = psnr_b - psnr_a
    d[np.abs(d) < 0.001] = 0
    ref = scipy.stats.wilcoxon(d, zero_method="wilcox")
    assert rows["psnr"].pvalue == pytest.approx(ref.pvalue, rel=1e-12)
    assert rows["psnr"].statistic == pytest.approx(ref.statistic)
    assert rows["psnr"].ties == 3
    assert rows["psnr"].wins == int((d > 0).sum()) and rows["psnr"].losses == int((d < 0).sum())
    dl = lp_b - lp_a
    dl[np.abs(dl) < 0.001] = 0
    ref_l = scipy.stats.wilcoxon(dl, zero_method="wilcox")
    assert rows["lpips"].pvalue == pytest.approx(ref_l.pvalue, rel=1e-12)
    # lower is better for LPIPS: a win is a negative difference
    assert rows["lpips"].wins == int((dl < 0).sum())
    # metrics with identical columns: all differences zero -> p = 1, not a scipy warning
    assert rows["ssim"].pvalue == 1.0 and rows["ssim"].ties == n
    # Holm over the 5 tests of the call
    raw = [r.pvalue for r in comp.rows]
    assert [r.p_holm for r in comp.rows] == pytest.approx(holm(raw))
    assert rows["psnr"].verdict == (BETTER if rows["psnr"].p_holm < 0.05 else NO_DIFF)
    assert rows["psnr"].mean_diff == pytest.approx(float(np.mean(psnr_b - psnr_a)))


def test_verdicts_better_and_worse(tmp_path):
    n = 10
    base = np.linspace(20, 30, n)
    a = write_run(tmp_path, "a", scores_from({"psnr": base, "delta_e00": base / 10}, n))
    b = write_run(tmp_path, "b", scores_from({"psnr": base - 1.0, "delta_e00": base / 10 - 0.5}, n))
    comp = compare_runs([load_run(a), load_run(b)])
    rows = {r.metric: r for r in comp.rows}
    # all 10 differences one sign: exact two-sided p = 2/2^10; Holm multiplies by at most 5
    assert rows["psnr"].pvalue == pytest.approx(2 / 2**10)
    assert rows["psnr"].verdict == WORSE  # lower PSNR
    assert rows["delta_e00"].verdict == BETTER  # lower delta E
    assert [r.metric for r in comp.worse] == ["psnr"]


def test_all_pairs_and_against_first(tmp_path):
    n = 6
    runs = [write_run(tmp_path, name, scores_from({"psnr": np.arange(n) + k}, n)) for k, name in enumerate("abc")]
    loaded = [load_run(r) for r in runs]
    all_pairs = compare_runs(loaded)
    assert {(r.baseline, r.candidate) for r in all_pairs.rows} == set(itertools.combinations("abc", 2))
    first = compare_runs(loaded, against_first=True)
    assert {(r.baseline, r.candidate) for r in first.rows} == {("a", "b"), ("a", "c")}
    assert len(first.rows) == 2 * len(PROTOCOL.ranked_metrics)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"track": "other"}, "run.json track is 'other' but"),
        ({"revision": "r2"}, "run.json dataset.revision is 'r2' but"),
        ({"protocol_sha": "0" * 64}, "run.json protocol.sha256 is '" + "0" * 64 + "' but"),
        (
            {"complete": False},
            "run.json says complete: false (5 of 6 pairs scored); only complete runs can be compared",
        ),
    ],
)
def test_refusals(tmp_path, kwargs, message):
    n = 6
    a = write_run(tmp_path / "x", "a", scores_from({}, n))
    b = write_run(tmp_path / "y", "b", scores_from({}, n), **kwargs)
    with pytest.raises(UserError) as err:
        compare_runs([load_run(a), load_run(b)])
    assert message in str(err.value)
    assert str(b) in str(err.value)


def test_refuses_other_pairs(tmp_path):
    a = write_run(tmp_path / "x", "a", scores_from({}, 6))
    b = write_run(tmp_path / "y", "b", scores_from({}, 5))
    with pytest.raises(
        UserError,
        match=r"metrics.csv has another set of pairs than .*\(only in the first: \['p05'\], only here: \[\]\)",
    ):
        compare_runs([load_run(a), load_run(b)])


def test_cli_compare_table_json_and_errors(tmp_path, capsys):
    n = 10
    base = np.linspace(20, 30, n)
    a = write_run(tmp_path, "a", scores_from({"psnr": base}, n))
    b = write_run(tmp_path, "b", scores_from({"psnr": base - 1.0}, n))
    assert cli_main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "PSNR↑" in out and "worse" in out and "0/0/10" in out
    assert cli_main(["compare", str(a), str(b), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {t["metric"]: t["verdict"] for t in data["tests"]}["psnr"] == "worse"
    assert cli_main(["compare", str(a)]) == 2
    assert "compare needs at least two run folders" in capsys.readouterr().err
    assert cli_main(["compare", str(a), str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "nope: run folder not found" in err and "Traceback" not in err
