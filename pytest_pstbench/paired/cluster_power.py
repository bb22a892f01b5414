"""What a clustered comparison can detect: the minimum detectable effect under a protocol that tests cluster means
with the sign-flip test (`comparison.test: cluster_sign_flip`, the shipped variant `clustered`), from a
simulation of that test (the Wilcoxon twin is paired/power.py; docs/compare-and-gate.md, "What the gate can detect").

A simulated comparison draws K clusters with replacement from the observed ones (`numpy.random.default_rng(seed)`,
`rng.integers(0, K_obs, (simulations, K))`: a cluster keeps its pairs and their centred per-pair residuals), shifts
every pair's difference by the shift towards worse, applies the protocol's tie rule per pair, takes each drawn
cluster's mean, and tests the K means with the protocol's sign-flip test: every one of the 2^K sign patterns up
to `exact_max_clusters`, else the test's own `resamples` patterns from `default_rng(sign_flip.seed)` (drawn in the
blocks `stats.sign_flip_test` draws them, so the p-values are that test's row by row); where that is more than
PLAN_PATTERNS patterns, the first PLAN_PATTERNS seeded ones (a Monte Carlo estimate of the test's p-value). A draw detects the shift
when m * p < alpha (Holm's first step) and the mean of the cluster means points to worse. The MDE is the
smallest shift whose power reaches the target (bisection to a relative 1e-3); the same draws for every shift.
"""

from __future__ import annotations

import numpy as np

#: Statistic values held at once (patterns x rows) when the p-values of many rows are computed.
BLOCK_VALUES = 4_000_000
#: The most sign patterns a simulated test uses: beyond, the test's p-value is estimated from its first PLAN_PATTERNS
#: seeded patterns (a Monte Carlo error of at most about 0.002 at p = 0.05), which keeps a plan to seconds.
PLAN_PATTERNS = 1 << 14
_SIGN_BLOCK = 1 << 14  # core.stats.sign_flip_test's block of patterns (its random stream is drawn in these blocks)


def exact(k: int, sign_flip, limit: int | None = None) -> bool:
    """The test enumerates every sign pattern of k clusters (and, with a `limit`, there are at most that many)."""
    return k <= sign_flip.exact_max_clusters and (limit is None or 1 << k <= limit)


