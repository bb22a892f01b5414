"""The scoring pipeline (paired/planner.py): decode-ahead worker threads and several methods in one call.

What must hold: the run files do not depend on the number of workers nor on how many methods share
a call (the same bytes as one `pstbench score` per folder, and as the pytest items' path), the
reference work of a pair is done once for all methods, and bad options are one-line errors.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track
from PIL import Image

from pytest_pstbench.cli import main as cli_main

RUN_FILES = ("metrics.csv", "summary.json")


def _files(run_dir: Path) -> dict[str, bytes]:
    return {f: (run_dir / f).read_bytes() for f in RUN_FILES}


@pytest.fixture
def setup(tmp_path):
    manifest = make_track(tmp_path / "track", n=5)
    a = make_outputs(manifest, tmp_path / "a", strength=0.3)
    b = make_outputs(manifest, tmp_path / "b", strength=0.8)
    return manifest, a, b, protocol_without_lpips(tmp_path / "proto.yaml")


def _score(tmp_path, manifest, proto, results, *outputs_and_extra):
    return cli_main(
        [
            "score",
            "--track",
            str(manifest),
            "--protocol",
            str(proto),
            "--results",
            str(tmp_path / results),
            "--no-cache",
            *outputs_and_extra,
        ]
    )


def test_several_outputs_in_one_call_equal_one_call_each(tmp_path, setup, capsys):
    manifest, a, b, proto = setup
    assert _score(tmp_path, manifest, proto, "one", "--outputs", str(a)) == 0
    assert _score(tmp_path, manifest, proto, "one", "--outputs", str(b)) == 0
    capsys.readouterr()
    assert _score(tmp_path, manifest, proto, "both", "--outputs", str(a), str(b)) == 0
    out = capsys.readouterr().out
    for name in ("a", "b", "identity"):
        assert _files(tmp_path / "both" / "small" / name) == _files(tmp_path / "one" / "small" / name), name
    rows = [line.split()[0] for line in out.splitlines()[3:5]]
    assert rows == ["Identity", "a"] and out.splitlines()[5].split()[0] == "b"  # Identity, then the folders in order


@pytest.mark.parametrize("workers", ["1", "3"])
def test_values_do_not_depend_on_workers(tmp_path, setup, workers):
    manifest, a, _, proto = setup
    assert _score(tmp_path, manifest, proto, "serial", "--outputs", str(a), "-j", "1") == 0
    assert _score(tmp_path, manifest, proto, f"j{workers}", "--outputs", str(a), "--workers", workers) == 0
    assert _files(tmp_path / f"j{workers}" / "small" / "a") == _files(tmp_path / "serial" / "small" / "a")


def test_pipeline_equals_the_pytest_items_path(tmp_path, setup, pytester):
    manifest, a, _, proto = setup
    assert _score(tmp_path, manifest, proto, "cli", "--outputs", str(a)) == 0
    r = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={manifest}",
        f"--pstbench-protocol={proto}",
        f"--pstbench-outputs={a}",
        f"--pstbench-results={tmp_path / 'py'}",
        "--pstbench-no-cache",
    )
    r.assert_outcomes(passed=5)
    assert (tmp_path / "py" / "small" / "a" / "metrics.csv").read_bytes() == (
        tmp_path / "cli" / "small" / "a" / "metrics.csv"
    ).read_bytes()


def test_reference_and_style_decoded_once_per_pair_for_all_methods(tmp_path, setup, monkeypatch):
    manifest, a, b, proto = setup
    from pytest_pstbench.paired import imageio

    decoded = []
    real = imageio.load_dataset_image

    def counting(path, protocol, role="dataset image"):
        decoded.append((Path(path).name, role))
        return real(path, protocol, role=role)

    monkeypatch.setattr(imageio, "load_dataset_image", counting)
    assert _score(tmp_path, manifest, proto, "r", "--outputs", str(a), str(b)) == 0
    refs = [name for name, role in decoded if role.startswith("reference of")]
    styles = [name for name, role in decoded if role.startswith("style of")]
    # a, b and the Identity row: 3 runs, yet each reference and style is read once
    assert len(refs) == 5 and len(set(refs)) == 5 and len(styles) == 5


def test_a_failing_pair_fails_only_its_own_run(tmp_path, setup, capsys):
    manifest, a, b, proto = setup
    Image.fromarray(np.zeros((10, 10, 3), np.uint8)).save(b / "p02.png")  # wrong size, no --allow-resize
    assert _score(tmp_path, manifest, proto, "r", "--outputs", str(a), str(b)) == 1
    run_a = json.loads((tmp_path / "r" / "small" / "a" / "run.json").read_text())
    run_b = json.loads((tmp_path / "r" / "small" / "b" / "run.json").read_text())
    assert run_a["complete"] is True
    assert run_b["complete"] is False and [f["pair"] for f in run_b["failures"]] == ["p02"]


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_bad_workers_is_one_line(tmp_path, setup, capsys, value):
    manifest, a, _, proto = setup
    assert _score(tmp_path, manifest, proto, "r", "--outputs", str(a), f"--workers={value}") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"pstbench: error: --workers {value!r}: expected a whole number of worker threads, at least 1 (e.g. --workers 4)"
    ]
    assert not (tmp_path / "r").exists()


def test_name_with_several_outputs_is_refused(tmp_path, setup, capsys):
    manifest, a, b, proto = setup
    assert _score(tmp_path, manifest, proto, "r", "--outputs", str(a), str(b), "--name", "x") == 2
    err = capsys.readouterr().err
    assert "--name x: names one run, but 2 --outputs folders were given" in err and "Traceback" not in err
    assert not (tmp_path / "r").exists()


def test_two_folders_with_one_name_are_refused(tmp_path, setup, capsys):
    manifest, a, _, proto = setup
    other = tmp_path / "elsewhere" / "a"
    other.parent.mkdir()
    import shutil

    shutil.copytree(a, other)
    assert _score(tmp_path, manifest, proto, "r", "--outputs", str(a), str(other)) == 2
    err = capsys.readouterr().err
    assert f"--outputs {a} and {other}: both would be run a" in err
    assert not (tmp_path / "r").exists()


def test_xdist_gateways_spelled_tx_give_the_serial_run_files(tmp_path, setup, pytester):
    # `--tx N*popen` is the gateway spelling of the multi-machine command in docs/pytest.md (ssh= there)
    manifest, a, _, proto = setup
    base = (
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={manifest}",
        f"--pstbench-protocol={proto}",
        f"--pstbench-outputs={a}",
        "--pstbench-no-cache",
    )
    serial = pytester.runpytest_subprocess(*base, f"--pstbench-results={tmp_path / 'serial'}")
    spread = pytester.runpytest_subprocess(
        *base, f"--pstbench-results={tmp_path / 'tx'}", "--dist", "load", "--tx", "2*popen"
    )
    serial.assert_outcomes(passed=5)
    spread.assert_outcomes(passed=5)
    assert "gw1" in spread.stdout.str() or "2 workers" in spread.stdout.str()
    assert _files(tmp_path / "tx" / "small" / "a") == _files(tmp_path / "serial" / "small" / "a")


def test_cuda_without_cuda_is_refused_before_scoring(tmp_path, setup, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    manifest, a, _, proto = setup  # a protocol without LPIPS: SSIM and CIEDE2000 run on the device too
    assert _score(tmp_path, manifest, proto, "r", "--outputs", str(a), "--device", "cuda") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "pstbench: error: device 'cuda' was asked for, but CUDA is not available here"
    )
    assert not (tmp_path / "r").exists()


def test_an_incomplete_identity_row_is_scored_once(tmp_path, setup, monkeypatch, capsys):
    from pytest_pstbench.paired.session import RunSession

    manifest, a, _, proto = setup
    (manifest.parent / "p03_content.png").write_bytes(b"not a png at all")  # only Identity reads the content
    finished = []
    real = RunSession.finish

    def counting(self, *args, **kwargs):
        finished.append(self.name)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(RunSession, "finish", counting)
    assert _score(tmp_path, manifest, proto, "r", "--outputs", str(a)) == 1
    out, err = capsys.readouterr()
    assert "Identity (incomplete: 4 of 5 pairs)" in out and "the Identity row is incomplete: 4 of 5 pairs scored" in err
    assert sorted(finished) == ["a", "identity"]  # not scored a second time for the table's row


LOAD_LOGGER = """
import threading
from pathlib import Path

