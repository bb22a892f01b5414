"""Per-pair score cache: re-scoring unchanged outputs costs a hash and a small JSON read.

An entry is keyed by everything that determines a pair's scores: the output file's sha256, the
track's dataset id and revision, the pair id, the protocol file's sha256, whether resizing was
allowed, the LPIPS device, and the versions of the metric implementations (this package, numpy,
scikit-image, pillow, torch, torchvision, lpips). Entries are written atomically (temporary file +
rename), so concurrent xdist workers never see a half-written one; an unreadable or inconsistent
entry is ignored and recomputed.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path

from .paths import cache_dir

FORMAT = 1


@lru_cache(maxsize=1)
def implementation_versions() -> tuple[tuple[str, str | None], ...]:
    from importlib import metadata

    out = []
    for dist in ("pytest-pstbench", "numpy", "scikit-image", "pillow", "torch", "torchvision", "lpips"):
        try:
            out.append((dist, metadata.version(dist)))
        except metadata.PackageNotFoundError:
            out.append((dist, None))
    return tuple(out)


class ScoreCache:
    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root is not None else cache_dir() / "scores"

    def key(self, *, output_sha256: str, dataset_id: str, revision: str, pair_id: str, protocol_sha256: str,
            allow_resize: bool, device: str) -> str:
        material = {
            "format": FORMAT,
            "output": output_sha256,
            "dataset": dataset_id,
            "revision": revision,
            "pair": pair_id,
            "protocol": protocol_sha256,
            "allow_resize": bool(allow_resize),
            "device": device,
            "versions": implementation_versions(),
        }
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str, metric_names: list[str]) -> dict | None:
        """The cached {"metrics", "notes"} for `key`, or None when absent or unusable."""
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
            if data.get("key") != key:
                return None
            metrics = data["metrics"]
            if list(metrics) != list(metric_names) or not all(isinstance(v, float) for v in metrics.values()):
                return None
            notes = data.get("notes", {})
            if not isinstance(notes, dict):
                return None
            return {"metrics": metrics, "notes": notes}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def put(self, key: str, metrics: dict, notes: dict) -> None:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:8]}.", suffix=".tmp", dir=path.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"key": key, "metrics": metrics, "notes": notes}, fh, allow_nan=False)
            os.replace(tmp, path)
        except OSError:  # a read-only or full cache must not fail a run
            try:
                os.unlink(tmp)  # type: ignore[possibly-undefined]
            except (OSError, NameError):
                pass
