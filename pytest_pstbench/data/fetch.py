"""`pstbench data fetch`: the Hub's file list at the pinned commit (with each file's size and LFS
sha256) resolved against the manifest's pair mapping; what is missing or bad is downloaded into
``$PSTBENCH_DATA/<name>/`` and checked, or registered from a local copy (``--from DIR``); offline,
the lock decides. A selection manifest's parquet files are then extracted into selection tracks
(``pytest_pstbench.data.remote_selection``).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.jsonfile import read_json
from pytest_pstbench.core.hub import client
from pytest_pstbench.core.hub import endpoint as hub_endpoint
from pytest_pstbench.core.hub.digests import check_file
from pytest_pstbench.core.hub.network import network_errors
from pytest_pstbench.core.progress import human, reporter, shown
from pytest_pstbench.data.dataset_lock import (
    LOCK_NAME,
    dataset_dir,
    new_lock,
    override_record,
    read_lock,
    record_verification,
    requested_revision,
    same_revision,
    utc_now,
    write_json_atomic,
)
from pytest_pstbench.data.manifest import HEX_RE, TASKS, DatasetManifest, get_manifest, resolve_layout
from pytest_pstbench.data.remote import DatasetSubject, remote_listing
from pytest_pstbench.data.verify import check_present


@dataclass
class FetchResult:
    name: str
    root: Path
    revision: str
    files: int
    downloaded: int
    bytes_downloaded: int
    refetched: list[str]
    override: dict | None
    source: str
    tasks: dict[str, int] | None = None  # selection datasets: track id -> tasks extracted


def _check_splits(m: DatasetManifest, splits: list[str] | None) -> list[str]:
    splits = list(dict.fromkeys(splits or m.default_splits))
    unknown = [s for s in splits if s not in m.splits]
    if unknown:
        raise UserError(
            f"--splits {' '.join(unknown)}: not a split of {m.name} ({m.path.name}); fix: choose from {', '.join(m.splits)}"
        )
    return splits


class _FetchLock:
    """One fetch per dataset folder at a time."""

    def __init__(self, root: Path):
        self.root = root
        self.lock = None

    def __enter__(self):
        self.root.mkdir(parents=True, exist_ok=True)
        from filelock import FileLock, Timeout

        from pytest_pstbench.core.files.lock import lock_timeout

        self.lock = FileLock(str(self.root / ".pstbench-fetch.lock"))
        timeout = lock_timeout(default=5.0)  # $PSTBENCH_LOCK_TIMEOUT, as every writer's lock; else 5 s
        try:
            self.lock.acquire(timeout=timeout)
        except Timeout:
            raise UserError(
                f"{self.root}: another pstbench data fetch is running on this folder (still after {timeout:g} s); "
                "fix: wait for it to end"
            ) from None
        return self

    def __exit__(self, *exc):
        self.lock.release()


def fetch_dataset(
    name: str,
    splits: list[str] | None = None,
    *,
    revision: str | None = None,
    allow_other_revision: bool = False,
    from_dir: Path | None = None,
    progress=None,
) -> FetchResult:
    """Fetch (or register with `from_dir`) the splits of dataset `name` at the pinned revision, verified.

    `progress`: a `progress.Reporter` (one bar or percent lines, per-file lines under verbose), or a
    callable that gets every message, per-file lines included; None: silent.
    """
    say = reporter(progress)
    m = get_manifest(name)
    splits = _check_splits(m, splits)
    requested, override = requested_revision(m, revision, allow_other_revision)
    root = dataset_dir(m.name)
    created = not root.exists()
    try:
        return _fetch_locked(m, root, splits, requested, override, from_dir, say)
    except BaseException:
        # a refused or failed fetch leaves no empty dataset folder (one with a lock file holds data to resume)
        if created and root.is_dir() and not (root / LOCK_NAME).exists():
            shutil.rmtree(root, ignore_errors=True)
        raise


def _fetch_locked(m: DatasetManifest, root: Path, splits: list[str], requested: str, override: bool, from_dir, say):
    with _FetchLock(root):
        old = read_lock(m.name)
        if from_dir is not None:
            sha, expected, layout = _expected_for_copy(m, requested, override, splits, Path(from_dir), say)
        elif client.offline():
            return _after_fetch(m, _fetch_offline(m, splits, requested, old, say), say)
        else:
            say(f"{m.repo_id}: asking {hub_endpoint.where()} for revision {requested} ...")
            sha, listing = remote_listing(m, requested, splits)
            _check_resolved(m, requested, sha, override)
            layout = resolve_layout(m, listing, splits)
            expected = {p: listing[p] for split in splits for p in layout[split].values()}
        ov = override_record(m, requested, sha) if override else None
        lock = new_lock(m, sha, ov, old)
        lock["files"].update(expected)
        lock["pairs"].update(layout)
        if from_dir is not None:
            result = _register_copy(m, root, Path(from_dir), expected, lock, say)
        else:
            result = _download(m, root, sha, expected, lock, say)
        result.override = ov
        return _after_fetch(m, result, say)


def _after_fetch(m: DatasetManifest, result: FetchResult, say) -> FetchResult:
    """Selection datasets: extract (or re-check) the tasks of every track whose split is now present."""
    if m.layout == TASKS:
        from pytest_pstbench.data.remote_selection import extract_fetched_tracks

        result.tasks = extract_fetched_tracks(m, progress=say)
    return result


def _check_resolved(m: DatasetManifest, requested: str, sha: str, override: bool) -> None:
    if override:
        return
    if HEX_RE.match(requested.lower()) and not sha.startswith(requested.lower()):
        raise UserError(
            f"{m.repo_id}: the Hub resolved the pinned revision {requested} to commit {sha}, which is not that commit "
            f"(a branch or tag of that name?); refused; fix: pin the full 40-hex commit in {m.path}"
        )


def _download(m: DatasetManifest, root: Path, sha: str, expected: dict[str, dict], lock: dict, say) -> FetchResult:
    """The files of `expected` not present and verified in `root` fetched and verified; the lock's
    verification record written; one line for the files that failed."""
    todo, refetch = _to_fetch(m, root, sha, expected, say)
    errors, done_bytes, gated = _fetch_files(m, root, sha, expected, todo, say)
    record_verification(lock, list(expected), sorted(errors))
    lock["updated"] = utc_now()
    write_json_atomic(root / LOCK_NAME, lock)
    if gated is not None:
        raise client.hub_error(DatasetSubject(m), gated, f"downloading {len(errors)} files")
    if errors:
        _refuse_failed(m, root, sha, todo, errors, lock)
    say(f"{m.repo_id}@{sha[:12]}: {len(expected)} files present and verified (sha256) in {root}")
    return FetchResult(m.name, root, sha, len(expected), len(todo), done_bytes, refetch, None, lock["source"])


def _to_fetch(m: DatasetManifest, root: Path, sha: str, expected: dict[str, dict], say) -> tuple[list, list]:
    """(the files to fetch, those among them present but damaged: removed here) of `expected` in `root`."""
    say(f"{m.repo_id}@{sha[:12]}: checking {len(expected)} files already in {root} ...")
    todo, refetch = [], []
    checked = check_present(f"{m.name}: checking present files", root, expected, say)
    for path, _entry in expected.items():
        reason = checked[path]
        if reason is None:
            continue
        if reason != "missing":
            refetch.append(path)
            say(f"  {path}: {reason}; fetching it again")
            (root / path).unlink()
            (root / ".cache" / "huggingface" / "download" / f"{path}.metadata").unlink(missing_ok=True)
        todo.append(path)
    return todo, refetch


def _fetch_files(m: DatasetManifest, root: Path, sha: str, expected: dict[str, dict], todo: list, say):
    """Download and verify the files `todo` (8 at a time, one progress display) -> ({file: why it failed},
    bytes fetched, the first gated refusal or None)."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    total = sum(expected[p]["size"] for p in todo)
    if todo:
        say(f"{m.repo_id}@{sha[:12]}: downloading {len(todo)} of {len(expected)} files ({human(total)}) into {root}")
    errors: dict[str, str] = {}
    done_bytes = 0
    gated = None
    prog = say.progress(f"{m.name}: downloading", len(todo), total) if todo else None

    client.bounded_hub_client()

    def one(path: str) -> None:
        ok = False
        try:  # huggingface_hub's per-file progress goes into our one display (bytes while they arrive)
            client.download(
                m.repo_id,
                path,
                repo_type=m.repo_type,
                revision=sha,
                local_dir=root,
                tqdm_class=prog.download_tqdm_class,
            )
            reason = check_file(root / path, expected[path], full=True)
            if reason is not None:
                (root / path).unlink(missing_ok=True)
                raise _Mismatch(reason)
            ok = True
        finally:
            prog.file_done(expected[path]["size"], ok=ok)

    if not todo:
        return errors, done_bytes, gated
    pool = ThreadPoolExecutor(max_workers=min(8, len(todo)))
    try:
        futures = {pool.submit(one, p): p for p in todo}
        for k, fut in enumerate(as_completed(futures), 1):
            path = futures[fut]
            try:
                fut.result()
                done_bytes += expected[path]["size"]
                say.detail(f"[{k}/{len(todo)}] {path} ({human(expected[path]['size'])}) ok")
            except _Mismatch as exc:
                errors[path] = f"downloaded, but {exc}; removed"
                say(f"[{k}/{len(todo)}] {path}: {errors[path]}")
            except network_errors() as exc:
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                errors[path] = f"{type(exc).__name__}: {first}"
                say(f"[{k}/{len(todo)}] {path}: FAILED ({errors[path]})")
                if gated is None and client.classify(exc)[0] == "gated":
                    gated = exc
    except BaseException:  # e.g. Ctrl-C: drop the queued files; complete ones stay and are reused next time
        pool.shutdown(wait=False, cancel_futures=True)
        prog.close("stopped")
        raise
    pool.shutdown()
    prog.close(f"{len(todo) - len(errors)} downloaded and verified" + (f", {len(errors)} failed" if errors else ""))
    return errors, done_bytes, gated


