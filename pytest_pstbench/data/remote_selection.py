"""Remote selection datasets (VAB): verified parquet rows -> a selection track on disk.

A manifest with ``kind: selection`` (``protocols/tracks/vab.yaml``) names parquet shards on the Hub
whose rows are tasks (task id, domain, topic, images, letter labels, best/worst labels). ``fetch``
(``pytest_pstbench.data.fetch``) downloads and verifies the shards like any other remote data; then
this module extracts every task, in dataset order (shards sorted by name, then row order), into

    $PSTBENCH_DATA/<name>/pstbench-tracks/<track>/
        track.yaml             # a local selection manifest (kind: selection), read by selection.tracks
        pstbench-extract.json  # what it was built from (revision, shard hashes, the manifest's rules)
                               #   and the size and sha256 of every extracted image
        <task_id>/<i>.<ext>    # candidate i (dataset order), the image bytes exactly as stored

built in a temporary folder beside it and renamed into place. Each image keeps the bytes the
dataset stores (no re-encoding); its extension is the format Pillow detects. Every row is checked
against the manifest's rules first; one that breaks a rule stops the extraction with one line that
names the parquet file, the row, the task and the rule, and nothing is written.

Scoring (``selection.tracks.load_remote_selection_track``) never touches the network: the shards
must be present at the pinned revision (cheap checks on the lock), and the extraction must match
them; a missing or stale extraction is rebuilt from the verified shards. pyarrow is imported only
when rows are read.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.jsonfile import loads, read_json
from pytest_pstbench.core.files.write import replace_stale_dir, staging_dir
from pytest_pstbench.core.progress import shown
from pytest_pstbench.data.dataset_lock import dataset_dir, read_lock
from pytest_pstbench.data.manifest import DatasetManifest

EXTRACT_DIR = "pstbench-tracks"
STATE_NAME = "pstbench-extract.json"
EXTRACT_FORMAT = 1
MANIFEST_NAME = "track.yaml"
_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
_EXT = {"JPEG": ".jpg", "MPO": ".jpg", "PNG": ".png", "WEBP": ".webp", "GIF": ".gif", "BMP": ".bmp", "TIFF": ".tif"}


def track_root(m: DatasetManifest, track_id: str) -> Path:
    return dataset_dir(m.name) / EXTRACT_DIR / track_id


def _parquet(m: DatasetManifest):
    try:
        import pyarrow.parquet as pq
    except ImportError:
        from pytest_pstbench.core.install_hints import extra_install

        raise UserError(
            f"dataset {m.name}: its files are parquet, and reading them needs pyarrow, which is not installed; "
            f"fix: {extra_install('vab')}"
        ) from None
    return pq


def _source(m: DatasetManifest, lock: dict, track_id: str) -> dict:
    """What an extraction is built from; a different value means it is stale."""
    split = str(m.tracks[track_id]["split"])
    files = {}
    for path in lock["pairs"][split].values():
        e = lock["files"][path]
        files[path] = {"size": e["size"], "sha256": e.get("sha256"), "git_oid": e.get("git_oid")}
    return loads(
        json.dumps(
            {
                "format": EXTRACT_FORMAT,
                "dataset": m.name,
                "repo_id": m.repo_id,
                "revision": lock["revision"],
                "split": split,
                "files": files,
                "rules": m.data["tasks"],
            },
            sort_keys=True,
        )
    )


def _read_state(root: Path) -> dict | None:
    try:
        state = read_json(root / STATE_NAME)
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and isinstance(state.get("files"), dict) else None


def _problems(root: Path, state: dict, full: bool) -> list[str]:
    """Extracted images that are missing, of another size, or (with `full`) of another sha256."""
    out = []
    if not (root / MANIFEST_NAME).is_file():
        out.append(f"{MANIFEST_NAME}: missing")
    for rel, e in state["files"].items():
        f = root / rel
        if not f.is_file():
            out.append(f"{rel}: missing")
        elif f.stat().st_size != e["size"]:
            out.append(f"{rel}: size {f.stat().st_size} bytes, expected {e['size']}")
        elif full and hashlib.sha256(f.read_bytes()).hexdigest() != e["sha256"]:
            out.append(f"{rel}: sha256 differs from the extracted image's (modified)")
    return out


# ---- rows -> tasks -----------------------------------------------------------------------------
class _Rows:
    """Reads the rows of a split's shards in dataset order and checks each against the manifest's rules."""

    def __init__(self, m: DatasetManifest, lock: dict, split: str):
        self.m = m
        self.lock = lock
        self.split = split
        rules = m.data["tasks"]
        self.cols = {k: str(v) for k, v in rules["columns"].items()}
        self.k_min, self.k_max = int(rules["n_images"]["min"]), int(rules["n_images"]["max"])
        self.seen: dict[str, str] = {}

    def __iter__(self):
        pq = _parquet(self.m)
        root = dataset_dir(self.m.name)
        wanted = list(dict.fromkeys(self.cols.values()))
        for repo_path in self.lock["pairs"][self.split].values():
            path = root / repo_path
            try:
                pf = pq.ParquetFile(path)
                names = set(pf.schema_arrow.names)
            except Exception as exc:  # pyarrow raises its own types (ArrowInvalid, OSError)
                raise UserError(
                    f"{path}: not a readable parquet file ({type(exc).__name__}: {' '.join(str(exc).split())}); "
                    f"fix: run `pstbench data verify {self.m.name}`, then `pstbench data fetch {self.m.name}`"
                ) from None
            missing = [c for c in wanted if c not in names]
            if missing:
                raise UserError(
                    f"{path}: column(s) {', '.join(missing)} missing (the file has {', '.join(sorted(names))}); "
                    f"fix: correct tasks.columns in {self.m.path} to this revision's columns"
                )
            index = 0
            for batch in pf.iter_batches(batch_size=16, columns=wanted):
                for row in batch.to_pylist():
                    yield self._task(path, index, row)
                    index += 1

    def _task(self, path: Path, index: int, row: dict) -> dict:
        c = self.cols
        raw_id = row[c["id"]]

        def bad(rule: str) -> UserError:
            return UserError(
                f"{path}: row {index} (0-based; task {raw_id}): {rule}; the data breaks the task rules of {self.m.path.name}; "
                f"fix: check the revision, or correct `tasks` in {self.m.path}"
            )

        if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)) or not _PLAIN.match(str(raw_id)):
            raise bad(f"{c['id']} {raw_id!r} is not a plain name (letters, digits, . _ + -; it names a folder)")
        tid = str(raw_id)
        where = f"{path.name} row {index}"
        if tid in self.seen:
            raise bad(f"{c['id']} {tid} appears twice (first at {self.seen[tid]}); task ids must be unique")
        self.seen[tid] = where
        k = row[c["n_images"]]
        if isinstance(k, bool) or not isinstance(k, int):
            raise bad(f"{c['n_images']} is {k!r}, not an integer")
        images, labels = row[c["images"]], row[c["labels"]]
        if not isinstance(images, list) or len(images) != k:
            raise bad(
                f"{c['n_images']} is {k} but {c['images']} has {len(images) if isinstance(images, list) else 'no list of'} entries"
            )
        if not isinstance(labels, list) or len(labels) != k:
            raise bad(
                f"{c['n_images']} is {k} but {c['labels']} has {len(labels) if isinstance(labels, list) else 'no list of'} entries"
            )
        if not self.k_min <= k <= self.k_max:
            raise bad(f"{c['n_images']} {k} is outside {self.k_min}..{self.k_max} (tasks.n_images)")
        if any(not isinstance(x, str) or not x for x in labels) or len(set(labels)) != k:
            raise bad(f"{c['labels']} {labels!r} must be {k} distinct non-empty strings")

        def label_index(col: str, value) -> int:
            if value not in labels:
                raise bad(f"{col} {value!r} is not one of the row's {c['labels']} ({', '.join(labels)})")
            return labels.index(value)

        best = label_index(c["best"], row[c["best"]])
        worst_raw = row[c["worst"]]
        if k == 2 and worst_raw in (None, ""):
            worst = 1 - best
        else:
            worst = label_index(c["worst"], worst_raw)
        if worst == best:
            raise bad(f"{c['best']} and {c['worst']} are both {labels[best]!r}; they must differ")
        blobs = []
        for i, img in enumerate(images):
            data = img.get("bytes") if isinstance(img, dict) else img if isinstance(img, (bytes, bytearray)) else None
            if not data:
                ref = img.get("path") if isinstance(img, dict) else None
                raise bad(f"{c['images']}[{i}] holds no image bytes" + (f" (only a path, {ref!r})" if ref else ""))
            blobs.append(
                (
                    bytes(data),
                    _format(
                        bytes(data), lambda why, i=i: bad(f"{c['images']}[{i}] is not an image Pillow can read ({why})")
                    ),
                )
            )
        return {
            "seed": raw_id,
            "id": tid,
            "domain": "unspecified" if row[c["domain"]] is None else str(row[c["domain"]]),
            "topic": "unspecified" if row[c["topic"]] is None else str(row[c["topic"]]),
            "labels": labels,
            "best": best,
            "worst": worst,
            "images": blobs,
            "row": {"file": path.name, "index": index},
        }


def _format(data: bytes, bad) -> str:
    """The file extension for encoded image bytes, from the format Pillow detects (header only)."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as im:
            fmt = str(im.format or "")
    except Exception as exc:  # UnidentifiedImageError, DecompressionBombError, ...
        raise bad(f"{type(exc).__name__}: {' '.join(str(exc).split())}") from None
    return _EXT.get(fmt, "." + (fmt.lower() or "img"))