import pytest_pstbench.paired.session as session_mod

_real = session_mod.RunSession.load


def _logged(self, pair, output, dataset_images):
    with open(LOG, "a") as fh:
        fh.write(f"{pair.id} {threading.current_thread().name}\\n")
    return _real(self, pair, output, dataset_images)


session_mod.RunSession.load = _logged
"""


@pytest.mark.parametrize("xdist", [False, True])
def test_pytest_items_load_the_next_pair_ahead_in_a_thread(tmp_path, setup, pytester, xdist):
    """Each item's files are loaded while the item before it (in this process) computes: every pair
    but the first of each process is loaded in the loader thread, each once, and the run files are
    those of `pstbench score`."""
    manifest, a, _, proto = setup
    log = tmp_path / "loads.txt"
    pytester.makeconftest(f"LOG = {str(log)!r}\n" + LOAD_LOGGER)
    extra = ("-n", "2") if xdist else ()
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={manifest}",
        f"--pstbench-protocol={proto}",
        f"--pstbench-outputs={a}",
        "--pstbench-no-cache",
        f"--pstbench-results={tmp_path / 'py'}",
        *extra,
    )
    result.assert_outcomes(passed=5)
    loads = [line.split() for line in log.read_text().splitlines()]
    assert len(loads) == len({p for p, _ in loads}) == 5  # each pair loaded once
    in_thread = [p for p, t in loads if t.startswith("pstbench-load")]
    in_main = [p for p, t in loads if t == "MainThread"]
    assert len(in_thread) + len(in_main) == 5
    assert 1 <= len(in_main) <= (2 if xdist else 1) and len(in_thread) >= 3
    assert _score(tmp_path, manifest, proto, "cli", "--outputs", str(a)) == 0
    assert _files(tmp_path / "py" / "small" / "a") == _files(tmp_path / "cli" / "small" / "a")


THREADS_LOGGER = """
import os


