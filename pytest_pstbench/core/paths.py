"""Where pstbench keeps its caches and data; file hashing and sniffing (standard library only)."""
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


def sniff_format(path: Path) -> str:
    """The image container from the file's first bytes: PNG, JPEG, WEBP, TIFF, or `other`."""
    with open(path, "rb") as fh:
        head = fh.read(16)
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if head.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "WEBP"
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "TIFF"
    return "other"
