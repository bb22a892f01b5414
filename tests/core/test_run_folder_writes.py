"""Run folders are written whole: a failed, killed or concurrent writer never leaves a mixed or
partial run in place of the previous complete one.

Found by issue #11 (a number the kit prints is right or absent): each test reproduces one case of the issue
(its number in the test's docstring) and checks the fixed behaviour."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.protocols import protocol_without_lpips
from helpers.run_files import RUN_FILES, snapshot
from helpers.scoring import score_cli
from helpers.tracks import make_outputs, make_track

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.files.lock import lock_path


def _fail_second_fsync(monkeypatch):
    real = os.fsync
    calls = []

    def fsync(fd):
        calls.append(fd)
        if len(calls) == 2:  # the second run file: a full disk in the middle of writing the run
            raise OSError(28, "No space left on device")
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def test_a_failed_write_keeps_the_previous_complete_run(tmp_path, monkeypatch, capsys):
    """Issue #11 case 02."""
    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    first = make_outputs(manifest, tmp_path / "first", strength=0.9)
    assert score_cli(tmp_path, manifest, first, proto) == 0
    run_dir = tmp_path / "results" / "small" / "run"
    (run_dir / "notes.txt").write_text("kept")  # other files of the folder are carried over
    before = snapshot(run_dir)
    second = make_outputs(manifest, tmp_path / "second", strength=0.2)
    capsys.readouterr()
    _fail_second_fsync(monkeypatch)
    assert score_cli(tmp_path, manifest, second, proto) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(
        f"pstbench: error: {run_dir}: cannot write the run files ([Errno 28] No space left on device); fix: "
    )
    assert err.endswith("the previous run there (if any) is unchanged")
    assert snapshot(run_dir) == before  # the old complete run, whole
    assert json.loads((run_dir / "run.json").read_text())["complete"] is True
    leftovers = [p.name for p in run_dir.parent.iterdir() if ".build-" in p.name or ".old-" in p.name]
    assert leftovers == []
    monkeypatch.undo()
    assert score_cli(tmp_path, manifest, second, proto) == 0  # a successful write replaces the folder whole
    assert snapshot(run_dir) != before
    assert (run_dir / "notes.txt").read_text() == "kept"


def test_a_failed_selection_write_keeps_the_previous_complete_run(tmp_path, monkeypatch, capsys):
    """Issue #11 case 02."""
    from pytest_pstbench.selection.demo import build_vab_demo

    manifest = build_vab_demo(tmp_path / "vab-demo", size=(32, 24))
    judges = Path(__file__).resolve().parents[2] / "examples" / "judges" / "no_reference.py"
    args = ["vab", "score", "--track", str(manifest), "--results", str(tmp_path / "r"), "--name", "j"]
    assert cli_main([*args, "--judge", f"{judges}:sharpness"]) == 0
    run_dir = tmp_path / "r" / "vab-demo" / "j"
    files = ("per_task.csv", "summary.json", "run.json")
    before = snapshot(run_dir, files)
    capsys.readouterr()
    _fail_second_fsync(monkeypatch)
    assert cli_main([*args, "--judge", f"{judges}:colourfulness"]) == 2
    assert "cannot write the run files ([Errno 28] No space left on device)" in capsys.readouterr().err
    assert snapshot(run_dir, files) == before


def test_run_files_follow_the_umask(tmp_path):
    """Issue #11 case 02."""
    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    outputs = make_outputs(manifest, tmp_path / "out")
    old = os.umask(0o027)
    try:
        assert score_cli(tmp_path, manifest, outputs, proto) == 0
    finally:
        os.umask(old)
    run_dir = tmp_path / "results" / "small" / "run"
    for f in RUN_FILES:
        assert (run_dir / f).stat().st_mode & 0o777 == 0o640, f


_HOLD_LOCK = """
import sys, time
from pytest_pstbench.core.files.lock import run_lock
with run_lock(sys.argv[1]):
    print("locked", flush=True)
    sys.stdin.read()
"""