# ---- extraction --------------------------------------------------------------------------------
def _extract(m: DatasetManifest, lock: dict, track_id: str, dest: Path, source: dict, say) -> int:
    import yaml

    split = source["split"]
    tasks, files = [], {}
    for n, t in enumerate(_Rows(m, lock, split), 1):
        (dest / t["id"]).mkdir()
        cands = []
        for i, (data, ext) in enumerate(t["images"]):
            rel = f"{t['id']}/{i}{ext}"
            (dest / rel).write_bytes(data)
            files[rel] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
            cands.append({"file": rel, "label": t["labels"][i]})
        tasks.append(
            {
                "id": t["seed"],
                "domain": t["domain"],
                "topic": t["topic"],
                "candidates": cands,
                "best": t["best"],
                "worst": t["worst"],
                "row": t["row"],
            }
        )
        if n % 50 == 0:
            say(f"{m.name}: extracted {n} tasks ...")
    want = m.data["tasks"].get("count")
    if want is not None and len(tasks) != int(want):
        raise UserError(
            f"{m.path}: split {split} of {m.repo_id}@{lock['revision'][:12]} has {len(tasks)} tasks, expected {want} "
            f"(tasks.count); fix: check the revision, or correct tasks.count"
        )
    spec = m.tracks[track_id]
    manifest = {
        "kind": "selection",
        "id": track_id,
        "dataset": m.repo_id,
        "revision": lock["revision"],
        "name": f"{m.repo_id} split {split}",
        "description": spec.get("description") or m.data.get("description"),
        "tasks": tasks,
    }
    (dest / MANIFEST_NAME).write_text(
        yaml.safe_dump(manifest, sort_keys=False, default_flow_style=None, width=110, allow_unicode=True),
        encoding="utf-8",
        newline="\n",
    )
    state = {"source": source, "n_tasks": len(tasks), "files": files}
    (dest / STATE_NAME).write_text(json.dumps(state, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return len(tasks)


def ensure_extracted(
    m: DatasetManifest, track_id: str, lock: dict, *, full: bool = False, progress=None
) -> tuple[Path, int, bool]:
    """(manifest path, tasks, rebuilt) of track `track_id`; (re)built from the verified shards when missing
    or stale, or when an extracted image is missing or resized (with `full`: or its sha256 differs)."""
    root = track_root(m, track_id)
    source = _source(m, lock, track_id)
    why = _stale(root, source, full)
    if why is None:
        return root / MANIFEST_NAME, int(_read_state(root)["n_tasks"]), False
    from filelock import FileLock, Timeout

    try:
        root.parent.mkdir(parents=True, exist_ok=True)
        guard = FileLock(str(root.parent / f".{track_id}.extract.lock"))
        guard.acquire(timeout=600)
    except OSError as exc:
        raise UserError(
            f"{root.parent}: cannot extract track {track_id} here ({exc}); fix: set PSTBENCH_DATA to a writable folder"
        ) from None
    except Timeout:  # pragma: no cover - another process extracting for 10 minutes
        raise UserError(
            f"{root.parent}: another process keeps extracting track {track_id}; fix: wait for it and retry"
        ) from None
    try:
        why = _stale(root, source, full)  # another process (an xdist worker) may have extracted it meanwhile
        if why is None:
            return root / MANIFEST_NAME, int(_read_state(root)["n_tasks"]), False
        n = _rebuild(m, lock, track_id, root, source, why, progress)
    finally:
        guard.release()
    return root / MANIFEST_NAME, n, True


def _stale(root: Path, source: dict, full: bool) -> str | None:
    """Why the extraction in `root` cannot be used for `source` (None: it can)."""
    state = _read_state(root)
    if state is None:
        return "not extracted yet"
    if state.get("source") != source:
        return "extracted from other data or rules"
    problems = _problems(root, state, full)
    return f"{len(problems)} extracted files damaged ({shown(problems, 3)})" if problems else None


def _rebuild(m: DatasetManifest, lock: dict, track_id: str, root: Path, source: dict, why: str, progress) -> int:
    say = progress or (lambda _m: None)
    say(
        f"{m.name}: extracting the tasks of track {track_id} from {m.repo_id}@{lock['revision'][:12]} into {root} ({why}) ..."
    )
    with staging_dir(root, what=f"extract track {track_id}", fix="set PSTBENCH_DATA to a writable folder") as build:
        n = _extract(m, lock, track_id, build, source, say)
        replace_stale_dir(build, root, what="extracted track")  # under the extract lock: no concurrent builder
    say(f"{m.name}: track {track_id}: {n} tasks extracted into {root}")
    return n


def extract_fetched_tracks(m: DatasetManifest, progress=None) -> dict[str, int]:
    """After a fetch: extract (or re-check, hashing every image) each track whose split is in the lock."""
    lock = read_lock(m.name)
    if lock is None:  # pragma: no cover - fetch always writes one
        return {}
    out = {}
    for tid, spec in m.tracks.items():
        if spec["split"] in lock.get("pairs", {}):
            _manifest, n, _rebuilt = ensure_extracted(m, tid, lock, full=True, progress=progress)
            out[tid] = n
    return out


def verify_extraction(m: DatasetManifest) -> list[tuple[str, str]]:
    """(path, reason) of every extracted file that is missing or differs (sha256) from what was extracted."""
    lock = read_lock(m.name)
    bad = []
    for tid, spec in m.tracks.items():
        if lock is None or spec["split"] not in lock.get("pairs", {}):
            continue
        root = track_root(m, tid)
        rel_root = f"{EXTRACT_DIR}/{tid}"
        state = _read_state(root)
        if state is None:
            bad.append((rel_root, "tasks not extracted"))
        elif state.get("source") != _source(m, lock, tid):
            bad.append((rel_root, "extracted from other data or rules (stale)"))
        else:
            bad.extend(
                (f"{rel_root}/{p.split(': ', 1)[0]}", p.split(": ", 1)[1]) for p in _problems(root, state, full=True)
            )
    return bad
