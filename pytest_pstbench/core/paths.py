"""Where pstbench keeps its caches and data; file hashing (standard library only)."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path


def cache_dir() -> Path:
    """`$PSTBENCH_CACHE`, else `~/.cache/pstbench`."""
    env = os.environ.get("PSTBENCH_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "pstbench"


def data_dir() -> Path:
    """`$PSTBENCH_DATA`, else `<cache dir>/data`."""
    env = os.environ.get("PSTBENCH_DATA")
    return Path(env).expanduser() if env else cache_dir() / "data"


def shown(text: str) -> str:
    """`text` as it can be printed: a byte of a file-system name that is not UTF-8 (held as a lone surrogate,
    Python's surrogateescape) shown as \\xNN."""
    return str(text).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def refuse_non_utf8(args, *, what: str = "argument") -> None:
    """Refuse, before any work, an argument holding a byte that is not UTF-8 (a path as the OS gives it): the
    command and its paths are recorded as UTF-8 text (run files are JSON, pages and tables UTF-8), where such a
    name cannot be written; one UserError naming it."""
    from pytest_pstbench.core.errors import UserError

    for arg in args:
        try:
            str(arg).encode("utf-8")
        except UnicodeEncodeError:
            raise UserError(
                f"{what} {shown(arg)}: holds a byte that is not UTF-8; pstbench records its command and paths as "
                "UTF-8 text (run files are JSON), so such a name is refused before any work; fix: rename it to a "
                "UTF-8 name (or give it through a link that has one)"
            ) from None


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


#: A cache entry's file name: its key (64 hex digits) and `.json` (the score and the response caches).
CACHE_ENTRY = re.compile(r"[0-9a-f]{64}\.json")


def files_within(root: Path, name: re.Pattern | None = None) -> list[Path]:
    """Every regular file below `root` (sorted) whose name `name` fully matches (every one without it), found
    without following a symbolic link: a linked folder is not entered and a link is not listed, so whatever a
    prune removes lies within `root` (issue #54: a link in the response cache made `cache prune --responses`
    delete the files it pointed at)."""
    out: list[Path] = []
    stack = [Path(root)]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            continue
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append(Path(e.path))
                elif e.is_file(follow_symlinks=False) and (name is None or name.fullmatch(e.name)):
                    out.append(Path(e.path))
            except OSError:
                continue
    return sorted(out)
