"""The null model of the consensus filter (`consensus`): how often random judges would pass it.

Null model: each judge picks an ordered pair (best, worst), best != worst, uniformly among the
k(k-1) pairs, independently. `null_pass_probability(k, n, m)` is the exact probability, as a
`Fraction`, that max best votes >= m and max worst votes >= m (for k = 2 the worst is the other
candidate, so this is P(max best votes >= m)). It counts ties as passing, so it bounds the
filter's null acceptance rate from above, and equals it when 2m > n.

Exact computation. With A = {all best counts < m} and B = {all worst counts < m},
P(pass) = 1 - P(A) - P(B) + P(A and B). P(A) = P(B) = W(n; m, ..., m) / k^n, where W(N; a) counts
words of length N over k letters using letter j fewer than a_j times. P(A and B) counts sequences of
n ordered pairs with b_i != w_i, all row and column counts < m; inclusion-exclusion over the judges
forced to b_i = w_i (d_j of them at candidate j, D = sum d_j) gives

    #(A and B) = sum_d (-1)^D * n! / (prod_j d_j! * (n-D)!) * W(n-D; m - d)^2,

summed over d in {0..m-1}^k with D <= n. By symmetry only the multiset of d matters; the sum runs
over multisets with their number of arrangements. Everything is integer arithmetic.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache


def _extend(poly: list[int], bound: int, n: int) -> list[int]:
    """Labelled product: words over the letters so far, plus one letter used fewer than `bound` times."""
    new = [0] * (n + 1)
    for length, v in enumerate(poly):
        if v:
            top = min(bound - 1, n - length)
            for c in range(top + 1):
                new[length + c] += v * math.comb(length + c, c)
    return new


def bounded_words(n: int, bounds) -> int:
    """Number of words of length n over len(bounds) letters, letter j used fewer than bounds[j] times."""
    poly = [1] + [0] * n
    for b in bounds:
        poly = _extend(poly, b, n)
    return poly[n]


@lru_cache(maxsize=4096)
def _count_none_pass(k: int, n: int, m: int) -> int:
    """Number of sequences of n ordered pairs (b != w) with every best count and worst count < m."""
    total = 0
    fact = math.factorial

    def rec(j: int, start: int, d_sum: int, poly: list[int], den: int, mult: Counter) -> None:
        nonlocal total
        if j == k:
            rest = n - d_sum
            w = poly[rest]
            if w:
                arrangements = fact(k)
                for c in mult.values():
                    arrangements //= fact(c)
                multinomial = fact(n) // (den * fact(rest))
                term = arrangements * multinomial * w * w
                total += -term if d_sum % 2 else term
            return
        for d in range(start, m):
            if d_sum + d > n:
                break
            mult[d] += 1
            rec(j + 1, d, d_sum + d, _extend(poly, m - d, n), den * fact(d), mult)
            mult[d] -= 1

    rec(0, 0, 0, [1] + [0] * n, 1, Counter())
    return total


def _count_pass_majority(k: int, n: int, m: int) -> int:
    """For 2m > n: the number of sequences of n ordered pairs (b != w) with some best count >= m and some
    worst count >= m. At most one candidate can reach m best votes, and one m worst votes, so the
    events (candidate i best >= m, candidate j worst >= m) are disjoint: the count is
    k * #(B_1 >= m, W_1 >= m) + k(k-1) * #(B_1 >= m, W_2 >= m), each a sum over multinomial counts of
    the judges' per-judge categories. The innermost sum of the second is a binomial tail, tabulated once
    (Pascal's rule), so both are O(n^2) integer terms (n = 500 judges: well under a second)."""
    fact = [1] * (n + 1)
    for i in range(1, n + 1):
        fact[i] = fact[i - 1] * i
    pairs = k * (k - 1)
    total = 0
    # same candidate: best = 1 (k-1 pairs), worst = 1 (k-1 pairs), neither ((k-1)(k-2) pairs)
    same = 0
    for a in range(m, n + 1):
        for b in range(m, n - a + 1):
            rest = n - a - b
            same += fact[n] // (fact[a] * fact[b] * fact[rest]) * (k - 1) ** (a + b) * ((k - 1) * (k - 2)) ** rest
    total += k * same
    # candidates 1 (best) and 2 (worst): (1, 2): 1 pair; (1, not 2): k-2; (not 1, 2): k-2; neither: the rest.
    # For c11 judges on (1, 2) and c10 on (1, not 2), the r = n - c11 - c10 others split into c01 on
    # (not 1, 2) and the rest on neither: sum over c01 >= lo of C(r, c01) x^c01 y^(r - c01) = tail[r][lo].
    x, y = k - 2, pairs - 1 - 2 * (k - 2)
    diff = 0
    row = [1]  # row[lo] = tail(r, lo) for lo = 0..r; tail(r, lo) = x tail(r-1, lo-1) + y tail(r-1, lo) (Pascal)
    for r in range(0, n + 1):
        if r:
            prev = row + [0]
            row = [(x + y) ** r] + [x * prev[lo - 1] + y * prev[lo] for lo in range(1, r + 1)]
        for c11 in range(0, n - r + 1):
            c10, lo = n - r - c11, max(0, m - c11)
            if c10 >= lo and lo <= r:
                diff += fact[n] // (fact[c11] * fact[c10] * fact[r]) * x**c10 * row[lo]
    total += pairs * diff
    return total


#: The inclusion-exclusion sum (m <= n/2) runs over C(m-1+k, k) multisets, each extending a polynomial of
#: n+1 big-integer terms by up to m terms for each of its k letters: computed exactly while
#: C(m-1+k, k) * (n+1) * m * k <= EXACT_LIMIT (about half a second on one core), else estimated by Monte
#: Carlo. (The earlier bound, C(m-1+k, k) * (n+1) <= 5,000,000, let one probability at k = 3, n = 100 take 6 s
#: and a 100-expert human row 8 s; benchmarks/bench_human.py.)
EXACT_LIMIT = 30_000_000


def exact_is_cheap(k: int, n: int, m: int) -> bool:
    return k == 2 or 2 * m > n or m <= 0 or m > n or math.comb(m - 1 + k, k) * (n + 1) * m * k <= EXACT_LIMIT


def null_pass_probability(k: int, n: int, m: int) -> Fraction:
    """Exact P(max best votes >= m and max worst votes >= m) under the uniform null (see module doc)."""
    if k < 2 or n < 0 or m < 0:
        raise ValueError("need k >= 2, n >= 0, m >= 0")
    if m <= 0:
        return Fraction(1)
    if m > n:
        return Fraction(0)
    if k == 2:  # the worst is the other candidate: P(max(X, n - X) >= m), X ~ Bin(n, 1/2); O(n)
        return Fraction(sum(math.comb(n, x) for x in range(n + 1) if max(x, n - x) >= m), 2**n)
    if 2 * m > n:  # disjoint events: polynomial in n
        return Fraction(_count_pass_majority(k, n, m), (k * (k - 1)) ** n)
    p_a = Fraction(bounded_words(n, [m] * k), k**n)
    p_ab = Fraction(_count_none_pass(k, n, m), (k * (k - 1)) ** n)
    return 1 - 2 * p_a + p_ab


MC_DRAWS = 200_000  # Monte Carlo draws where the exact sum is too large (see EXACT_LIMIT)
MC_BLOCK_VALUES = 1_000_000  # judges' votes drawn per block (draws x n): a few MB whatever the panel's size


def _draw_max_votes(rng, k: int, n: int, size: int):
    """`size` draws of n judges under the null, each judge an ordered pair (best, worst), best != worst,
    uniform among the k(k-1) pairs: per draw, the most votes any candidate got as best, and as worst."""
    import numpy as np

    pair = rng.integers(0, k * (k - 1), size=(size, n))
    best = pair // (k - 1)
    w = pair % (k - 1)
    worst = w + (w >= best)
    offset = (np.arange(size) * k)[:, None]  # per draw, its candidates' counts: one bincount, O(size n)
    best_max = np.bincount((best + offset).ravel(), minlength=size * k).reshape(size, k).max(axis=1)
    worst_max = np.bincount((worst + offset).ravel(), minlength=size * k).reshape(size, k).max(axis=1)
    return best_max, worst_max


class _NullDraws:
    """Monte Carlo draws of (max best votes, max worst votes) under the null for one (k, n), reused for
    every m (common random numbers: the hit count is monotone in m, so a binary search stays valid)."""

    def __init__(self, k: int, n: int, draws: int, seed: int, chunk: int = 20000):
        import numpy as np

        chunk = max(1, min(chunk, MC_BLOCK_VALUES // max(1, n)))  # memory bounded in n; the stream is the same
        rng = np.random.default_rng([seed, k, n])
        self.draws = draws
        parts = []
        done = 0
        while done < draws:
            size = min(chunk, draws - done)
            best_max, worst_max = _draw_max_votes(rng, k, n, size)
            parts.append(np.minimum(best_max, worst_max))
            done += size
        self.min_max = np.sort(np.concatenate(parts))

    def estimate(self, m: int, confidence: float) -> MonteCarlo:
        import numpy as np

        hits = int(self.min_max.size - np.searchsorted(self.min_max, m, side="left"))
        lo, hi = clopper_pearson(hits, self.draws, confidence)
        return MonteCarlo(self.draws, hits / self.draws, lo, hi)


def clopper_pearson(hits: int, draws: int, confidence: float) -> tuple[float, float]:
    from scipy.stats import beta

    a = 1 - confidence
    lo = 0.0 if hits == 0 else float(beta.ppf(a / 2, hits, draws - hits + 1))
    hi = 1.0 if hits == draws else float(beta.ppf(1 - a / 2, hits + 1, draws - hits))
    return lo, hi


def threshold_for_alpha(
    k: int, n: int, alpha: float, *, progress=None, draws: int = MC_DRAWS, seed: int = 0, confidence: float = 0.95
) -> tuple[int | None, Fraction | MonteCarlo | None]:
    """The smallest m in 1..n with null pass probability <= alpha, and that probability (None, None if none).

    The probability is exact (a Fraction) where `exact_is_cheap`; elsewhere it is a Monte Carlo estimate
    (`draws` draws, Clopper-Pearson interval at `confidence`) and m must have its interval's upper end
    <= alpha (conservative: the threshold is never below the exact one by chance of the draws, unless the
    interval misses). `progress(msg)` receives one line per probability computed."""
    say = progress or (lambda _msg: None)
    sampled: list[_NullDraws] = []

    def p(m: int):
        if exact_is_cheap(k, n, m):
            value = null_pass_probability(k, n, m)
            say(f"consensus: k={k} n={n} m={m}: exact null pass probability {float(value):.6g}")
            return value, float(value) <= alpha
        if not sampled:
            say(
                f"consensus: k={k} n={n}: the exact sum is too large beyond m={_largest_exact(k, n)}; "
                f"drawing {draws} Monte Carlo samples"
            )
            sampled.append(_NullDraws(k, n, draws, seed))
        mc = sampled[0].estimate(m, confidence)
        say(f"consensus: k={k} n={n} m={m}: Monte Carlo {mc.estimate:.6g} [{mc.ci_low:.6g}, {mc.ci_high:.6g}]")
        return mc, mc.ci_high <= alpha

    top, ok = p(n)
    if not ok:
        return None, None
    lo, hi = 1, n
    while lo < hi:  # the pass probability decreases with m
        mid = (lo + hi) // 2
        if p(mid)[1]:
            hi = mid
        else:
            lo = mid + 1
    return lo, p(lo)[0]


def _largest_exact(k: int, n: int) -> int:
    m = 1
    while m + 1 <= n and 2 * (m + 1) <= n and exact_is_cheap(k, n, m + 1):
        m += 1
    return m


@dataclass(frozen=True)
class MonteCarlo:
    draws: int
    estimate: float
    ci_low: float
    ci_high: float

    def contains(self, p: float) -> bool:
        return self.ci_low <= p <= self.ci_high


def monte_carlo_pass_probability(
    k: int, n: int, m: int, draws: int, *, seed: int = 0, confidence: float = 0.95, chunk: int = 50000
) -> MonteCarlo:
    """Monte Carlo estimate of the null pass probability with a Wald interval."""
    from statistics import NormalDist

    import numpy as np

    rng = np.random.default_rng(seed)
    hits = 0
    done = 0
    chunk = max(1, min(chunk, MC_BLOCK_VALUES // max(1, n)))
    while done < draws:
        size = min(chunk, draws - done)
        best_max, worst_max = _draw_max_votes(rng, k, n, size)
        hits += int(np.count_nonzero((best_max >= m) & (worst_max >= m)))
        done += size
    p = hits / draws
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    half = z * math.sqrt(p * (1 - p) / draws)
    return MonteCarlo(draws, p, max(0.0, p - half), min(1.0, p + half))
