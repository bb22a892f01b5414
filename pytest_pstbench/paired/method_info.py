"""The method's provenance a paired run records in run.json's `method`: `method.yaml` beside the outputs,
and `--method-info key=value` pairs.
"""

from __future__ import annotations

import os
from pathlib import Path

from pytest_pstbench.core.errors import UserError


def parse_method_info(items: list[str] | None) -> dict:
    """`key=value` strings -> dict (for --method-info)."""
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UserError(f"--method-info {item!r}: expected key=value (e.g. code=https://host/repo@abc123)")
        out[key.strip()] = value
    return out


def load_method_yaml(outputs_dir: Path | None) -> dict:
    """Method provenance from `method.yaml` beside the outputs, if present. One that is there but cannot be read
    (a folder, a broken or looping link) is a UserError, not a run without provenance."""
    if outputs_dir is None:
        return {}
    path = Path(outputs_dir) / "method.yaml"
    if not os.path.lexists(path):
        return {}
    from pytest_pstbench.core.files.yamlfile import json_ready, read_yaml

    data = read_yaml(path, "method.yaml")
    if not isinstance(data, dict):
        raise UserError(f"{path}: must be a mapping (e.g. code: URL@commit, weights: sha256, settings: ...)")
    return json_ready(data, path, "method.yaml")  # recorded in run.json as given (dates as ISO 8601 text)
