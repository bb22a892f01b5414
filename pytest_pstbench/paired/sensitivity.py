"""Protocol sensitivity: score methods under the protocol and its evaluation variants, then compare
the rankings (Kendall tau), and list method pairs that swap order with their paired significance.

Work is shared: each image is decoded once per (method, pair), resized once per evaluation
resolution, and each distinct computation (metric parameters, per-pair quantity, effective
resolution) is done once per (method, pair); a variant that does not change a metric reuses the
value of the protocol (or of an earlier variant). LPIPS is computed from per-image backbone features
(`LpipsMetric.features`): the reference's (and style's) are computed once per pair, LPIPS parameters
and evaluation size and shared by all methods, an output's once per (method, pair, parameters, size);
the pairs are scored one after the other and each pair's features are dropped after it. In the
analysis, each distinct family of paired tests (metric, comparison section, per-pair values) runs once.

Size: about 600 lines: the shared-work scoring plan and the ranking analysis are kept together until
the one-engine redesign moves scoring into paired/ (planner/session) and the analysis beside compare.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import Protocol
from pytest_pstbench.core.aggregation import aggregate, statistic_of as metric_statistic
from pytest_pstbench.metrics.registry import computing_params  # noqa: F401 (aggregate: used and re-exported)
from pytest_pstbench.paired.resolution import evaluation_resolution, res_key, resize_image
from pytest_pstbench.paired.variants import BASE_ID, Variant

VALUE, MSE = "value", "mse"


@dataclass(frozen=True)
class Method:
    name: str
    spec: str  # the PATH of NAME=PATH as given
    outputs: dict  # pair id -> Path


@dataclass
class SensitivityResult:
    track: object
    base: Protocol
    variants: list[Variant]
    methods: list[Method]
    scores: dict  # variant -> metric -> method -> np.ndarray over the track's pairs
    unavailable: dict  # (variant, metric) -> reason
    timings: dict
    counts: dict = field(default_factory=dict)
    analysis: dict | None = None
    resized: list = field(default_factory=list)  # outputs resized to the reference size (--allow-resize)


# ---- specs ------------------------------------------------------------------------------------------

def parse_method_specs(specs: list[str]) -> list[tuple[str, str]]:
    """`NAME=PATH` strings -> [(name, path)], refusing bad or duplicate names (no file access)."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for spec in specs:
        name, sep, path = spec.partition("=")
        name, path = name.strip(), path.strip()
        if not sep or not name or not path:
            raise UserError(
                f"method spec {spec!r}: expected NAME=PATH (an outputs folder, or identity / log:identity), "
                "e.g. reinhard=results/demo/reinhard/outputs"
            )
        if "/" in name or "\\" in name or name.startswith(".") or "," in name:
            raise UserError(f"method spec {spec!r}: NAME {name!r} must be a plain name (no '/', ',' or leading '.')")
        if name in seen:
            raise UserError(f"method spec {spec!r}: NAME {name!r} is given twice; fix: give each method a distinct NAME")
        seen.add(name)
        out.append((name, path))
    if len(out) < 2:
        raise UserError("sensitivity needs at least two methods (NAME=PATH ...) to rank; fix: add another method, e.g. identity=identity")
    return out


def resolve_methods(track, specs: list[tuple[str, str]]) -> list[Method]:
    """Each spec's outputs (or the track's content for identity specs); every pair must have an output."""
    from pytest_pstbench.paired.identity import identity_outputs, is_identity_spec
    from pytest_pstbench.paired.tracks import resolve_outputs

    methods = []
    for name, path in specs:
        if is_identity_spec(path):
            outputs = identity_outputs(track, path)
        else:
            outputs = resolve_outputs(track, Path(path))
        missing = [pid for pid, p in outputs.items() if not Path(p).is_file()]
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            raise UserError(
                f"{path} (method {name}): no output for pair(s) {shown}; fix: write <pair_id>.png for every pair of "
                f"track {track.id} (the sensitivity analysis pairs every method on every pair)"
            )
        methods.append(Method(name, path, outputs))
    return methods


