"""The paired protocol: the validation of a file at load (every value of the right type and in range, known
values only; the first rule broken is one line naming the file, the key, the rule and the fix), and its
sections read into typed, immutable objects (`PairedProtocol`: `io`, `resolution`, `aggregation`,
`comparison` with its `sign_flip`; the metric entries are checked and applied through the metric registry).

What the engine can honour is listed here; a protocol value outside it is refused, never ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.images import MAX_PIXELS
from pytest_pstbench.core.protocol import (
    MAX_RESAMPLES,
    MAX_SEED,
    MAX_VERSION,
    PowerSection,
    Protocol,
    bootstrap_problem,
    integer_problem,
    number_problem,
    power_problem,
)
from pytest_pstbench.metrics import registry as _registry
from pytest_pstbench.metrics.registry import ENTRY_KEYS as _REQUIRED_METRIC_KEYS
from pytest_pstbench.metrics.registry import MAX_SIDE, RESIZE_FILTERS

KNOWN_KINDS = tuple(_registry.KINDS)

# What the engine can honour. A protocol value outside these is refused at load, never ignored.
IO_FORMATS = ("PNG",)  # method outputs are read as PNG only
IO_MODES = ("RGB",)  # metrics work on 8-bit HxWx3 RGB arrays
ICC_TARGETS = ("sRGB",)
RENDERING_INTENTS = ("perceptual", "relative_colorimetric", "saturation", "absolute_colorimetric")
SIZE_RULES = ("reference",)
STATISTICS = ("mean", "median")
PER_METRIC_STATISTICS = ("mean", "median", "pooled_mse")
RESOLUTION_MODES = ("full", "short_side", "fixed")
BOOTSTRAP_METHODS = ("percentile",)
ZERO_METHODS = ("wilcox", "pratt", "zsplit")  # scipy.stats.wilcoxon
WILCOXON_METHODS = ("auto", "exact", "approx")
ALTERNATIVES = ("two-sided", "less", "greater")
CORRECTIONS = ("holm",)
PAIRED_TESTS = ("wilcoxon", "cluster_sign_flip")  # the second: stats.sign_flip_test over clusters of pairs
BOOTSTRAP_UNITS = ("pair", "cluster")  # cluster: whole clusters resampled (stats.cluster_bootstrap_mean_ci)


class _Rules:
    """Checks of one protocol file; each failure is one line naming the file, the key, the rule and the fix."""

    def __init__(self, path):
        self.path = path

    def bad(self, rule: str) -> UserError:
        return UserError(f"{self.path}: invalid protocol: {rule}; fix: correct this value in the protocol file")

    def mapping(self, value: Any, key: str) -> dict:
        if not isinstance(value, dict):
            raise self.bad(f"{key} must be a mapping")
        return value

    def boolean(self, value: Any, key: str) -> None:
        if not isinstance(value, bool):
            raise self.bad(f"{key} must be true or false (got {value!r})")

    def number(
        self,
        value: Any,
        key: str,
        *,
        low: float | None = None,
        high: float | None = None,
        low_open: bool = False,
        high_open: bool = False,
    ) -> None:
        problem = number_problem(value, key, low=low, high=high, low_open=low_open, high_open=high_open)
        if problem:
            raise self.bad(problem)

    def integer(self, value: Any, key: str, *, low: int, high: int) -> None:
        problem = integer_problem(value, key, low=low, high=high)
        if problem:
            raise self.bad(problem)

    def choice(self, value: Any, key: str, allowed: tuple) -> None:
        if value not in allowed:
            raise self.bad(
                f"{key} must be {' or '.join(map(str, allowed)) if len(allowed) <= 2 else 'one of ' + ', '.join(map(str, allowed))} (got {value!r})"
            )

    def text(self, value: Any, key: str) -> None:
        if not isinstance(value, str) or not value.strip():
            raise self.bad(f"{key} must be a non-empty string (got {value!r})")

    def bootstrap(self, boot: Any, key: str) -> None:
        problem = bootstrap_problem(boot, key, BOOTSTRAP_METHODS, BOOTSTRAP_UNITS)
        if problem:
            raise self.bad(problem)


def validate(path: Path, data: Any) -> None:
    rules = _Rules(path)
    bad = rules.bad
    if not isinstance(data, dict):
        raise UserError(
            f"{path}: invalid protocol: the file must be a mapping with keys id, io, resolution, metrics, aggregation"
        )
    for key in ("id", "io", "resolution", "metrics", "aggregation"):
        if key not in data:
            raise bad(f"missing top-level key '{key}'")
    pid = data["id"]
    if not isinstance(pid, str) or not pid or "/" in pid or "\\" in pid or "\0" in pid or pid.startswith("."):
        raise bad(f"id must be a plain name (no '/', not starting with '.') (got {pid!r})")
    if "version" in data:
        rules.integer(data["version"], "version", low=1, high=MAX_VERSION)
    _validate_io(rules, data["io"])
    _validate_resolution(rules, data["resolution"])
    metrics = data["metrics"]
    if not isinstance(metrics, dict) or not metrics:
        raise bad("'metrics' must be a non-empty mapping of metric name -> parameters")
    for name, params in metrics.items():
        _validate_metric(rules, name, params)
    _validate_aggregation(rules, data["aggregation"], metrics)
    comparison = data.get("comparison")
    if comparison is not None:
        _validate_comparison(rules, comparison, metrics)


def _validate_io(rules: _Rules, io: Any) -> None:
    io = rules.mapping(io, "io")
    for key in ("format", "mode"):
        if key not in io:
            raise rules.bad(f"io lacks '{key}'")
    rules.choice(io["format"], "io.format", IO_FORMATS)
    rules.choice(io["mode"], "io.mode", IO_MODES)
    if "exif_orientation" in io:
        rules.boolean(io["exif_orientation"], "io.exif_orientation")
    if "max_pixels" in io:
        rules.integer(
            io["max_pixels"], "io.max_pixels", low=1, high=MAX_PIXELS
        )  # may lower the kit's limit, not raise it
    if io.get("icc") is not None:
        icc = rules.mapping(io["icc"], "io.icc")
        rules.choice(icc.get("target", "sRGB"), "io.icc.target", ICC_TARGETS)
        rules.choice(icc.get("rendering_intent", "perceptual"), "io.icc.rendering_intent", RENDERING_INTENTS)
    conv = io.get("allowed_conversions")
    if conv is not None:
        conv = rules.mapping(conv, "io.allowed_conversions")
        for mode, why in conv.items():
            if not isinstance(mode, str) or not isinstance(why, str):
                raise rules.bad(f"io.allowed_conversions.{mode} must map a Pillow mode to a reason (text)")


def _validate_resolution(rules: _Rules, res: Any) -> None:
    res = rules.mapping(res, "resolution")
    rules.choice(res.get("size"), "resolution.size", SIZE_RULES)
    if "allow_resize_filter" in res:
        rules.choice(res["allow_resize_filter"], "resolution.allow_resize_filter", RESIZE_FILTERS)
    ev = res.get("evaluate")
    if ev is None:
        return
    if not isinstance(ev, dict) or ev.get("mode") not in RESOLUTION_MODES:
        raise rules.bad(f"resolution.evaluate.mode must be one of {', '.join(RESOLUTION_MODES)}")
    mode = ev["mode"]
    want = {
        "full": {"mode"},
        "short_side": {"mode", "pixels", "filter"},
        "fixed": {"mode", "width", "height", "filter"},
    }[mode]
    if set(ev) != want:
        raise rules.bad(f"resolution.evaluate with mode {mode} takes exactly the keys {', '.join(sorted(want))}")
    for k in ("pixels", "width", "height"):
        if k in ev:
            rules.integer(ev[k], f"resolution.evaluate.{k}", low=1, high=MAX_SIDE)
    if mode == "fixed" and ev["width"] * ev["height"] > MAX_PIXELS:
        raise rules.bad(
            f"resolution.evaluate is {ev['width']} x {ev['height']} = {ev['width'] * ev['height']} pixels, over the "
            f"{MAX_PIXELS} pixels the kit scores (the largest image it decodes)"
        )
    if "filter" in ev and ev["filter"] not in RESIZE_FILTERS:
        raise rules.bad(
            f"resolution.evaluate.filter {ev['filter']!r} is not a PIL resampling filter ({', '.join(RESIZE_FILTERS)})"
        )


def _validate_metric(rules: _Rules, name: Any, params: Any) -> None:
    """The entry's common keys here; its kind's parameters and direction by the metric registry."""
    where = f"metrics.{name}"
    if not isinstance(params, dict):
        raise rules.bad(f"{where} must be a mapping")
    for key in _REQUIRED_METRIC_KEYS:
        if key not in params:
            raise rules.bad(f"{where} lacks '{key}'")
    if params["against"] not in ("reference", "style"):
        raise rules.bad(f"{where}.against must be 'reference' or 'style'")
    rules.text(params["label"], f"{where}.label")
    rules.boolean(params["higher_is_better"], f"{where}.higher_is_better")
    rules.boolean(params["ranked"], f"{where}.ranked")
    if "decimals" in params:
        rules.integer(params["decimals"], f"{where}.decimals", low=0, high=12)
    problem = _registry.entry_problem(name, params)
    if problem:
        raise rules.bad(problem)


def _validate_aggregation(rules: _Rules, agg: Any, metrics: dict) -> None:
    agg = rules.mapping(agg, "aggregation")
    rules.choice(agg.get("statistic", "mean"), "aggregation.statistic", STATISTICS)
    if "bootstrap" not in agg:
        raise rules.bad("aggregation lacks 'bootstrap'")
    rules.bootstrap(agg["bootstrap"], "aggregation.bootstrap")
    per = agg.get("per_metric")
    if agg["bootstrap"].get("unit") == "cluster":
        other = [
            s
            for s in [
                agg.get("statistic", "mean"),
                *((e or {}).get("statistic") if isinstance(e, dict) else None for e in (per or {}).values()),
            ]
            if s not in (None, "mean")
        ]
        if other:
            raise rules.bad(
                f"aggregation.bootstrap.unit cluster resamples cluster means: it needs the statistic mean "
                f"(got {other[0]})"
            )
    if per is None:
        return
    if not isinstance(per, dict):
        raise rules.bad("aggregation.per_metric must be a mapping of metric -> {statistic: ...}")
    for m, entry in per.items():
        if m not in metrics:
            raise rules.bad(f"aggregation.per_metric.{m}: no such metric")
        if (
            not isinstance(entry, dict)
            or set(entry) != {"statistic"}
            or entry["statistic"] not in PER_METRIC_STATISTICS
        ):
            raise rules.bad(f"aggregation.per_metric.{m} must be {{statistic: {'|'.join(PER_METRIC_STATISTICS)}}}")
        if entry["statistic"] == "pooled_mse" and metrics[m]["kind"] != "psnr":
            raise rules.bad(f"aggregation.per_metric.{m}: pooled_mse applies only to a metric of kind psnr")


def _validate_comparison(rules: _Rules, cmp: Any, metrics: dict) -> None:
    cmp = rules.mapping(cmp, "comparison")
    for key in ("zero_method", "alternative", "alpha", "bootstrap"):
        if key not in cmp:
            raise rules.bad(f"comparison lacks '{key}'")
    rules.choice(cmp.get("test", "wilcoxon"), "comparison.test", PAIRED_TESTS)
    rules.choice(cmp["zero_method"], "comparison.zero_method", ZERO_METHODS)
    rules.choice(cmp.get("method", "auto"), "comparison.method", WILCOXON_METHODS)
    rules.choice(cmp["alternative"], "comparison.alternative", ALTERNATIVES)
    rules.choice(cmp.get("correction", "holm"), "comparison.correction", CORRECTIONS)
    rules.number(cmp["alpha"], "comparison.alpha", low=0, high=1, low_open=True, high_open=True)
    rules.bootstrap(cmp["bootstrap"], "comparison.bootstrap")
    if cmp.get("test", "wilcoxon") == "cluster_sign_flip":
        problem = sign_flip_problem(cmp.get("sign_flip"), "comparison.sign_flip")
        if problem:
            raise rules.bad(problem)
    elif "sign_flip" in cmp:
        raise rules.bad("comparison.sign_flip applies only with comparison.test cluster_sign_flip")
    if cmp.get("power") is not None:  # optional: absent, the defaults of core.protocol.PowerSection
        problem = power_problem(cmp["power"], "comparison.power")
        if problem:
            raise rules.bad(problem)
    ties = cmp.get("tie_threshold")
    if ties is not None:
        ties = rules.mapping(ties, "comparison.tie_threshold")
        for m, thr in ties.items():
            if m not in metrics:
                raise rules.bad(f"comparison.tie_threshold.{m}: no such metric")
            rules.number(thr, f"comparison.tie_threshold.{m}", low=0)


# ---- the typed sections ------------------------------------------------------------------------------
@dataclass(frozen=True)
class PairedProtocol(Protocol):
    """A loaded, validated paired protocol (`load_protocol` builds it: the paired KindSpec's `protocol_type`):
    the sections the engine computes with, read into typed, immutable objects."""

    @cached_property
    def io(self) -> IOSection:
        return IOSection.of(self.data.get("io") or {})

    @cached_property
    def resolution(self) -> ResolutionSection:
        return ResolutionSection.of(self.data.get("resolution") or {})

    @cached_property
    def aggregation(self) -> AggregationSection:
        return AggregationSection.of(self.data.get("aggregation") or {})

    @cached_property
    def comparison(self) -> ComparisonSection:
        section = self.data.get("comparison")
        if section is None:
            raise UserError(
                f"{self.path}: protocol {self.id} has no comparison section, so runs under it cannot be compared; "
                "fix: add one (see the comparison section of the shipped protocols/pstbench.yaml)"
            )
        return ComparisonSection.of(section)


@dataclass(frozen=True)
class IOSection:
    """`io`: how an image file becomes the uint8 RGB array the metrics see (paired/imageio.py).
    Absent optional keys take the defaults that validation documents."""

    format: str  # the container accepted, checked from the file's bytes (PNG)
    mode: str  # the Pillow mode after decoding (RGB)
    exif_orientation: bool = True
    icc_target: str = "sRGB"
    rendering_intent: str = "perceptual"  # for converting another embedded ICC profile to sRGB
    allowed_conversions: dict = field(default_factory=dict)  # Pillow mode -> the reason it is allowed
    max_pixels: int | None = None  # None: the kit's own limit (imageio.MAX_PIXELS)

    @classmethod
    def of(cls, d: dict) -> IOSection:
        icc = d.get("icc") or {}
        return cls(
            str(d.get("format", "")),
            str(d.get("mode", "")),
            bool(d.get("exif_orientation", True)),
            str(icc.get("target", "sRGB")),
            str(icc.get("rendering_intent", "perceptual")),
            dict(d.get("allowed_conversions") or {}),
            int(d["max_pixels"]) if d.get("max_pixels") is not None else None,
        )


@dataclass(frozen=True)
class ResolutionSection:
    """`resolution`: outputs at the reference's size (`size`), the filter of --allow-resize, and the
    evaluation resolution every metric sees (`evaluate`; paired/resolution.py)."""

    size: str
    allow_resize_filter: str | None  # None: the protocol allows no resizing of outputs
    evaluate: (
        tuple  # the (key, value) items of `resolution.evaluate`, in the file's order; (("mode", "full"),) by default
    )

    @classmethod
    def of(cls, d: dict) -> ResolutionSection:
        ev = d.get("evaluate") or {"mode": "full"}
        filt = d.get("allow_resize_filter")
        return cls(str(d.get("size", "reference")), None if filt is None else str(filt), tuple(ev.items()))

    @property
    def evaluate_spec(self) -> dict:
        return dict(self.evaluate)


@dataclass(frozen=True)
class BootstrapSection:
    """A percentile bootstrap: `numpy.random.default_rng(seed)`, `resamples` resamples, the
    (1 - confidence)/2 and (1 + confidence)/2 quantiles."""

    confidence: float
    resamples: int
    seed: int
    method: str = "percentile"
    unit: str = (
        "pair"  # what is resampled: `pair`, or `cluster` (whole clusters of pairs; stats.cluster_bootstrap_mean_ci)
    )
    # With unit cluster: the fewest clusters an interval may rest on (the variant `clustered` says why its value);
    # over fewer, no interval is given and the entry says why (`too_few_clusters`). None: the protocol sets none.
    min_clusters: int | None = None

    @classmethod
    def of(cls, d: dict) -> BootstrapSection:
        return cls(
            float(d["confidence"]),
            int(d["resamples"]),
            int(d["seed"]),
            str(d.get("method", "percentile")),
            str(d.get("unit", "pair")),
            int(d["min_clusters"]) if "min_clusters" in d else None,
        )

    @property
    def clustered(self) -> bool:
        return self.unit == "cluster"

    def too_few_clusters(self, k: int) -> str | None:
        """Why an interval over `k` clusters is not given (fewer than `min_clusters`), or None."""
        if not self.clustered or self.min_clusters is None or k >= self.min_clusters:
            return None
        return (
            f"no interval: {k} cluster{'s' if k != 1 else ''}, fewer than the {self.min_clusters} a cluster "
            "bootstrap needs (bootstrap.min_clusters)"
        )

    def kwargs(self) -> dict:
        """The keyword arguments of `stats.bootstrap_mean_ci` / `stats.bootstrap_ci`."""
        return {"confidence": self.confidence, "resamples": self.resamples, "seed": self.seed}


@dataclass(frozen=True)
class AggregationSection:
    """`aggregation`: the statistic over pairs (per metric when `per_metric` says so) and its bootstrap."""

    statistic: str
    per_metric: dict
    bootstrap: BootstrapSection | None  # None only for the engine's one-metric protocols (no aggregation)

    @classmethod
    def of(cls, d: dict) -> AggregationSection:
        per = {m: str(e["statistic"]) for m, e in (d.get("per_metric") or {}).items()}
        boot = BootstrapSection.of(d["bootstrap"]) if d.get("bootstrap") else None
        return cls(str(d.get("statistic", "mean")), per, boot)

    def statistic_of(self, metric: str) -> str:
        return self.per_metric.get(metric, self.statistic)


@dataclass(frozen=True)
class SignFlipSection:
    """`comparison.sign_flip`: the sign-flip permutation test of cluster-mean differences
    (`stats.sign_flip_test`): exact over all 2^K sign patterns up to `exact_max_clusters` clusters, else
    `resamples` patterns drawn with `numpy.random.default_rng(seed)`."""

    exact_max_clusters: int
    resamples: int
    seed: int

    @classmethod
    def of(cls, d: dict | None) -> SignFlipSection | None:
        if not d:
            return None
        return cls(int(d["exact_max_clusters"]), int(d["resamples"]), int(d["seed"]))

    def kwargs(self) -> dict:
        return {"exact_max_clusters": self.exact_max_clusters, "resamples": self.resamples, "seed": self.seed}


MAX_EXACT_CLUSTERS = 24  # 2^24 sign patterns: a few seconds; beyond, Monte Carlo


def sign_flip_problem(section: Any, key: str) -> str | None:
    """The first rule a `comparison.sign_flip` section breaks, or None (docs/protocol.md, "Ranges")."""
    if not isinstance(section, dict):
        return f"{key} must be a mapping with exact_max_clusters, resamples, seed"
    for k in ("exact_max_clusters", "resamples", "seed"):
        if k not in section:
            return f"{key} lacks '{k}'"
    unknown = sorted(set(section) - {"exact_max_clusters", "resamples", "seed"})
    if unknown:
        return f"{key}.{unknown[0]} is not a key of {key} (exact_max_clusters, resamples, seed)"
    return (
        integer_problem(section["exact_max_clusters"], f"{key}.exact_max_clusters", low=0, high=MAX_EXACT_CLUSTERS)
        or integer_problem(section["resamples"], f"{key}.resamples", low=1, high=MAX_RESAMPLES)
        or integer_problem(section["seed"], f"{key}.seed", low=0, high=MAX_SEED)
    )


@dataclass(frozen=True)
class ComparisonSection:
    """`comparison`: the paired test between runs (scipy.stats.wilcoxon's settings), its ties, the
    correction, alpha, and the bootstrap of the mean difference."""

    zero_method: str
    alternative: str
    alpha: float
    bootstrap: BootstrapSection
    tie_threshold: dict
    method: str = "auto"
    test: str = "wilcoxon"
    correction: str = "holm"
    power: PowerSection = PowerSection()  # `comparison.power`, defaults when absent
    sign_flip: SignFlipSection | None = None  # `comparison.sign_flip`, with test `cluster_sign_flip`

    @classmethod
    def of(cls, d: dict) -> ComparisonSection:
        ties = {m: float(v) for m, v in (d.get("tie_threshold") or {}).items()}
        return cls(
            str(d["zero_method"]),
            str(d["alternative"]),
            float(d["alpha"]),
            BootstrapSection.of(d["bootstrap"]),
            ties,
            str(d.get("method", "auto")),
            str(d.get("test", "wilcoxon")),
            str(d.get("correction", "holm")),
            PowerSection.of(d.get("power")),
            SignFlipSection.of(d.get("sign_flip")),
        )

    def tie(self, metric: str) -> float:
        """Differences below this are ties (0 when the protocol names no threshold for the metric)."""
        return self.tie_threshold.get(metric, 0.0)
