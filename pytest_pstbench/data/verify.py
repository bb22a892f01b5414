"""Checks of fetched files against the lock: the cheap one before scoring (presence and recorded
size), the full one of `pstbench data verify` (re-hash: sha256, or the git blob id of non-LFS files),
and the status row of `pstbench data list`.
"""

from __future__ import annotations

from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.hub.digests import check_file
from pytest_pstbench.core.progress import human, reporter, shown
from pytest_pstbench.data.dataset_lock import (
    LOCK_NAME,
    dataset_dir,
    read_lock,
    record_verification,
    refetch_args,
    same_revision,
    write_json_atomic,
)
from pytest_pstbench.data.manifest import DatasetManifest, get_manifest


def check_present(desc: str, root: Path, entries: dict[str, dict], say) -> dict[str, str | None]:
    """path -> None (verified) or the reason, hashing every file that is there, with one progress display."""
    present = [p for p in entries if (root / p).is_file()]
    out: dict[str, str | None] = {p: "missing" for p in entries if p not in present}
    if not present:
        return out
    prog = say.progress(desc, len(present), sum(entries[p]["size"] for p in present))
    for p in present:
        out[p] = check_file(root / p, entries[p], full=True)
        say.detail(f"  {p}: {out[p] or 'ok'}")
        prog.file_done(entries[p]["size"])
    ok = sum(out[p] is None for p in present)
    prog.close(f"{ok} of {len(present)} verified" + (f", {len(present) - ok} bad" if ok < len(present) else ""))
    return {p: out[p] for p in entries}


def verify_dataset(name: str, progress=None) -> tuple[dict, list[tuple[str, str]]]:
    """Re-hash every file in the lock. Returns (lock, [(path, reason), ...] for bad files).

    `progress`: as for `fetch_dataset`."""
    say = reporter(progress)
    m = get_manifest(name)
    lock = read_lock(m.name)
    if lock is None:
        raise UserError(f"{dataset_dir(m.name)}: no {m.name} data to verify; fix: run `{m.fetch_command()}`")
    root = dataset_dir(m.name)
    say(f"{lock['repo_id']}@{lock['revision'][:12]}: re-hashing {len(lock['files'])} files in {root} ...")
    bad = [(p, r) for p, r in check_present(f"{m.name}: verifying", root, lock["files"], say).items() if r]
    record_verification(lock, list(lock["files"]), [p for p, _ in bad])
    write_json_atomic(root / LOCK_NAME, lock)
    return lock, bad


def dataset_state(m: DatasetManifest) -> tuple[dict, bool]:
    """A dataset's local state, the one status `pstbench data list` and `pstbench ls tracks` show (cheap:
    presence and size only): (the `data list` row, usable), usable when the lock file is sound, every file is
    present with its recorded size and none failed `verify` (what scoring's cheap checks ask too)."""
    row = {
        "name": m.name,
        "dataset": m.repo_id,
        "pinned": m.revision or "(unpinned)",
        "revision": "-",
        "splits": "-",
        "files": "-",
        "size": "-",
        "status": "not fetched",
    }
    try:
        lock = read_lock(m.name)
    except UserError as exc:
        row["status"] = f"bad lock file: {exc}"
        return row, False
    if lock is None:
        return row, False
    root = dataset_dir(m.name)
    problems = [p for p, e in lock["files"].items() if check_file(root / p, e, full=False)]
    ver = lock.get("verified") or {}
    row.update(
        revision=lock["revision"][:12],
        splits=", ".join(sorted(lock.get("pairs", {}))),
        files=str(len(lock["files"])),
        size=human(sum(e["size"] for e in lock["files"].values())),
    )
    if problems:
        row["status"] = f"incomplete: {len(problems)} missing or truncated"
    elif ver.get("bad"):
        row["status"] = f"FAILED verification: {len(ver['bad'])} files"
    elif ver.get("ok"):
        row["status"] = f"verified {ver.get('at', '')}"
    else:
        row["status"] = "present, not verified"
    usable = not problems and not ver.get("bad")
    if lock.get("revision_override"):
        ov = lock["revision_override"]
        row["status"] += f" ({ov.get('detail') or 'revision override'})"
    if str(lock.get("source", "hub")).startswith("from:"):
        row["status"] += f" [{lock['source']}]"
    return row, usable


def dataset_status(m: DatasetManifest) -> dict:
    """What `pstbench data list` shows for one dataset (`dataset_state`'s row)."""
    return dataset_state(m)[0]


def fetched_status(m: DatasetManifest) -> str:
    """`pstbench ls tracks`'s "fetched" column from `dataset_state`: `yes`, or `no: <data list's status>` and
    the fetch command."""
    row, usable = dataset_state(m)
    if usable:
        return "yes"
    if row["status"] == "not fetched":
        return f"no: pstbench data fetch {m.name}"
    status = row["status"].split(" (", 1)[0] if row["status"].startswith("bad lock file") else row["status"]
    return f"no: {status}; fix: pstbench data fetch {m.name} (see pstbench data list)"


def checked_data(m: DatasetManifest, track_id: str, needed: list[str]) -> tuple[Path, dict, str, list[str]]:
    """(root, lock, fetch command, paths) of the splits `needed` by track `track_id`, after the cheap checks.

    The lock must exist, hold those splits at the pinned revision (or a recorded override), and every
    file must be present with its recorded size and not have failed `verify`; otherwise one UserError
    with the exact fetch command. Never touches the network.
    """
    root = dataset_dir(m.name)
    lock = read_lock(m.name)
    cmd = m.fetch_command(needed, refetch_args(m, lock))
    pin = m.revision or "(unpinned)"
    if lock is None:
        raise UserError(
            f"track {track_id}: the data of {m.repo_id}@{pin} is not in {root} ($PSTBENCH_DATA); "
            f"fix: run `{cmd}` (or `{cmd} --from DIR` to register a copy you already have)"
        )
    missing_splits = [s for s in needed if s not in lock.get("pairs", {})]
    if missing_splits:
        raise UserError(
            f"track {track_id}: split(s) {', '.join(missing_splits)} of {m.repo_id} not fetched into {root}; fix: run `{cmd}`"
        )
    if not same_revision(lock["revision"], m.revision) and not lock.get("revision_override"):
        raise UserError(
            f"track {track_id}: {root} holds {m.repo_id}@{lock['revision'][:12]}, but {m.path.name} pins {pin}; "
            f"fix: run `{m.fetch_command(needed)}` to fetch the pinned revision"
        )
    paths = [p for s in needed for p in lock["pairs"][s].values()]
    verified_bad = set((lock.get("verified") or {}).get("bad", []))
    problems = []
    for p in paths:
        reason = check_file(root / p, lock["files"][p], full=False)
        if reason is None and p in verified_bad:
            reason = "failed sha256 verification"
        if reason:
            problems.append(f"{p}: {reason}")
    if problems:
        raise UserError(
            f"track {track_id}: {len(problems)} of {len(paths)} files of {m.repo_id}@{lock['revision'][:12]} in {root} "
            f"are missing or damaged ({shown(problems, 3)}); fix: run `{cmd}` (it fetches only those again)"
        )
    return root, lock, cmd, paths