# ---- computation units ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Unit:
    """What one (variant, metric) needs per pair: a metric computation at an evaluation resolution."""

    metric: str
    params_key: str  # canonical JSON of the metric's computing parameters
    quantity: str  # VALUE (the metric) or MSE (per-pair MSE for pooled PSNR)
    resolution: str  # res_key of the evaluation resolution


def plan_units(variants: list[Variant]) -> dict[tuple[str, str], Unit]:
    plan = {}
    for v in variants:
        res = res_key(evaluation_resolution(v.protocol))
        for m, params in v.protocol.metrics.items():
            quantity = MSE if metric_statistic(v.protocol, m) == "pooled_mse" else VALUE
            key = json.dumps(computing_params(params), sort_keys=True)
            plan[(v.id, m)] = Unit(m, key, quantity, res)
        # metrics are the base's (variants may not add or remove them)
    return plan


class _Computer:
    """Computes a unit's value on one image pair; one PairScorer per distinct metric parameters.

    LPIPS (when the caller names the images by `keys`) goes through per-image features: those of the
    reference or style are kept until `new_pair`, those of an output until `new_method`, so at most
    one pair's features are held."""

    def __init__(self, device: str):
        self.device = device
        self._scorers: dict[str, object] = {}
        self._lpips: dict[str, object] = {}
        self._pair_features: dict[tuple, list] = {}  # (feature key, (role, size)) -> features of reference/style
        self._output_features: dict[tuple, list] = {}  # the same for the current method's output
        self.calls = 0
        self.feature_passes = 0  # LPIPS backbone passes (one per image and feature key)

    def new_pair(self) -> None:
        self._pair_features.clear()
        self._output_features.clear()

    def new_method(self) -> None:
        self._output_features.clear()

    def __call__(self, unit: Unit, output: np.ndarray, other: np.ndarray, keys: tuple | None = None) -> float:
        """`keys`: (output's, other's) identity within the pair, (role, evaluation size), for LPIPS features."""
        self.calls += 1
        params = json.loads(unit.params_key)
        if unit.quantity == MSE:
            from pytest_pstbench.metrics import fidelity

            return float(
                fidelity.mse(output, other, channels=params.get("channels", "rgb"), luma_weights=params.get("luma_weights"))
            )
        if params.get("kind") == "lpips" and keys is not None:
            return self._lpips_distance(unit, params, output, other, keys)
        scorer = self._scorers.get(unit.params_key)
        if scorer is None:
            from pytest_pstbench.metrics import PairScorer

            one = Protocol(id="unit", path=Path("unit"), sha256="", data={"metrics": {unit.metric: _full_params(unit, params)}})
            scorer = self._scorers[unit.params_key] = PairScorer(one, self.device)
        ref, style = (other, None) if params["against"] == "reference" else (None, other)
        (value,) = scorer.score(output, ref, style).values()
        return float(value)

    def _lpips_distance(self, unit: Unit, params: dict, output: np.ndarray, other: np.ndarray, keys: tuple) -> float:
        metric = self._lpips.get(unit.params_key)
        if metric is None:
            from pytest_pstbench.metrics.lpips_metric import LpipsMetric

            metric = self._lpips[unit.params_key] = LpipsMetric(_full_params(unit, params), self.device)
        metric.check_inputs(output, other)
        fo = self._features(metric, self._output_features, keys[0], output)
        fr = self._features(metric, self._pair_features, keys[1], other)
        return metric.distance_from_features(fo, fr)

    def _features(self, metric, store: dict, image_key: tuple, arr: np.ndarray) -> list:
        key = (metric.feature_key(), image_key)
        if key not in store:
            store[key] = metric.features(arr)
            self.feature_passes += 1
        return store[key]


def _full_params(unit: Unit, params: dict) -> dict:
    # PairScorer wants a protocol entry: the bookkeeping keys do not change what is computed.
    return {"label": unit.metric, "higher_is_better": True, "ranked": False, **params}


# ---- scoring --------------------------------------------------------------------------------------------

