"""Load and validate a protocol file (`protocols/*.yaml`); its id and sha256; its typed sections.
The rules a file must follow are its kind's (`KindSpec.validate_protocol`: paired/protocol.py,
selection/protocol.py), checked at load.

The protocol is data: every scoring parameter comes from the file, never from code.
"""

from __future__ import annotations

import copy
import hashlib
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pytest_pstbench.core.errors import UserError, did_you_mean

# ---- numeric ranges: the rules every kind's protocol validation applies to a number (docs/protocol.md, "Ranges")
MAX_RESAMPLES = 10_000_000  # a bootstrap beyond this is a typo (and would not fit in memory)
MAX_SEED = 2**64 - 1  # numpy.random.default_rng seeds
MAX_VERSION = 1_000_000  # a protocol's `version`: an integer >= 1
MAX_SIMULATIONS = 1_000_000  # `comparison.power.simulations`: more is a typo (and would not finish)


def _finite_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def number_problem(
    value: Any,
    key: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> str | None:
    """`key must be a finite number ...` when `value` is not a finite number in the range, else None."""
    ok = _finite_number(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if ok:
        return None
    lo = "" if low is None else f"{'>' if low_open else '>='} {low:g}"
    hi = "" if high is None else f"{'<' if high_open else '<='} {high:g}"
    rng = " and ".join(x for x in (lo, hi) if x)
    return f"{key} must be a finite number{' ' + rng if rng else ''} (got {value!r})"


def integer_problem(value: Any, key: str, *, low: int, high: int) -> str | None:
    """`key must be an integer >= low and <= high` when `value` is not such an integer, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return None
    return f"{key} must be an integer >= {low} and <= {high} (got {value!r})"


def bootstrap_problem(
    boot: Any, key: str, methods: tuple[str, ...] = ("percentile",), units: tuple[str, ...] = ("pair",)
) -> str | None:
    """The first rule a `bootstrap` section (method, confidence, resamples, seed, optional unit: what is
    resampled, `pair` or, where the kind allows it, `cluster`) breaks, or None."""
    if not isinstance(boot, dict):
        return f"{key} must be a mapping"
    if "unit" in boot and boot["unit"] not in units:
        return f"{key}.unit must be {' or '.join(units)} (got {boot['unit']!r})"
    for k in ("confidence", "resamples", "seed"):
        if k not in boot:
            return f"{key} lacks '{k}'"
    if "method" in boot and boot["method"] not in methods:
        return f"{key}.method must be {' or '.join(methods)} (got {boot['method']!r})"
    if "min_clusters" in boot and boot.get("unit") != "cluster":
        return f"{key}.min_clusters applies only with {key}.unit cluster"
    return (
        number_problem(boot["confidence"], f"{key}.confidence", low=0, high=1, low_open=True, high_open=True)
        or integer_problem(boot["resamples"], f"{key}.resamples", low=1, high=MAX_RESAMPLES)
        or integer_problem(boot["seed"], f"{key}.seed", low=0, high=MAX_SEED)
        or integer_problem(boot.get("min_clusters", 1), f"{key}.min_clusters", low=1, high=MAX_RESAMPLES)
    )


def protocols_dir() -> Path:
    """The folder with the protocol files shipped with the package.

    `pytest_pstbench.protocols` (and its `tracks`, `variants`) are regular packages holding only
    YAML files, so `importlib.resources.files` gives their folder on disk for every installed form
    (wheel, editable, source checkout). An installation whose package data is not on the file system
    (e.g. a zip) is refused with one line instead of reading files from somewhere else.
    """
    from importlib.resources import files

    root = files("pytest_pstbench.protocols")
    if not isinstance(root, Path) or not (root / "pstbench.yaml").is_file():
        raise UserError(
            f"{root}: the protocol files shipped with pytest-pstbench are not readable as files here; "
            "fix: install pytest-pstbench from its wheel or source (pip install), not as a zip"
        )
    return root


@dataclass(frozen=True)
class Protocol:
    """A loaded, validated protocol file. `data` is the parsed YAML; the sections the engine computes
    with are also read into typed, immutable objects (`io`, `resolution`, `aggregation`, `comparison`;
    the metric entries are checked and applied through the metric registry)."""

    id: str
    path: Path
    sha256: str
    data: dict = field(repr=False)

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

    @property
    def metrics(self) -> dict[str, dict[str, Any]]:
        """Metric name -> its parameters, in the file's order."""
        return self.data["metrics"]

    @property
    def metric_names(self) -> list[str]:
        return list(self.data["metrics"])

    @property
    def ranked_metrics(self) -> list[str]:
        return [m for m, p in self.metrics.items() if p["ranked"]]

    def section(self, name: str) -> dict[str, Any]:
        return self.data[name]


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
class PowerSection:
    """`comparison.power`: how the minimum detectable effect is simulated (paired/power.py). Optional: a
    protocol without it (the shipped ones) gets these defaults, which docs/protocol.md lists."""

    target: float = 0.8  # the power the minimum detectable effect reaches
    simulations: int = 2000  # simulated comparisons per power value
    seed: int = 0  # numpy.random.default_rng(seed)
    baseline_correlation: float = 0.5  # planning from a baseline alone: assumed correlation of the two runs' values

    @classmethod
    def of(cls, d: dict | None) -> PowerSection:
        d = d or {}
        base = cls()
        return cls(
            float(d.get("target", base.target)),
            int(d.get("simulations", base.simulations)),
            int(d.get("seed", base.seed)),
            float(d.get("baseline_correlation", base.baseline_correlation)),
        )


def power_problem(power: Any, key: str) -> str | None:
    """The first rule an optional `comparison.power` section breaks, or None (docs/protocol.md, "Ranges")."""
    if not isinstance(power, dict):
        return f"{key} must be a mapping"
    unknown = sorted(set(power) - {"target", "simulations", "seed", "baseline_correlation"})
    if unknown:
        return f"{key}.{unknown[0]} is not a key of {key} (target, simulations, seed, baseline_correlation)"
    checks = (
        ("target", lambda v, k: number_problem(v, k, low=0, high=1, low_open=True, high_open=True)),
        ("simulations", lambda v, k: integer_problem(v, k, low=100, high=MAX_SIMULATIONS)),
        ("seed", lambda v, k: integer_problem(v, k, low=0, high=MAX_SEED)),
        ("baseline_correlation", lambda v, k: number_problem(v, k, low=-1, high=1, high_open=True)),
    )
    for name, check in checks:
        if name in power:
            problem = check(power[name], f"{key}.{name}")
            if problem:
                return problem
    return None


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


def protocol_path(spec: str | Path | None = None) -> Path:
    """The file of protocol `spec`: an id (a file shipped in `protocols/`) or a path. Default: `pstbench`."""
    spec = "pstbench" if spec is None else spec
    path = Path(spec)
    return protocols_dir() / f"{spec}.yaml" if not path.suffix else path


def variant_spec(spec) -> tuple[str, str] | None:
    """`BASE+VARIANT` (a protocol id or path, a `+`, a shipped variant id: `pstbench+clustered`) -> (base, variant);
    None for a plain protocol id or path."""
    if not isinstance(spec, str) or "+" not in spec:
        return None
    base, _, variant = spec.rpartition("+")
    if not base or not variant or Path(variant).suffix or "/" in variant or "\\" in variant:
        return None
    return base, variant


def load_protocol(spec: str | Path | None = None) -> Protocol:
    """Load a protocol by id (a file shipped in `protocols/`) or by path. Default: `pstbench`.
    `BASE+VARIANT` is protocol BASE with the named variant of its kind applied (its id `BASE+VARIANT`, its path
    the variant file's, its sha256 that of the base's and the variant's digests: `kind.apply_variant`)."""
    composite = variant_spec(spec)
    if composite is not None:
        from pytest_pstbench.core.kinds import protocol_kind
        from pytest_pstbench.core.kinds import spec as kind_spec

        base = load_protocol(composite[0])
        kind = kind_spec(protocol_kind(base.data, base.path))
        if not kind.apply_variant:
            raise UserError(
                f"--protocol {spec}: protocols of kind {kind.name} have no named variants; "
                f"fix: give protocol {composite[0]} alone"
            )
        return kind.load("apply_variant")(base, composite[1])
    path = protocol_path(spec)
    if not path.is_file():
        shipped = sorted(p.stem for p in protocols_dir().glob("*.yaml"))
        raise UserError(
            f"{path}: protocol file not found{did_you_mean(spec, shipped)}; give a protocol id shipped with pstbench "
            f"({', '.join(shipped)}) or a path to a YAML file"
        )
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    from pytest_pstbench.core.kinds import protocol_kind, registered, spec

    key = (str(path.resolve()), digest, id(registered()))  # the kinds whose rules checked it (tests re-register)
    data = _VALIDATED.get(key)
    if data is None:
        from pytest_pstbench.core.files.yamlfile import parse_yaml

        data = parse_yaml(raw, path, "protocol")
        spec(protocol_kind(data, path)).load("validate_protocol")(
            path, data
        )  # its kind's rules (`kind:`, else the default)
        if len(_VALIDATED) >= 64:
            _VALIDATED.clear()
        _VALIDATED[key] = data
    return Protocol(id=data["id"], path=path.resolve(), sha256=digest, data=copy.deepcopy(data))


# (real path, sha256 of the bytes, the registry) -> the parsed data of a protocol file that passed its kind's rules: a file is
# parsed (pure-Python YAML, the slow part) and checked once per process and content; a changed file is read anew.
# Each Protocol gets its own copy of the data.
_VALIDATED: dict[tuple[str, str, int], dict] = {}