def sign_patterns(k: int, sign_flip, limit: int | None = None):
    """The sign patterns `stats.sign_flip_test` uses for k clusters, in blocks of (patterns, k) +-1 values: every
    one of the 2^k up to `exact_max_clusters`, else its `resamples` seeded ones in the blocks it draws them. With a
    `limit` (the simulation's PLAN_PATTERNS), more patterns than that are replaced by the first `limit` seeded ones."""
    if exact(k, sign_flip, limit):
        bits = np.arange(k, dtype=np.int64)
        for start in range(0, 1 << k, _SIGN_BLOCK):
            j = np.arange(start, min(1 << k, start + _SIGN_BLOCK), dtype=np.int64)
            yield 1.0 - 2.0 * ((j[:, None] >> bits) & 1)
        return
    rng = np.random.default_rng(sign_flip.seed)
    block = max(1, _SIGN_BLOCK * 16 // k)
    done = 0
    total = sign_flip.resamples if limit is None else min(sign_flip.resamples, limit)
    while done < total:
        m = min(block, total - done)
        yield 1.0 - 2.0 * rng.integers(0, 2, size=(m, k))
        done += m


def pvalues(means, alternative: str, sign_flip, limit: int | None = None) -> np.ndarray:
    """Per row of cluster means, the p-value of `stats.sign_flip_test` on that row alone (all-zero rows p = 1); with
    a `limit`, from at most that many patterns (`sign_patterns`)."""
    t = np.atleast_2d(np.asarray(means, dtype=np.float64))
    rows, k = t.shape
    observed = t.mean(axis=1)
    tol = 1e-12 * np.abs(t).sum(axis=1) / k
    count = np.zeros(rows, dtype=np.int64)
    total = 0
    for patterns in sign_patterns(k, sign_flip, limit):
        total += len(patterns)
        step = max(1, BLOCK_VALUES // len(patterns))
        for r in range(0, rows, step):
            stats = patterns @ t[r : r + step].T / k  # (patterns, rows of this block)
            obs, eps = observed[r : r + step], tol[r : r + step]
            if alternative == "two-sided":
                hit = np.abs(stats) >= np.abs(obs) - eps
            elif alternative == "greater":
                hit = stats >= obs - eps
            else:
                hit = stats <= obs + eps
            count[r : r + step] += np.count_nonzero(hit, axis=0)
    p = count / total if exact(k, sign_flip, limit) else (1 + count) / (1 + total)
    return np.where(np.count_nonzero(t, axis=1) == 0, 1.0, p)


class ClusterDraws:
    """The simulated comparisons of one noise model: `simulations` draws of k clusters from the observed ones."""

    def __init__(self, residuals, clusters, k: int, settings):
        from pytest_pstbench.core.stats import cluster_codes

        e = np.asarray(residuals, dtype=np.float64)
        self.residuals = e - e.mean()
        self.codes, self.observed = cluster_codes(clusters)
        self.sizes = np.bincount(self.codes, minlength=self.observed)
        self.k = k
        self.idx = np.random.default_rng(settings.seed).integers(0, self.observed, size=(settings.simulations, k))

    def means(self, shift: float, threshold: float) -> np.ndarray:
        """(simulations, k): each drawn cluster's mean of its tied, shifted per-pair differences."""
        from pytest_pstbench.core.stats import tie_differences

        tied = tie_differences(self.residuals + shift, threshold)
        return (np.bincount(self.codes, weights=tied, minlength=self.observed) / self.sizes)[self.idx]


def power(draws: ClusterDraws, shift: float, plan) -> float:
    """The share of draws in which a shift of `shift` towards worse is detected (paired/power.Plan: direction,
    tie threshold, the protocol's comparison section, Holm's m)."""
    worse = -shift if plan.higher_is_better else shift
    t = draws.means(worse, plan.threshold)
    p = pvalues(t, plan.cfg.alternative, plan.cfg.sign_flip, PLAN_PATTERNS)
    direction = t.mean(axis=1)
    towards = direction < 0 if plan.higher_is_better else direction > 0
    return float(((plan.tests * p < plan.cfg.alpha) & towards).mean())


def minimum_detectable_effect(residuals, clusters, k: int, plan, settings, *, steps: int = 40) -> float | None:
    """The smallest shift towards worse detected with power >= settings.target with k clusters; None when none is
    (too few clusters: even every cluster worse is not significant after Holm), NaN when the residuals have no
    spread (not known from them: paired/power.UNKNOWN)."""
    draws = ClusterDraws(residuals, clusters, k, settings)
    everything = 1e6 * max(float(np.abs(draws.residuals).max()), plan.threshold, 1.0)
    if power(draws, everything, plan) < settings.target:
        return None
    if float(np.std(draws.residuals)) <= 1e-12 * max(1.0, float(np.max(np.abs(residuals)))):  # power.constant
        return float("nan")
    scale = max(float(np.std(draws.residuals)), plan.threshold)
    return smallest_effect(lambda x: power(draws, x, plan) >= settings.target, scale, steps)


def clusters_needed(residuals, clusters, effect: float, plan, settings, max_clusters: int) -> int | None:
    """The fewest clusters (drawn from the observed ones) in which a shift of `effect` is detected with power >=
    settings.target (doubling, then bisection); None beyond `max_clusters`."""

    def reaches(k: int) -> bool:
        return power(ClusterDraws(residuals, clusters, k, settings), effect, plan) >= settings.target

    return smallest_reaching(reaches, max_clusters)


def smallest_effect(reaches, scale: float, steps: int) -> float:
    """The smallest shift for which the monotone `reaches(shift)` holds, to 0.1% (doubling from `scale`, then at
    most `steps` bisections). Shared by the pair and cluster MDEs (paired/power.py)."""
    lo, hi = 0.0, scale
    while not reaches(hi):
        lo, hi = hi, hi * 2
    for _ in range(steps):
        if hi - lo <= 1e-3 * hi:
            break
        mid = (lo + hi) / 2
        if reaches(mid):
            hi = mid
        else:
            lo = mid
    return hi


def smallest_reaching(reaches, upper: int) -> int | None:
    """The smallest n in [2, upper] for which the monotone `reaches(n)` holds (doubling, then bisection); None when
    even `upper` does not reach. Shared by the pair and cluster planners (paired/power.py)."""
    n = 2
    while not reaches(n):
        if n >= upper:
            return None
        n = min(2 * n, upper)
    lo, hi = max(1, n // 2), n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if reaches(mid):
            hi = mid
        else:
            lo = mid
    return hi
