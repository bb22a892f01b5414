"""A hostile model endpoint (issue #44, "done when": a hostile model endpoint in the damaged-input harness):
an error answer that repeats the request's Authorization header must not carry the key into the error the run
prints (and records). The harness (tests/contract/test_damaged_inputs.py, `model-*` cases) runs `vab run` against
every behaviour; this is the one it found printing the key.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pytest_pstbench.selection.ask import chat_api

KEY = "sk-hostile-endpoint-key-0123456789"


@pytest.fixture
def echoing():
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            auth = self.headers.get("Authorization") or ""
            body = json.dumps({"error": {"message": f"Incorrect API key provided: {auth} (key {auth[7:]})"}}).encode()
            self.send_response(int(self.path.rsplit("/", 1)[-1]))
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("status", [401, 429, 500])
def test_an_echoed_key_is_not_in_the_error(echoing, status):
    """Issue #44, model endpoint: a 401 (429, 500) whose body repeats the Authorization header printed the key in
    `pstbench: error: ...: HTTP 401 Unauthorized: {... Bearer <key> ...}`."""
    with pytest.raises(chat_api.ApiError) as info:
        chat_api.post(
            f"{echoing}/v1/{status}", b"{}", {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}, 5
        )
    text = str(info.value)
    assert KEY not in text and f"HTTP {status}" in text and "Incorrect API key provided: <redacted>" in text, text


def test_a_dripped_answer_that_closes_the_connection_is_cut_at_the_timeout():
    """Issue #44, model endpoint: an answer sent with `Connection: close`, one byte every 0.2 s, ran its whole
    length (16 s) past `--timeout 1`: http.client lets go of the socket on `Connection: close`, so the watchdog
    had nothing to close."""
    import time

    from helpers.damaged_world import ModelStub

    stub = ModelStub()
    stub.hostile = "drips"
    try:
        t0 = time.monotonic()
        with pytest.raises(chat_api.ApiError, match="timed out after 1 s"):
            chat_api.post(f"{stub.base}/chat/completions", b"{}", {"Authorization": f"Bearer {KEY}"}, 1.0)
        assert time.monotonic() - t0 < 3
    finally:
        stub.close()


def test_a_deadline_that_passes_while_connecting_still_cuts_a_dripped_answer(monkeypatch):
    """The harness's `vab-run-asked/model-drips` case took 18 s in 1 of 4 runs: with 32 requests at once the
    stub's listen backlog (5) was full, a SYN was resent after 1 s, the watchdog fired before the socket was
    held (it closed nothing), and the dripped answer then ran its whole length. Made certain here: the connect
    itself takes past the deadline."""
    import http.client
    import time

    from helpers.damaged_world import ModelStub

    real_connect = http.client.HTTPConnection.connect

    def slow_connect(self):
        time.sleep(1.2)  # past --timeout 1, before the socket exists
        real_connect(self)

    monkeypatch.setattr(http.client.HTTPConnection, "connect", slow_connect)
    stub = ModelStub()
    stub.hostile = "drips"
    try:
        t0 = time.monotonic()
        with pytest.raises(chat_api.ApiError, match="timed out after 1 s"):
            chat_api.post(f"{stub.base}/chat/completions", b"{}", {"Authorization": f"Bearer {KEY}"}, 1.0)
        assert time.monotonic() - t0 < 3
    finally:
        stub.close()
