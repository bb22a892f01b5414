"""A Hub that cannot be reached says why, in its own words, and names the fix that works for that case (issue #45
item 1): `pstbench data fetch pst50` with a host name that does not resolve failed after 3 s with "no answer ...
within 30 s ... set PSTBENCH_NETWORK_TIMEOUT ... to wait longer", which cannot help. Each case is made on this
machine (tests/helpers/unreachable.py) and run through the real commands; the fixes named are then tried.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time

import pytest
from helpers.hub_server import TLS_CERT, FakeHub, make_pst50_files
from helpers.unreachable import KINDS, TIMEOUT_VAR, UNRESOLVED, endpoint, says

from pytest_pstbench.cli import main as cli_main

PST50_SHA = "6ed86e3" + hashlib.sha1(b"pst50").hexdigest()[:33]  # the commit the pst50 manifest pins starts 6ed86e3
FETCH = ("data", "fetch", "pst50", "--splits", "paired_gt")


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("PSTBENCH_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv(TIMEOUT_VAR, "0.3")
    for name in ("HF_HUB_OFFLINE", "SSL_CERT_FILE", "SSL_CERT_DIR", "HF_TOKEN", "PSTBENCH_REMOTE_MANIFESTS"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def run(capsys, *argv) -> tuple[int, str, float]:
    """(exit status, the last line of stderr, seconds) of `pstbench argv` in this process."""
    capsys.readouterr()
    t0 = time.monotonic()
    code = cli_main(list(argv))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, (err.strip().splitlines() or [""])[-1], time.monotonic() - t0


@pytest.mark.parametrize("kind", KINDS)
def test_data_fetch_says_why_the_hub_cannot_be_reached(env, capsys, kind):
    """Issue #45 item 1: name not resolved, connection refused, TLS and timeout each in its own words, each with its
    fix (DNS or a mirror; HF_ENDPOINT's host and port; SSL_CERT_FILE; only then PSTBENCH_NETWORK_TIMEOUT)."""
    with endpoint(kind) as url:
        env.setenv("HF_ENDPOINT", url)
        code, last, took = run(capsys, *FETCH)
    assert code == 2 and last.startswith("pstbench: error: zrgong/PST50: "), last
    assert says(kind, url, last) == [], last
    assert "register a copy you have with --from DIR" in last and took < 10, (took, last)


@pytest.mark.parametrize("kind", KINDS)
def test_runs_pull_says_why_the_hub_cannot_be_reached(env, capsys, kind):
    """Issue #45 item 1, the same through `pstbench runs pull` of a published run."""
    uri = "hf://datasets/me/board@main/t/a"
    with endpoint(kind) as url:
        env.setenv("HF_ENDPOINT", url)
        code, last, took = run(capsys, "runs", "pull", uri)
    assert code == 2 and last.startswith(f"pstbench: error: {uri}: "), last
    assert says(kind, url, last) == [] and took < 10, (took, last)


def test_a_name_that_does_not_resolve_names_the_cache_that_works_offline(env, capsys, tmp_path):
    """Issue #45 item 1: with a copy fetched before, the message names HF_HUB_OFFLINE=1, and HF_HUB_OFFLINE=1 then
    works; the mirror it names (HF_ENDPOINT) works too."""
    hub = FakeHub().start()
    try:
        hub.add_commit("zrgong/PST50", PST50_SHA, make_pst50_files(size=(16, 20)), refs=["main"])
        env.setenv("HF_ENDPOINT", hub.url)  # a mirror you can reach
        assert run(capsys, *FETCH)[0] == 0
    finally:
        hub.stop()
    env.setenv("HF_ENDPOINT", UNRESOLVED)
    code, last, _ = run(capsys, *FETCH)
    assert code == 2 and says("unresolved", UNRESOLVED, last) == [], last
    assert f"set HF_HUB_OFFLINE=1 to use the copy fetched before ({tmp_path / 'data'}" in last, last
    env.setenv("HF_HUB_OFFLINE", "1")
    assert run(capsys, *FETCH)[0] == 0


def test_an_untrusted_certificate_names_the_variable_that_trusts_it(env, capsys):
    """Issue #45 item 1: a Hub mirror behind TLS with a certificate the client does not trust: the message names
    SSL_CERT_FILE, and SSL_CERT_FILE set to the certificate's bundle makes the same fetch work."""
    hub = FakeHub().start(tls=True)
    try:
        hub.add_commit("zrgong/PST50", PST50_SHA, make_pst50_files(size=(16, 20)), refs=["main"])
        env.setenv("HF_ENDPOINT", hub.url)
        code, last, _ = run(capsys, *FETCH)
        assert code == 2 and says("tls", hub.url, last) == [], last
        env.setenv("SSL_CERT_FILE", TLS_CERT)  # read when the HTTP client is made: a new process, as a user's next try
        r = subprocess.run(
            [sys.executable, "-m", "pytest_pstbench.cli", *FETCH],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ),
        )
        assert r.returncode == 0, r.stderr[-2000:]
    finally:
        hub.stop()
