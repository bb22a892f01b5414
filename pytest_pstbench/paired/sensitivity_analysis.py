"""The analysis half of `pstbench sensitivity`: rankings of the methods under each evaluation variant,
Kendall tau against the protocol's ranking, method pairs that swap order with their paired
significance (Wilcoxon, Holm over each family), and the files and tables of the analysis; and the
command's run (`run_sensitivity`: score, analyse, write the files).

Each distinct family of paired tests (metric, comparison section, per-pair values) runs once. The
scores come from `paired/sensitivity.py` (a `SensitivityResult`).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from pytest_pstbench.paired.aggregation import aggregate
from pytest_pstbench.paired.aggregation import statistic_of as metric_statistic
from pytest_pstbench.paired.planner import plan_units
from pytest_pstbench.paired.protocol import PairedProtocol
from pytest_pstbench.paired.resolution import evaluation_resolution
from pytest_pstbench.paired.sensitivity import Method, SensitivityResult, score_variants
from pytest_pstbench.paired.variants import BASE_ID, Variant

# ---- analysis -------------------------------------------------------------------------------------------


def rank_methods(
    aggregates: dict[str, float], higher_is_better: bool, order: list[str]
) -> tuple[list[str], dict[str, int]]:
    """Methods best first (ties keep the given order) and their ranks (1 = best; ties share the lowest rank)."""
    from scipy.stats import rankdata

    oriented = [aggregates[m] if higher_is_better else -aggregates[m] for m in order]
    ranking = [m for _, _, m in sorted((-o, i, m) for i, (o, m) in enumerate(zip(oriented, order)))]
    ranks = rankdata([-o for o in oriented], method="min")
    return ranking, {m: int(r) for m, r in zip(order, ranks)}


def _finite(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _paired_family(scores: dict[str, np.ndarray], names: list[str], protocol: PairedProtocol, metric: str) -> dict:
    """Wilcoxon signed-rank for every method pair (a before b in `names`), Holm over this family."""
    from pytest_pstbench.core.stats import holm, tie_differences, wilcoxon_test

    cfg = protocol.comparison
    thr = cfg.tie(metric)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    tests = []
    for a, b in pairs:
        d = tie_differences(scores[b] - scores[a], thr)
        t = wilcoxon_test(d, zero_method=cfg.zero_method, alternative=cfg.alternative, method=cfg.method)
        tests.append(t.pvalue)
    adjusted = holm(tests)
    alpha = cfg.alpha
    return {(a, b): {"p": p, "p_holm": ph, "significant": ph < alpha} for (a, b), p, ph in zip(pairs, tests, adjusted)}


def analyse(result: SensitivityResult) -> dict:
    base = result.base
    names = [m.name for m in result.methods]
    ranked = base.ranked_metrics
    variants = result.variants
    aggregates, rankings, ranks, families, oriented = _aggregate_all(result)
    kendall, swaps, sig_changes = _order_changes(result, families, oriented)
    paired_tests = {
        v.id: {
            m: [
                {"a": a, "b": b, **{k: (bool(x) if k == "significant" else x) for k, x in t.items()}}
                for (a, b), t in families[(v.id, m)].items()
            ]
            for m in ranked
            if (v.id, m) in families
        }
        for v in variants
    }
    variants_json = _variants_json(result)
    return {
        "track": result.track.id,
        "protocol": base.id,
        "protocol_sha256": base.sha256,
        "dataset_revision": result.track.revision,
        "dataset": result.track.dataset_id,
        "n_pairs": len(result.track.pairs),
        "methods": names,
        "method_specs": {m.name: m.spec for m in result.methods},
        "metrics": {
            m: {"label": base.metrics[m]["label"], "higher_is_better": bool(base.metrics[m]["higher_is_better"])}
            for m in ranked
        },
        "variants": variants_json,
        "aggregates": aggregates,
        "rankings": rankings,
        "ranks": ranks,
        "kendall_tau": kendall,
        "swaps": swaps,
        "significance_changes": sig_changes,
        "paired_tests": paired_tests,
        "tests": {
            "test": "scipy.stats.wilcoxon on per-pair differences (b - a), the variant's comparison section "
            "(tie threshold, zero_method, method, alternative)",
            "family": "Holm over the tests of one (variant, metric): every pair of methods",
            "alpha": base.comparison.alpha,
        },
        "unavailable": [
            {"variant": v, "metric": m, "reason": r}
            for (v, m), r in sorted(result.unavailable.items(), key=lambda x: (_vorder(variants, x[0][0]), x[0][1]))
        ],
        "computations": result.counts,
        # outputs of another size than the reference, resized to it under --allow-resize (a deviation)
        "resized": result.resized,
        "timings": {},
    }


def _aggregate_all(result: SensitivityResult) -> tuple:
    """Per variant and ranked metric: each method's aggregate, the ranking and ranks, the values oriented so that
    higher is better, and the paired tests of every two methods (a family)."""
    names = [m.name for m in result.methods]
    ranked = result.base.ranked_metrics
    variants = result.variants
    aggregates: dict = {}
    rankings: dict = {}
    ranks: dict = {}
    families: dict = {}
    oriented: dict = {}
    # A variant that leaves a metric's values and the comparison section as they are gets the same tests:
    # each distinct family (metric, comparison settings, per-pair values) is tested once.
    tested: dict = {}
    for v in variants:
        aggregates[v.id], rankings[v.id], ranks[v.id] = {}, {}, {}
        for m in ranked:
            if m not in result.scores[v.id]:
                continue
            params = v.protocol.metrics[m]
            stat = metric_statistic(v.protocol, m)
            agg = {n: aggregate(result.scores[v.id][m][n], stat, params) for n in names}
            hib = bool(params["higher_is_better"])
            aggregates[v.id][m] = agg
            rankings[v.id][m], ranks[v.id][m] = rank_methods(agg, hib, names)
            oriented[(v.id, m)] = {n: (agg[n] if hib else -agg[n]) for n in names}
            key = (
                m,
                json.dumps(v.protocol.section("comparison"), sort_keys=True),
                tuple(np.asarray(result.scores[v.id][m][n], dtype=np.float64).tobytes() for n in names),
            )
            if key not in tested:
                tested[key] = _paired_family(result.scores[v.id][m], names, v.protocol, m)
            families[(v.id, m)] = tested[key]
    return aggregates, rankings, ranks, families, oriented


def _order_changes(result: SensitivityResult, families: dict, oriented: dict) -> tuple:
    """Kendall tau of each variant's order against the protocol's, the swapped pairs of methods, and the pairs in
    the same order whose significance changed."""
    from scipy.stats import kendalltau

    names = [m.name for m in result.methods]
    ranked = result.base.ranked_metrics
    variants = result.variants
    kendall: dict = {}
    swaps: list = []
    sig_changes: list = []
    for v in variants:
        kendall[v.id] = {}
        for m in ranked:
            if (v.id, m) not in oriented or (BASE_ID, m) not in oriented:
                continue
            bo, vo = oriented[(BASE_ID, m)], oriented[(v.id, m)]
            res = kendalltau([bo[n] for n in names], [vo[n] for n in names])
            kendall[v.id][m] = {"tau": _finite(float(res.statistic)), "pvalue": _finite(float(res.pvalue))}
            if v.id == BASE_ID:
                continue
            bf, vf = families[(BASE_ID, m)], families[(v.id, m)]
            for i, a in enumerate(names):
                for b in names[i + 1 :]:
                    sb, sv = np.sign(bo[a] - bo[b]), np.sign(vo[a] - vo[b])
                    entry = {
                        "variant": v.id,
                        "metric": m,
                        "a": a,
                        "b": b,
                        "base_order": [a, b] if sb > 0 else [b, a],
                        "variant_order": [a, b] if sv > 0 else [b, a],
                        "base_p_holm": bf[(a, b)]["p_holm"],
                        "variant_p_holm": vf[(a, b)]["p_holm"],
                        "base_significant": bool(bf[(a, b)]["significant"]),
                        "variant_significant": bool(vf[(a, b)]["significant"]),
                    }
                    if sb * sv < 0:
                        swaps.append(entry)
                    elif sb * sv > 0 and entry["base_significant"] != entry["variant_significant"]:
                        sig_changes.append(entry)
    return kendall, swaps, sig_changes


def _variants_json(result: SensitivityResult) -> list[dict]:
    """The analysis's `variants`: each one's description and what it changes."""
    base = result.base
    ranked = base.ranked_metrics
    variants = result.variants
    plan = plan_units(variants)
    variants_json = []
    for v in variants:
        entry = {"id": v.id, "description": v.description, "file": v.file, "changes": v.changes, "sha256": v.sha256}
        # metrics whose per-pair computation or aggregation differs from the protocol's
        entry["affects"] = [
            m
            for m in base.metric_names
            if v.id != BASE_ID
            and (plan[(v.id, m)] != plan[(BASE_ID, m)] or metric_statistic(v.protocol, m) != metric_statistic(base, m))
        ]
        entry["resolution"] = evaluation_resolution(v.protocol)
        entry["statistic"] = {m: metric_statistic(v.protocol, m) for m in ranked}
        per_pair = {
            m: "per-pair MSE (lower is better); aggregate = min(cap_db, 10 log10(data_range^2 / mean over pairs of MSE))"
            for m in ranked
            if metric_statistic(v.protocol, m) == "pooled_mse"
        }
        if per_pair:
            entry["per_pair_values"] = per_pair
        variants_json.append(entry)
    return variants_json


def _vorder(variants: list[Variant], vid: str) -> int:
    return next(i for i, v in enumerate(variants) if v.id == vid)


# ---- files ---------------------------------------------------------------------------------------------


def scores_csv(result: SensitivityResult) -> str:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["variant", "method", "pair", "metric", "value"])
    pair_ids = result.track.pair_ids
    for v in result.variants:
        for meth in result.methods:
            for i, pid in enumerate(pair_ids):
                for m in result.base.metric_names:
                    if m in result.scores[v.id]:
                        w.writerow([v.id, meth.name, pid, m, repr(float(result.scores[v.id][m][meth.name][i]))])
    return buf.getvalue()


def _fmt(x: float | None, decimals: int) -> str:
    return "-" if x is None else f"{x:.{decimals}f}"


def _shorten(text: str, width: int | None) -> str:
    return text if width is None or len(text) <= width else text[: width - 1].rstrip() + "…"


def analysis_tables(
    analysis: dict, base: PairedProtocol, tablefmt: str = "simple", reason_width: int | None = None
) -> list[tuple[str, str]]:
    """(title, table) per ranked metric (the protocol's row and the variants that change that metric),
    then the swaps and the unavailable variants."""
    from tabulate import tabulate

    out = []
    names = analysis["methods"]
    swaps_by = {}
    for s in analysis["swaps"]:
        swaps_by.setdefault((s["variant"], s["metric"]), []).append(s)
    for m, info in analysis["metrics"].items():
        dec = int(base.metrics[m].get("decimals", 4))
        rows = []
        for v in analysis["variants"]:
            vid = v["id"]
            agg = analysis["aggregates"].get(vid, {}).get(m)
            if agg is None or (vid != BASE_ID and m not in v["affects"]):
                continue
            tau = analysis["kendall_tau"][vid].get(m, {}).get("tau")
            sw = swaps_by.get((vid, m), [])
            stat = v["statistic"][m]
            rows.append(
                [
                    vid + ("" if stat == "mean" else f" ({stat})"),
                    *[_fmt(agg[n], dec) for n in names],
                    " > ".join(analysis["rankings"][vid][m]),
                    _fmt(tau, 2),
                    f"{len(sw)} ({sum(s['base_significant'] for s in sw)}/{sum(s['variant_significant'] for s in sw)})"
                    if vid != BASE_ID
                    else "",
                ]
            )
        arrow = "↑" if info["higher_is_better"] else "↓"
        headers = ["variant", *names, "ranking (best first)", "Kendall τ", "swaps (sig. base/variant)"]
        out.append(
            (f"{info['label']}{arrow}", tabulate(rows, headers=headers, tablefmt=tablefmt, disable_numparse=True))
        )
    if analysis["swaps"]:
        rows = [
            [
                s["variant"],
                analysis["metrics"][s["metric"]]["label"],
                " > ".join(s["base_order"]),
                " > ".join(s["variant_order"]),
                f"{s['base_p_holm']:.3g}" + (" *" if s["base_significant"] else ""),
                f"{s['variant_p_holm']:.3g}" + (" *" if s["variant_significant"] else ""),
            ]
            for s in analysis["swaps"]
        ]
        out.append(
            (
                "Swaps (order under the protocol vs the variant; * = significant after Holm)",
                tabulate(
                    rows,
                    headers=[
                        "variant",
                        "metric",
                        "protocol order",
                        "variant order",
                        "p Holm (protocol)",
                        "p Holm (variant)",
                    ],
                    tablefmt=tablefmt,
                    disable_numparse=True,
                ),
            )
        )
    else:
        out.append(("Swaps", "no method pair changes order under any variant"))
    if analysis["unavailable"]:
        rows = [[u["variant"], u["metric"], _shorten(u["reason"], reason_width)] for u in analysis["unavailable"]]
        out.append(
            (
                "Unavailable",
                tabulate(rows, headers=["variant", "metric", "reason"], tablefmt=tablefmt, disable_numparse=True),
            )
        )
    return out


def analysis_markdown(analysis: dict, base: PairedProtocol) -> str:
    lines = [
        f"# Protocol sensitivity: track {analysis['track']}",
        "",
        f"Protocol `{analysis['protocol']}` (sha256 `{analysis['protocol_sha256'][:12]}`), dataset "
        f"`{analysis['dataset']}@{analysis['dataset_revision']}`, {analysis['n_pairs']} pairs, methods: "
        + ", ".join(f"`{n}`" for n in analysis["methods"])
        + ".",
        "",
        "Aggregates per variant (the statistic is the mean over pairs unless noted), the ranking (best first), "
        "Kendall τ between the protocol's ranking and the variant's (scipy.stats.kendalltau, τ-b), and the method "
        "pairs that swap order. Each metric's table shows the protocol and the variants that change that metric "
        "(analysis.json has every variant). Paired tests: "
        + analysis["tests"]["test"]
        + "; "
        + analysis["tests"]["family"]
        + f"; significant when the Holm-adjusted p < {analysis['tests']['alpha']}.",
        "",
        "## Variants",
        "",
    ]
    labels = {m: base.metrics[m]["label"] for m in base.metric_names}
    for v in analysis["variants"]:
        affects = "" if v["id"] == BASE_ID else f" (changes {', '.join(labels[m] for m in v['affects']) or 'nothing'})"
        lines.append(f"- `{v['id']}`{affects}: {v['description']}")
    for title, table in analysis_tables(analysis, base, tablefmt="github"):
        lines += ["", f"## {title}", "", table]
    if analysis["significance_changes"]:
        lines += ["", "## Same order, significance changes", ""]
        for s in analysis["significance_changes"]:
            lines.append(
                f"- `{s['variant']}`, {analysis['metrics'][s['metric']]['label']}: {' > '.join(s['base_order'])}; "
                f"p Holm {s['base_p_holm']:.3g} under the protocol, {s['variant_p_holm']:.3g} under the variant"
            )
    t = analysis["timings"]
    lines += [
        "",
        "## Timings",
        "",
        f"Total {t['total_s']:.1f} s; per variant (shared work counted once, under the first "
        "variant that needs it): " + ", ".join(f"{k} {s:.1f} s" for k, s in t["per_variant_s"].items()) + ".",
    ]
    return "\n".join(lines) + "\n"


ANALYSIS_FILES = ("scores.csv", "analysis.md", "analysis.json")  # what `write_outputs` writes into its folder


def write_outputs(out_dir: Path, result: SensitivityResult, analysis: dict) -> None:
    """scores.csv, analysis.md, then analysis.json, all or none (`core.files.write.write_files`: on failure the
    previous files stay; analysis.json, which vouches for the others, is replaced last)."""
    from pytest_pstbench.core.files.write import dumps_json, write_files

    files = {
        "scores.csv": scores_csv(result),
        "analysis.md": analysis_markdown(analysis, result.base),
        "analysis.json": dumps_json(analysis),
    }
    write_files(
        Path(out_dir), files, what="the sensitivity analysis", fix="free some space or give --out a writable folder"
    )


# ---- the command's run ----------------------------------------------------------------------------------


def run_sensitivity(
    track,
    base: PairedProtocol,
    variants: list[Variant],
    methods: list[Method],
    *,
    device: str = "cpu",
    out_dir: Path | None = None,
    allow_resize: bool = False,
    progress=None,
) -> SensitivityResult:
    t0 = time.perf_counter()
    result = score_variants(track, base, variants, methods, device=device, allow_resize=allow_resize, progress=progress)
    t1 = time.perf_counter()
    analysis = analyse(result)
    analysis_s = time.perf_counter() - t1
    analysis["timings"] = {
        "total_s": round(time.perf_counter() - t0, 3),
        "scoring_s": round(result.timings["scoring_s"], 3),
        "analysis_s": round(analysis_s, 3),
        "lpips_backbone_s": round(result.timings["lpips_backbone_s"], 3),
        "per_variant_s": {k: round(s, 3) for k, s in result.timings["per_variant_s"].items()},
    }
    result.analysis = analysis
    if out_dir is not None:
        write_outputs(out_dir, result, analysis)
    return result
