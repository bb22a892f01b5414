"""A Hub that accepts a connection and never answers: every request is bounded by a timeout, and the
user sees one line.

Found by issue #11 (a number the kit prints is right or absent): each test reproduces one case of the issue
(its number in the test's docstring) and checks the fixed behaviour."""

from __future__ import annotations

import os

import pytest

from pytest_pstbench.cli import main as cli_main


def test_a_silent_endpoint_times_out_with_one_line(tmp_path):
    """Issue #11 case 14."""
    import socket
    import subprocess
    import sys
    import threading
    import time

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held = []
    stop = threading.Event()

    def accept():  # accept every connection, never answer
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    url = f"http://127.0.0.1:{srv.getsockname()[1]}"
    env = {
        **os.environ,
        "HF_ENDPOINT": url,
        "PSTBENCH_DATA": str(tmp_path / "data"),
        "HF_HOME": str(tmp_path / "hf"),
        "PSTBENCH_NETWORK_TIMEOUT": "0.5",
    }
    env.pop("HF_HUB_OFFLINE", None)
    try:
        start = time.monotonic()
        r = subprocess.run(
            [sys.executable, "-m", "pytest_pstbench.cli", "data", "fetch", "pst50", "--splits", "paired_gt"],
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
        )
        took = time.monotonic() - start
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        srv.close()
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"pstbench: error: zrgong/PST50: no answer from {url} within 0.5 s while resolving revision "
    )
    assert last.endswith(
        "(3 attempts); fix: check the network and HF_ENDPOINT, set PSTBENCH_NETWORK_TIMEOUT "
        "(seconds) to wait longer, or register a copy you have with --from DIR"
    )
    assert "Traceback" not in r.stderr
    assert took < 30
    assert list((tmp_path / "data").rglob("pstbench-lock.json")) == []  # nothing registered


def test_the_network_timeout_value_is_checked(monkeypatch):
    """Issue #11 case 14."""
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.core.hub.client import network_timeout

    monkeypatch.setenv("PSTBENCH_NETWORK_TIMEOUT", "soon")
    with pytest.raises(UserError, match=r"^PSTBENCH_NETWORK_TIMEOUT='soon': expected a number of seconds > 0; "):
        network_timeout()
    monkeypatch.delenv("PSTBENCH_NETWORK_TIMEOUT")
    assert network_timeout() == 30.0


def test_a_tree_listing_that_never_answers_times_out(tmp_path, monkeypatch, capsys):
    """Issue #11 case 14."""
    import hashlib
    import time

    import huggingface_hub.utils._http as hf_http
    from helpers.hub_server import FakeHub, make_pst50_files

    sha = "6ed86e3" + hashlib.sha1(b"pst50").hexdigest()[:33]
    hub = FakeHub().start()
    try:
        hub.add_commit("zrgong/PST50", sha, make_pst50_files(n=4), refs=["main"])
        hub.hang.add("/tree/")
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("PSTBENCH_DATA", str(tmp_path / "data"))
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
        monkeypatch.setenv("PSTBENCH_NETWORK_TIMEOUT", "0.3")
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.setattr(hf_http.time, "sleep", lambda s: None)  # huggingface_hub's backoff, not waited here
        start = time.monotonic()
        assert cli_main(["data", "fetch", "pst50", "--splits", "paired_gt"]) == 2
        assert time.monotonic() - start < 20
    finally:
        hub.stop()
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(
        f"pstbench: error: zrgong/PST50: no answer from {hub.url} within 0.3 s while listing split folder "
    )
    assert "(after huggingface_hub's retries with backoff); fix: check the network and HF_ENDPOINT" in err
    assert list((tmp_path / "data").rglob("pstbench-lock.json")) == []
