"""Protocol sensitivity: score methods under the protocol and its evaluation variants, then compare
the rankings (Kendall tau), and list method pairs that swap order with their paired significance.

Work is shared: each image is decoded once per (method, pair), resized once per evaluation
resolution, and each distinct computation (metric parameters, per-pair quantity, effective
resolution) is done once per (method, pair); a variant that does not change a metric reuses the
value of the protocol (or of an earlier variant). Values come from the metric engine that `pstbench
score` uses (`metrics/scorer.py`: `MetricComputer.value`), so the protocol's own row equals a `score`
run bit for bit. LPIPS is computed from per-image backbone features: the reference's (and style's)
once per pair, LPIPS parameters and evaluation size, shared by all methods, an output's once per
(method, pair, parameters, size); the pairs are scored one after the other and each pair's features
are dropped after it. The analysis (rankings, Kendall tau, swaps, files) and the command's run
(`run_sensitivity`: score, analyse, write) are `sensitivity_analysis.py`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.jsonfile import loads
from pytest_pstbench.paired.planner import Unit, plan_units
from pytest_pstbench.paired.protocol import PairedProtocol
from pytest_pstbench.paired.resolution import evaluation_resolution, res_key, resize_image
from pytest_pstbench.paired.variants import BASE_ID, Variant


@dataclass(frozen=True)
class Method:
    name: str
    spec: str  # the PATH of NAME=PATH as given
    outputs: dict  # pair id -> Path


@dataclass
class SensitivityResult:
    track: object
    base: PairedProtocol
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
            raise UserError(
                f"method spec {spec!r}: NAME {name!r} is given twice; fix: give each method a distinct NAME"
            )
        seen.add(name)
        out.append((name, path))
    if len(out) < 2:
        raise UserError(
            "sensitivity needs at least two methods (NAME=PATH ...) to rank; fix: add another method, e.g. identity=identity"
        )
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


class _Computer:
    """Computes a unit's value on one image pair through the metric engine (`MetricComputer.value`, the
    code `pstbench score` computes through), with the stores of per-image halves (LPIPS features):
    those of the reference or style are kept until `new_pair`, those of an output until `new_method`,
    so at most one pair's features are held."""

    def __init__(self, device: str):
        from pytest_pstbench.paired.engine import metric_computer

        self.engine = metric_computer(device)
        self._pair_features: dict[tuple, list] = {}  # (feature key, (role, size)) -> features of reference/style
        self._output_features: dict[tuple, list] = {}  # the same for the current method's output

    @property
    def calls(self) -> int:
        return self.engine.calls

    @property
    def feature_passes(self) -> int:  # LPIPS backbone passes (one per image and feature key)
        return self.engine.feature_passes

    def new_pair(self) -> None:
        self._pair_features.clear()
        self._output_features.clear()

    def new_method(self) -> None:
        self._output_features.clear()

    def __call__(self, unit: Unit, output: np.ndarray, other: np.ndarray, keys: tuple) -> float:
        """`keys`: (output's, other's) identity within the pair, (role, evaluation size)."""
        return self.engine.value(
            loads(unit.params_key),
            output,
            other,
            quantity=unit.quantity,
            stores=(self._pair_features, keys[1], self._output_features, keys[0]),
        )


# ---- scoring --------------------------------------------------------------------------------------------


def score_variants(
    track,
    base: PairedProtocol,
    variants: list[Variant],
    methods: list[Method],
    *,
    device: str = "cpu",
    allow_resize: bool = False,
    progress=None,
) -> SensitivityResult:
    """Every (variant, metric, method, pair) value, computing each distinct unit once per (method, pair)."""
    scoring = _VariantScoring(base, variants, methods, device, allow_resize)
    for i, pair in enumerate(track.pairs, 1):
        t_pair = time.perf_counter()
        pair_computed = scoring.score_pair(pair)
        if progress:
            progress(
                f"[{i}/{len(track.pairs)}] {pair.id}: {len(methods)} methods x {len(variants)} variants, "
                f"{pair_computed} computations ({time.perf_counter() - t_pair:.1f} s)"
            )
    return scoring.result(track)


