"""core.files.write.staging_dir / swap_dir_into_place / replace_stale_dir: build beside the target, rename into place."""

from __future__ import annotations

import os
import stat

import pytest

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.write import replace_stale_dir, staging_dir, swap_dir_into_place


def _fill(folder, text):
    folder.mkdir(exist_ok=True)
    (folder / "f.txt").write_text(text)


def test_staging_dir_is_beside_target_0755_and_removed_on_error(tmp_path):
    target = tmp_path / "sub" / "out"
    with pytest.raises(RuntimeError, match="boom"):
        with staging_dir(target, what="write it", fix="x", tag="build") as tmp:
            assert tmp.parent == target.parent  # the parent was created
            assert tmp.name.startswith(".out.build-")
            assert stat.S_IMODE(tmp.stat().st_mode) == 0o755
            _fill(tmp, "half")
            raise RuntimeError("boom")
    assert not tmp.exists()
    assert not target.exists()
    assert os.listdir(target.parent) == []


def test_staging_dir_oserror_is_one_line_user_error(tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("not a folder")
    with pytest.raises(UserError) as info:
        with staging_dir(blocker / "out", what="write the thing", fix="choose a writable folder"):
            pytest.fail("body must not run")
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"{blocker}: cannot write the thing here (")
    assert msg.endswith("; fix: choose a writable folder")


def test_swap_replaces_existing_folder(tmp_path):
    target = tmp_path / "out"
    _fill(target, "old")
    with staging_dir(target, what="w", fix="f") as tmp:
        _fill(tmp, "new")
        swap_dir_into_place(tmp, target)
    assert (target / "f.txt").read_text() == "new"
    assert os.listdir(tmp_path) == ["out"]  # neither the staging folder nor the old copy is left


def test_swap_keeps_old_folder_when_rename_fails(tmp_path, monkeypatch):
    target = tmp_path / "out"
    _fill(target, "old")
    new = tmp_path / "new"
    _fill(new, "new")
    real_rename = os.rename
    calls = []

    def rename(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:  # 1: old moved aside, 2: new -> target fails, 3: old moved back
            raise OSError(5, "simulated failure")
        return real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError, match="simulated failure"):
        swap_dir_into_place(new, target)
    assert len(calls) == 3
    assert (target / "f.txt").read_text() == "old"
    assert (new / "f.txt").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["new", "out"]  # no moved-aside copy left


def test_replace_stale_dir_replaces_stale_or_keeps_current(tmp_path):
    target = tmp_path / "track"
    _fill(target, "stale")
    new = tmp_path / "build1"
    _fill(new, "fresh")
    assert replace_stale_dir(new, target, what="track", current=lambda: False) is True
    assert (target / "f.txt").read_text() == "fresh"
    assert sorted(os.listdir(tmp_path)) == ["track"]

    other = tmp_path / "build2"
    _fill(other, "late")
    assert replace_stale_dir(other, target, what="track", current=lambda: True) is False
    assert (target / "f.txt").read_text() == "fresh"  # a finished build is never replaced
    assert (other / "f.txt").read_text() == "late"  # left for the caller's staging_dir to remove


def test_replace_stale_dir_gives_up_with_user_error(tmp_path, monkeypatch):
    target = tmp_path / "track"
    new = tmp_path / "build"
    _fill(new, "x")

    def rename(src, dst):
        raise OSError(16, "busy")

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(UserError) as info:
        replace_stale_dir(new, target, what="demo track", attempts=3)
    assert str(info.value) == (
        f"{target}: could not move the demo track into place (another process keeps replacing it); retry"
    )


# ---- the run lock (issue #24): filelock, in the cache, nothing left in results/ ------------------------


def test_run_lock_leaves_nothing_in_results_and_serializes_threads(tmp_path, monkeypatch):
    import threading
    import time

    from pytest_pstbench.core.files import lock
    from pytest_pstbench.core.files.write import dumps_json
    from pytest_pstbench.core.store.folder import write_run_files

    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    run_dir = tmp_path / "results" / "small" / "run"
    order = []

    def writer(tag):
        with lock.run_lock(run_dir):
            order.append(f"{tag}-in")
            time.sleep(0.2)
            order.append(f"{tag}-out")

    threads = [threading.Thread(target=writer, args=(t,)) for t in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first, second = order[0][0], order[2][0]
    assert (
        order == [f"{first}-in", f"{first}-out", f"{second}-in", f"{second}-out"] and first != second
    )  # never interleaved
    write_run_files(run_dir, {"run.json": dumps_json({"complete": True})}, {"complete": True})
    assert os.listdir(tmp_path / "results" / "small") == ["run"]  # no `.run.lock` beside the run
    assert lock.lock_path(run_dir).parent == tmp_path / "cache" / "locks" / "runs"
    # the same folder through another spelling (a symbolic link) takes the same lock
    (tmp_path / "alias").symlink_to(tmp_path / "results")
    assert lock.lock_path(tmp_path / "alias" / "small" / "run") == lock.lock_path(run_dir)


def test_run_lock_timeout_is_a_one_line_error(tmp_path, monkeypatch):
    from pytest_pstbench.core.files import lock

    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PSTBENCH_LOCK_TIMEOUT", "0.2")
    run_dir = tmp_path / "results" / "small" / "run"
    import subprocess
    import sys

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\nfrom pytest_pstbench.core.files.lock import run_lock\n"
            "with run_lock(sys.argv[1]):\n    print('locked', flush=True)\n    sys.stdin.read()\n",
            str(run_dir),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(UserError) as exc:
            with lock.run_lock(run_dir):
                pass
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert str(exc.value) == (
        f"{run_dir}: another pstbench process is writing this run (lock {lock.lock_path(run_dir)} "
        "still held after 0.2 s); fix: wait for it to finish, or give this run another name"
    )
    with lock.run_lock(run_dir):  # released with its holder
        pass


def test_run_lock_with_a_read_only_cache_falls_back_beside_the_run(tmp_path, monkeypatch):
    from pytest_pstbench.core.files import lock

    cache = tmp_path / "cache"
    monkeypatch.setenv("PSTBENCH_CACHE", str(cache))
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p).startswith(str(cache)) else real_access(p, mode))
    run_dir = tmp_path / "results" / "small" / "run"
    with lock.run_lock(run_dir) as held:
        assert held == run_dir.parent / ".run.lock"  # a read-only cache (e.g. a CI home): as before, beside the run
