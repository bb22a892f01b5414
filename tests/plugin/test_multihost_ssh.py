"""Issue #32: docs/pytest.md's multi-host command, run as written over a real ssh gateway (an OpenSSH server
started on 127.0.0.1 for the test, with its own host key, client key and config; skipped where no sshd can
be started). The workers are ssh hosts in another folder, with the cache folder handed over in the gateway
spec as the docs say; the run's files equal a serial run's byte for byte, and the gate decides the same."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
from helpers.tracks import make_outputs, make_track

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)
pytestmark = pytest.mark.skipif(
    not (SSHD and shutil.which("ssh") and shutil.which("ssh-keygen")),
    reason="needs OpenSSH (sshd, ssh, ssh-keygen): apt-get install openssh-server",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ssh_host(tmp_path_factory):
    """An sshd on 127.0.0.1 that lets this user in with a key of its own; yields (host alias, ssh config file)."""
    d = tmp_path_factory.mktemp("sshd")
    for key in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)], check=True)
    shutil.copy(d / "client_key.pub", d / "authorized_keys")
    port = _free_port()
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host_key'}\nAuthorizedKeysFile {d / 'authorized_keys'}\n"
        f"PidFile {d / 'sshd.pid'}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
    )
    (d / "ssh_config").write_text(
        f"Host pstbench-test\n  HostName 127.0.0.1\n  Port {port}\n  User {getpass.getuser()}\n"
        f"  IdentityFile {d / 'client_key'}\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n"
        "  UserKnownHostsFile /dev/null\n  BatchMode yes\n  LogLevel ERROR\n"
    )
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege separation folder, when run as root
    server = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(d / "sshd_config")], stdout=subprocess.DEVNULL, stderr=open(d / "sshd.log", "wb")
    )
    try:
        for _ in range(50):
            probe = subprocess.run(["ssh", "-F", str(d / "ssh_config"), "pstbench-test", "true"], capture_output=True)
            if probe.returncode == 0:
                break
            if server.poll() is not None:
                break
            time.sleep(0.2)
        else:
            probe = None
        if probe is None or probe.returncode != 0:
            pytest.skip(f"could not start or log in to an sshd on 127.0.0.1: {(d / 'sshd.log').read_text()[-300:]}")
        yield "pstbench-test", d / "ssh_config"
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_the_documented_multi_host_command_over_ssh_equals_a_serial_run(pytester, ssh_host, tmp_path):
    host, config = ssh_host
    manifest = make_track(pytester.path / "track", n=4)
    make_outputs(manifest, pytester.path / "out")
    elsewhere = tmp_path / "worker-home"  # the workers' folder on the "host": not the controller's
    elsewhere.mkdir()
    cache = os.environ["PSTBENCH_CACHE"]  # the test session's cache, holding the LPIPS weights
    # docs/pytest.md, "Several machines": the gateway spec names the host's python, its folder and its cache
    spec = f"2*ssh={host}//ssh_config={config}//python={sys.executable}//chdir={elsewhere}//env:PSTBENCH_CACHE={cache}"
    args = ("-p", "no:cacheprovider", "--pstbench-track=track/track.yaml", "--pstbench-outputs=out")
    run = pytester.path / "results" / "small" / "out"

    r = pytester.runpytest_subprocess(
        *args, "--dist=load", f"--tx={spec}", "--max-worker-restart=0", "--pstbench-min=psnr=5"
    )
    out = r.stdout.str()
    assert r.ret == 0, out + r.stderr.str()
    r.assert_outcomes(passed=4)
    assert "created: 2/2 workers" in out  # the items ran on the two ssh workers
    record = json.loads((run / "run.json").read_text())
    assert not [d for d in record["deviations"] if d["kind"] == "environment_differs"]
    distributed = {name: (run / name).read_bytes() for name in ("metrics.csv", "summary.json")}

    # the gate fails over ssh exactly as serially (a bound no run reaches)
    failing = pytester.runpytest_subprocess(
        *args, "--dist=load", f"--tx={spec}", "--max-worker-restart=0", "--pstbench-min=psnr=99"
    )
    assert failing.ret == 1
    serial_failing = pytester.runpytest_subprocess(*args, "--pstbench-min=psnr=99")
    assert serial_failing.ret == 1
    gate_line = [line for line in failing.stdout.lines if "pstbench gate FAILED" in line]
    assert gate_line and gate_line == [line for line in serial_failing.stdout.lines if "pstbench gate FAILED" in line]
    for name, data in distributed.items():
        assert (run / name).read_bytes() == data, name  # the serial run wrote the same bytes
