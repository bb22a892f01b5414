"""Issue #32 item 26: a pair lost to a crashed pytest-xdist worker is named as lost, not as deselected.
Found by the third audit (#32)."""

from __future__ import annotations

import pytest
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track

KILLER = """
import os

LOST = {lost!r}


def pytest_runtest_call(item):
    if item.nodeid.rpartition("::")[2] in LOST:
        os._exit(3)  # the worker dies as if killed
"""


@pytest.mark.parametrize(
    "lost, n_pairs, expected",
    [
        (
            ("p02",),
            4,
            "the run is incomplete (3 of 4 pairs scored; 1 of the track's 4 pairs was lost to a crashed xdist "
            "worker (p02: killed, or out of memory)), so the gate could not be evaluated",
        ),
        (
            ("p01", "p02"),
            2,
            "no pair of track small was scored in this session (2 of the track's 2 pairs were lost to a "
            "crashed xdist worker (",
        ),
    ],
)
def test_a_pair_lost_to_a_crashed_worker_is_named(pytester, lost, n_pairs, expected):
    manifest = make_track(pytester.path / "track", n=n_pairs)
    outputs = make_outputs(manifest, pytester.path / "out")
    proto = protocol_without_lpips(pytester.path / "proto.yaml")
    pytester.makeconftest(KILLER.format(lost=set(lost)))
    r = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={manifest}",
        f"--pstbench-protocol={proto}",
        f"--pstbench-outputs={outputs}",
        "--pstbench-min=psnr=1",
        "-n",
        "2",
        "--max-worker-restart=4",
    )
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
    args = (
        "-p",
        "no:cacheprovider",
        "--pstbench-track=track/track.yaml",
        "--pstbench-protocol=proto.yaml",
        "--pstbench-outputs=out",
    )
    r = pytester.runpytest_subprocess(
        *args, f"--tx=2*popen//chdir={elsewhere}", "--dist=load", "--max-worker-restart=0"
    )
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
    r = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--pstbench-track=track/track.yaml",
        "--pstbench-outputs",
        "out",
        f"--tx=2*popen//chdir={elsewhere}",
        "--dist=load",
    )
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(
        [
            "ERROR: pstbench: out: pytest-xdist workers that run elsewhere (--tx popen//chdir=*) cannot "
            "take a command-line argument that names a path outside an --rsyncdir; fix: give it as "
            "--pstbench-outputs=out"
        ]
    )
    assert "INTERNALERROR" not in r.stdout.str() + r.stderr.str()


def _deviations(run_json, kind):
    import json

    return [d for d in json.loads(run_json.read_text())["deviations"] if d["kind"] == kind]


def test_workers_on_other_thread_counts_are_recorded_in_run_json(pytester):
    """Issue #32 item 25: workers on another torch thread count (as on a host with fewer CPUs) compute LPIPS to other
    last digits; run.json recorded only the controller's environment. It now records the environment the values were
    computed in, and a deviation naming each worker's thread count and its pairs when they differ."""
    import json

    manifest = make_track(pytester.path / "track", n=4)
    outputs = make_outputs(manifest, pytester.path / "out")
    args = (
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={manifest}",
        f"--pstbench-outputs={outputs}",
        "--pstbench-no-cache",
        "--dist=load",
        "--max-worker-restart=0",
    )
    run_json = pytester.path / "results" / "small" / "out" / "run.json"

    # every worker on 1 thread, the controller on the machine's count: the run says 1, and nothing differs
    r = pytester.runpytest_subprocess(*args, "--tx=2*popen//env:OMP_NUM_THREADS=1")
    r.assert_outcomes(passed=4)
    assert json.loads(run_json.read_text())["environment"]["torch_threads"] == 1
    assert _deviations(run_json, "environment_differs") == []

    r = pytester.runpytest_subprocess(*args, "--tx=popen//env:OMP_NUM_THREADS=1", "--tx=popen//env:OMP_NUM_THREADS=2")
    r.assert_outcomes(passed=4)
    (dev,) = _deviations(run_json, "environment_differs")
    assert dev["fields"] == ["torch_threads"]
    by_threads = {g["environment"]["torch_threads"]: g for g in dev["groups"]}
    assert set(by_threads) == {1, 2}
    assert by_threads[1]["workers"] == ["gw0"] and by_threads[2]["workers"] == ["gw1"]
    assert sorted(by_threads[1]["pairs"] + by_threads[2]["pairs"]) == ["p01", "p02", "p03", "p04"]
    run = json.loads(run_json.read_text())
    assert (
        run["environment"]["torch_threads"] == dev["groups"][0]["environment"]["torch_threads"]
    )  # most pairs' environment
    assert "the workers computed in different environments (torch_threads)" in r.stdout.str()