def test_a_second_writer_waits_then_refuses_with_one_line(tmp_path):
    """Issue #11 case 08."""
    import subprocess
    import sys

    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    outputs = make_outputs(manifest, tmp_path / "out")
    run_dir = tmp_path / "results" / "small" / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(run_dir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        env = {**os.environ, "PSTBENCH_LOCK_TIMEOUT": "1"}
        cmd = [
            sys.executable,
            "-m",
            "pytest_pstbench.cli",
            "score",
            "--track",
            str(manifest),
            "--outputs",
            str(outputs),
            "--name",
            "run",
            "--results",
            str(tmp_path / "results"),
            "--protocol",
            str(proto),
            "--no-cache",
        ]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1] == (
        f"pstbench: error: {run_dir}: another pstbench process is writing this run (lock "
        f"{lock_path(run_dir)} still held after 1 s); fix: wait for it to finish, or give this run another name"
    )
    assert "Traceback" not in r.stderr
    assert not run_dir.exists()
    # once the holder is gone, the same command writes the run
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_two_concurrent_writers_never_mix_a_run(tmp_path):
    """Issue #11 case 08."""
    import subprocess
    import sys

    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    outs = {s: make_outputs(manifest, tmp_path / f"out{s}", strength=s) for s in (0.2, 0.9)}

    def cmd(out, results, name="run"):
        return [
            sys.executable,
            "-m",
            "pytest_pstbench.cli",
            "score",
            "--track",
            str(manifest),
            "--outputs",
            str(out),
            "--name",
            name,
            "--results",
            str(results),
            "--protocol",
            str(proto),
            "--no-cache",
        ]

    for s, out in outs.items():  # what each writer alone produces
        assert subprocess.run(cmd(out, tmp_path / f"alone{s}"), capture_output=True).returncode == 0
    for _round in range(2):
        procs = [
            subprocess.Popen(cmd(out, tmp_path / "shared"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for out in outs.values()
        ]
        for p in procs:
            _out, err = p.communicate(timeout=300)
            assert p.returncode == 0 and b"Traceback" not in err, err
        run_dir = tmp_path / "shared" / "small" / "run"
        winner = [
            s for s, out in outs.items() if json.loads((run_dir / "run.json").read_text())["outputs_dir"] == str(out)
        ]
        assert len(winner) == 1
        alone = tmp_path / f"alone{winner[0]}" / "small" / "run"
        assert snapshot(run_dir, ("metrics.csv", "summary.json")) == snapshot(alone, ("metrics.csv", "summary.json"))


_KILLED_WRITER = """
import os, sys, time
real = os.fsync
calls = []
def fsync(fd):
    calls.append(fd)
    if len(calls) == 2:  # in the middle of writing the run files
        print("writing", flush=True)
        time.sleep(600)
    return real(fd)
os.fsync = fsync
from pytest_pstbench.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_writer_killed_during_the_write_keeps_the_previous_complete_run(tmp_path):
    """Issue #11 case 02."""
    import signal
    import subprocess
    import sys

    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    first = make_outputs(manifest, tmp_path / "first", strength=0.9)
    assert score_cli(tmp_path, manifest, first, proto) == 0
    run_dir = tmp_path / "results" / "small" / "run"
    before = snapshot(run_dir)
    second = make_outputs(manifest, tmp_path / "second", strength=0.2)
    p = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _KILLED_WRITER,
            "score",
            "--track",
            str(manifest),
            "--outputs",
            str(second),
            "--name",
            "run",
            "--results",
            str(tmp_path / "results"),
            "--protocol",
            str(proto),
            "--no-cache",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert p.stdout.readline().strip() == "writing"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
    assert snapshot(run_dir) == before
    # the killed writer's lock died with it: the next run is not blocked, and replaces the folder whole
    assert score_cli(tmp_path, manifest, second, proto, "--no-cache") == 0
    assert snapshot(run_dir) != before


def test_a_writer_killed_between_the_renames_is_recovered_under_the_lock(tmp_path):
    """Issue #11 case 02."""
    from pytest_pstbench.core.errors import UserError as _UserError
    from pytest_pstbench.core.files.write import dumps_json
    from pytest_pstbench.core.store.folder import write_run_files

    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    outputs = make_outputs(manifest, tmp_path / "out", strength=0.9)
    assert score_cli(tmp_path, manifest, outputs, proto) == 0
    run_dir = tmp_path / "results" / "small" / "run"
    before = snapshot(run_dir)
    # what a kill after "old moved aside" and before "new renamed in" leaves: no run folder, the old one aside,
    # and a staging folder
    os.rename(run_dir, run_dir.parent / ".run.old-0badc0de")
    (run_dir.parent / ".run.build-x1").mkdir()
    partial = {
        "n_pairs": 4,
        "n_scored": 1,
        "deviations": [{"kind": "pairs_not_scored", "pairs": ["p02", "p03", "p04"]}],
    }
    with pytest.raises(_UserError, match="holds a complete run"):
        write_run_files(run_dir, {"run.json": dumps_json(partial)}, partial)
    assert snapshot(run_dir) == before  # the previous run is back in place, and kept
    assert sorted(p.name for p in run_dir.parent.iterdir() if p.name.startswith(".")) == []  # no lock file either
