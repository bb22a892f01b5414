"""The lock file ``$PSTBENCH_DATA/<name>/pstbench-lock.json`` of a fetched dataset: the resolved
commit, the expected size and hash of each file, the pair mapping, the last verification; and the
rules for revisions (the pinned one, or a recorded override).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.jsonfile import read_json
from pytest_pstbench.core.paths import data_dir
from pytest_pstbench.data.manifest import HEX_RE, DatasetManifest

LOCK_NAME = "pstbench-lock.json"
LOCK_FORMAT = 1


def same_revision(a: str | None, b: str | None) -> bool:
    """Whether two commit ids (full or abbreviated hex) name the same commit."""
    if not a or not b:
        return False
    a, b = a.lower(), b.lower()
    if HEX_RE.match(a) and HEX_RE.match(b):
        return a.startswith(b) or b.startswith(a)
    return a == b


def requested_revision(m: DatasetManifest, revision: str | None, allow_other: bool) -> tuple[str, bool]:
    """(revision to ask the Hub for, whether it is an override of the pin).

    An unpinned manifest (`revision: null`) takes any `--revision` (a branch, tag or commit) without
    --allow-other-revision: there is no pin to deviate from silently, and the lock and every run.json
    record the commit it resolved to as a deviation.
    """
    if revision is None:
        if not m.pinned:
            raise UserError(
                f"{m.path}: dataset {m.repo_id} has no pinned revision (revision: null; its commit could not be "
                f"checked when the manifest was written), so it is not fetched; fix: name a branch, tag or commit "
                f"with `pstbench data fetch {m.name} --revision main` (the commit it resolves to is recorded as a "
                "deviation in run.json), or pin a 40-hex commit in the manifest"
            )
        return m.revision, False
    if m.pinned and same_revision(revision, m.revision):
        return revision, False
    if not m.pinned:
        return revision, True
    if not allow_other:
        raise UserError(
            f"--revision {revision}: {m.path.name} pins {m.revision} for {m.repo_id}; another revision is refused; "
            "fix: drop --revision to fetch the pinned one, or add --allow-other-revision "
            "(the lock file and every run.json then record the deviation)"
        )
    return revision, True


def override_record(m: DatasetManifest, requested: str, sha: str) -> dict:
    """The lock's `revision_override` (copied into each run.json's deviations as kind revision_override)."""
    how = "" if requested.lower() == sha else f"resolved from {requested}; "
    pin = "not the kit's pin" if not m.pinned else f"the kit pins {m.revision}"
    return {
        "pinned": m.revision,
        "requested": requested,
        "fetched": sha,
        "flag": "--allow-other-revision" if m.pinned else "--revision (unpinned dataset)",
        "detail": f"dataset revision: {sha} ({how}{pin})",
    }


def refetch_args(m: DatasetManifest, lock: dict | None) -> str:
    """The `--revision ...` arguments that fetch the lock's commit again (empty for the pinned revision)."""
    if lock is None or not lock.get("revision_override"):
        return ""
    return f" --revision {lock['revision']}" + (" --allow-other-revision" if m.pinned else "")


def dataset_dir(name: str) -> Path:
    return data_dir() / name


def lock_path(name: str) -> Path:
    return dataset_dir(name) / LOCK_NAME


def read_lock(name: str) -> dict | None:
    path = lock_path(name)
    if not path.is_file():
        return None
    try:
        lock = read_json(path)
    except (OSError, ValueError) as exc:
        raise UserError(
            f"{path}: unreadable lock file ({exc}); fix: delete it and run `pstbench data fetch {name}` again"
        ) from None
    if not isinstance(lock, dict) or lock.get("format") != LOCK_FORMAT or not isinstance(lock.get("files"), dict):
        raise UserError(
            f"{path}: not a pstbench lock file (format {LOCK_FORMAT}); fix: delete it and run "
            f"`pstbench data fetch {name}` again"
        )
    problem = lock_problem(lock)
    if problem:
        raise UserError(
            f"{path}: damaged lock file ({problem}); fix: delete it and run `pstbench data fetch {name}` "
            "again (files already there are verified, not downloaded again)"
        )
    return lock


