"""Where pstbench keeps its caches and data (standard library only)."""
from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """`$PSTBENCH_CACHE`, else `~/.cache/pstbench`."""
    env = os.environ.get("PSTBENCH_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "pstbench"


def data_dir() -> Path:
    """`$PSTBENCH_DATA`, else `<cache dir>/data`."""
    env = os.environ.get("PSTBENCH_DATA")
    return Path(env).expanduser() if env else cache_dir() / "data"