def _refuse_failed(m: DatasetManifest, root: Path, sha: str, todo: list, errors: dict[str, str], lock: dict) -> None:
    """One line for the files that could not be fetched and verified, with the fix."""
    again = f"run `{m.fetch_command(sorted(lock['pairs']))}` again"
    # a folder or a broken link where a file belongs fails the same way on every run: it must go first
    blocked = [
        str(root / p)
        for p in sorted(errors)
        if (root / p).is_dir() or ((root / p).is_symlink() and not (root / p).exists())
    ]
    fix = (
        f"remove {shown(blocked, 3)} (a folder or a broken link where a file of the dataset belongs), then {again}"
        if blocked
        else f"{again} (it fetches only what is missing)"
    )
    raise UserError(
        f"{m.repo_id}@{sha[:12]}: {len(errors)} of {len(todo)} files could not be fetched and verified "
        f"({shown([f'{p}: {r}' for p, r in sorted(errors.items())], 3)}); the other files are kept and verified; "
        f"fix: {fix}"
    )


class _Mismatch(Exception):
    pass


def _fetch_offline(m: DatasetManifest, splits: list[str], requested: str, lock: dict | None, say) -> FetchResult:
    root = dataset_dir(m.name)
    cmd = m.fetch_command(splits)
    if (
        lock is None
        or not same_revision(lock.get("revision"), requested)
        or any(s not in lock.get("pairs", {}) for s in splits)
    ):
        raise UserError(
            f"HF_HUB_OFFLINE=1: the splits {', '.join(splits)} of {m.repo_id}@{requested} are not in {root}, and offline "
            f"mode forbids downloading them; fix: unset HF_HUB_OFFLINE and run `{cmd}`, or register a copy with "
            f"`{cmd} --from DIR`"
        )
    paths = [p for s in splits for p in lock["pairs"][s].values()]
    checked = check_present(f"{m.name}: verifying", root, {p: lock["files"][p] for p in paths}, say)
    bad = {p: r for p, r in checked.items() if r}
    record_verification(lock, paths, list(bad))
    write_json_atomic(root / LOCK_NAME, lock)
    if bad:
        raise UserError(
            f"HF_HUB_OFFLINE=1: {len(bad)} files of {m.name} are missing or damaged "
            f"({shown([f'{p}: {r}' for p, r in bad.items()], 3)}) and cannot be "
            f"downloaded offline; fix: unset HF_HUB_OFFLINE and run `{cmd}`"
        )
    say(
        f"{m.repo_id}@{lock['revision'][:12]}: offline; all {len(paths)} files present and verified, nothing to download"
    )
    return FetchResult(
        m.name, root, lock["revision"], len(paths), 0, 0, [], lock.get("revision_override"), lock.get("source", "hub")
    )


