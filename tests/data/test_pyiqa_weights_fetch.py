"""Issue #43: `pstbench weights fetch pyiqa:NAME` against a local 127.0.0.1 server that serves small generated
weight files (the real hosts cannot be reached here). The fetch pins (the kit's digest, `--pin`, or the digest
recorded on first use) and verifies; a tampered file is refused in one line; a second run makes no request (the
server counts them); a download cut short leaves nothing that a later run takes for good.

Expected digests are computed here with hashlib over the bytes the test generated, never by the code under test.
"""

from __future__ import annotations

import hashlib
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pytest_pstbench.cli import main
from pytest_pstbench.core.files.jsonfile import read_json

MUSIQ = "musiq_koniq_ckpt-e95806b9.pth"  # pyiqa 0.1.16's file for pyiqa:musiq (the shipped table)


class Server:
    """Serves `files` (URL path -> bytes) on 127.0.0.1; `cut`: paths whose answer announces the full length
    and stops half-way; `requests`: every path asked for."""

    def __init__(self, files: dict[str, bytes]):
        self.files, self.cut, self.requests = dict(files), set(), []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                server.requests.append(self.path)
                body = server.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[: len(body) // 2] if self.path in server.cut else body)
                self.wfile.flush()
                if self.path in server.cut:
                    self.close_connection = True

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def world(tmp_path, monkeypatch):
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    files = {
        f"/{MUSIQ}": os.urandom(3000) + b"musiq",
        "/pinned.pth": b"pinned weights " * 100,
        "/other.pth": b"other weights " * 50,
    }
    server = Server(files)
    monkeypatch.setenv("PSTBENCH_PYIQA_WEIGHTS_URL", server.url)
    yield server, tmp_path / "torch" / "hub" / "pyiqa"
    server.close()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def error_line(capsys) -> str:
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("pstbench: error:") or "Traceback" in ln]
    assert len(err) == 1 and "fix:" in err[0], err
    return err[0]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def kit_table(tmp_path: Path, monkeypatch, digest: str, size: int | None = None) -> None:
    """A table whose metric `pinme` has one file the kit pins to `digest`."""
    from pytest_pstbench.data.weights import pyiqa_table

    table = tmp_path / "table.yaml"
    table.write_text(
        "schema: 1\nhosts:\n  pyiqa: {url: 'https://example.invalid', url_env: PSTBENCH_PYIQA_WEIGHTS_URL, "
        "folder: torch-hub/pyiqa}\nversions:\n  '9.9':\n    pinme:\n      files:\n"
        f"        - {{host: pyiqa, path: pinned.pth, sha256: {digest}, size: {'null' if size is None else size}}}\n"
    )
    monkeypatch.setattr(pyiqa_table, "TABLE_PATH", table)


def test_first_fetch_records_the_digest_and_a_second_run_makes_no_request(world, tmp_path, capsys):
    server, folder = world
    body = server.files[f"/{MUSIQ}"]
    argv = ["weights", "fetch", "pyiqa:musiq", "--pyiqa-version", "0.1.16", "--trust-on-first-use"]
    assert main(argv) == 0
    assert (folder / MUSIQ).read_bytes() == body and leftovers(folder) == [MUSIQ]
    assert server.requests == [f"/{MUSIQ}"]
    lock = read_json(tmp_path / "cache" / "weights" / "pyiqa-weights.lock.json")
    assert lock["files"][f"pyiqa/{MUSIQ}"]["sha256"] == sha(body)
    # later runs: the file is checked against the lock, nothing is asked of the server (without the flag too)
    assert main(argv) == 0
    assert main(argv[:-1]) == 0
    assert main(["weights", "verify", "pyiqa:musiq", "--pyiqa-version", "0.1.16"]) == 0
    assert server.requests == [f"/{MUSIQ}"]


def test_without_a_digest_nothing_is_fetched_unless_asked(world, capsys):
    server, folder = world
    assert main(["weights", "fetch", "pyiqa:musiq", "--pyiqa-version", "0.1.16"]) == 2
    line = error_line(capsys)
    assert MUSIQ in line and "--trust-on-first-use" in line and "--pin" in line
    assert server.requests == [] and leftovers(folder) == []


def test_trust_on_first_use_does_not_trust_a_file_found_in_place(world, tmp_path, capsys):
    """Issue #54 (11): a 1,234-byte file found at the weight's path was recorded in the lock with 0 requests to the
    source, and `weights verify` passed it afterwards. Trust on first use records only what it downloads now: the
    source is asked, and a file in place that differs from what it serves is refused in one line and kept."""
    server, folder = world
    folder.mkdir(parents=True)
    planted = b"x" * 1234
    (folder / MUSIQ).write_bytes(planted)
    argv = ["weights", "fetch", "pyiqa:musiq", "--pyiqa-version", "0.1.16", "--trust-on-first-use"]
    lock = tmp_path / "cache" / "weights" / "pyiqa-weights.lock.json"
    assert main(argv) == 2
    line = error_line(capsys)
    served = sha(server.files[f"/{MUSIQ}"])
    assert str(folder / MUSIQ) in line and sha(planted) in line and served in line and "delete" in line
    assert server.requests == [f"/{MUSIQ}"]  # the source was asked
    assert not lock.exists() and (folder / MUSIQ).read_bytes() == planted and leftovers(folder) == [MUSIQ]
    assert main(["weights", "verify", "pyiqa:musiq", "--pyiqa-version", "0.1.16"]) == 2  # still nothing to check
    error_line(capsys)
    # the file in place equal to what the source serves: recorded, after one request
    (folder / MUSIQ).write_bytes(server.files[f"/{MUSIQ}"])
    assert main(argv) == 0
    assert read_json(lock)["files"][f"pyiqa/{MUSIQ}"]["sha256"] == served
    assert server.requests == [f"/{MUSIQ}"] * 2
    assert main(["weights", "verify", "pyiqa:musiq", "--pyiqa-version", "0.1.16"]) == 0


