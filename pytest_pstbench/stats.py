"""Statistics over per-pair scores: bootstrap confidence intervals (and, later, paired tests).

The bootstrap is written here with numpy rather than `scipy.stats.bootstrap` so that the resampling
stream is fixed by this code (seeded `numpy.random.default_rng`) and run files stay byte-identical
across scipy releases.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MeanCI:
    mean: float
    ci_low: float
    ci_high: float

    @property
    def pm(self) -> float:
        """Half the width of the interval."""
        return (self.ci_high - self.ci_low) / 2.0


def bootstrap_mean_ci(values, *, confidence: float, resamples: int, seed: int, chunk: int = 1000) -> MeanCI:
    """Mean of `values` and its percentile bootstrap interval over `resamples` resamples with replacement.

    Resample i draws n indices with `rng.integers(0, n, n)` from `numpy.random.default_rng(seed)`, in
    blocks of `chunk` resamples (the block size does not change the stream). The interval is the
    (1-confidence)/2 and (1+confidence)/2 quantiles of the resampled means (numpy's linear method).
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("need a non-empty 1-D sequence of values")
    n = x.size
    rng = np.random.default_rng(seed)
    means = np.empty(resamples, dtype=np.float64)
    done = 0
    while done < resamples:
        m = min(chunk, resamples - done)
        idx = rng.integers(0, n, size=(m, n))
        means[done : done + m] = x[idx].mean(axis=1)
        done += m
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return MeanCI(float(x.mean()), float(low), float(high))


@dataclass(frozen=True)
class PairedTest:
    """A paired Wilcoxon signed-rank test of candidate - baseline differences."""

    statistic: float
    pvalue: float
    n_nonzero: int  # differences that entered the test (non-ties)


def tie_differences(diff, threshold: float):
    """Differences with |d| < threshold set to exactly 0 (ties)."""
    d = np.asarray(diff, dtype=np.float64).copy()
    if threshold > 0:
        d[np.abs(d) < threshold] = 0.0
    return d


def wilcoxon_test(diff, *, zero_method: str, alternative: str = "two-sided", method: str = "auto") -> PairedTest:
    """scipy.stats.wilcoxon on the (already tied) differences; all-zero differences give p = 1."""
    from scipy.stats import wilcoxon

    d = np.asarray(diff, dtype=np.float64)
    nonzero = int(np.count_nonzero(d))
    if nonzero == 0:
        return PairedTest(0.0, 1.0, 0)
    res = wilcoxon(d, zero_method=zero_method, alternative=alternative, method=method)
    return PairedTest(float(res.statistic), float(res.pvalue), nonzero)


def holm(pvalues) -> list[float]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1), in the input order."""
    p = [float(x) for x in pvalues]
    m = len(p)
    order = sorted(range(m), key=lambda i: (p[i], i))
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return adjusted