SELECTION_WORKER_ON_OTHER_NUMPY = """
import os

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER") == "gw1":  # as a host with another numpy would be
        from pytest_pstbench.selection import session

        base = session.SelectionSession.environment
        session.SelectionSession.environment = lambda self: {**base(self), "numpy": "0.0-other-host"}
"""


def test_selection_workers_with_other_versions_are_recorded_in_run_json(pytester):
    """Item 25 for the selection kind: the environment of each worker's tasks, one path with the paired kind."""
    from pathlib import Path

    judges = Path(__file__).resolve().parents[2] / "examples" / "judges" / "no_reference.py"
    pytester.makeconftest(SELECTION_WORKER_ON_OTHER_NUMPY)
    args = (
        "-p",
        "no:cacheprovider",
        "--pstbench-track=vab-demo",
        f"--pstbench-judge={judges}:sharpness",
        "--dist=load",
        "--max-worker-restart=0",
        "--tx=2*popen",
    )
    r = pytester.runpytest_subprocess(*args)
    assert r.ret == 0, r.stdout.str()
    (dev,) = _deviations(pytester.path / "results" / "vab-demo" / "sharpness" / "run.json", "environment_differs")
    assert dev["fields"] == ["numpy"]
    other = [g for g in dev["groups"] if g["environment"]["numpy"] == "0.0-other-host"]
    assert len(other) == 1 and other[0]["workers"] == ["gw1"] and other[0]["tasks"]


def test_run_environment_groups_by_what_decides_the_values():
    """Hosts keep the LPIPS weights in different folders: one environment when only that path differs; the
    run's environment is most pairs', whatever order the workers' reports arrived in."""
    from pytest_pstbench.core.environment import run_environment
    from pytest_pstbench.paired.run_record import values_key

    def env(threads, path):
        return {"torch": "2", "torch_threads": threads, "lpips_weights": {"digest": "d", "path": path}}

    own = env(4, "/controller")
    same = [(env(2, "/host-a"), "gw0", "p02"), (env(2, "/host-b"), "gw1", "p01")]
    assert run_environment(own, same, ["p01", "p02"], "pair", values_key=values_key) == (
        env(2, "/host-b"),
        None,
    )  # p01's
    assert run_environment(own, None, ["p01"], "pair", values_key=values_key) == (own, None)

    mixed = [(env(1, "/b"), "gw1", "p03"), (env(2, "/a"), "gw0", "p01"), (env(2, "/a"), "gw0", "p02")]
    main, dev = run_environment(own, mixed, ["p01", "p02", "p03"], "pair", values_key=values_key)
    assert main == env(2, "/a")
    assert dev == {
        "kind": "environment_differs",
        "fields": ["torch_threads"],
        "groups": [
            {"environment": {"torch_threads": 2}, "workers": ["gw0"], "pairs": ["p01", "p02"]},
            {"environment": {"torch_threads": 1}, "workers": ["gw1"], "pairs": ["p03"]},
        ],
    }
    # a pair of the run that no worker sent was computed here, in this process's environment
    _, dev = run_environment(own, mixed[1:], ["p01", "p02", "p03"], "pair", values_key=values_key)
    assert dev["groups"][1] == {"environment": {"torch_threads": 4}, "workers": [], "pairs": ["p03"]}
