"""bootstrap_mean_ci: hand-derived intervals and an independent re-implementation of the documented resampling."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.core.stats import MeanCI, bootstrap_mean_ci


@pytest.fixture(scope="module")
def boot() -> dict:
    """The protocol's bootstrap parameters (confidence, resamples, seed)."""
    b = load_protocol().section("aggregation")["bootstrap"]
    return {"confidence": b["confidence"], "resamples": b["resamples"], "seed": b["seed"]}


def plain_loop_ci(values, *, confidence, resamples, seed) -> tuple[float, float, float]:
    """The documented procedure written as a plain loop: resample i = rng.integers(0, n, n), one call each."""
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for i in range(resamples):
        idx = rng.integers(0, n, n)
        means[i] = x[idx].mean()
    alpha = (1.0 - confidence) / 2.0
    low = np.quantile(means, alpha)  # numpy's default (linear) method, as documented
    high = np.quantile(means, 1.0 - alpha)
    return float(x.mean()), float(low), float(high)


# --- hand-derived cases ---------------------------------------------------------------------


def test_single_value_interval_collapses(boot):
    ci = bootstrap_mean_ci([0.8125], **boot)
    assert (ci.mean, ci.ci_low, ci.ci_high) == (0.8125, 0.8125, 0.8125)
    assert ci.pm == 0.0


def test_constant_values_give_a_zero_width_interval(boot):
    # 0.75 and its sums with itself are exact in binary floating point: every resampled mean is 0.75.
    ci = bootstrap_mean_ci([0.75] * 8, **boot)
    assert (ci.mean, ci.ci_low, ci.ci_high, ci.pm) == (0.75, 0.75, 0.75, 0.0)
    # A value that is not exact in binary: equal up to rounding of the sums.
    ci = bootstrap_mean_ci([0.1] * 13, **boot)
    assert ci.ci_low == pytest.approx(0.1, abs=1e-15)
    assert ci.ci_high == pytest.approx(0.1, abs=1e-15)


def test_two_values_interval_is_the_two_values(boot):
    # n = 2: a resampled mean is a (p = 1/4), (a+b)/2 (p = 1/2) or b (p = 1/4). With thousands of
    # resamples about 25% of the means are exactly a and 25% exactly b, so the 2.5% and 97.5%
    # quantiles land inside those runs: low == a and high == b exactly.
    a, b = 2.0, 5.0
    ci = bootstrap_mean_ci([b, a], **boot)
    assert ci.mean == 3.5
    assert ci.ci_low == a
    assert ci.ci_high == b
    assert ci.pm == 1.5


def test_two_values_premise_holds(boot):
    # The premise above, checked on the resampling stream itself: share of all-a resamples > (1-confidence)/2.
    rng = np.random.default_rng(boot["seed"])
    idx = np.stack([rng.integers(0, 2, 2) for _ in range(boot["resamples"])])
    share_all_first = np.mean((idx == 0).all(axis=1))
    share_all_second = np.mean((idx == 1).all(axis=1))
    tail = (1.0 - boot["confidence"]) / 2.0
    assert share_all_first > tail and share_all_second > tail
    assert share_all_first == pytest.approx(0.25, abs=0.03)


def test_pm_is_half_the_width():
    assert MeanCI(mean=1.0, ci_low=0.25, ci_high=2.75).pm == 1.25
    ci = bootstrap_mean_ci([1.0, 4.0, 2.5, 9.0], confidence=0.9, resamples=500, seed=3)
    assert ci.pm == (ci.ci_high - ci.ci_low) / 2.0
    assert ci.ci_low < ci.mean < ci.ci_high


# --- against an independent loop -------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 5, 7, 12, 31])
def test_matches_plain_loop_exactly(boot, n):
    values = np.random.default_rng(100 + n).normal(30.0, 4.0, n)
    ci = bootstrap_mean_ci(values, **boot)
    mean, low, high = plain_loop_ci(values, **boot)
    assert (ci.mean, ci.ci_low, ci.ci_high) == (mean, low, high)
    assert low < high  # the case is not degenerate


def test_matches_plain_loop_other_confidence_and_seed():
    values = np.random.default_rng(5).exponential(2.0, 9)
    kw = {"confidence": 0.8, "resamples": 777, "seed": 12345}
    ci = bootstrap_mean_ci(values, **kw)
    assert (ci.mean, ci.ci_low, ci.ci_high) == plain_loop_ci(values, **kw)


@pytest.mark.parametrize("chunk", [1, 3, 7, 999, 1000, 4096, 10_000, 25_000])
def test_chunk_size_does_not_change_the_result(boot, chunk):
    values = np.random.default_rng(11).uniform(0.0, 1.0, 9)
    reference = bootstrap_mean_ci(values, **boot)
    assert bootstrap_mean_ci(values, **boot, chunk=chunk) == reference


def test_deterministic_for_a_seed_and_different_for_another(boot):
    values = np.random.default_rng(21).normal(0.0, 1.0, 15)
    first = bootstrap_mean_ci(values, **boot)
    again = bootstrap_mean_ci(values, **boot)
    assert first == again
    other = bootstrap_mean_ci(values, **{**boot, "seed": boot["seed"] + 1})
    assert other.mean == first.mean
    assert (other.ci_low, other.ci_high) != (first.ci_low, first.ci_high)


def test_interval_contains_mean_and_narrows_with_more_data(boot):
    rng = np.random.default_rng(8)
    small = bootstrap_mean_ci(rng.normal(0.0, 1.0, 10), **boot)
    large = bootstrap_mean_ci(rng.normal(0.0, 1.0, 400), **boot)
    assert small.ci_low < small.mean < small.ci_high
    assert large.ci_low < large.mean < large.ci_high
    # the width of a mean's CI scales as 1/sqrt(n): 40x the data -> about 1/6.3 of the width
    assert large.pm < small.pm / 3.0


@pytest.mark.parametrize("bad", [[], [[1.0, 2.0], [3.0, 4.0]]])
def test_rejects_empty_or_non_1d(boot, bad):
    with pytest.raises(ValueError, match="non-empty 1-D"):
        bootstrap_mean_ci(bad, **boot)
