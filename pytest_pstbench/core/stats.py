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


#: Resampled values held at once by `_resampled` (indices and values: 16 bytes each, so about 16 MB).
BLOCK_VALUES = 1_000_000


def _resampled(x: np.ndarray, rows, *, resamples: int, seed: int, chunk: int) -> np.ndarray:
    """`rows(block)` of every resample: resample i draws n indices with `rng.integers(0, n, n)` from
    `numpy.random.default_rng(seed)`, in blocks of `chunk` resamples, fewer where n is large (at most
    BLOCK_VALUES values a block; the block size does not change the stream)."""
    n = x.size
    chunk = max(1, min(chunk, BLOCK_VALUES // n))  # memory bounded whatever n (20,000 tasks: not 1000 x n x 16 bytes)
    rng = np.random.default_rng(seed)
    stats = np.empty(resamples, dtype=np.float64)
    done = 0
    while done < resamples:
        m = min(chunk, resamples - done)
        idx = rng.integers(0, n, size=(m, n))
        stats[done : done + m] = rows(x[idx])
        done += m
    return stats


def _values(values) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("need a non-empty 1-D sequence of values")
    return x


def bootstrap_mean_ci(values, *, confidence: float, resamples: int, seed: int, chunk: int = 1000) -> MeanCI:
    """Mean of `values` and its percentile bootstrap interval over `resamples` resamples with replacement.

    The interval is the (1-confidence)/2 and (1+confidence)/2 quantiles of the resampled means
    (numpy's linear method); the resamples are drawn as `_resampled` says.
    """
    x = _values(values)
    means = _resampled(x, lambda block: block.mean(axis=1), resamples=resamples, seed=seed, chunk=chunk)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return MeanCI(float(x.mean()), float(low), float(high))


def bootstrap_ci(
    values, rows, point: float, *, confidence: float, resamples: int, seed: int, chunk: int = 1000
) -> MeanCI:
    """`point` (the statistic on `values`) and the percentile bootstrap interval of the statistic that
    `rows` computes row by row on a block of resamples (e.g. `np.median(block, axis=1)`); the same
    resampling stream as `bootstrap_mean_ci`. The result's `mean` field holds `point`."""
    x = _values(values)
    stats = _resampled(x, rows, resamples=resamples, seed=seed, chunk=chunk)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return MeanCI(float(point), float(low), float(high))


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


# ---- clusters (pairs that share an input image): cluster bootstrap and sign-flip test ------------------------
def cluster_codes(labels) -> tuple[np.ndarray, int]:
    """Cluster labels (one per value) -> integer codes 0..K-1 in order of first appearance, and K."""
    index: dict = {}
    codes = np.array([index.setdefault(label, len(index)) for label in labels], dtype=np.int64)
    return codes, len(index)


def cluster_bootstrap_mean_ci(
    values, clusters, *, confidence: float, resamples: int, seed: int, chunk: int = 1000
) -> MeanCI:
    """Mean of `values` and its percentile cluster-bootstrap interval: resample i draws K cluster indices
    with `rng.integers(0, K, K)` from `numpy.random.default_rng(seed)` (K clusters, numbered in order of first
    appearance in `clusters`), and its statistic is the mean over every pair of the drawn clusters (a cluster
    drawn twice counts twice): sum of the drawn clusters' sums / sum of their sizes. Quantiles as
    `bootstrap_mean_ci`; blocks of `chunk` resamples (the block size does not change the stream)."""
    x = _values(values)
    codes, k = cluster_codes(clusters)
    if codes.size != x.size:
        raise ValueError("need one cluster label per value")
    sums = np.bincount(codes, weights=x, minlength=k)
    sizes = np.bincount(codes, minlength=k).astype(np.float64)
    chunk = max(1, min(chunk, BLOCK_VALUES // k))
    rng = np.random.default_rng(seed)
    means = np.empty(resamples, dtype=np.float64)
    done = 0
    while done < resamples:
        m = min(chunk, resamples - done)
        idx = rng.integers(0, k, size=(m, k))
        means[done : done + m] = sums[idx].sum(axis=1) / sizes[idx].sum(axis=1)
        done += m
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return MeanCI(float(x.mean()), float(low), float(high))


def cluster_means(values, clusters) -> np.ndarray:
    """The mean of `values` within each cluster, clusters in order of first appearance."""
    x = _values(values)
    codes, k = cluster_codes(clusters)
    return np.bincount(codes, weights=x, minlength=k) / np.bincount(codes, minlength=k)


#: Sign patterns held at once by the exact enumeration of `sign_flip_test`.
_SIGN_BLOCK = 1 << 14


def sign_flip_test(means, *, alternative: str, exact_max_clusters: int, resamples: int, seed: int) -> PairedTest:
    """Sign-flip permutation test of cluster-mean differences (H0: each cluster's mean difference is
    symmetric about 0). The statistic is T = the mean of `means` (one per cluster); each sign pattern
    s in {-1, +1}^K gives T(s) = mean(s * means). With K <= exact_max_clusters every one of the 2^K patterns
    is enumerated (pattern j: cluster i's sign is -1 where bit i of j is set) and p is the share of patterns
    at least as extreme as the observed one; else `resamples` patterns are drawn from
    `numpy.random.default_rng(seed)` (`rng.integers(0, 2, (resamples, K))`, 1 -> -1) and
    p = (1 + count) / (1 + resamples). At least as extreme: |T(s)| >= |T| (two-sided), T(s) >= T (greater),
    T(s) <= T (less), each up to 1e-12 relative (sums computed in another order are equal values)."""
    t = np.asarray(means, dtype=np.float64)
    k = t.size
    nonzero = int(np.count_nonzero(t))
    if nonzero == 0:
        return PairedTest(0.0, 1.0, 0)
    observed = float(t.mean())
    tol = 1e-12 * float(np.abs(t).sum()) / k

    def extreme(stats: np.ndarray) -> int:
        if alternative == "two-sided":
            return int(np.count_nonzero(np.abs(stats) >= abs(observed) - tol))
        if alternative == "greater":
            return int(np.count_nonzero(stats >= observed - tol))
        return int(np.count_nonzero(stats <= observed + tol))

    count = 0
    if k <= exact_max_clusters:
        total = 1 << k
        bits = np.arange(k, dtype=np.int64)
        for start in range(0, total, _SIGN_BLOCK):
            j = np.arange(start, min(total, start + _SIGN_BLOCK), dtype=np.int64)
            signs = 1.0 - 2.0 * ((j[:, None] >> bits) & 1)
            count += extreme((signs * t).mean(axis=1))
        return PairedTest(observed, count / total, nonzero)
    rng = np.random.default_rng(seed)
    block = max(1, _SIGN_BLOCK * 16 // k)
    done = 0
    while done < resamples:
        m = min(block, resamples - done)
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(m, k))
        count += extreme((signs * t).mean(axis=1))
        done += m
    return PairedTest(observed, (1 + count) / (1 + resamples), nonzero)
