"""Per-pair score cache: re-scoring unchanged outputs costs a hash and a small JSON read.

An entry is keyed by everything that determines a pair's scores: the sha256 of every file read (the
output, the reference and the style image; not a declared label), the I/O rules the output was read
under (`read_as`: the protocol's output rules, or the dataset image rules of the Identity run's content
images, so the same bytes refused as an output are never accepted through an entry the Identity run
wrote), the digest of the pretrained weights the metrics use (`weights`: LPIPS's backbone), the track's
dataset id and revision, the pair id, the protocol file's sha256, whether resizing was allowed, the
scoring device, the metric engine's number (`ENGINE`), the cache format (`FORMAT`) and the versions of
the metric implementations (this package, numpy, scikit-image, pillow, torch, torchvision, lpips). Each entry carries a digest of its key and content: an entry whose digest does
not match (edited, truncated, from another format) is a miss and is recomputed. Only finite values
are stored. Entries are written atomically (temporary file + rename), so concurrent xdist workers
never see a half-written one, and no temporary file is left behind.

Trust model: the digest detects accidental corruption and naive edits, not a deliberate forgery by
someone who can write the cache folder (they can recompute the digest). A cache must therefore only
come from trusted writers (in CI: restore it only from trusted branches); `--verify-cache N` rescoring
N random cached pairs checks a cache of unknown history.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.jsonfile import loads, read_json
from pytest_pstbench.core.paths import CACHE_ENTRY, cache_dir, files_within

#: What prune may remove: an entry (its key and `.json`) or a writer's temporary file (`.NAME.XXXX.tmp`).
_OWN_FILE = re.compile(rf"{CACHE_ENTRY.pattern}|\..+\.tmp")

# The key's format: 3 adds `read_as` and `weights` (an entry of format 2 may hold another weights' values,
# or a value of bytes read under the dataset's rules, so none of them is hit again).
FORMAT = 3
# The metric code's own version: bumped whenever a change to how the kit computes a metric can move a
# value, even in the last digits (3: the SSIM/CIEDE2000/H-Corr kernels of metrics/kernels.py; 4: sums in an
# order independent of torch's thread count, `kernels_color.sum64`; 5: SSIM's horizontal band of 24
# columns, which moves values by an ulp), so that an entry written by an earlier engine under the same
# package version never stands in for a fresh value.
ENGINE = 5

_FILE_HASHES: dict[tuple, str] = {}


def dataset_file_sha256(path: Path) -> str:
    """sha256 of a dataset file, computed once per process while the file is unchanged (same path, inode,
    size and modification time)."""
    from pytest_pstbench.core.paths import file_sha256

    real = os.path.realpath(path)
    st = os.stat(real)
    ident = (real, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    digest = _FILE_HASHES.get(ident)
    if digest is None:
        digest = _FILE_HASHES[ident] = file_sha256(Path(real))
    return digest


def entry_digest(key: str, metrics: dict, notes: dict) -> str:
    """The digest an entry carries: sha256 over its key, metrics and notes (canonical JSON)."""
    text = json.dumps({"key": key, "metrics": metrics, "notes": notes}, sort_keys=True, allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _finite(metrics: dict) -> bool:
    import math

    return all(isinstance(v, float) and math.isfinite(v) for v in metrics.values())


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


def made_by() -> dict:
    """The engine, cache format and implementation versions an entry is written by (part of its key): an
    entry made by others can never be hit again by this installation."""
    return {"format": FORMAT, "engine": ENGINE, "versions": dict(implementation_versions())}


@dataclass
class PruneReport:
    root: Path
    examined: int = 0
    removed: dict = field(default_factory=dict)  # reason -> count
    removed_bytes: int = 0
    kept: int = 0
    kept_unknown: int = 0  # entries written before `made_by` was recorded (kept unless old or --all)


def prune(
    root: Path | None = None,
    *,
    older_than_days: float | None = None,
    everything: bool = False,
    dry_run: bool = False,
    now: float | None = None,
) -> PruneReport:
    """Remove score cache entries that can no longer be hit or are not wanted (`pstbench cache prune`):
    entries made by another metric engine, cache format or implementation versions (`made_by`; their keys
    differ from any this installation computes), unreadable entries and leftover temporary files; with
    `older_than_days`, also entries not written for that many days; with `everything`, every entry.
    `dry_run`: count only. Other cache contents (LPIPS weights, fetched datasets, packages, run locks) are
    not touched: `pstbench weights` / `pstbench data` manage them; nor are files not named as the cache names
    its own, and no link is followed (`core.paths.files_within`)."""
    import time

    root = Path(root) if root is not None else cache_dir() / "scores"
    report = PruneReport(root)
    if not root.is_dir():
        return report
    now = time.time() if now is None else now
    current = loads(json.dumps(made_by()))  # as read back from JSON
    for path in files_within(root, _OWN_FILE):  # entries and temporary files; no link followed, no foreign file
        try:
            st = path.stat()
        except OSError:
            continue
        reason = None
        if path.suffix == ".tmp":
            reason = "leftover temporary file" if now - st.st_mtime > 3600 else None  # a writer may be using it
            if reason is None:
                continue
        elif path.suffix != ".json":
            continue
        else:
            report.examined += 1
            if everything:
                reason = "all entries (--all)"
            else:
                try:
                    entry = read_json(path)
                    made = entry.get("made_by") if isinstance(entry, dict) else None
                    ok = isinstance(entry, dict) and entry.get("key") == path.stem
                except (OSError, ValueError):
                    made, ok = None, False
                if not ok:
                    reason = "unreadable or damaged"
                elif made is not None and made != current:
                    reason = "made by another engine or package versions"
                elif older_than_days is not None and now - st.st_mtime > older_than_days * 86400:
                    reason = f"not written for {older_than_days:g} days"
        if reason is None:
            report.kept += 1
            if made is None:
                report.kept_unknown += 1
            continue
        if not dry_run:
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            except OSError:
                report.kept += 1
                continue
        report.removed[reason] = report.removed.get(reason, 0) + 1
        report.removed_bytes += st.st_size
    if not dry_run:
        for d in sorted((p for p in root.iterdir() if p.is_dir()), reverse=True):
            try:
                d.rmdir()  # only when empty
            except OSError:
                pass
    return report


class ScoreCache:
    def __init__(self, root: Path | None = None):
        self.root = Path(root) if root is not None else cache_dir() / "scores"

    def key(
        self,
        *,
        output_sha256: str,
        read_as: str,
        weights: dict,
        dataset_id: str,
        revision: str,
        pair_id: str,
        protocol_sha256: str,
        allow_resize: bool,
        device: str,
        reference_sha256: str | None = None,
        style_sha256: str | None = None,
        threads: int | None = None,
    ) -> str:
        """The entry's key. `read_as`: the I/O rules the output file was read under ("output" or "dataset");
        `weights`: name -> digest of the pretrained weights the metrics were given ({} when none)."""
        material = {
            "format": FORMAT,
            "engine": ENGINE,
            "output": output_sha256,
            "read_as": str(read_as),
            "weights": {str(k): v for k, v in weights.items()},
            "reference": reference_sha256,
            "style": style_sha256,
            "dataset": dataset_id,
            "revision": revision,
            "pair": pair_id,
            "protocol": protocol_sha256,
            "allow_resize": bool(allow_resize),
            "device": device,
            "versions": implementation_versions(),
        }
        if threads is not None:  # torch's CPU thread count: LPIPS's last digits depend on it (see compute_threads)
            material["threads"] = int(threads)
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()

    def path(self, key: str) -> Path:
        return self._path(key)

    def discard(self, key: str) -> None:
        try:
            os.unlink(self._path(key))
        except OSError:
            pass

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str, metric_names: list[str]) -> dict | None:
        """The cached {"metrics", "notes"} for `key`, or None when absent or unusable."""
        try:
            data = read_json(self._path(key))
            if data.get("key") != key:
                return None
            metrics = data["metrics"]
            if list(metrics) != list(metric_names) or not _finite(metrics):
                return None
            notes = data.get("notes", {})
            if not isinstance(notes, dict):
                return None
            if data.get("digest") != entry_digest(key, metrics, notes):
                return None  # edited or damaged: recomputed
            return {"metrics": metrics, "notes": notes}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def put(self, key: str, metrics: dict, notes: dict) -> None:
        """Store an entry; a non-finite value is never stored (the pair is not cached)."""
        if not _finite(metrics):
            return
        from pytest_pstbench.core.files.write import write_atomic

        try:
            text = json.dumps(
                {
                    "key": key,
                    "metrics": metrics,
                    "notes": notes,
                    "digest": entry_digest(key, metrics, notes),
                    "made_by": made_by(),
                },  # what `pstbench cache prune` reads (the key is a one-way hash)
                allow_nan=False,
            )
            write_atomic(self._path(key), text, durable=False)
        except (UserError, ValueError, TypeError):  # a read-only or full cache, or notes not JSON: not cached
            pass


def compute_threads(device: str, protocol) -> int | None:
    """torch's intra-op thread count when it decides the last digits of a value: on the CPU, for a protocol
    with a learned metric, LPIPS (oneDNN picks its convolution algorithm by thread count, so LPIPS differs in its
    last digits between thread counts (measured: up to 5e-9 relative); every other metric sums in a fixed
    order). None otherwise.

    Read from torch when torch is loaded (a caller may have set it); otherwise not by loading torch (seconds,
    on a run served from the cache) but from what torch reads it from: OMP_NUM_THREADS, else the CPUs this
    process may run on. Where the two disagree (a machine whose torch counts physical cores only) the keys
    differ and entries are recomputed: a miss, never another thread count's value."""
    import sys

    from pytest_pstbench.metrics.registry import pretrained_backbones

    if device != "cpu" or not pretrained_backbones(protocol.metrics):
        return None
    torch = sys.modules.get("torch")
    if torch is not None:
        return int(torch.get_num_threads())
    raw = os.environ.get("OMP_NUM_THREADS", "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without sched_getaffinity
        return os.cpu_count() or 1
