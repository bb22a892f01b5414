"""`pstbench vab run` against an endpoint that echoes the request: the API key and every --header value
never reach the answers file, the run files or the terminal, whatever path they come back by (the answer's
text, a reasoning field, an error body, cut or not): issue #44 case 11.

The server here listens on 127.0.0.1 and echoes the headers it received; nothing else is contacted."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.selection.ask import chat_api

KEY = 'sk-te"st\\key/0123456789abcdef'  # JSON-escapes: an echo of it in JSON spells it otherwise
HEADER_SECRET = "hdr-secret-value-4242"
SHORT = "on"  # a header value under chat_api.SECRET_MIN_CHARS is not a secret (it could not be told from answer text)


def _forms(secret: str) -> list[str]:
    return [secret, json.dumps(secret)[1:-1], secret[:12], secret[-12:]]  # a cut key leaks half of it


def _echo(mode: str):
    """A chat-completions endpoint whose reply carries the request's headers: in the answer and a reasoning
    field (`ok`), in an error body (`error`: 500, retried, then recorded), with the key where an error body is
    cut (`cut`), in a 401 body that stops the run (`stop`)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            echoed = json.dumps(dict(self.headers))
            if mode == "ok":
                status = 200
                message = {
                    "role": "assistant",
                    "content": f"BEST: A\nWORST: B\nyou sent {echoed}",
                    "reasoning_content": f"headers: {self.headers.get('Authorization')} {self.headers.get('X-Api-Key')}",
                }
                data = json.dumps({"choices": [{"index": 0, "message": message}]}).encode()
            elif mode == "cut":
                status = 400
                auth = self.headers.get("Authorization")
                key = auth.partition(" ")[2]  # the key's first 14 characters inside the kept start of the body
                data = ("x" * (chat_api.ERROR_BODY_CHARS - 14) + key + " " + echoed).encode()
            else:
                status = 500 if mode == "error" else 401
                data = json.dumps({"error": {"message": f"bad request from {echoed}"}}).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _track(root: Path) -> Path:
    from PIL import Image

    files = []
    for c in range(2):
        p = root / "t0" / f"c{c}.jpg"
        p.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (8 + c, 6), (40 * c, 60, 90)).save(p, format="JPEG")
        files.append(f"t0/c{c}.jpg")
    m = root / "track.yaml"
    m.write_text(
        yaml.safe_dump(
            {
                "kind": "selection",
                "id": "echotrack",
                "revision": "r1",
                "tasks": [{"id": "task0", "domain": "photograph", "candidates": files, "best": 0, "worst": 1}],
            }
        )
    )
    return m


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    monkeypatch.setattr(chat_api, "pause", lambda s: None)


@pytest.mark.parametrize("mode", ["ok", "error", "cut", "stop"])
def test_an_echoing_endpoint_cannot_write_or_print_the_secrets(tmp_path, monkeypatch, capsys, mode):
    server = _echo(mode)
    try:
        monkeypatch.setenv("T44_KEY", KEY)
        monkeypatch.setenv("T44_HDR", HEADER_SECRET)
        base = f"http://127.0.0.1:{server.server_address[1]}/v1"
        code = cli_main(
            [
                "vab",
                "run",
                "--track",
                str(_track(tmp_path)),
                "--model",
                "m1",
                "--api-base",
                base,
                "--api-key-env",
                "T44_KEY",
                "--header",
                "X-Api-Key=env:T44_HDR",
                "--header",
                f"X-Flag={SHORT}",
                "--answers",
                str(tmp_path / "answers.jsonl"),
                "--results",
                str(tmp_path / "results"),
                "--concurrency",
                "1",
                "--timeout",
                "5",
            ]
        )
    finally:
        server.shutdown()
        server.server_close()
    out, err = capsys.readouterr()
    assert code == {"ok": 0, "error": 1, "cut": 1, "stop": 2}[mode], err
    lines = [json.loads(x) for x in (tmp_path / "answers.jsonl").read_text().splitlines() if x]
    assert lines, "the answers file records the requests"
    recorded = [(tmp_path / "answers.jsonl").read_text()]
    recorded += [f.read_text() for f in (tmp_path / "results").rglob("*") if f.is_file()]
    for text in recorded + [out, err, json.dumps(lines, ensure_ascii=False)]:
        for secret in (KEY, HEADER_SECRET):
            for form in _forms(secret):
                assert form not in text, (mode, form, text[:2000])
    shown = "\n".join(json.dumps(x) for x in lines)
    assert "<redacted>" in shown  # the echo is kept, the secrets in it replaced
    if mode == "ok":
        assert all(x["response"].startswith("BEST: A\nWORST: B") for x in lines)
        assert '"X-Flag": "on"' in lines[0]["response"]  # a short value is not a secret: answer text stays whole
    else:
        assert all("error" in x for x in lines)
    if mode == "stop":
        assert "HTTP 401" in err and "<redacted>" in err
