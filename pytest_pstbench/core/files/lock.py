"""The one-writer lock of a folder or file the kit writes in place (a run folder, an answers file, a
dataset's download folder): `writer_lock`, an OS lock (`filelock`) on a file in the cache named for the
target's real path, waited for up to $PSTBENCH_LOCK_TIMEOUT seconds."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pytest_pstbench.core.envvars import env_number
from pytest_pstbench.core.errors import UserError

LOCK_TIMEOUT_ENV = "PSTBENCH_LOCK_TIMEOUT"


DEFAULT_LOCK_TIMEOUT = 120.0


def lock_path(target: Path, namespace: str = "runs") -> Path:
    """The lock file of a run folder (or, with another `namespace`, of another file the kit writes in place,
    e.g. an answers file): `<cache>/locks/<namespace>/<sha256 of the target's real path>.lock`.

    Not beside the run folder: a `flock` lock file must stay in place after release (a waiter that has
    opened it must lock the same inode a newcomer opens; deleting it on release lets two processes hold
    "the" lock at once), so a lock kept in `results/` would be left behind there (`.<name>.lock`). In the
    cache it is one empty file per run folder ever written, out of sight; writers that share the cache
    (one user, CI jobs, pytest-xdist workers, pytester subprocesses) serialize. The folder swap itself is
    atomic (`swap_dir_into_place`), so writers with different caches still never mix a run."""
    import hashlib

    from pytest_pstbench.core.paths import cache_dir

    real = os.path.realpath(os.path.abspath(target))
    digest = hashlib.sha256(real.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return cache_dir() / "locks" / namespace / f"{digest}.lock"


def lock_timeout(default: float = DEFAULT_LOCK_TIMEOUT) -> float:
    """How long a writer waits for another one's lock: $PSTBENCH_LOCK_TIMEOUT seconds, else `default`."""
    return env_number(LOCK_TIMEOUT_ENV, default, unit="seconds", example=120, zero_ok=True)


@contextmanager
def writer_lock(
    target: Path, *, namespace: str, what: str, fix: str, where: str, writes: str, timeout: float | None = None
) -> Iterator[Path]:
    """Hold the one-writer lock of `target` (`lock_path(target, namespace)`: a `filelock.FileLock`, an OS
    lock released when the process ends, even when killed; nothing is left beside `target`; only when the
    cache is not writable, `.<name>.lock` beside it). Another holder (a process or a thread) is waited for
    up to `timeout` seconds (default $PSTBENCH_LOCK_TIMEOUT, else 120), then UserError `<target>: another
    pstbench process is writing this <what> (lock ... still held after T s); fix: <fix>`. When not even the
    fallback's folder can be made: UserError `<folder>: cannot write <writes> here (...); fix: <where>`."""
    from filelock import FileLock, Timeout

    target = Path(target)
    path = lock_path(target, namespace)
    timeout = lock_timeout() if timeout is None else timeout
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not os.access(path.parent, os.W_OK):
            raise PermissionError("not writable")
    except OSError:
        # A read-only cache (e.g. a CI home): the lock beside the target, as before, which stays there.
        path = target.parent / f".{target.name}.lock"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"{path.parent}: cannot write {writes} here ({exc}); fix: {where}") from None
    lock = FileLock(str(path), timeout=timeout)
    try:
        lock.acquire()
    except Timeout:
        raise UserError(
            f"{target}: another pstbench process is writing this {what} (lock {path} still held after "
            f"{timeout:g} s); fix: {fix}"
        ) from None
    except OSError as exc:
        raise UserError(
            f"{path}: cannot take the {what} lock ({exc}); fix: set PSTBENCH_CACHE to a writable folder"
        ) from None
    try:
        yield path
    finally:
        lock.release()


def run_lock(run_dir: Path, timeout: float | None = None):
    """Hold the per-run lock (`writer_lock` in namespace "runs"): one writer of a run folder at a time."""
    return writer_lock(
        run_dir,
        namespace="runs",
        what="run",
        timeout=timeout,
        fix="wait for it to finish, or give this run another name",
        where="give --results a writable folder",
        writes="the run files",
    )
