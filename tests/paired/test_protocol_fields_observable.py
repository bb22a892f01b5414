"""Issue #46 "Every statistical parameter observable": each statistical field of the protocol files changed
alone in a named variant changes the output exactly as an independent computation says (scipy, a plain loop,
a hand value), on data where the alternatives differ (asserted first). The five planted bugs the issue lists
(tie rule <= for <, zero_method hard-coded pratt, PSNR's tie threshold for every metric, ap@1 bootstrap with
1,000 resamples, pooled-MSE PSNR without its cap) each fail a test here."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.stats
import yaml

from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.core.stats import holm
from pytest_pstbench.paired.aggregation import summary_entry
from pytest_pstbench.paired.compare import compare_two, finish_comparison

SHIPPED = load_protocol()


def variant(tmp_path: Path, name: str, edit, base: str = "pstbench"):
    """The shipped protocol `base` with one field changed by `edit(data)`, saved as a named variant file."""
    data = yaml.safe_load(load_protocol(base).path.read_text())
    edit(data)
    data["id"] = name
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return load_protocol(path)


def runs(a: dict, b: dict):
    n = len(next(iter(a.values())))
    ids = [f"p{i:02d}" for i in range(n)]

    def mk(name, cols):
        return SimpleNamespace(name=name, scores={p: {m: float(cols[m][i]) for m in cols} for i, p in enumerate(ids)})  # noqa: E731

    return mk("base", a), mk("cand", b)


def row(protocol, a, b, metric):
    base, cand = runs({metric: a}, {metric: b})
    return compare_two(base, cand, protocol, [metric])[0]


def plain_bootstrap(x, *, resamples, seed, confidence, stat=np.mean):
    """A percentile bootstrap written as a loop: resample i draws n indices with rng.integers(0, n, n)."""
    x = np.asarray(x, dtype=np.float64)
    rng = np.random.default_rng(seed)
    values = [stat(x[rng.integers(0, x.size, x.size)]) for _ in range(resamples)]
    a = (1 - confidence) / 2
    return tuple(float(v) for v in np.quantile(values, [a, 1 - a]))


# ---- comparison.tie_threshold: the rule |d| < threshold, each metric its own ----------------------------
def test_tie_threshold_is_strict_and_per_metric(tmp_path):
    """Differences exactly at a metric's threshold are not ties (|d| < t); each metric its own threshold: a
    variant with distinct, exactly representable thresholds (psnr 0.25, lpips 0.125, delta_e00 0.0625)."""
    p = variant(
        tmp_path,
        "ties-distinct",
        lambda d: d["comparison"].update(tie_threshold={"psnr": 0.25, "lpips": 0.125, "delta_e00": 0.0625}),
    )
    a = np.full(8, 0.5)
    steps = np.array([0.25, -0.25, 0.125, -0.125, 0.0625, 0.5, -0.0625, 0.03125])  # all exact in binary
    for metric, t in (("psnr", 0.25), ("lpips", 0.125), ("delta_e00", 0.0625)):
        ties = int((np.abs(steps) < t).sum())  # the hand rule
        assert ties != int((np.abs(steps) <= t).sum())  # `<=` would count others
        assert ties != int((np.abs(steps) < 0.25).sum()) or metric == "psnr"  # PSNR's threshold would too
        r = row(p, a, a + steps, metric)
        assert r.ties == ties, metric
        d = steps.copy()
        d[np.abs(d) < t] = 0
        assert r.pvalue == scipy.stats.wilcoxon(d, zero_method="wilcox").pvalue
    # the shipped protocol: 0.001 on three metrics, 0 (exact ties only) elsewhere
    r = row(SHIPPED, a, a + np.array([0.001, 0.0009, 0, 1e-12, 0.5, -0.5, 0.2, 0.3]), "ssim")
    assert r.ties == 1


# ---- comparison.zero_method / alternative / method / alpha / correction --------------------------------
ZERO_DATA = np.array([0.0, 0.0, 0.0, 0.3, -0.1, 0.5, 0.7, -0.2, 0.9, 1.1, 0.4, 0.6, -0.45, 0.8, 0.25, -0.6])


@pytest.mark.parametrize("zero_method", ["wilcox", "pratt", "zsplit"])
def test_zero_method_is_the_protocols(tmp_path, zero_method):
    ps = {z: scipy.stats.wilcoxon(ZERO_DATA, zero_method=z).pvalue for z in ("wilcox", "pratt", "zsplit")}
    assert len(set(ps.values())) == 3  # the data tell the three apart
    p = (
        SHIPPED
        if zero_method == "wilcox"
        else variant(tmp_path, f"zero-{zero_method}", lambda d: d["comparison"].update(zero_method=zero_method))
    )
    assert p.comparison.zero_method == zero_method
    assert row(p, np.full(16, 2.0), 2.0 + ZERO_DATA, "ssim").pvalue == ps[zero_method]


@pytest.mark.parametrize("alternative", ["less", "greater"])
def test_alternative_is_the_protocols(tmp_path, alternative):
    d = np.array([0.3, -0.1, 0.5, 0.7, -0.2, 0.9, 1.1, 0.4, 0.6, -0.35])
    want = scipy.stats.wilcoxon(d, alternative=alternative).pvalue
    assert want != scipy.stats.wilcoxon(d).pvalue
    p = variant(tmp_path, f"alt-{alternative}", lambda x: x["comparison"].update(alternative=alternative))
    assert row(p, np.full(10, 2.0), 2.0 + d, "ssim").pvalue == want


def test_method_is_the_protocols(tmp_path):
    d = np.concatenate([[0.0, 0.0], np.linspace(0.05, 1.0, 18) * np.where(np.arange(18) % 4 == 0, -1, 1)])
    exact, auto = (scipy.stats.wilcoxon(d, method=m).pvalue for m in ("exact", "auto"))
    assert exact != auto  # zeros at n = 20: auto takes the normal approximation
    p = variant(tmp_path, "method-exact", lambda x: x["comparison"].update(method="exact"))
    assert row(p, np.full(20, 2.0), 2.0 + d, "ssim").pvalue == exact
    assert row(SHIPPED, np.full(20, 2.0), 2.0 + d, "ssim").pvalue == auto
    nozero = d[2:]
    approx, auto = (scipy.stats.wilcoxon(nozero, method=m).pvalue for m in ("asymptotic", "auto"))
    assert approx != auto  # no zeros at n = 18: auto takes the exact distribution
    p = variant(tmp_path, "method-approx", lambda x: x["comparison"].update(method="approx"))
    assert row(p, np.full(18, 2.0), 2.0 + nozero, "ssim").pvalue == approx


def test_alpha_and_holm_are_the_protocols(tmp_path):
    d = np.array([0.3, -0.1, 0.5, 0.7, -0.2, 0.9, 1.1, 0.4, 0.6, -0.35])
    d2 = np.array([0.3, -0.1, 0.5, 0.7, -0.2, 0.9, -1.1, 0.4, 0.6, -0.35])
    a = np.full(10, 2.0)
    rows = [row(SHIPPED, a, a + d, "ssim"), row(SHIPPED, a, a + d2, "hcorr_gt")]
    raw = [r.pvalue for r in rows]
    m = len(raw)
    order = np.argsort(raw)
    by_hand = [0.0] * m  # Holm step-down written out
    for k, i in enumerate(order):
        by_hand[i] = min(1.0, max((m - j) * raw[order[j]] for j in range(k + 1)))
    assert holm(raw) == by_hand
    for alpha in (0.05, 0.2):
        p = SHIPPED if alpha == 0.05 else variant(tmp_path, "alpha-0.2", lambda x: x["comparison"].update(alpha=0.2))
        fresh = [row(p, a, a + d, "ssim"), row(p, a, a + d2, "hcorr_gt")]
        comp = finish_comparison(fresh, p)
        assert [r.p_holm for r in comp.rows] == by_hand
        assert [r.verdict != "no significant difference" for r in comp.rows] == [q < alpha for q in by_hand]
    assert any(0.05 <= q < 0.2 for q in by_hand)  # the data tell the two alphas apart


# ---- bootstraps: comparison.bootstrap and aggregation.bootstrap, exactly a plain loop -------------------
@pytest.mark.parametrize("field, value", [("resamples", 2500), ("seed", 7), ("confidence", 0.8)])
def test_difference_bootstrap_bounds_equal_a_plain_loop(tmp_path, field, value):
    rng = np.random.default_rng(3)
    a, d = rng.normal(25, 2, 15), rng.normal(0.1, 0.5, 15)
    p = variant(tmp_path, f"cmp-boot-{field}", lambda x: x["comparison"]["bootstrap"].update({field: value}))
    cfg = p.comparison.bootstrap
    r = row(p, a, a + d, "psnr")
    want = plain_bootstrap((a + d) - a, resamples=cfg.resamples, seed=cfg.seed, confidence=cfg.confidence)
    assert (r.diff_ci_low, r.diff_ci_high) == want
    shipped = SHIPPED.comparison.bootstrap
    assert want != plain_bootstrap(
        (a + d) - a, resamples=shipped.resamples, seed=shipped.seed, confidence=shipped.confidence
    )


@pytest.mark.parametrize("field, value", [(None, None), ("resamples", 2500), ("seed", 7), ("confidence", 0.8)])
def test_aggregation_bootstrap_bounds_equal_a_plain_loop(tmp_path, field, value):
    x = np.random.default_rng(4).uniform(0.1, 0.4, 13)
    p = (
        SHIPPED
        if field is None
        else variant(tmp_path, f"agg-boot-{field}", lambda d: d["aggregation"]["bootstrap"].update({field: value}))
    )
    cfg = p.aggregation.bootstrap
    e = summary_entry(list(x), p, "lpips")
    assert (e["ci_low"], e["ci_high"]) == plain_bootstrap(
        x, resamples=cfg.resamples, seed=cfg.seed, confidence=cfg.confidence
    )
    assert e["mean"] == float(np.mean(x))


# ---- caps: the pooled-MSE PSNR's cap_db ----------------------------------------------------------------
@pytest.mark.parametrize("cap", [100.0, 60.0])
def test_pooled_mse_psnr_is_capped(tmp_path, cap):
    """Pooled MSE so small that 10 log10(255^2 / MSE) is above the cap (but MSE > 0): the value is the cap."""

    def edit(d):
        d["aggregation"]["per_metric"] = {"psnr": {"statistic": "pooled_mse"}}
        d["metrics"]["psnr"]["cap_db"] = cap

    p = variant(tmp_path, f"pooled-cap{cap:g}", edit)
    mse = np.array([1e-9, 2e-9, 4e-9, 1e-6, 3e-9])
    uncapped = 10 * math.log10(255.0**2 / mse.mean())
    assert uncapped > cap
    e = summary_entry(list(mse), p, "psnr")
    assert e["value"] == cap
    # below the cap the value is the formula (a hand value)
    big = np.array([10.0, 20.0, 30.0])
    assert summary_entry(list(big), p, "psnr")["value"] == 10 * math.log10(255.0**2 / 20.0)


# ---- the selection protocol's ap@1 bootstrap: exactly a plain loop at the protocol's resamples ----------
def _selection_cells(params):
    from pytest_pstbench.selection.accuracy import aggregate, trial_outcomes
    from pytest_pstbench.selection.tracks import Task

    P = Path("x")
    tasks, answers = [], {}
    rng = np.random.default_rng(9)
    for i in range(40):
        t = Task(f"T{i}", f"T{i}", "a", "x", (P,) * 3, best=0, worst=2)
        tasks.append(t)
        right = rng.random(3) < 0.6
        ans = lambda ok: {"best": 0 if ok else 1, "worst": 2, "status": "ok", "detail": None}  # noqa: E731
        answers[t.id] = {
            "pick_best": [ans(ok) for ok in right],
            "pick_worst": [ans(True)] * 3,
            "pick_best_and_worst": [ans(ok) for ok in right],
        }
    cells = aggregate(tasks, [trial_outcomes(t, answers[t.id], params) for t in tasks], params)
    hits = np.array([[1.0 if (answers[t.id]["pick_best"][k]["best"] == 0) else 0.0 for k in range(3)] for t in tasks])
    return cells[0]["metrics"]["top1"]["ap@1"], hits


def _selection_pass3(params):
    """The overall top1 pass^3 entry of the same tasks as `_selection_cells`."""
    from pytest_pstbench.selection.accuracy import aggregate, trial_outcomes
    from pytest_pstbench.selection.tracks import Task

    P = Path("x")
    tasks, answers = [], {}
    rng = np.random.default_rng(9)
    for i in range(40):
        t = Task(f"T{i}", f"T{i}", "a", "x", (P,) * 3, best=0, worst=2)
        tasks.append(t)
        right = rng.random(3) < 0.6
        ans = lambda ok: {"best": 0 if ok else 1, "worst": 2, "status": "ok", "detail": None}  # noqa: E731
        answers[t.id] = {
            "pick_best": [ans(ok) for ok in right],
            "pick_worst": [ans(True)] * 3,
            "pick_best_and_worst": [ans(ok) for ok in right],
        }
    return aggregate(tasks, [trial_outcomes(t, answers[t.id], params) for t in tasks], params)[0]["metrics"]["top1"][
        "pass^3"
    ]


def _plain_ap1(hits, boot):
    """ap@1 (each trial's accuracy over the resampled tasks, then their mean) bootstrapped in a loop."""
    rng = np.random.default_rng(int(boot["seed"]))
    n = hits.shape[0]
    values = [hits[rng.integers(0, n, n)].mean(axis=0).mean() for _ in range(int(boot["resamples"]))]
    a = (1 - float(boot["confidence"])) / 2
    return tuple(float(v) for v in np.nanquantile(values, [a, 1 - a]))


@pytest.mark.parametrize("field, value", [(None, None), ("resamples", 2500), ("seed", 5), ("confidence", 0.8)])
def test_selection_ap1_bootstrap_equals_a_plain_loop(tmp_path, field, value):
    from pytest_pstbench.selection.protocol import SelectionParams

    protocol = (
        load_protocol("vab")
        if field is None
        else variant(
            tmp_path, f"vab-boot-{field}", lambda d: d["aggregation"]["bootstrap"].update({field: value}), base="vab"
        )
    )
    params = SelectionParams.of(protocol)
    entry, hits = _selection_cells(params)
    want = _plain_ap1(hits, params.bootstrap)
    if field in (None, "resamples"):
        assert want != _plain_ap1(hits, {**params.bootstrap, "resamples": 1000})  # 1,000 resamples would differ
    low, high = min(want[0], entry["mean"]), max(want[1], entry["mean"])
    assert (entry["ci_low"], entry["ci_high"]) == (low, high)


@pytest.mark.parametrize("field, value", [(None, None), ("seed", 5), ("confidence", 0.8)])
def test_selection_pass3_bootstrap_equals_a_plain_loop(tmp_path, field, value):
    """pass^3 (1 when all three trials are right) bootstrapped over tasks: the plain loop, the protocol's fields."""
    from pytest_pstbench.selection.protocol import SelectionParams

    protocol = (
        load_protocol("vab")
        if field is None
        else variant(
            tmp_path, f"vab-p3-{field}", lambda d: d["aggregation"]["bootstrap"].update({field: value}), base="vab"
        )
    )
    params = SelectionParams.of(protocol)
    _, hits = _selection_cells(params)
    cells_pass = hits.all(axis=1).astype(float)
    boot = params.bootstrap
    want = plain_bootstrap(
        cells_pass, resamples=int(boot["resamples"]), seed=int(boot["seed"]), confidence=float(boot["confidence"])
    )
    got = _selection_pass3(params)
    assert (got["ci_low"], got["ci_high"]) == want and got["mean"] == cells_pass.mean()
