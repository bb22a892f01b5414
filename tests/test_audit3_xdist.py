"""Issue #32 item 26: a pair lost to a crashed pytest-xdist worker is named as lost, not as deselected."""
from __future__ import annotations

import pytest

from conftest import make_outputs, make_track, protocol_without_lpips

KILLER = '''
import os

LOST = {lost!r}


def pytest_runtest_call(item):
    if item.nodeid.rpartition("::")[2] in LOST:
        os._exit(3)  # the worker dies as if killed
'''


@pytest.mark.parametrize("lost, n_pairs, expected", [
    (("p02",), 4, "the run is incomplete (3 of 4 pairs scored; 1 of the track's 4 pairs was lost to a crashed xdist "
                  "worker (p02: killed, or out of memory)), so the gate could not be evaluated"),
    (("p01", "p02"), 2, "no pair of track small was scored in this session (2 of the track's 2 pairs were lost to a "
                        "crashed xdist worker ("),
])
def test_a_pair_lost_to_a_crashed_worker_is_named(pytester, lost, n_pairs, expected):
    manifest = make_track(pytester.path / "track", n=n_pairs)
    outputs = make_outputs(manifest, pytester.path / "out")
    proto = protocol_without_lpips(pytester.path / "proto.yaml")
    pytester.makeconftest(KILLER.format(lost=set(lost)))
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--pstbench-track={manifest}",
                                      f"--pstbench-protocol={proto}", f"--pstbench-outputs={outputs}",
                                      "--pstbench-min=psnr=1", "-n", "2", "--max-worker-restart=4")
    out = r.stdout.str() + r.stderr.str()
    assert r.ret != 0
    assert expected in out
    assert "deselected" not in out


def test_relative_paths_are_read_on_the_controller_by_workers_running_elsewhere(pytester, tmp_path):
    """Issue #32 item 24: workers started in another folder (`--tx popen//chdir=DIR`, as an ssh host is) read
    relative --pstbench-track/--pstbench-protocol/--pstbench-outputs as the controller does; the values equal a
    serial run's byte for byte."""
    manifest = make_track(pytester.path / "track", n=4)
    make_outputs(manifest, pytester.path / "out")
    protocol_without_lpips(pytester.path / "proto.yaml")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    args = ("-p", "no:cacheprovider", "--pstbench-track=track/track.yaml", "--pstbench-protocol=proto.yaml",
            "--pstbench-outputs=out")
    r = pytester.runpytest_subprocess(*args, f"--tx=2*popen//chdir={elsewhere}", "--dist=load", "--max-worker-restart=0")
    r.assert_outcomes(passed=4)
    run = pytester.path / "results" / "small" / "out" / "metrics.csv"
    distributed = run.read_bytes()
    run.unlink()
    pytester.runpytest_subprocess(*args).assert_outcomes(passed=4)
    assert run.read_bytes() == distributed


def test_a_path_given_as_its_own_argument_to_workers_running_elsewhere_is_one_line(pytester, tmp_path):
    """Issue #32 item 23: pytest-xdist stops with an INTERNALERROR ("not relative to an rsync root") on an option
    value given as its own argument when workers run elsewhere; the plugin says so first, with the form that works."""
    manifest = make_track(pytester.path / "track", n=2)
    make_outputs(manifest, pytester.path / "out")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--pstbench-track=track/track.yaml",
                                      "--pstbench-outputs", "out", f"--tx=2*popen//chdir={elsewhere}", "--dist=load")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["ERROR: pstbench: out: pytest-xdist workers that run elsewhere (--tx popen//chdir=*) cannot "
                            "take a command-line argument that names a path outside an --rsyncdir; fix: give it as "
                            "--pstbench-outputs=out"])
    assert "INTERNALERROR" not in r.stdout.str() + r.stderr.str()