def _expected_for_copy(m: DatasetManifest, requested: str, override: bool, splits: list[str], src: Path, say):
    """(sha, expected files, layout) for a user's copy: from a pstbench lock inside it, else from the Hub's metadata."""
    if not src.is_dir():
        raise UserError(
            f"--from {src}: not a folder; fix: give the folder that holds {', '.join(m.splits[s]['folder'] for s in splits)}/"
        )
    theirs = src / LOCK_NAME
    if theirs.is_file():
        try:
            other = read_json(theirs)
        except (OSError, ValueError) as exc:
            raise UserError(f"{theirs}: unreadable lock file ({exc}); fix: remove it from the copy") from None
        if (
            other.get("repo_id") == m.repo_id
            and same_revision(other.get("revision"), requested)
            and all(s in other.get("pairs", {}) for s in splits)
        ):
            say(
                f"--from {src}: using the file list and hashes of its {LOCK_NAME} ({m.repo_id}@{other['revision'][:12]})"
            )
            layout = {s: other["pairs"][s] for s in splits}
            expected = {p: other["files"][p] for s in splits for p in layout[s].values()}
            return other["revision"], expected, layout
    if client.offline():
        raise UserError(
            f"--from {src}: the expected sizes and sha256 come from the Hub's metadata for {m.repo_id}@{requested}, "
            f"and HF_HUB_OFFLINE=1 forbids asking for them (and {src} holds no {LOCK_NAME} for that revision); "
            "fix: run once without HF_HUB_OFFLINE (only metadata is fetched), or copy the lock file along with the data"
        )
    say(f"--from {src}: asking the Hub for the file list and hashes of {m.repo_id}@{requested} (metadata only) ...")
    sha, listing = remote_listing(m, requested, splits)
    _check_resolved(m, requested, sha, override)
    layout = resolve_layout(m, listing, splits)
    return sha, {p: listing[p] for s in splits for p in layout[s].values()}, layout


