"""Where pstbench keeps its caches and data; file hashing (standard library only)."""
from __future__ import annotations

import hashlib
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


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()