def _is_hex(value, lengths: tuple[int, ...]) -> bool:
    return isinstance(value, str) and len(value) in lengths and all(c in "0123456789abcdef" for c in value.lower())


def lock_problem(lock: dict) -> str | None:
    """What is wrong with the shape of a parsed lock file (every field the commands read), or None."""
    for key in ("dataset", "repo_id", "revision"):
        if not isinstance(lock.get(key), str) or not lock.get(key):
            return f"{key} is {lock.get(key)!r}, expected a non-empty string"
    for rel, entry in lock["files"].items():
        if not isinstance(entry, dict):
            return f"files[{rel!r}] is {type(entry).__name__}, expected an object"
        size = entry.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            return f"files[{rel!r}].size is {size!r}, expected a whole number of bytes"
        if entry.get("sha256") is not None and not _is_hex(entry.get("sha256"), (64,)):
            return f"files[{rel!r}].sha256 is {entry.get('sha256')!r}, expected 64 hex digits"
        if not entry.get("sha256") and not _is_hex(entry.get("git_oid"), (40, 64)):
            return f"files[{rel!r}] has neither a sha256 nor a git_oid (40 hex digits)"
    pairs = lock.get("pairs", {})
    if not isinstance(pairs, dict):
        return f"pairs is {type(pairs).__name__}, expected an object"
    for split, mapping in pairs.items():
        if not isinstance(mapping, dict):
            return f"pairs[{split!r}] is {type(mapping).__name__}, expected an object"
        for key, rel in mapping.items():
            if not isinstance(rel, str) or rel not in lock["files"]:
                return f"pairs[{split!r}][{key!r}] is {rel!r}, not a file of the lock's files"
    verified = lock.get("verified")
    if verified is not None and not (isinstance(verified, dict) and isinstance(verified.get("bad", []), list)):
        return "verified is not an object with a list `bad`"
    override = lock.get("revision_override")
    if override is not None and not isinstance(override, dict):
        return f"revision_override is {type(override).__name__}, expected an object or null"
    if not isinstance(lock.get("source", "hub"), str):
        return f"source is {lock.get('source')!r}, expected a string"
    return None


def write_json_atomic(path: Path, data: dict) -> None:
    from pytest_pstbench.core.files.write import write_atomic

    write_atomic(
        path,
        json.dumps(data, indent=2, sort_keys=False) + "\n",
        what="the lock file",
        fix="free some space or set PSTBENCH_DATA to a writable folder",
    )


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def new_lock(m: DatasetManifest, sha: str, override: dict | None, old: dict | None) -> dict:
    keep = old is not None and old.get("revision") == sha and old.get("repo_id") == m.repo_id
    return {
        "format": LOCK_FORMAT,
        "dataset": m.name,
        "repo_id": m.repo_id,
        "repo_type": m.repo_type,
        "pinned_revision": m.revision,
        "revision": sha,
        "revision_override": override,
        "manifest": {"path": str(m.path), "sha256": hashlib.sha256(m.path.read_bytes()).hexdigest()},
        "source": old.get("source", "hub") if keep else "hub",
        "files": dict(old["files"]) if keep else {},
        "pairs": dict(old.get("pairs", {})) if keep else {},
        "verified": dict(old.get("verified") or {}) if keep else {},
        "updated": utc_now(),
    }


def record_verification(lock: dict, checked: list[str], bad: list[str]) -> None:
    prev = lock.get("verified") or {}
    still_bad = [p for p in prev.get("bad", []) if p not in checked and p in lock["files"]]
    all_bad = sorted(set(still_bad) | set(bad))
    lock["verified"] = {
        "at": utc_now(),
        "ok": not all_bad,
        "bad": all_bad,
        "how": "size and sha256 (git blob id for non-LFS files)",
    }