def _register_copy(
    m: DatasetManifest, root: Path, src: Path, expected: dict[str, dict], lock: dict, say
) -> FetchResult:
    src = Path(os.path.realpath(src))
    say(f"--from {src}: verifying {len(expected)} files (size and sha256) ...")
    bad = [f"{src / p}: {r}" for p, r in check_present(f"{m.name}: verifying {src}", src, expected, say).items() if r]
    if bad:
        raise UserError(
            f"--from {src}: {len(bad)} of {len(expected)} files do not match {m.repo_id}@{lock['revision'][:12]} "
            f"({shown(bad, 3)}); nothing was registered; fix: give a complete, unmodified copy of that revision "
            f"(or fetch it: `{m.fetch_command(sorted(lock['pairs']))}`)"
        )
    copied = linked = 0
    if src != Path(os.path.realpath(root)):
        for path, entry in expected.items():
            dst = root / path
            if check_file(dst, entry, full=True) is None:
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            tmp = dst.with_name(f".{dst.name}.pstbench-tmp")
            tmp.unlink(missing_ok=True)
            try:
                os.link(src / path, tmp)
                linked += 1
            except OSError:
                shutil.copyfile(src / path, tmp)
                copied += 1
            os.replace(tmp, dst)
            if check_file(dst, entry, full=True) is not None:  # pragma: no cover - a copy that changed underway
                dst.unlink()
                raise UserError(f"{dst}: the copy from {src / path} does not verify; fix: run the command again")
    lock["source"] = f"from:{src}"
    record_verification(lock, list(expected), [])
    write_json_atomic(root / LOCK_NAME, lock)
    say(
        f"{m.repo_id}@{lock['revision'][:12]}: registered {len(expected)} verified files from {src} into {root} "
        f"({linked} hard-linked, {copied} copied)"
    )
    return FetchResult(m.name, root, lock["revision"], len(expected), 0, 0, [], None, lock["source"])
