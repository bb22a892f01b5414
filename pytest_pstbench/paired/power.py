"""What a paired comparison can detect: the minimum detectable effect (MDE) of each gated metric, from a
simulation of the protocol's own test (docs/compare-and-gate.md, "What the gate can detect").

A simulated comparison draws n per-pair differences d = shift + e, the shift on the worse side of the metric
and e from the noise model (`noise`): the observed differences centred on their mean when a candidate exists
(compare, the gate), else the baseline's values centred and scaled by sqrt(2 (1 - rho)) (the difference of
two runs whose values correlate by rho, `comparison.power.baseline_correlation`). Each draw resamples the
centred values with replacement plus a Gaussian kernel (Silverman's bandwidth, variance kept), so that the
draws carry no exact ties. The differences then go through the protocol's tie rule (`stats.tie_differences`)
and scipy.stats.wilcoxon with its zero_method, alternative and method, decided row by row as scipy decides
for one comparison (`pvalues`); a draw detects the shift when m * p < alpha (Holm's first step over the
comparison's m tests, assuming the other tests show nothing) and the signed-rank sum points to worse.
The power of a shift is the share of `simulations` draws that detect it (`numpy.random.default_rng(seed)`,
the same draws for every shift); the MDE is the smallest shift whose power reaches `target` (bisection).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Values held at once by one scipy call (rows x n); the block size does not change any result.
BLOCK_VALUES = 2_000_000
#: `pstbench power --effect`: the most pairs it searches (beyond it: "more than MAX_PAIRS").
MAX_PAIRS = 20_000


@dataclass(frozen=True)
class Plan:
    """One metric's test as the gate runs it: its direction, tie threshold, the protocol's comparison
    settings (core.protocol.ComparisonSection) and the number of tests Holm corrects over."""

    higher_is_better: bool
    threshold: float
    cfg: object
    tests: int = 1

    @property
    def level(self) -> float:
        return self.cfg.alpha / self.tests


def noise(residuals, n: int, simulations: int, seed: int) -> np.ndarray:
    """`simulations` x `n` draws of the per-pair noise: the centred `residuals` resampled with replacement
    plus N(0, h^2), h = 1.06 sd m^(-1/5) (Silverman), divided by sqrt(1 + h^2 / sd^2) so that the draws keep
    the residuals' variance. All zero when the residuals are constant (then one row: every draw is alike)."""
    e = np.asarray(residuals, dtype=np.float64)
    e = e - e.mean()
    sd = float(e.std())
    rng = np.random.default_rng(seed)
    if constant(e):
        return np.zeros((1, n))
    idx = rng.integers(0, e.size, size=(simulations, n))
    h = 1.06 * sd * e.size**-0.2
    return (e[idx] + h * rng.standard_normal((simulations, n))) / np.sqrt(1.0 + (h / sd) ** 2)


def constant(residuals) -> bool:
    """The differences are one value up to rounding (sd at most 1e-12 of their size): no noise to simulate."""
    e = np.asarray(residuals, dtype=np.float64)
    return float(np.std(e)) <= 1e-12 * max(1.0, float(np.max(np.abs(e))) if e.size else 0.0)


def _has_ties(d: np.ndarray) -> np.ndarray:
    """Per row: two non-zero differences of equal magnitude (what makes scipy's `auto` leave the exact test)."""
    a = np.where(d != 0, np.abs(d), np.nan)
    s = np.sort(a, axis=1)
    return np.any(np.diff(s, axis=1) == 0, axis=1)


