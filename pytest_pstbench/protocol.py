"""Load and validate a protocol file (`protocols/*.yaml`); its id and sha256.

The protocol is data: every scoring parameter comes from the file, never from code.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import UserError

KNOWN_KINDS = ("psnr", "ssim", "lpips", "ciede2000", "hist_corr")
_REQUIRED_METRIC_KEYS = ("kind", "label", "higher_is_better", "ranked", "against")


def protocols_dir() -> Path:
    """The folder with the protocol files shipped with the package."""
    try:
        from importlib.resources import files

        p = Path(str(files("pytest_pstbench.protocols")))
        if (p / "pstbench.yaml").is_file():
            return p
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - running from a source tree
        pass
    return Path(__file__).resolve().parent.parent / "protocols"


@dataclass(frozen=True)
class Protocol:
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


def load_protocol(spec: str | Path | None = None) -> Protocol:
    """Load a protocol by id (a file shipped in `protocols/`) or by path. Default: `pstbench`."""
    spec = "pstbench" if spec is None else spec
    path = Path(spec)
    if not path.suffix:
        path = protocols_dir() / f"{spec}.yaml"
    if not path.is_file():
        raise UserError(
            f"{path}: protocol file not found; give a protocol id shipped with pstbench "
            f"({', '.join(sorted(p.stem for p in protocols_dir().glob('*.yaml')))}) or a path to a YAML file"
        )
    raw = path.read_bytes()
    import yaml

    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not valid YAML ({str(exc).splitlines()[0]}); fix the file's syntax") from None
    if isinstance(data, dict) and data.get("kind") == "selection":  # selection protocols (e.g. vab)
        from .selection.protocol import validate_selection_protocol

        validate_selection_protocol(path, data)
    else:
        _validate(path, data)
    return Protocol(id=data["id"], path=path.resolve(), sha256=hashlib.sha256(raw).hexdigest(), data=data)


def _validate(path: Path, data: Any) -> None:
    def bad(rule: str) -> UserError:
        return UserError(f"{path}: invalid protocol: {rule}")

    if not isinstance(data, dict):
        raise bad("the file must be a mapping with keys id, io, resolution, metrics, aggregation")
    for key in ("id", "io", "resolution", "metrics", "aggregation"):
        if key not in data:
            raise bad(f"missing top-level key '{key}'")
    metrics = data["metrics"]
    if not isinstance(metrics, dict) or not metrics:
        raise bad("'metrics' must be a non-empty mapping of metric name -> parameters")
    for name, params in metrics.items():
        if not isinstance(params, dict):
            raise bad(f"metrics.{name} must be a mapping")
        for key in _REQUIRED_METRIC_KEYS:
            if key not in params:
                raise bad(f"metrics.{name} lacks '{key}'")
        if params["kind"] not in KNOWN_KINDS:
            raise bad(f"metrics.{name}.kind '{params['kind']}' is not one of {', '.join(KNOWN_KINDS)}")
        if params["against"] not in ("reference", "style"):
            raise bad(f"metrics.{name}.against must be 'reference' or 'style'")
    comparison = data.get("comparison")
    if comparison is not None:
        for key in ("zero_method", "alternative", "alpha", "bootstrap"):
            if key not in comparison:
                raise bad(f"comparison lacks '{key}'")
    boot = data["aggregation"].get("bootstrap", {})
    for key in ("confidence", "resamples", "seed"):
        if key not in boot:
            raise bad(f"aggregation.bootstrap lacks '{key}'")