class _VariantScoring:
    """The state of `score_variants`: the values so far, the (variant, metric)s found unavailable, the time per
    variant, the counts; one pair at a time."""

    def __init__(self, base, variants: list[Variant], methods: list[Method], device: str, allow_resize: bool):
        self.t_start = time.perf_counter()
        self.base, self.variants, self.methods, self.allow_resize = base, variants, methods, allow_resize
        self.plan = plan_units(variants)
        self.computer = _Computer(device)
        self.per_variant = {v.id: 0.0 for v in variants}
        self.unavailable: dict[tuple[str, str], str] = {}
        self.values: dict[tuple[str, str, str], list[float]] = {
            (v.id, m, meth.name): [] for v in variants for m in v.protocol.metrics for meth in methods
        }
        self.n_values = self.n_computed = 0
        self.resized_outputs: list[dict] = []  # --allow-resize
        self.res_specs = {
            res_key(evaluation_resolution(v.protocol)): evaluation_resolution(v.protocol) for v in variants
        }
        self.full = res_key({"mode": "full"})
        self.resized: dict[tuple[str, str], np.ndarray] = {}  # the current pair's, shared by all its methods

    def at(self, role: str, arr: np.ndarray, rk: str, vid: str) -> np.ndarray:
        if (role, rk) not in self.resized:
            t = time.perf_counter()
            self.resized[(role, rk)] = resize_image(arr, self.res_specs[rk])
            self.per_variant[vid] += time.perf_counter() - t
        return self.resized[(role, rk)]

    def score_pair(self, pair) -> int:
        """Score every method's output of `pair` under every variant; the number of values computed."""
        from pytest_pstbench.paired.imageio import load_dataset_image

        t0 = time.perf_counter()
        reference = load_dataset_image(pair.reference, self.base, role=f"reference of {pair.id}").array
        style = load_dataset_image(pair.style, self.base, role=f"style of {pair.id}").array
        self.per_variant[BASE_ID] += time.perf_counter() - t0
        self.resized = {}
        pair_computed = 0
        self.computer.new_pair()
        for meth in self.methods:
            self.computer.new_method()
            output = self._output(meth, pair, reference)
            done: dict[tuple, tuple[bool, object]] = {}  # effective unit -> (ok, value or reason)
            for v in self.variants:
                for m in v.protocol.metrics:
                    if (v.id, m) not in self.unavailable:
                        pair_computed += self._value(v, m, meth, pair, (output, reference, style), done)
        self.n_computed += pair_computed
        self.computer.new_pair()  # this pair's LPIPS features are not needed any more
        return pair_computed

    def _output(self, meth: Method, pair, reference: np.ndarray) -> np.ndarray:
        from pytest_pstbench.paired.imageio import fit_to_reference, load_output, output_rules

        t0 = time.perf_counter()
        out_path = Path(meth.outputs[pair.id])
        # the Identity method's "output" is the dataset's content image (dataset image rules)
        loaded = load_output(
            out_path,
            output_rules(out_path, pair.content),
            self.base,
            role=f"output of {meth.name}",
            expected_size=(reference.shape[1], reference.shape[0]),
            allow_resize=self.allow_resize,
        )
        fitted = fit_to_reference(loaded, reference.shape, out_path, self.base, allow_resize=self.allow_resize)
        if "resized" in fitted.notes:
            self.resized_outputs.append({"method": meth.name, "pair": pair.id, **fitted.notes["resized"]})
        self.per_variant[BASE_ID] += time.perf_counter() - t0
        return fitted.array

    def _value(self, v: Variant, m: str, meth: Method, pair, images: tuple, done: dict) -> int:
        """Record the value of metric `m` under variant `v` (computed, or taken from `done` where an earlier
        variant's unit is the same); 1 when it was computed, else 0."""
        output, reference, style = images
        unit = self.plan[(v.id, m)]
        against = v.protocol.metrics[m]["against"]
        other_arr = reference if against == "reference" else style
        out_role = f"output:{meth.name}"
        o = self.at(out_role, output, unit.resolution, v.id)
        r = self.at(against, other_arr, unit.resolution, v.id)
        # A resolution that leaves both images as they are is the full resolution.
        eff = unit.resolution if (o is not output or r is not other_arr) else self.full
        key = (unit.params_key, unit.quantity, eff)
        computed = 0
        if key not in done:
            t = time.perf_counter()
            try:
                keys = (
                    (out_role, unit.resolution if o is not output else self.full),
                    (against, unit.resolution if r is not other_arr else self.full),
                )
                value = self.computer(unit, o, r, keys)
                done[key] = (
                    (True, value)
                    if math.isfinite(value)
                    else (False, f"{m} gave a non-finite value ({value}) (pair {pair.id}, method {meth.name})")
                )
            except UserError as exc:
                done[key] = (False, f"{exc} (pair {pair.id}, method {meth.name})")
            self.per_variant[v.id] += time.perf_counter() - t
            computed = 1
        ok, value = done[key]
        if not ok:
            self.unavailable[(v.id, m)] = str(value)
            return computed
        self.values[(v.id, m, meth.name)].append(float(value))
        self.n_values += 1
        return computed

    def result(self, track) -> SensitivityResult:
        scores: dict = {}
        for v in self.variants:
            scores[v.id] = {}
            for m in v.protocol.metrics:
                if (v.id, m) in self.unavailable:
                    continue
                scores[v.id][m] = {
                    meth.name: np.asarray(self.values[(v.id, m, meth.name)], dtype=np.float64) for meth in self.methods
                }
        timings = {
            "scoring_s": time.perf_counter() - self.t_start,
            "per_variant_s": self.per_variant,
            "lpips_backbone_s": self.computer.engine.feature_seconds,
        }
        counts = {
            "values": self.n_values,
            "computed": self.n_computed,
            "reused": self.n_values - self.n_computed,
            "lpips_feature_passes": self.computer.feature_passes,
        }
        return SensitivityResult(
            track,
            self.base,
            self.variants,
            self.methods,
            scores,
            self.unavailable,
            timings,
            counts,
            resized=self.resized_outputs,
        )
