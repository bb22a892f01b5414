"""Protocol files made for tests from the shipped ones."""

from __future__ import annotations

from pathlib import Path

import yaml


def protocol_without_lpips(path: Path) -> Path:
    """A copy of the shipped protocol without the LPIPS metric (for fast engine tests)."""
    from pytest_pstbench.core.protocol import load_protocol

    data = yaml.safe_load(load_protocol().path.read_text())
    del data["metrics"]["lpips"]
    data["comparison"]["tie_threshold"].pop("lpips", None)  # a threshold must name a metric of the protocol
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return path