def test_a_tampered_file_is_refused_in_one_line(world, capsys):
    server, folder = world
    argv = ["weights", "fetch", "pyiqa:musiq", "--pyiqa-version", "0.1.16", "--trust-on-first-use"]
    assert main(argv) == 0
    good = sha(server.files[f"/{MUSIQ}"])
    tampered = bytearray((folder / MUSIQ).read_bytes())
    tampered[100] ^= 1
    (folder / MUSIQ).write_bytes(bytes(tampered))
    capsys.readouterr()
    for command in (argv, ["weights", "verify", "pyiqa:musiq", "--pyiqa-version", "0.1.16"]):
        assert main(command) == 2
        line = error_line(capsys)
        assert str(folder / MUSIQ) in line and good in line and sha(bytes(tampered)) in line
    assert (folder / MUSIQ).read_bytes() == bytes(tampered)  # refused, not silently replaced
    assert server.requests == [f"/{MUSIQ}"]


def test_the_kits_pin_is_checked_on_download_and_after(world, tmp_path, monkeypatch, capsys):
    server, folder = world
    body = server.files["/pinned.pth"]
    kit_table(tmp_path, monkeypatch, sha(body), size=len(body))
    argv = ["weights", "fetch", "pyiqa:pinme", "--pyiqa-version", "9.9"]
    assert main(argv) == 0 and (folder / "pinned.pth").read_bytes() == body
    assert not (tmp_path / "cache" / "weights" / "pyiqa-weights.lock.json").exists()  # the kit's pin: no lock entry
    assert main(argv) == 0 and server.requests == ["/pinned.pth"]
    # a mirror that serves another file: refused, nothing written
    (folder / "pinned.pth").unlink()
    server.files["/pinned.pth"] = body[::-1]
    capsys.readouterr()
    assert main(argv) == 2
    line = error_line(capsys)
    assert sha(body[::-1]) in line and sha(body) in line and "nothing was written" in line
    assert leftovers(folder) == []
    # a longer file than the table's size: refused before it is written
    server.files["/pinned.pth"] = body + b"x"
    assert main(argv) == 2
    assert f"{len(body) + 1} bytes, over the limit of {len(body)}" in error_line(capsys)
    assert leftovers(folder) == []


def test_pin_option(world, tmp_path, capsys):
    server, folder = world
    body = server.files[f"/{MUSIQ}"]
    base = ["weights", "fetch", "pyiqa:musiq", "--pyiqa-version", "0.1.16"]
    assert main([*base, "--pin", f"{MUSIQ}={sha(b'something else')}"]) == 2
    assert sha(body) in error_line(capsys) and leftovers(folder) == []
    assert main([*base, "--pin", f"{MUSIQ}={sha(body)}"]) == 0
    lock = read_json(tmp_path / "cache" / "weights" / "pyiqa-weights.lock.json")
    assert lock["files"][f"pyiqa/{MUSIQ}"] == {
        "sha256": sha(body),
        "size": len(body),
        "how": "--pin",
        "url": f"{server.url}/{MUSIQ}",
    }
    assert main([*base, "--pin", "nosuchfile.pth=" + "0" * 64]) == 2
    assert "nosuchfile.pth" in error_line(capsys)


def test_an_interrupted_download_leaves_nothing_claimed_as_good(world, tmp_path, capsys):
    server, folder = world
    server.cut.add(f"/{MUSIQ}")
    argv = ["weights", "fetch", "pyiqa:musiq", "--pyiqa-version", "0.1.16", "--trust-on-first-use"]
    assert main(argv) == 2
    line = error_line(capsys)
    body = server.files[f"/{MUSIQ}"]
    assert f"{len(body) // 2} of its {len(body)} bytes" in line
    assert leftovers(folder) == []  # no file in place, no part file
    assert not (tmp_path / "cache" / "weights" / "pyiqa-weights.lock.json").exists()
    assert main(["weights", "verify", "pyiqa:musiq", "--pyiqa-version", "0.1.16"]) == 2
    assert "missing" in error_line(capsys)
    server.cut.clear()
    assert main(argv) == 0 and (folder / MUSIQ).read_bytes() == body


def test_network_failures_are_one_line(world, monkeypatch, capsys):
    server, folder = world
    monkeypatch.setenv("PSTBENCH_PYIQA_WEIGHTS_URL", server.url + "/missing")
    argv = ["weights", "fetch", "pyiqa:musiq", "--pyiqa-version", "0.1.16", "--trust-on-first-use"]
    assert main(argv) == 2
    assert "answered HTTP 404" in error_line(capsys)
    port = server.httpd.server_address[1]
    server.close()
    monkeypatch.setenv("PSTBENCH_PYIQA_WEIGHTS_URL", f"http://127.0.0.1:{port}")
    assert main(argv) == 2
    line = error_line(capsys)
    assert "refused the connection" in line and "PSTBENCH_PYIQA_WEIGHTS_URL" in line
    assert leftovers(folder) == []
    server.close = lambda: None


def test_unknown_metric_and_version_are_one_line(world, capsys):
    assert main(["weights", "fetch", "pyiqa:nosuch", "--pyiqa-version", "0.1.16"]) == 2
    assert "musiq" in error_line(capsys)
    assert main(["weights", "fetch", "pyiqa:musiq", "--pyiqa-version", "0.0.1"]) == 2
    assert "0.1.16" in error_line(capsys)
    assert main(["weights", "fetch", "lpips:alex"]) == 2
    assert "pyiqa:NAME" in error_line(capsys)