def pvalues(d, cfg, alternative: str | None = None) -> np.ndarray:
    """Per row of `d` (already tied differences), the p-value `stats.wilcoxon_test` gives for that row alone
    (scipy.stats.wilcoxon with the protocol's zero_method and method; all-zero rows p = 1), computed in
    vectorised groups: scipy's `auto` picks, per comparison, the exact test (n <= 50, no zeros or ties), a
    permutation test over every sign (n <= 13 with zeros or ties) or the normal approximation. A permutation
    row under zero_method wilcox whose non-zero magnitudes are distinct has the exact distribution of its
    non-zero count (every sign of a dropped zero counts alike), so it is computed exactly on those."""
    from scipy.stats import wilcoxon

    d = np.atleast_2d(np.asarray(d, dtype=np.float64))
    alternative = alternative or cfg.alternative
    rows, n = d.shape
    p = np.ones(rows)
    nonzero = np.count_nonzero(d, axis=1)
    live = nonzero > 0
    zeros = nonzero < n
    ties = _has_ties(d)
    if cfg.method == "auto":
        if n > 50:
            kind = np.full(rows, "asymptotic", dtype=object)
        else:
            plain = ~(zeros | ties)
            kind = np.where(plain, "exact", "permutation" if n <= 13 else "asymptotic").astype(object)
    else:
        kind = np.full(rows, "asymptotic" if cfg.method == "approx" else cfg.method, dtype=object)
    kw = {"zero_method": cfg.zero_method, "alternative": alternative}
    for method in ("exact", "asymptotic"):
        sel = np.flatnonzero(live & (kind == method))
        for start in range(0, sel.size, max(1, BLOCK_VALUES // n)):
            block = sel[start : start + max(1, BLOCK_VALUES // n)]
            p[block] = wilcoxon(d[block], axis=1, method=method, **kw).pvalue
    perm = np.flatnonzero(live & (kind == "permutation"))
    if perm.size:
        exactly = perm[(~ties[perm]) & (cfg.zero_method == "wilcox")]
        for k in np.unique(nonzero[exactly]):
            sel = exactly[nonzero[exactly] == k]
            compact = d[sel][d[sel] != 0].reshape(sel.size, int(k))
            p[sel] = wilcoxon(compact, axis=1, method="exact", **kw).pvalue
        from pytest_pstbench.core.stats import wilcoxon_test

        for i in np.setdiff1d(perm, exactly):  # pratt / zsplit zeros, or ties: scipy's own permutation test, row by row
            p[i] = wilcoxon_test(d[i], zero_method=cfg.zero_method, alternative=alternative, method=cfg.method).pvalue
    return p


def signed_rank_sums(d) -> np.ndarray:
    """Per row, the sum of sign x rank of the non-zero differences (ranks of |d| among them, ties averaged):
    `compare_two`'s direction before orienting."""
    from scipy.stats import rankdata

    d = np.atleast_2d(np.asarray(d, dtype=np.float64))
    a = np.where(d != 0, np.abs(d), np.nan)
    r = rankdata(a, axis=1, nan_policy="omit")
    return np.nansum(np.sign(d) * r, axis=1)


def detected(d, plan: Plan) -> np.ndarray:
    """Per row of raw differences: the gate calls the candidate worse (tie rule, the test, Holm's first step
    m * p < alpha, the signed-rank sum on the worse side)."""
    from pytest_pstbench.core.stats import tie_differences

    tied = tie_differences(d, plan.threshold)
    p = pvalues(tied, plan.cfg)
    srs = signed_rank_sums(tied)
    worse = srs < 0 if plan.higher_is_better else srs > 0
    return (plan.tests * p < plan.cfg.alpha) & worse


def power(draws: np.ndarray, shift: float, plan: Plan) -> float:
    """The share of `draws` (rows of noise) in which a shift of the metric's mean by `shift` towards worse is detected."""
    worse = -shift if plan.higher_is_better else shift
    return float(detected(draws + worse, plan).mean())


def nothing_detectable(n: int, plan: Plan) -> bool:
    """Not even n differences all far on the worse side are detected (too few pairs for Holm's alpha): true of
    every noise model, so it is known without one."""
    return power(np.zeros((1, n)), 1e6 * max(plan.threshold, 1.0), plan) < 1.0


def minimum_detectable_effect(residuals, n: int, plan: Plan, settings, *, steps: int = 40) -> float | None:
    """The smallest shift towards worse detected with power >= settings.target in n pairs (`settings`:
    core.protocol.PowerSection), to a relative 1e-3; None when no shift reaches it (too few pairs: even n
    differences all worse are not significant after Holm's correction). Differences without spread (`constant`)
    carry no noise to simulate: the MDE is not known from them, and callers check `constant` first
    (`UNKNOWN`); here such residuals give None where nothing is detectable at n, else NaN."""
    e = np.asarray(residuals, dtype=np.float64)
    if constant(e):  # no spread: not a tie threshold posing as an MDE (issue #53)
        return None if nothing_detectable(n, plan) else float("nan")
    draws = noise(residuals, n, settings.simulations, settings.seed)
    scale = max(float(np.std(e)), plan.threshold)
    if power(draws, scale * 1e6, plan) < settings.target:
        return None
    from pytest_pstbench.paired.cluster_power import smallest_effect

    return smallest_effect(lambda x: power(draws, x, plan) >= settings.target, scale, steps)


def pairs_needed(residuals, effect: float, plan: Plan, settings, max_pairs: int = MAX_PAIRS) -> int | None:
    """The fewest pairs in which a shift of `effect` towards worse is detected with power >= settings.target
    (new draws of that many pairs for each n tried: doubling, then bisection); None beyond `max_pairs`."""

    def reaches(n: int) -> bool:
        return power(noise(residuals, n, settings.simulations, settings.seed), effect, plan) >= settings.target

    from pytest_pstbench.paired.cluster_power import smallest_reaching

    return smallest_reaching(reaches, max_pairs)


def baseline_residuals(values, correlation: float) -> np.ndarray:
    """Planning from a baseline alone: its centred values times sqrt(2 (1 - rho)), the spread of the
    difference of two runs whose per-pair values correlate by rho and vary alike."""
    x = np.asarray(values, dtype=np.float64)
    return (x - x.mean()) * np.sqrt(2.0 * (1.0 - correlation))


def detectable(comp, protocol) -> None:
    """Sets each row's `detectable` (compare and the gate): the MDE of its metric at the row's n from the
    observed differences (`row.differences`, set by compare_two), Holm over the comparison's tests; rows with
    a margin (a one-sided test of shifted differences) are left as they are."""
    cfg = protocol.comparison
    settings = cfg.power
    m = len(comp.rows)
    for row in comp.rows:
        diffs = getattr(row, "differences", None)
        if row.margin is not None or diffs is None:
            continue
        plan = Plan(row.higher_is_better, cfg.tie(row.metric), cfg, m)
        row.detectable = mde_record(minimum_detectable_effect(diffs, row.n, plan, settings), settings, m)


#: Why an MDE is not known: the differences it would be simulated from are one value (identical runs, or one
#: constant shift); `detectable["unknown"]` holds it and `mde` is None.
UNKNOWN = "the per-pair differences have no spread"


def mde_record(mde: float | None, settings, tests: int) -> dict:
    """A row's `detectable`: the MDE (None: none at this n), or `unknown` where it cannot be known (NaN)."""
    out = {"mde": mde, "power": settings.target, "simulations": settings.simulations, "seed": settings.seed}
    out["tests"] = tests
    if mde is not None and mde != mde:
        out["mde"], out["unknown"] = None, UNKNOWN
    return out


def mde_text(row, decimals: int) -> str:
    """A row's MDE as the tables show it: the shift, `none at this n`, `unknown (no spread)` (differences without
    spread: never the tie threshold), or `-` (not computed)."""
    info = row.detectable
    if not info:
        return "-"
    if info.get("unknown"):
        return "unknown (no spread)"
    return "none at this n" if info["mde"] is None else f"{info['mde']:.{decimals}g}"


@dataclass(frozen=True)
class Noise:
    """Where `pstbench power`'s noise model comes from (the first line it prints says it): the observed
    differences of a candidate (`candidate`), the differences of two other runs (`noise_runs`: A, B), or the
    baseline's values with a correlation (`correlation`: given, else the protocol's assumed one), with per-metric
    spreads of the differences where given (`difference_sd`)."""

    candidate: object = None
    noise_runs: tuple | None = None
    correlation: float | None = None
    difference_sd: dict | None = None

    def source(self, runs, settings) -> str:
        if self.candidate is not None:
            return (
                f"the observed per-pair differences {self.candidate.path} - {runs[0].path} (as compare computes them)"
            )
        if self.noise_runs:
            a, b = self.noise_runs
            return (
                f"the per-pair differences {b.path} - {a.path} over {len(shared_ids(a, b))} shared pairs (--noise-from)"
            )
        given = " (--difference-sd for " + ", ".join(self.difference_sd) + ")" if self.difference_sd else ""
        if self.correlation is not None:
            return f"{runs[0].path}'s values, the two runs' per-pair values correlating by {self.correlation:g} (--correlation){given}"
        return (
            f"{runs[0].path}'s values, ASSUMING the two runs' per-pair values correlate by {settings.baseline_correlation:g} "
            f"(the protocol's comparison.power.baseline_correlation, not measured){given}; fix: measure it with "
            "--noise-from RUN_A RUN_B (e.g. the baseline and a previous commit's run) or give --correlation R"
        )

    def residuals(self, runs, metric: str, settings) -> tuple[np.ndarray, str, list | None]:
        """(residuals, a short label, the residuals' pair ids or None: the planned run's)."""
        base = np.array([runs[0].scores[p][metric] for p in runs[0].scores], dtype=np.float64)
        if self.candidate is not None:
            return (
                np.array([self.candidate.scores[p][metric] for p in runs[0].scores]) - base,
                "observed differences",
                None,
            )
        if self.noise_runs:
            a, b = self.noise_runs
            ids = shared_ids(a, b)
            x = np.array([a.scores[p][metric] for p in ids], dtype=np.float64)
            y = np.array([b.scores[p][metric] for p in ids], dtype=np.float64)
            r = np.corrcoef(x, y)[0, 1] if x.std() > 0 and y.std() > 0 else float("nan")
            return y - x, f"differences of two runs, correlation {r:.3g}", ids
        if self.difference_sd and metric in self.difference_sd:
            c = base - base.mean()
            if constant(c):  # no shape to keep: normal quantiles
                from scipy.stats import norm

                c = norm.ppf((np.arange(base.size) + 0.5) / base.size)
            return c / c.std() * self.difference_sd[metric], "given difference sd", None
        rho = settings.baseline_correlation if self.correlation is None else self.correlation
        return baseline_residuals(base, rho), f"baseline values, correlation {rho:g}", None


def shared_ids(a, b) -> list[str]:
    """The pairs two runs both scored, in the first run's order."""
    return [p for p in a.scores if p in b.scores]


def planning_rows(
    runs: list, protocol, metrics: list[str], *, pairs: int | None = None, effects: dict | None = None, noise=None
) -> list[dict]:
    """`pstbench power`: per metric, the noise model (`Noise`: a candidate's observed differences, two named runs'
    differences, or the baseline's values with a correlation), the MDE at the run's n (and at `pairs`), and the
    pairs each shift in `effects` needs. Holm's correction is over len(metrics) tests, as a gate on them. Under a
    protocol that tests cluster means (`cluster_sign_flip`) the simulation is of that test (paired/cluster_power.py)."""
    from pytest_pstbench.paired.aggregation import per_pair_higher_is_better
    from pytest_pstbench.paired.clusters import SIGN_FLIP

    cfg = protocol.comparison
    noise = noise or Noise(candidate=runs[1] if len(runs) > 1 else None)
    clustered = cfg.test == SIGN_FLIP
    settings = cfg.power
    n = len(runs[0].scores)
    out = []
    for m in metrics:
        residuals, model, ids = noise.residuals(runs, m, settings)
        plan = Plan(per_pair_higher_is_better(protocol, m), cfg.tie(m), cfg, len(metrics))
        row = {"metric": m, "n": n, "noise": model, "sd": float(np.std(residuals)), "tests": len(metrics)}
        row.update(power=settings.target, simulations=settings.simulations, seed=settings.seed)
        if clustered:
            row.update(cluster_plan(runs, noise, residuals, ids, plan, settings, pairs, (effects or {}).get(m)))
        else:
            row["mde"] = minimum_detectable_effect(residuals, n, plan, settings)
            if pairs is not None:
                row["pairs"] = pairs
                row["mde_at_pairs"] = minimum_detectable_effect(residuals, pairs, plan, settings)
            if effects and m in effects:
                row["effect"] = effects[m]
                row["pairs_needed"] = pairs_needed(residuals, effects[m], plan, settings)
        out.append(unknown_fields(row, constant(residuals)))
    return out


def unknown_fields(row: dict, no_spread: bool) -> dict:
    """Residuals without spread: no MDE or pairs needed is known from them (never the tie threshold); they
    become None with `unknown` saying why."""
    if no_spread:
        row["unknown"] = UNKNOWN
        for key in ("mde", "mde_at_pairs", "pairs_needed", "clusters_needed"):
            if key in row:
                row[key] = None
    return row


def cluster_plan(runs, noise, residuals, ids, plan, settings, pairs, effect) -> dict:
    """A clustered row's plan: the MDE with the planned run's K clusters, with about `pairs` pairs (clusters of the
    observed mean size) and the clusters (and pairs) a shift of `effect` needs."""
    from pytest_pstbench.paired import cluster_power
    from pytest_pstbench.paired.clusters import clusters_of

    base = runs[0]
    k = len(set(clusters_of(base, list(base.scores))))
    source = noise.noise_runs[0] if noise.noise_runs else base
    labels = clusters_of(source, ids if ids is not None else list(base.scores))
    size = len(base.scores) / k
    row = {"clusters": k, "mde": cluster_power.minimum_detectable_effect(residuals, labels, k, plan, settings)}
    if pairs is not None:
        at = max(2, round(pairs / size))
        row.update(pairs=pairs, clusters_at_pairs=at)
        row["mde_at_pairs"] = cluster_power.minimum_detectable_effect(residuals, labels, at, plan, settings)
    if effect is not None and not constant(residuals):
        need = cluster_power.clusters_needed(residuals, labels, effect, plan, settings, MAX_CLUSTERS)
        row.update(effect=effect, clusters_needed=need, pairs_needed=None if need is None else round(need * size))
    elif effect is not None:
        row.update(effect=effect, clusters_needed=None, pairs_needed=None)
    return row


#: `pstbench power --effect` under a clustered protocol: the most clusters it searches.
MAX_CLUSTERS = 512


def planning_text(rows: list[dict], runs: list, protocol, noise=None) -> str:
    """What `pstbench power` prints: the noise model's source first, the settings, then one line per metric."""
    settings = protocol.comparison.power
    noise = noise or Noise(candidate=runs[1] if len(runs) > 1 else None)

    def shift(v):
        return "none (no shift is detectable at this n)" if v is None else f"{v:.4g}"

    s = runs[0].summary
    first = rows[0]
    unit = f"n={first['n']}" + (f" in {first['clusters']} clusters" if "clusters" in first else "")
    test = "the sign-flip test of cluster means" if "clusters" in first else "the Wilcoxon test"
    lines = [
        f"noise model: {noise.source(runs, settings)}",
        f"track: {s.get('track')}   protocol: {protocol.id}   {unit}   alpha={protocol.comparison.alpha}   "
        f"power target {first['power'] * 100:g}% ({first['simulations']} simulations of {test}, seed "
        f"{first['seed']}; Holm over {first['tests']} tests)",
    ]
    for r in rows:
        label = protocol.metrics[r["metric"]]["label"]
        if r.get("unknown"):
            lines.append(
                f"{label} ({r['metric']}): minimum detectable worse shift unknown: {r['unknown']} (identical runs?), "
                "so nothing can be simulated from them; fix: plan with --correlation R or --noise-from RUN_A RUN_B"
            )
            continue
        text = f"{label} ({r['metric']}): minimum detectable worse shift {shift(r['mde'])} at n={r['n']}"
        if "pairs" in r:
            text += f"; {shift(r['mde_at_pairs'])} at n={r['pairs']}"
            text += f" ({r['clusters_at_pairs']} clusters)" if "clusters_at_pairs" in r else ""
        if "effect" in r:
            text += effect_text(r)
        lines.append(f"{text}   [noise: {r['noise']}, sd {r['sd']:.4g}]")
    return "\n".join(lines)


def effect_text(r: dict) -> str:
    need = r["pairs_needed"]
    if "clusters_needed" in r:
        if r["clusters_needed"] is None:
            return f"; a shift of {r['effect']:g} needs more than {MAX_CLUSTERS} clusters"
        return f"; a shift of {r['effect']:g} needs {r['clusters_needed']} clusters (about {need} pairs)"
    if need is None:
        return f"; a shift of {r['effect']:g} needs more than {MAX_PAIRS} pairs"
    return f"; a shift of {r['effect']:g} needs {need} pairs"
