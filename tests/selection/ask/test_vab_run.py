"""`pstbench vab run` against a fake OpenAI-compatible endpoint on 127.0.0.1 that this test starts.

The server gives each distinct request body a behaviour, round robin in the order bodies first arrive: well-formed;
unparseable first, then well-formed; HTTP 429 first; HTTP 500 nine times (an API error after the
official 3 attempts of 3 HTTP calls each, answered on the next run: resume); slow first (the client times out);
dropped connection first; a body that is not JSON first; a body cut short first. Nothing outside 127.0.0.1 is contacted.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.selection.ask import chat_api

KEY = "sekrit-key-123"
BUCKETS = ("ok", "unparseable_once", "429_once", "500_nine", "slow_once", "drop_once", "badjson_once", "cut_once")
FAILS = {
    "ok": 0,
    "unparseable_once": 1,
    "429_once": 1,
    "500_nine": 9,
    "slow_once": 1,
    "drop_once": 1,
    "badjson_once": 1,
    "cut_once": 1,
}


class FakeApi:
    def __init__(self, all_ok: bool = False):
        self.calls: Counter = Counter()
        self.bodies: dict[str, dict] = {}
        self.auth: set = set()
        self.lock = threading.Lock()
        self.in_flight = self.max_in_flight = 0
        self.all_ok = all_ok
        self.assigned: dict[str, str] = {}
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_POST(self):
                with api.lock:
                    api.in_flight += 1
                    api.max_in_flight = max(api.max_in_flight, api.in_flight)
                try:
                    self._post()
                finally:
                    with api.lock:
                        api.in_flight -= 1

            def _post(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                h = hashlib.sha256(raw).hexdigest()
                with api.lock:
                    if h not in api.assigned:  # round robin over distinct bodies: every behaviour occurs
                        api.assigned[h] = BUCKETS[len(api.assigned) % len(BUCKETS)]
                    bucket = api.assigned[h]
                    api.calls[h] += 1
                    n = api.calls[h]
                    api.bodies[h] = json.loads(raw)
                    api.auth.add(self.headers.get("Authorization"))
                assert self.path == "/v1/chat/completions"
                failing = n <= FAILS[bucket] and not api.all_ok
                try:
                    if failing and bucket == "429_once":
                        return self._send(429, b'{"error": "rate limited"}')
                    if failing and bucket == "500_nine":
                        return self._send(500, b'{"error": "boom"}')
                    if failing and bucket == "slow_once":
                        time.sleep(3.0)
                    if failing and bucket == "drop_once":
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    if failing and bucket == "cut_once":  # promises 500 bytes, sends 20, closes
                        self.send_response(200)
                        self.send_header("Content-Length", "500")
                        self.end_headers()
                        self.wfile.write(b'{"choices": [{"mess')
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    if failing and bucket == "badjson_once":
                        return self._send(200, b"<html>bad gateway</html>")
                    text = (
                        "I like it." if failing and bucket == "unparseable_once" else "Reasoning...\nBEST: A\nWORST: B"
                    )
                    body = json.dumps({"choices": [{"message": {"role": "assistant", "content": text}}]}).encode()
                    self._send(200, body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _send(self, code, body):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def bucket(self, h):
        return self.assigned[h]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def api():
    a = FakeApi()
    yield a
    a.close()


@pytest.fixture
def track(tmp_path) -> Path:
    """4 tasks, k = 3 and 4, distinct small images (so every request body differs)."""
    from PIL import Image

    tasks = []
    for i, k in enumerate((3, 4, 3, 4)):
        files = []
        for c in range(k):
            p = tmp_path / f"t{i}" / f"c{c}.png"
            p.parent.mkdir(parents=True, exist_ok=True)
            Image.new("RGB", (5 + c, 4), (40 * i, 50 * c, 7)).save(p)
            files.append(f"t{i}/c{c}.png")
        tasks.append({"id": f"t{i}", "domain": "photograph", "candidates": files, "best": 0, "worst": k - 1})
    m = tmp_path / "track.yaml"
    m.write_text(
        yaml.safe_dump({"kind": "selection", "id": "runtrack", "revision": "r1", "tasks": tasks}, sort_keys=False)
    )
    return m


def test_run_end_to_end_with_retries_errors_and_resume(api, track, tmp_path, monkeypatch, capsys):
    slept = []
    monkeypatch.setattr(chat_api, "pause", lambda s: slept.append(s))
    monkeypatch.setenv("MY_KEY", KEY)
    gauge = {"now": 0, "max": 0}
    gl = threading.Lock()
    real_post = chat_api.post

    def counting_post(*a, **kw):
        with gl:
            gauge["now"] += 1
            gauge["max"] = max(gauge["max"], gauge["now"])
        try:
            return real_post(*a, **kw)
        finally:
            with gl:
                gauge["now"] -= 1

    monkeypatch.setattr(chat_api, "post", counting_post)
    results = tmp_path / "results"
    args = [
        "vab",
        "run",
        "--track",
        str(track),
        "--model",
        "acme/vision-1",
        "--api-base",
        api.base,
        "--api-key-env",
        "MY_KEY",
        "--results",
        str(results),
        "--concurrency",
        "4",
        "--timeout",
        "1.5",
        "-q",
    ]
    code = cli_main(args)
    out, err = capsys.readouterr()
    n_requests = 4 * 3 * 3  # k >= 3: three prompt types, three trials
    assert len(api.calls) == n_requests  # every request body is distinct
    buckets = Counter(api.bucket(h) for h in api.calls)
    assert set(buckets) == set(BUCKETS), buckets  # every behaviour occurs
    # calls per request: 1 when well-formed; 2 after one failure of any kind; 3 attempts x 3 HTTP calls for the 500s
    for h, n in api.calls.items():
        assert n == min(FAILS[api.bucket(h)] + 1, 9), api.bucket(h)
    answers = results / "runtrack" / "vision-1.answers.jsonl"
    lines = [json.loads(x) for x in answers.read_text().splitlines()]
    assert len(lines) == n_requests
    by_attempt = Counter((x["attempt"], "error" in x) for x in lines)
    in_attempt = ("ok", "429_once", "slow_once", "drop_once", "cut_once")  # the HTTP retries of attempt 1 answer these
    assert by_attempt[(3, True)] == buckets["500_nine"]
    assert by_attempt[(1, False)] == sum(buckets[b] for b in in_attempt)
    assert by_attempt[(2, False)] == buckets["unparseable_once"] + buckets["badjson_once"]
    assert all(x["error"] == 'HTTP 500 Internal Server Error: {"error": "boom"}' for x in lines if "error" in x)
    # the official delays: 2 s after the first failed attempt, 5 s after the second; within an attempt the
    # HTTP backoff 0.5 s, then 1.0 s
    http_once = sum(buckets[b] for b in in_attempt if b != "ok")
    assert Counter(slept) == Counter(
        {
            2: buckets["unparseable_once"] + buckets["badjson_once"] + buckets["500_nine"],
            5: buckets["500_nine"],
            0.5: http_once + 3 * buckets["500_nine"],
            1.0: 3 * buckets["500_nine"],
        }
    )
    # the request: official sampling and message layout, images as JPEG data URLs
    body = next(iter(api.bodies.values()))
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("acme/vision-1", 1.0, 8192)
    content = body["messages"][0]["content"]
    assert content[0]["type"] == "text" and content[0]["text"].startswith("You will be shown ")
    k = (len(content) - 1) // 2
    for i in range(k):
        label = chr(65 + i)
        assert content[1 + 2 * i] == {"type": "text", "text": f"\nImage {label}:"}
        url = content[2 + 2 * i]["image_url"]["url"]
        assert url.startswith("data:image/jpeg;base64,")
        from PIL import Image

        with Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as im:
            assert im.format == "JPEG" and im.mode == "RGB"
    assert api.auth == {f"Bearer {KEY}"}
    assert 1 < gauge["max"] <= 4  # calls in flight at once, bounded by --concurrency 4
    assert code == 1 and "requests ended in API errors; run the same command again" in err
    run = json.loads((results / "runtrack" / "vision-1" / "run.json").read_text())
    assert run["judge"]["model_api"]["model"] == "acme/vision-1" and run["judge"]["model_api"]["sampling"] == {
        "temperature": 1.0,
        "max_tokens": 8192,
    }
    assert run["judge"]["attempts"]["max"] == 3 and run["answers"]["error"] == buckets["500_nine"]
    assert "asked 36 requests (0 already answered)" in out

    # resume: only the requests that ended in an API error are asked again (the server now answers them)
    before = sum(api.calls.values())
    assert cli_main(args) == 0
    out = capsys.readouterr().out
    assert sum(api.calls.values()) - before == buckets["500_nine"]
    assert f"asked {buckets['500_nine']} requests ({n_requests - buckets['500_nine']} already answered)" in out
    assert cli_main(args) == 0
    assert "asked 0 requests" in capsys.readouterr().out
    # the key is never written
    for f in results.rglob("*"):
        if f.is_file():
            assert KEY not in f.read_text(errors="replace"), f


def test_run_resumes_after_a_cut_line_and_refuses_a_bad_url(api, track, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(chat_api, "pause", lambda s: None)
    answers = tmp_path / "a.jsonl"
    answers.write_text(
        '{"task_id": "t0", "trial": 0, "prompt_type": "pick_best", "response": "BEST: A"}\n{"task_id": "t0", "tri'
    )
    args = [
        "vab",
        "run",
        "--track",
        str(track),
        "--model",
        "m",
        "--api-base",
        api.base,
        "--answers",
        str(answers),
        "--results",
        str(tmp_path / "r"),
        "-q",
        "--timeout",
        "1.5",
    ]
    cli_main(args)
    out = capsys.readouterr().out
    assert "asked 35 requests (1 already answered)" in out
    assert len(answers.read_text().splitlines()) == 36
    assert cli_main([*args[:7], "ftp://x", *args[8:]]) == 2
    assert (
        capsys.readouterr().err
        == "pstbench: error: --api-base ftp://x: not an http(s) URL; fix: give the endpoint's base, e.g. http://127.0.0.1:8000/v1\n"
    )


def test_pytest_option_asks_the_model_then_scores_and_xdist_resumes(track, pytester, monkeypatch):
    api = FakeApi(all_ok=True)
    try:
        monkeypatch.setenv("API_KEY", KEY)
        base = [
            "-p",
            "no:cacheprovider",
            f"--pstbench-track={track}",
            "--pstbench-model=acme/vision-1",
            f"--pstbench-api-base={api.base}",
        ]
        r = pytester.runpytest_subprocess(*base)
        r.assert_outcomes(passed=4)
        assert sum(api.calls.values()) == 36 and api.auth == {f"Bearer {KEY}"}
        answers = pytester.path / "results" / "runtrack" / "vision-1.answers.jsonl"
        assert len(answers.read_text().splitlines()) == 36
        run = json.loads((pytester.path / "results" / "runtrack" / "vision-1" / "run.json").read_text())
        assert run["judge"]["model_api"]["model"] == "acme/vision-1" and run["command"].startswith("pytest ")
        r.stdout.fnmatch_lines(["*track: runtrack   protocol: vab*judge: acme/vision-1*"])
        summary = (pytester.path / "results" / "runtrack" / "vision-1" / "summary.json").read_bytes()
        r2 = pytester.runpytest_subprocess(*base, "-n", "2")  # everything answered: nothing is asked again
        r2.assert_outcomes(passed=4)
        assert sum(api.calls.values()) == 36
        assert (pytester.path / "results" / "runtrack" / "vision-1" / "summary.json").read_bytes() == summary
        for f in (pytester.path / "results").rglob("*"):
            if f.is_file():
                assert KEY not in f.read_text(errors="replace")
        r3 = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--pstbench-track={track}", "--pstbench-model=m")
        assert r3.ret == 4
        r3.stderr.fnmatch_lines(["*--pstbench-model needs --pstbench-api-base URL*"])
    finally:
        api.close()