def score_variants(
    track, base: Protocol, variants: list[Variant], methods: list[Method], *, device: str = "cpu",
    allow_resize: bool = False, progress=None
) -> SensitivityResult:
    """Every (variant, metric, method, pair) value, computing each distinct unit once per (method, pair)."""
    from pytest_pstbench.paired.imageio import fit_to_reference, load_dataset_image, load_image

    t_start = time.perf_counter()
    plan = plan_units(variants)
    computer = _Computer(device)
    per_variant = {v.id: 0.0 for v in variants}
    unavailable: dict[tuple[str, str], str] = {}
    n_pairs = len(track.pairs)
    values: dict[tuple[str, str, str], list[float]] = {(v.id, m, meth.name): [] for v in variants for m in v.protocol.metrics for meth in methods}
    n_values = n_computed = 0
    resized_outputs: list[dict] = []  # --allow-resize
    res_specs = {res_key(evaluation_resolution(v.protocol)): evaluation_resolution(v.protocol) for v in variants}
    full = res_key({"mode": "full"})
    for i, pair in enumerate(track.pairs, 1):
        t_pair = time.perf_counter()
        t0 = time.perf_counter()
        reference = load_dataset_image(pair.reference, base, role=f"reference of {pair.id}").array
        style = load_dataset_image(pair.style, base, role=f"style of {pair.id}").array
        per_variant[BASE_ID] += time.perf_counter() - t0
        resized: dict[tuple[str, str], np.ndarray] = {}  # shared by all methods of this pair

        def at(role: str, arr: np.ndarray, rk: str, vid: str) -> np.ndarray:
            if (role, rk) not in resized:
                t = time.perf_counter()
                resized[(role, rk)] = resize_image(arr, res_specs[rk])
                per_variant[vid] += time.perf_counter() - t
            return resized[(role, rk)]

        pair_computed = 0
        computer.new_pair()
        for meth in methods:
            computer.new_method()
            t0 = time.perf_counter()
            out_path = Path(meth.outputs[pair.id])
            if out_path.resolve() == Path(pair.content).resolve():
                # the Identity method's "output" is the dataset's content image (dataset image rules)
                loaded = load_dataset_image(out_path, base, role=f"output of {meth.name}")
            else:
                loaded = load_image(out_path, base, role=f"output of {meth.name}",  # size checked before decoding
                                    expected_size=(reference.shape[1], reference.shape[0]), allow_resize=allow_resize)
            fitted = fit_to_reference(loaded, reference.shape, out_path, base, allow_resize=allow_resize)
            if "resized" in fitted.notes:
                resized_outputs.append({"method": meth.name, "pair": pair.id, **fitted.notes["resized"]})
            output = fitted.array
            per_variant[BASE_ID] += time.perf_counter() - t0
            done: dict[tuple, tuple[bool, object]] = {}  # effective unit -> (ok, value or reason)
            out_role = f"output:{meth.name}"
            for v in variants:
                for m in v.protocol.metrics:
                    if (v.id, m) in unavailable:
                        continue
                    unit = plan[(v.id, m)]
                    against = v.protocol.metrics[m]["against"]
                    other_arr = reference if against == "reference" else style
                    o = at(out_role, output, unit.resolution, v.id)
                    r = at(against, other_arr, unit.resolution, v.id)
                    # A resolution that leaves both images as they are is the full resolution.
                    eff = unit.resolution if (o is not output or r is not other_arr) else full
                    key = (unit.params_key, unit.quantity, eff)
                    if key not in done:
                        t = time.perf_counter()
                        try:
                            keys = ((out_role, unit.resolution if o is not output else full),
                                    (against, unit.resolution if r is not other_arr else full))
                            value = computer(unit, o, r, keys)
                            done[key] = (True, value) if math.isfinite(value) else (
                                False, f"{m} gave a non-finite value ({value}) (pair {pair.id}, method {meth.name})")
                        except UserError as exc:
                            done[key] = (False, f"{exc} (pair {pair.id}, method {meth.name})")
                        per_variant[v.id] += time.perf_counter() - t
                        pair_computed += 1
                    ok, value = done[key]
                    if not ok:
                        unavailable[(v.id, m)] = str(value)
                        continue
                    values[(v.id, m, meth.name)].append(float(value))
                    n_values += 1
        n_computed += pair_computed
        computer.new_pair()  # this pair's LPIPS features are not needed any more
        if progress:
            progress(
                f"[{i}/{n_pairs}] {pair.id}: {len(methods)} methods x {len(variants)} variants, "
                f"{pair_computed} computations ({time.perf_counter() - t_pair:.1f} s)"
            )
    scores: dict = {}
    for v in variants:
        scores[v.id] = {}
        for m in v.protocol.metrics:
            if (v.id, m) in unavailable:
                continue
            scores[v.id][m] = {meth.name: np.asarray(values[(v.id, m, meth.name)], dtype=np.float64) for meth in methods}
    timings = {"scoring_s": time.perf_counter() - t_start, "per_variant_s": per_variant}
    counts = {"values": n_values, "computed": n_computed, "reused": n_values - n_computed,
              "lpips_feature_passes": computer.feature_passes}
    return SensitivityResult(track, base, variants, methods, scores, unavailable, timings, counts, resized=resized_outputs)


