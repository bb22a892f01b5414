"""Is a track spec a selection track? Standard library only: the pytest plugin asks this before
it decides which run object to load, without importing numpy or yaml."""
from __future__ import annotations

import re
from pathlib import Path

#: Built-in selection tracks (remote `vab`, generated `vab-demo`).
BUILTIN_SELECTION_TRACKS = ("vab", "vab-demo")

_KIND_LINE = re.compile(r"^kind:\s*['\"]?selection['\"]?\s*(#.*)?$", re.MULTILINE)


def manifest_path(spec: str | Path) -> Path | None:
    """The manifest file a local track spec points at (a YAML file, or a folder with track.yaml)."""
    path = Path(spec)
    if path.is_dir():
        path = path / "track.yaml"
    return path if path.is_file() else None


def is_selection_track(spec: str | Path, *bases: Path) -> bool:
    """True for a built-in selection track or a manifest with a top-level `kind: selection` line.

    A relative path is tried as given, then relative to each of `bases` (e.g. the ini file's folder).
    """
    if str(spec) in BUILTIN_SELECTION_TRACKS:
        return True
    candidates = [Path(spec)] + ([Path(b) / spec for b in bases] if not Path(spec).is_absolute() else [])
    for cand in candidates:
        path = manifest_path(cand)
        if path is None:
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                head = fh.read(65536)
        except OSError:
            return False
        return bool(_KIND_LINE.search(head))
    return False