def pytest_runtest_teardown(item):
    import torch

    with open(LOG, "a") as fh:
        fh.write(f"{item.name} {torch.get_num_threads()} {os.environ.get('OMP_WAIT_POLICY')}\\n")
"""


@pytest.mark.parametrize("policy", [None, "ACTIVE"])
def test_xdist_workers_wait_passively_with_the_serial_thread_count(tmp_path, setup, pytester, monkeypatch, policy):
    """Under xdist the workers keep torch's thread count (the values, hence the run files, stay those of a
    serial run) and OpenMP waits passively (busy-waiting workers stalled each other), unless the user
    chose a policy."""
    import os

    import torch

    manifest, a, _, proto = setup
    log = tmp_path / "threads.txt"
    pytester.makepyfile(threadlog=f"LOG = {str(log)!r}\n" + THREADS_LOGGER)  # a plugin (-p): its hooks see every item
    monkeypatch.setenv("PYTHONPATH", str(pytester.path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    if policy is None:
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    else:
        monkeypatch.setenv("OMP_WAIT_POLICY", policy)
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "-p",
        "threadlog",
        f"--pstbench-track={manifest}",
        f"--pstbench-protocol={proto}",
        f"--pstbench-outputs={a}",
        "--pstbench-no-cache",
        f"--pstbench-results={tmp_path / 'r'}",
        "-n",
        "2",
    )
    result.assert_outcomes(passed=5)
    seen = {tuple(line.split()[1:]) for line in log.read_text().splitlines()}
    assert seen == {(str(torch.get_num_threads()), policy or "PASSIVE")}  # the thread count of this (serial) process