# ---- analysis -------------------------------------------------------------------------------------------

def rank_methods(aggregates: dict[str, float], higher_is_better: bool, order: list[str]) -> tuple[list[str], dict[str, int]]:
    """Methods best first (ties keep the given order) and their ranks (1 = best; ties share the lowest rank)."""
    from scipy.stats import rankdata

    oriented = [aggregates[m] if higher_is_better else -aggregates[m] for m in order]
    ranking = [m for _, _, m in sorted((-o, i, m) for i, (o, m) in enumerate(zip(oriented, order)))]
    ranks = rankdata([-o for o in oriented], method="min")
    return ranking, {m: int(r) for m, r in zip(order, ranks)}


def _finite(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _paired_family(scores: dict[str, np.ndarray], names: list[str], protocol: Protocol, metric: str) -> dict:
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
    return {
        (a, b): {"p": p, "p_holm": ph, "significant": ph < alpha} for (a, b), p, ph in zip(pairs, tests, adjusted)
    }


def analyse(result: SensitivityResult) -> dict:
    from scipy.stats import kendalltau

    base = result.base
    names = [m.name for m in result.methods]
    ranked = base.ranked_metrics
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
            key = (m, json.dumps(v.protocol.section("comparison"), sort_keys=True),
                   tuple(np.asarray(result.scores[v.id][m][n], dtype=np.float64).tobytes() for n in names))
            if key not in tested:
                tested[key] = _paired_family(result.scores[v.id][m], names, v.protocol, m)
            families[(v.id, m)] = tested[key]
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
    paired_tests = {
        v.id: {
            m: [{"a": a, "b": b, **{k: (bool(x) if k == "significant" else x) for k, x in t.items()}} for (a, b), t in families[(v.id, m)].items()]
            for m in ranked
            if (v.id, m) in families
        }
        for v in variants
    }
    plan = plan_units(variants)
    variants_json = []
    for v in variants:
        entry = {"id": v.id, "description": v.description, "file": v.file, "changes": v.changes, "sha256": v.sha256}
        # metrics whose per-pair computation or aggregation differs from the protocol's
        entry["affects"] = [
            m for m in base.metric_names
            if v.id != BASE_ID and (plan[(v.id, m)] != plan[(BASE_ID, m)] or metric_statistic(v.protocol, m) != metric_statistic(base, m))
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
    return {
        "track": result.track.id,
        "protocol": base.id,
        "protocol_sha256": base.sha256,
        "dataset_revision": result.track.revision,
        "dataset": result.track.dataset_id,
        "n_pairs": len(result.track.pairs),
        "methods": names,
        "method_specs": {m.name: m.spec for m in result.methods},
        "metrics": {m: {"label": base.metrics[m]["label"], "higher_is_better": bool(base.metrics[m]["higher_is_better"])} for m in ranked},
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
        "unavailable": [{"variant": v, "metric": m, "reason": r} for (v, m), r in sorted(result.unavailable.items(), key=lambda x: (_vorder(variants, x[0][0]), x[0][1]))],
        "computations": result.counts,
        # outputs of another size than the reference, resized to it under --allow-resize (a deviation)
        "resized": result.resized,
        "timings": {},
    }


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


def analysis_tables(analysis: dict, base: Protocol, tablefmt: str = "simple", reason_width: int | None = None) -> list[tuple[str, str]]:
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
                [vid + ("" if stat == "mean" else f" ({stat})"), *[_fmt(agg[n], dec) for n in names],
                 " > ".join(analysis["rankings"][vid][m]), _fmt(tau, 2),
                 f"{len(sw)} ({sum(s['base_significant'] for s in sw)}/{sum(s['variant_significant'] for s in sw)})" if vid != BASE_ID else ""]
            )
        arrow = "↑" if info["higher_is_better"] else "↓"
        headers = ["variant", *names, "ranking (best first)", "Kendall τ", "swaps (sig. base/variant)"]
        out.append((f"{info['label']}{arrow}", tabulate(rows, headers=headers, tablefmt=tablefmt, disable_numparse=True)))
    if analysis["swaps"]:
        rows = [
            [s["variant"], analysis["metrics"][s["metric"]]["label"], " > ".join(s["base_order"]), " > ".join(s["variant_order"]),
             f"{s['base_p_holm']:.3g}" + (" *" if s["base_significant"] else ""),
             f"{s['variant_p_holm']:.3g}" + (" *" if s["variant_significant"] else "")]
            for s in analysis["swaps"]
        ]
        out.append(("Swaps (order under the protocol vs the variant; * = significant after Holm)",
                    tabulate(rows, headers=["variant", "metric", "protocol order", "variant order", "p Holm (protocol)", "p Holm (variant)"], tablefmt=tablefmt, disable_numparse=True)))
    else:
        out.append(("Swaps", "no method pair changes order under any variant"))
    if analysis["unavailable"]:
        rows = [[u["variant"], u["metric"], _shorten(u["reason"], reason_width)] for u in analysis["unavailable"]]
        out.append(("Unavailable", tabulate(rows, headers=["variant", "metric", "reason"], tablefmt=tablefmt, disable_numparse=True)))
    return out


def analysis_markdown(analysis: dict, base: Protocol) -> str:
    lines = [
        f"# Protocol sensitivity: track {analysis['track']}",
        "",
        f"Protocol `{analysis['protocol']}` (sha256 `{analysis['protocol_sha256'][:12]}`), dataset "
        f"`{analysis['dataset']}@{analysis['dataset_revision']}`, {analysis['n_pairs']} pairs, methods: "
        + ", ".join(f"`{n}`" for n in analysis["methods"]) + ".",
        "",
        "Aggregates per variant (the statistic is the mean over pairs unless noted), the ranking (best first), "
        "Kendall τ between the protocol's ranking and the variant's (scipy.stats.kendalltau, τ-b), and the method "
        "pairs that swap order. Each metric's table shows the protocol and the variants that change that metric "
        "(analysis.json has every variant). Paired tests: " + analysis["tests"]["test"] + "; " + analysis["tests"]["family"]
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
    lines += ["", "## Timings", "", f"Total {t['total_s']:.1f} s; per variant (shared work counted once, under the first "
              "variant that needs it): " + ", ".join(f"{k} {s:.1f} s" for k, s in t["per_variant_s"].items()) + "."]
    return "\n".join(lines) + "\n"


def write_outputs(out_dir: Path, result: SensitivityResult, analysis: dict) -> None:
    """scores.csv, analysis.md, then analysis.json, each atomically (analysis.json last)."""
    from pytest_pstbench.core.runs import dumps_json, write_atomic

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    old = out_dir / "analysis.json"
    if old.exists():  # an older analysis must not vouch for new scores while they are written
        old.unlink()
    write_atomic(out_dir / "scores.csv", scores_csv(result))
    write_atomic(out_dir / "analysis.md", analysis_markdown(analysis, result.base))
    write_atomic(out_dir / "analysis.json", dumps_json(analysis))


def run_sensitivity(
    track, base: Protocol, variants: list[Variant], methods: list[Method], *, device: str = "cpu", out_dir: Path | None = None,
    allow_resize: bool = False, progress=None
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
        "per_variant_s": {k: round(s, 3) for k, s in result.timings["per_variant_s"].items()},
    }
    result.analysis = analysis
    if out_dir is not None:
        write_outputs(out_dir, result, analysis)
    return result
