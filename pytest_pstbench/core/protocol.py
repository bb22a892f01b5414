"""Load and validate a protocol file (`protocols/*.yaml`); its id and sha256; its variants (`BASE+VARIANT`); the
range rules and the sections both kinds use (`bootstrap`, `comparison.power`). The rules a file must follow and
its kind's typed sections are its kind's (`KindSpec.validate_protocol`, `KindSpec.protocol_type`:
paired/protocol.py, selection/protocol.py), checked at load.

The protocol is data: every scoring parameter comes from the file, never from code.
"""

from __future__ import annotations

import copy
import hashlib
import math
from dataclasses import dataclass, field
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
    """A loaded, validated protocol file. `data` is the parsed YAML. A kind may read its sections into typed,
    immutable objects by a subclass its KindSpec names (`protocol_type`: paired.protocol.PairedProtocol's `io`,
    `resolution`, `aggregation`, `comparison`); `load_protocol` builds that class."""

    id: str
    path: Path
    sha256: str
    data: dict = field(repr=False)

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
    kind = spec(protocol_kind(data, path))
    made = kind.load("protocol_type") if kind.protocol_type else Protocol  # the kind's typed sections
    return made(id=data["id"], path=path.resolve(), sha256=digest, data=copy.deepcopy(data))


# (real path, sha256 of the bytes, the registry) -> the parsed data of a protocol file that passed its kind's rules: a file is
# parsed (pure-Python YAML, the slow part) and checked once per process and content; a changed file is read anew.
# Each Protocol gets its own copy of the data.
_VALIDATED: dict[tuple[str, str, int], dict] = {}
