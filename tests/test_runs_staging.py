"""runs.staging_dir / swap_dir_into_place / replace_stale_dir: build beside the target, rename into place."""
from __future__ import annotations

import os
import stat

import pytest

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.runs import replace_stale_dir, staging_dir, swap_dir_into_place


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
