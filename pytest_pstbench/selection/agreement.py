"""A judge placed among the experts (where a run has the human reference row, summary.json `human`).

Per metric (Top-1, Bot-1, TB-1; ap@1, the agreement of one answer with the consensus), from summary.json alone:

* the judge's agreement with the expert consensus: its overall ap@1 (the track's labels are the consensus of
  the full panel);
* the experts' leave-one-out agreements: each expert's overall ap@1 against the consensus of the other experts
  (`human.per_expert`, the human row's rule); shown as min / median / max;
* the judge's percentile among the experts: the share of experts below the judge plus half the share equal
  (mid-rank), with a percentile bootstrap interval over experts (the experts resampled with replacement, the
  protocol's `aggregation.bootstrap` resamples, confidence and seed: which experts were asked);
* a chance-corrected agreement: the free-marginal kappa (Brennan & Prediger 1981; Randolph's kappa for
  two raters) kappa = (p_o - p_e) / (1 - p_e), with p_o the judge's ap@1 and p_e the protocol's analytic random
  baseline of the cell (1/k for Top-1 and Bot-1; what a judge answering uniformly at random agrees), and its
  interval the cell's bootstrap CI over tasks mapped through the same formula (exact in a k cell, where p_e is
  fixed; overall, p_e is the mean over the track's tasks). A kappa with the raters' own marginals (Cohen's,
  Fleiss') does not apply: the categories are each task's own candidates, so no marginal is shared across
  tasks; the free-marginal form is what remains, and numpy computes it (no library computes it with a
  per-task number of categories).

Nothing here is stored: it is derived from summary.json's overall and k cells (recomputed from per_task.csv by
the validating loader) and its `human` section."""

from __future__ import annotations

AGG = "ap@1"


def _cell(summary: dict, group: str, value) -> dict | None:
    return next((c for c in summary.get("cells") or [] if c.get("group") == group and c.get("value") == value), None)


def kappa(p_o, p_e):
    """The free-marginal kappa of agreement p_o against chance p_e (None where either is None or p_e is 1)."""
    if p_o is None or p_e is None or p_e >= 1:
        return None
    return (p_o - p_e) / (1 - p_e)


def percentile(value: float, experts: list[float]) -> float:
    """Mid-rank percentile (0..100) of `value` among the experts' values."""
    below = sum(1 for v in experts if v < value)
    equal = sum(1 for v in experts if v == value)
    return 100.0 * (below + 0.5 * equal) / len(experts)


def percentile_ci(value: float, experts: list[float], boot: dict) -> tuple[float, float]:
    """Percentile bootstrap interval of `percentile` over experts (resampled with replacement)."""
    import numpy as np

    x = np.asarray(experts, dtype=float)
    rng = np.random.default_rng(int(boot["seed"]))
    idx = rng.integers(0, len(x), size=(int(boot["resamples"]), len(x)))
    s = x[idx]
    pct = 100.0 * ((s < value).sum(axis=1) + 0.5 * (s == value).sum(axis=1)) / len(x)
    alpha = (1 - float(boot["confidence"])) / 2
    return float(np.quantile(pct, alpha)), float(np.quantile(pct, 1 - alpha))


def among_experts(summary: dict, params) -> list[dict] | None:
    """One entry per metric: judge, experts (values), percentile and its interval, kappa and its interval;
    None without a human row (or with fewer than two experts scored)."""
    human = summary.get("human") if isinstance(summary, dict) else None
    overall = _cell(summary, "overall", "all")
    if not isinstance(human, dict) or overall is None:
        return None
    out = []
    for m in params.metrics:
        experts = [
            e["metrics"][m][AGG]
            for e in human.get("per_expert") or []
            if (e.get("metrics") or {}).get(m, {}).get(AGG) is not None
        ]
        judge = overall["metrics"][m][AGG]
        if len(experts) < 2 or judge["mean"] is None:
            continue
        lo, hi = percentile_ci(judge["mean"], experts, params.bootstrap)
        ordered = sorted(experts)
        out.append(
            {
                "metric": m,
                "judge": judge["mean"],
                "experts": len(experts),
                "expert_min": ordered[0],
                "expert_median": ordered[len(ordered) // 2]
                if len(ordered) % 2
                else (ordered[len(ordered) // 2 - 1] + ordered[len(ordered) // 2]) / 2,
                "expert_max": ordered[-1],
                "percentile": percentile(judge["mean"], experts),
                "percentile_ci": [lo, hi],
                "kappa": kappa(judge["mean"], judge["random"]),
                "kappa_ci": [kappa(judge["ci_low"], judge["random"]), kappa(judge["ci_high"], judge["random"])],
            }
        )
    return out or None


def table(summary: dict, params) -> str | None:
    """`vab score`'s table of the judge among the experts (None without a human row)."""
    from tabulate import tabulate

    rows = among_experts(summary, params)
    if not rows:
        return None
    conf = float(params.bootstrap["confidence"]) * 100

    def f(v, spec=".3f"):
        return "-" if v is None else format(v, spec)

    body = [
        [
            params.metrics[r["metric"]].get("label", r["metric"]),
            f(r["judge"]),
            f"{f(r['expert_min'])} / {f(r['expert_median'])} / {f(r['expert_max'])}",
            str(r["experts"]),
            f"{r['percentile']:.0f} [{r['percentile_ci'][0]:.0f}, {r['percentile_ci'][1]:.0f}]",
            f"{f(r['kappa'])} [{f(r['kappa_ci'][0])}, {f(r['kappa_ci'][1])}]",
        ]
        for r in rows
    ]
    headers = [
        "metric",
        "judge ap@1",
        "experts (leave-one-out) min / median / max",
        "experts",
        f"judge's percentile [{conf:g}% CI over experts]",
        f"free-marginal kappa [{conf:g}% CI over tasks]",
    ]
    return (
        "the judge among the experts (its agreement with the consensus beside each expert's with the others'; "
        "kappa: (ap@1 - random) / (1 - random))\n"
        + tabulate(body, headers=headers, tablefmt="simple", disable_numparse=True)
    )


def line(summary: dict, params) -> str | None:
    """One line for `pstbench table`'s notes: per metric the judge's percentile among the experts and its kappa."""
    rows = among_experts(summary, params)
    if not rows:
        return None
    return "; ".join(
        f"{params.metrics[r['metric']].get('label', r['metric'])} at the {r['percentile']:.0f}th percentile of "
        f"{r['experts']} experts [{r['percentile_ci'][0]:.0f}, {r['percentile_ci'][1]:.0f}], kappa "
        f"{r['kappa']:.3f}"
        for r in rows
    )
