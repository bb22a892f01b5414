"""What a selection comparison can detect: per tested cell (metric, outcome: ap@1 / pass^3) the minimum
detectable drop of accuracy at the cell's n, from a simulation of the protocol's exact McNemar test
(docs/compare-and-gate.md, "What the gate can detect"; the paired kind's twin is paired/power.py).

Discordant-pair model. Each of the cell's n units (tasks for pass^3, task trials for ap@1) is, for the
candidate against the baseline, lost (baseline right, candidate wrong: a `c` unit) with probability q_c, won
(a `b` unit) with probability q_b, else concordant; the accuracy drops by q_c - q_b. With no drop both are
psi / 2, psi the discordance: the observed (b + c) / n of the comparison (compare, the gate: the observed discordance
without its direction, as paired/power.py centres the observed differences). A drop delta moves discordance from
won to lost: q_c = max((psi + delta) / 2, delta), q_b = q_c - delta (so psi stays the same until every
discordant unit is lost, then only losses grow), with q_b at most 1 - p and q_c at most p, the baseline's
accuracy on the cell's units (a drop beyond p is impossible). A simulated comparison draws the discordant count
D ~ Bin(n, q_b + q_c) and then c ~ Bin(D, q_c / (q_b + q_c)) by inversion of two uniforms per draw
(`numpy.random.default_rng(seed)`, the same uniforms for every delta, so power grows with delta); it detects
the drop when m * p < alpha (Holm's first step over the comparison's m tests, the others assumed to show
nothing) and c > b, p the exact McNemar p-value min(1, 2 P(X <= min(b, c))), X ~ Bin(b + c, 1/2), which
equals scipy.stats.binomtest's (`selection.compare.mcnemar_exact`). The MDE is the smallest delta whose power
reaches the protocol's `comparison.power.target` (bisection to an absolute 1e-4); None when even delta = p does not.
The simulation settings are the selection protocol's optional `comparison.power` section, else the defaults
docs/protocol.md lists (core.protocol.PowerSection), as for paired runs; the shipped vab.yaml has none.

The units of ap@1 are not independent (a task's trials share its images); like the test, the model treats
them as independent, so the ap@1 MDE is optimistic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Plan:
    """One cell's test as the gate runs it: alpha and the number of tests Holm corrects over."""

    alpha: float
    tests: int = 1


def pvalues(b, c) -> np.ndarray:
    """Exact two-sided McNemar p-values of discordant counts (arrays): min(1, 2 P(X <= min(b, c))) with
    X ~ Bin(b + c, 1/2); 1 with no discordant unit. Equal to `mcnemar_exact` (scipy.stats.binomtest)."""
    from scipy.stats import binom

    b = np.asarray(b, dtype=np.int64)
    c = np.asarray(c, dtype=np.int64)
    d = b + c
    p = np.minimum(1.0, 2.0 * binom.cdf(np.minimum(b, c), np.maximum(d, 1), 0.5))
    return np.where(d == 0, 1.0, p)


def rates(delta: float, discordance: float, accuracy: float) -> tuple[float, float]:
    """(q_b, q_c): the per-unit won and lost rates of a drop `delta` at the given discordance (module docstring)."""
    q_c = min(max((discordance + delta) / 2.0, delta), accuracy)
    q_b = max(0.0, min(q_c - delta, 1.0 - accuracy))
    return q_b, q_c


def uniforms(simulations: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random((simulations, 2))


def counts(u: np.ndarray, n: int, q_b: float, q_c: float) -> tuple[np.ndarray, np.ndarray]:
    """(b, c) per draw: D ~ Bin(n, q_b + q_c), c | D ~ Bin(D, q_c / (q_b + q_c)), by inversion of `u`."""
    from scipy.stats import binom

    q = q_b + q_c
    if q <= 0:
        zero = np.zeros(len(u), dtype=np.int64)
        return zero, zero
    d = np.maximum(binom.ppf(u[:, 0], n, min(q, 1.0)), 0).astype(np.int64)  # ppf(0) is -1
    c = np.maximum(binom.ppf(u[:, 1], d, q_c / q), 0).astype(np.int64)
    return d - c, c


def power(u: np.ndarray, n: int, delta: float, discordance: float, accuracy: float, plan: Plan) -> float:
    """The share of draws in which a drop of `delta` is detected (the gate calls the candidate worse)."""
    b, c = counts(u, n, *rates(delta, discordance, accuracy))
    return float(((plan.tests * pvalues(b, c) < plan.alpha) & (c > b)).mean())


def minimum_detectable_drop(
    n: int, accuracy: float, discordance: float, plan: Plan, settings, *, tolerance: float = 1e-4
) -> float | None:
    """The smallest drop of accuracy detected with power >= settings.target in n units (core.protocol.PowerSection:
    target, simulations, seed); None when no drop is (too few units, or a baseline too weak to drop that far)."""
    if n < 1 or accuracy <= 0 or plan.tests * 0.5 ** (n - 1) >= plan.alpha:
        return None
    u = uniforms(settings.simulations, settings.seed)
    if power(u, n, accuracy, discordance, accuracy, plan) < settings.target:
        return None
    lo, hi = 0.0, accuracy
    while hi - lo > tolerance:
        mid = (lo + hi) / 2
        if power(u, n, mid, discordance, accuracy, plan) >= settings.target:
            hi = mid
        else:
            lo = mid
    return hi


def detectable(comp, protocol) -> None:
    """Sets each row's `detectable` (compare and the gate): the MDE of its cell at the row's n, from the baseline's
    accuracy on the row's units and the observed discordance, Holm over the comparison's tests."""
    from pytest_pstbench.selection.protocol import comparison_params

    cfg = comparison_params(protocol)
    settings = cfg.power
    m = len(comp.rows)
    for row in comp.rows:
        disc = (row.b + row.c) / row.n if row.n else 0.0
        mde = minimum_detectable_drop(row.n, row.acc_baseline, disc, Plan(cfg.alpha, m), settings) if row.n else None
        row.detectable = {
            "mde": mde,
            "power": settings.target,
            "simulations": settings.simulations,
            "seed": settings.seed,
            "tests": m,
            "discordance": disc,
        }


def mde_text(row, decimals: int = 3) -> str:
    """A row's MDE as the tables show it: the drop of accuracy, `none at this n`, or `-` (not computed)."""
    info = getattr(row, "detectable", None)
    if not info:
        return "-"
    return "none at this n" if info["mde"] is None else f"{info['mde']:.{decimals}f}"


def detectable_line(comp, protocol) -> str | None:
    """The gate's basis: each tested cell's minimum detectable drop of accuracy (or none at its n)."""
    from pytest_pstbench.selection.protocol import SelectionParams

    rows = [r for r in (comp.rows if comp is not None else []) if getattr(r, "detectable", None)]
    if not rows:
        return None
    params = SelectionParams.of(protocol)
    info = rows[0].detectable
    several = len({r.baseline for r in rows}) > 1
    parts = [
        f"{params.metrics[r.metric].get('label', r.metric)} {r.outcome} {mde_text(r)} (n={r.n})"
        + (f" vs {r.baseline}" if several else "")
        for r in rows
    ]
    return (
        f"drops of accuracy detectable with {info['power'] * 100:g}% power (exact McNemar, Holm over "
        f"{info['tests']} tests): {', '.join(parts)}"
    )
