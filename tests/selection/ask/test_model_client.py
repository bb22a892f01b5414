"""`pstbench vab run`: the official pipeline as it runs, and a model client that is safe against any endpoint.

The reference rules below are written in this file from running the official toolkit (eval.py at commit
7a44805 with its uv.lock: litellm 1.81.14, openai 2.21.0, datasets 4.5.0; tests/parity/test_vab_official_toolkit.py)
and reading litellm / openai / datasets; they call nothing of the kit:

* what eval.py parses is `message.content` as litellm hands it over: when the message has no
  `reasoning_content` / `reasoning` field, a reasoning block that starts the content (`<think>`, `<thinking>`,
  `<budget:thinking>`, closed by the first of their closing tags) is moved out;
* images are sent upright when they carry an EXIF Orientation tag (`datasets` decodes them so);
* a request that keeps failing makes 3 attempts (eval.py) x 3 HTTP calls (the openai client's 2 retries on
  408, 409, 429, 5xx, timeouts and connection errors); the kit does not retry 400/401/403/404 and stops
  the run at 401/403/404.

Every server here listens on 127.0.0.1 (or 127.0.0.2, also loopback); nothing else is contacted.
"""

from __future__ import annotations

import base64
import io
import json
import socket
import threading
import time
import tracemalloc
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from helpers.selection_runs import vab_run_args

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.selection.ask import chat_api

KEY = "sekrit-key-22"
ATTEMPTS, HTTP_RETRIES = 3, 2  # eval.py's MAX_RETRIES; the openai client's DEFAULT_MAX_RETRIES


# ---- the reference ----------------------------------------------------------------------------------


def ref_content(message: dict) -> str | None:
    """litellm's OpenAI-compatible path, as observed: the content eval.py receives."""
    content = message.get("content")
    if "reasoning_content" in message or "reasoning" in message or not isinstance(content, str) or not content:
        return content
    for opening in ("<think>", "<thinking>", "<budget:thinking>"):
        if content.startswith(opening):
            ends = [
                (content.find(close, len(opening)), close)
                for close in ("</think>", "</thinking>", "</budget:thinking>")
            ]
            ends = [(i, c) for i, c in ends if i >= 0]
            if ends:
                i, close = min(ends)
                return content[i + len(close) :]
    return content


def ref_first(tag: str, text: str) -> str | None:
    """eval.py's _find_answer, spelled out: the first TAG: (upper case, not inside a word), then optional
    whitespace and one ASCII letter that does not continue a word; the letter upper-cased."""
    word = lambda c: c.isalnum() or c == "_"  # noqa: E731
    i = text.find(tag + ":")
    while i >= 0:
        if i == 0 or not word(text[i - 1]):
            j = i + len(tag) + 1
            while j < len(text) and text[j].isspace():
                j += 1
            if (
                j < len(text)
                and text[j].isascii()
                and text[j].isalpha()
                and (j + 1 == len(text) or not word(text[j + 1]))
            ):
                return text[j].upper()
        i = text.find(tag + ":", i + 1)
    return None


def ref_calls(status: int) -> int:
    """HTTP calls the kit makes for a request always answered with `status`."""
    if status in (400, 401, 403, 404):
        return 1
    retried = status in (408, 409, 429) or status >= 500
    return ATTEMPTS * (1 + HTTP_RETRIES if retried else 1)


def test_reference_against_the_measured_official_counts():
    """The counts the official run made against the parity server (429 / 500 / 503 always: 9 calls)."""
    assert [ref_calls(s) for s in (429, 500, 503)] == [9, 9, 9]
    assert ref_content({"content": "<think>BEST: A</think>\nBEST: B"}) == "\nBEST: B"
    assert (
        ref_content({"content": "<think>BEST: A</think>BEST: B", "reasoning": "x"}) == "<think>BEST: A</think>BEST: B"
    )
    assert ref_content({"content": " <think>BEST: A</think>BEST: B"}) == " <think>BEST: A</think>BEST: B"
    assert ref_first("BEST", "**BEST: C**") == "C" and ref_first("BEST", "**BEST:** C") is None


# ---- a scripted local server --------------------------------------------------------------------------


class Api:
    """Answers POST /v1/chat/completions with `reply(n, body)` -> (status, headers, bytes) or a callable
    taking the handler (n = 1, 2, ... per distinct request body)."""

    def __init__(self, reply, host: str = "127.0.0.1"):
        self.reply = reply
        self.calls: Counter = Counter()
        self.seen: list[dict] = []  # per call: path, headers, body
        self.lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with api.lock:
                    api.calls[raw] += 1
                    n = api.calls[raw]
                    api.seen.append(
                        {"path": self.path, "headers": dict(self.headers), "body": json.loads(raw or b"{}")}
                    )
                out = api.reply(n, json.loads(raw or b"{}"), self)
                if out is None:
                    return
                status, headers, data = out
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.origin = f"http://{host}:{self.server.server_address[1]}"
        self.base = self.origin + "/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def answer(message: dict, status: int = 200):
    return (
        status,
        {"Content-Type": "application/json"},
        json.dumps({"choices": [{"index": 0, "message": message}]}).encode(),
    )


@pytest.fixture
def servers():
    made = []

    def make(reply, host="127.0.0.1"):
        a = Api(reply, host)
        made.append(a)
        return a

    yield make
    for a in made:
        a.close()


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch):
    slept = []
    monkeypatch.setattr(chat_api, "pause", slept.append)
    return slept


def make_track(root: Path, ks=(3, 2), exif: dict | None = None) -> Path:
    from PIL import Image

    tasks = []
    for i, k in enumerate(ks):
        files = []
        for c in range(k):
            p = root / f"t{i}" / f"c{c}.jpg"
            p.parent.mkdir(parents=True, exist_ok=True)
            im = Image.new("RGB", (9 + 2 * c + 7 * i, 5 + c), (30 * c, 60 * i, 90))
            im.paste((255, 255, 255), (0, 0, 3, 2))
            extra = {}
            if exif and (i, c) in exif:
                e = Image.Exif()
                e[0x0112] = exif[(i, c)]
                extra["exif"] = e.tobytes()
            im.save(p, format="JPEG", quality=95, **extra)
            files.append(f"t{i}/c{c}.jpg")
        tasks.append({"id": f"task{i}", "domain": "photograph", "candidates": files, "best": 0, "worst": k - 1})
    m = root / "track.yaml"
    m.write_text(
        yaml.safe_dump({"kind": "selection", "id": "clienttrack", "revision": "r1", "tasks": tasks}, sort_keys=False)
    )
    return m


def run_args(track, base, tmp_path, *extra):
    return vab_run_args(track, base, tmp_path, "T22_KEY", "-q", "--concurrency", "2", *extra)


# ---- the official pipeline's rules, checked against the reference -------------------------------------

DRIFT = [
    {"content": "<think>BEST: {x}\nWORST: {y}</think>\nBEST: {b}\nWORST: {w}"},
    {"content": "<thinking>BEST: {x} WORST: {y}</thinking>BEST: {b} WORST: {w}"},
    {"content": "<think>BEST: {x} WORST: {y}</thinking>BEST: {b} WORST: {w}"},
    {"content": "<budget:thinking>BEST: {x}</budget:thinking>BEST: {b}\nWORST: {w}"},
    {"content": "\n<think>BEST: {x} WORST: {y}</think>BEST: {b} WORST: {w}"},
    {"content": "Hm <think>BEST: {x} WORST: {y}</think>BEST: {b} WORST: {w}"},
    {"content": "<think>BEST: {x} WORST: {y} never closed BEST: {b} WORST: {w}"},
    {"content": "<think>BEST: {b} WORST: {w}</think>"},
    {"content": "<think>a</think><think>BEST: {x} WORST: {y}</think>BEST: {b} WORST: {w}"},
    {"content": "<think>BEST: {x} WORST: {y}</think>BEST: {b}\nWORST: {w}", "reasoning_content": None},
    {"content": "<think>BEST: {x} WORST: {y}</think>BEST: {b}\nWORST: {w}", "reasoning": "r"},
    {"content": "BEST: {b}\nWORST: {w}", "reasoning_content": "BEST: {x} WORST: {y}"},
    {"content": "**BEST: {b}**\n**WORST: {w}**"},
    {"content": "**BEST:** {b}\n**WORST:** {w}"},
    {"content": "best: {b}\nworst: {w}"},
    {"content": "BEST: {x}\nWORST: {y}\nBEST: {b}\nWORST: {w}"},
    {"content": "BEST: Z\nWORST: Z"},
    {"content": ""},
    {"content": "line\u2028sep\u2029par\x85nel\x1c <think>BEST: {x}</think>\nBEST: {b}\nWORST: {w}"},
]


def test_drift_answers_are_read_as_the_official_pipeline_reads_them(servers, tmp_path, monkeypatch):
    """Each request gets one drift form (round robin); every answer is kept (max 1 attempt would hide the
    retries, so the first form is what every attempt gets). The kit's labels per request must be the
    reference's: ref_first on ref_content of the message."""
    track = make_track(tmp_path, ks=(4, 3, 2))
    assigned: dict = {}
    lock = threading.Lock()

    def form_of(body):
        key = json.dumps(body["messages"], sort_keys=True)
        with lock:
            if key not in assigned:
                assigned[key] = DRIFT[len(assigned) % len(DRIFT)]
            return assigned[key]

    def reply(n, body, _h):
        k = sum(1 for p in body["messages"][0]["content"] if p["type"] == "image_url")
        labels = "ABCD"[:k]
        fill = {"b": labels[1], "w": labels[0], "x": labels[-1], "y": labels[1 % k] if k > 2 else labels[0]}
        msg = {kk: (v.format(**fill) if isinstance(v, str) else v) for kk, v in form_of(body).items()}
        return answer({"role": "assistant", **msg})

    api = servers(reply)
    monkeypatch.setenv("T22_KEY", KEY)
    cli_main(run_args(track, api.base, tmp_path))
    lines = [json.loads(x) for x in (tmp_path / "answers.jsonl").read_bytes().decode().split("\n") if x]
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection.answers import read_answers
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.tracks import load_selection_manifest

    params = SelectionParams.of(load_protocol("vab"))
    aset = read_answers(tmp_path / "answers.jsonl", load_selection_manifest(track), params)
    checked = removed = 0
    for line in lines:
        key = (line["task_id"], line["trial"], line["prompt_type"])
        labels, status = aset.entries[key][0], aset.entries[key][1]
        if aset.entries[key][4] != line["attempt"]:
            continue  # a retried request: its last attempt counts
        message = {"content": line["response"]}
        if "reasoning" in line:
            message["reasoning_content"] = line["reasoning"]
        seen = ref_content(message)
        removed += seen != line["response"]
        k = 4 if line["task_id"] == "task0" else 3 if line["task_id"] == "task1" else 2
        shown = "ABCDEF"[:k]
        want = {}
        for which in labels:
            got = ref_first(which.upper(), seen or "")
            want[which] = got if got is not None and got in shown else None
        ok = all(v is not None for v in want.values())
        assert labels == want, (line, seen)
        assert (status == "ok") == ok, (line, seen)
        checked += 1
    assert checked >= 20 and removed >= 5
    # run.json records what the split removed
    run = json.loads(next((tmp_path / "results").rglob("run.json")).read_text())
    split = run["judge"]["reasoning_split"]
    assert split["removed"] == sum(
        1 for x in lines if "reasoning" not in x and ref_content({"content": x["response"]}) != x["response"]
    )
    assert split["returned_apart"] == sum(1 for x in lines if "reasoning" in x) > 0


def test_images_are_sent_upright_when_they_carry_an_orientation_tag(servers, tmp_path, monkeypatch):
    from PIL import Image

    track = make_track(tmp_path, ks=(3,), exif={(0, 0): 6, (0, 1): 1})
    api = servers(lambda n, body, h: answer({"role": "assistant", "content": "BEST: A\nWORST: B"}))
    monkeypatch.setenv("T22_KEY", KEY)
    assert cli_main(run_args(track, api.base, tmp_path)) == 0
    body = next(
        c["body"]
        for c in api.seen
        if "best overall" in c["body"]["messages"][0]["content"][0]["text"]
        and "and which" not in c["body"]["messages"][0]["content"][0]["text"]
    )
    sent = [
        base64.b64decode(p["image_url"]["url"].split(",", 1)[1])
        for p in body["messages"][0]["content"]
        if p["type"] == "image_url"
    ]
    for c, data in enumerate(sent[:3]):
        with Image.open(tmp_path / "t0" / f"c{c}.jpg") as src:
            src.load()
            ref = (
                src.transpose(Image.Transpose.ROTATE_270) if c == 0 else src.copy()
            )  # orientation 6: rotate 90 clockwise
        buf = io.BytesIO()
        ref.convert("RGB").save(buf, format="JPEG", quality=85)
        assert data == buf.getvalue(), c
    with Image.open(io.BytesIO(sent[0])) as im:
        assert im.size == (5, 9)  # stored 9 x 5, tagged 6: sent upright


@pytest.mark.parametrize("status", [429, 500, 503, 400])
def test_http_calls_per_request_on_a_persistent_error(servers, tmp_path, monkeypatch, status, no_sleep):
    track = make_track(tmp_path, ks=(3,))  # k = 3: the three trials' orders differ, so each request has its own body
    api = servers(
        lambda n, body, h: (
            status,
            {"Content-Type": "application/json"},
            json.dumps({"error": {"message": f"scripted failure {status} " + "x" * 400}}).encode(),
        )
    )
    monkeypatch.setenv("T22_KEY", KEY)
    assert cli_main(run_args(track, api.base, tmp_path)) == 1
    assert set(api.calls.values()) == {ref_calls(status)}
    lines = [json.loads(x) for x in (tmp_path / "answers.jsonl").read_text().splitlines()]
    assert {x["attempt"] for x in lines} == ({1} if status == 400 else {3})
    err = lines[0]["error"]
    assert err.startswith(f"HTTP {status} ") and f"scripted failure {status} xxx" in err
    assert err.endswith("...") and len(err) < 400  # the start of the body, bounded


def test_unauthorized_stops_the_run_at_once_with_the_body_text(servers, tmp_path, monkeypatch, capsys):
    track = make_track(tmp_path, ks=(3, 3))
    api = servers(lambda n, body, h: (401, {}, b'{"error": "invalid api key sk-...22"}'))
    monkeypatch.setenv("T22_KEY", KEY)
    assert cli_main(run_args(track, api.base, tmp_path, "--concurrency", "1")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and 'HTTP 401 Unauthorized: {"error": "invalid api key sk-...22"}' in err
    assert "the run was stopped" in err and "Traceback" not in err
    assert sum(api.calls.values()) == 1  # not retried, nothing else asked


# ---- a client safe against any endpoint ---------------------------------------------------------------


@pytest.mark.parametrize("target_host", ["127.0.0.2", "127.0.0.1"])
def test_a_redirect_to_another_origin_is_not_followed(servers, tmp_path, monkeypatch, capsys, target_host):
    other = servers(lambda n, body, h: answer({"role": "assistant", "content": "BEST: A\nWORST: B"}), host=target_host)
    api = servers(lambda n, body, h: (307, {"Location": other.origin + "/v1/chat/completions"}, b""))
    track = make_track(tmp_path, ks=(2,))
    monkeypatch.setenv("T22_KEY", KEY)
    assert cli_main(run_args(track, api.base, tmp_path)) == 2
    assert other.seen == []  # the other host (or port) got nothing, so no key
    assert "redirect to another origin" in capsys.readouterr().err


def test_a_same_origin_redirect_keeps_method_body_and_key(servers, tmp_path, monkeypatch):
    def reply(n, body, h):
        if h.path == "/v1/chat/completions":
            return 308, {"Location": "/v2/chat/completions"}, b""
        return answer({"role": "assistant", "content": "BEST: A\nWORST: B"})

    api = servers(reply)
    track = make_track(tmp_path, ks=(2,))
    monkeypatch.setenv("T22_KEY", KEY)
    assert cli_main(run_args(track, api.base, tmp_path)) == 0
    moved = [c for c in api.seen if c["path"] == "/v2/chat/completions"]
    assert moved and all(c["headers"]["Authorization"] == f"Bearer {KEY}" and c["body"]["model"] == "m1" for c in moved)


def _drip(n, body, h):
    """Headers at once, then one byte every 0.1 s for ever (until the client goes)."""
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", "100000")
    h.end_headers()
    try:
        for _ in range(600):
            h.wfile.write(b" ")
            h.wfile.flush()
            time.sleep(0.1)
    except (BrokenPipeError, ConnectionResetError):
        pass
    return None


def _drip_headers(n, body, h):
    """The status line, then one header byte every 0.1 s."""
    try:
        h.wfile.write(b"HTTP/1.1 200 OK\r\n")
        for _ in range(600):
            h.wfile.write(b"X")
            h.wfile.flush()
            time.sleep(0.1)
    except (BrokenPipeError, ConnectionResetError):
        pass
    return None


@pytest.mark.parametrize("drip", [_drip, _drip_headers])
def test_a_dripping_server_is_cut_at_the_timeout(servers, drip):
    api = servers(drip)
    t0 = time.monotonic()
    with pytest.raises(chat_api.ApiError) as exc:
        chat_api.post(api.base + "/chat/completions", b"{}", {"Content-Type": "application/json"}, 1.0)
    elapsed = time.monotonic() - t0
    assert exc.value.kind == "timeout" and str(exc.value) == "timed out after 1 s (--timeout)"
    assert 0.9 <= elapsed < 2.0


def _huge(n, body, h):
    """A 200 MB body without Content-Length (connection-delimited), written as fast as the client reads."""
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.send_header("Connection", "close")
    h.end_headers()
    chunk = b'{"choices": [' + b" " * (1 << 20)
    try:
        for _ in range(200):
            h.wfile.write(chunk)
    except (BrokenPipeError, ConnectionResetError):
        pass
    h.close_connection = True
    return None


def test_a_huge_body_is_refused_with_bounded_memory(servers):
    api = servers(_huge)
    limit = 8 << 20
    tracemalloc.start()
    try:
        with pytest.raises(chat_api.ApiError) as exc:
            chat_api.post(api.base + "/chat/completions", b"{}", {}, 30.0, max_bytes=limit)
        _cur, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(exc.value) == f"HTTP 200: response body over the limit of {limit} bytes"
    assert peak < limit + (4 << 20)  # the body up to the limit, once; never the 200 MB


def test_a_declared_huge_body_is_refused_before_reading(servers):
    api = servers(
        lambda n, body, h: (h.send_response(200), h.send_header("Content-Length", str(10**12)), h.end_headers(), None)[
            -1
        ]
    )
    t0 = time.monotonic()
    with pytest.raises(chat_api.ApiError) as exc:
        chat_api.post(api.base + "/chat/completions", b"{}", {}, 10.0, max_bytes=1 << 20)
    assert str(exc.value) == f"HTTP 200: response body of {10**12} bytes is over the limit of {1 << 20} bytes"
    assert time.monotonic() - t0 < 5


def test_an_answers_file_with_line_separators_stays_readable(servers, tmp_path, monkeypatch):
    weird = "a\u2028b\u2029c\x85d\x1ce\x1df\x1eg\x0bh\x0ci"
    api = servers(lambda n, body, h: answer({"role": "assistant", "content": f"{weird}\nBEST: A\nWORST: B"}))
    track = make_track(tmp_path, ks=(3, 2))
    monkeypatch.setenv("T22_KEY", KEY)
    args = run_args(track, api.base, tmp_path)
    assert cli_main(args) == 0
    raw = (tmp_path / "answers.jsonl").read_bytes()
    text = raw.decode("utf-8")
    assert len(text.splitlines()) == text.count("\n") == sum(api.calls.values())  # one line per answer, by any reader
    assert all(json.loads(x)["response"].startswith(weird) for x in text.splitlines())
    before = sum(api.calls.values())
    assert cli_main(args) == 0  # resume reads the file: nothing asked again
    assert sum(api.calls.values()) == before
    assert (
        cli_main(
            [
                "vab",
                "score",
                "--track",
                str(track),
                "--answers",
                str(tmp_path / "answers.jsonl"),
                "--results",
                str(tmp_path / "results2"),
            ]
        )
        == 0
    )
    # a file written by an older kit (U+2028 raw inside a JSON string) is read too
    old = tmp_path / "old.jsonl"
    old.write_text(
        json.dumps(
            {"task_id": "task0", "trial": 0, "prompt_type": "pick_best", "response": f"{weird} BEST: A"},
            ensure_ascii=False,
        )
        + "\n",
        encoding="utf-8",
    )
    assert "\u2028" in old.read_text(encoding="utf-8")
    # read and scored; task1 has no answer in this file, so the run is incomplete (exit 1, issue #44 case 6)
    assert (
        cli_main(
            ["vab", "score", "--track", str(track), "--answers", str(old), "--results", str(tmp_path / "results3")]
        )
        == 1
    )
    run = json.loads((tmp_path / "results3" / "clienttrack" / "old" / "run.json").read_text())
    assert run["n_scored"] == 1 and {"kind": "tasks_not_answered", "tasks": ["task1"]} in run["deviations"]


def test_extra_headers_and_body_fields_are_sent_and_secrets_never_written(servers, tmp_path, monkeypatch, capsys):
    api = servers(lambda n, body, h: answer({"role": "assistant", "content": "BEST: A\nWORST: B"}))
    track = make_track(tmp_path, ks=(2,))
    monkeypatch.setenv("T22_KEY", KEY)
    monkeypatch.setenv("T22_ORG_SECRET", "org-secret-value-987")
    args = run_args(
        track,
        api.base,
        tmp_path,
        "--header",
        "X-Org=env:T22_ORG_SECRET",
        "--header",
        "X-Inline=inline-secret-654",
        "--extra-body",
        'reasoning_effort="high"',
        "--extra-body",
        "top_k=5",
    )
    assert cli_main(args) == 0
    for call in api.seen:
        assert call["headers"]["X-Org"] == "org-secret-value-987" and call["headers"]["X-Inline"] == "inline-secret-654"
        assert call["headers"]["Authorization"] == f"Bearer {KEY}"
        assert call["body"]["reasoning_effort"] == "high" and call["body"]["top_k"] == 5
    run = json.loads(next((tmp_path / "results").rglob("run.json")).read_text())
    assert run["judge"]["model_api"]["headers"] == ["X-Inline", "X-Org"]
    assert run["judge"]["model_api"]["extra_body"] == {"reasoning_effort": "high", "top_k": 5}
    for f in list((tmp_path / "results").rglob("*")) + [tmp_path / "answers.jsonl"]:
        if f.is_file():
            text = f.read_text(errors="replace")
            assert KEY not in text and "org-secret-value-987" not in text and "inline-secret-654" not in text, f


@pytest.mark.parametrize("via_ini", [False, True])
def test_the_plugin_sends_the_same_headers_and_body_fields_as_vab_run(
    servers, tmp_path, monkeypatch, pytester, via_ini
):
    """--pstbench-header / --pstbench-extra-body (or their ini twins) reach the endpoint as `vab run`'s do, and
    no header value is written: run.json keeps the names, its command line shows <redacted>."""
    api = servers(lambda n, body, h: answer({"role": "assistant", "content": "BEST: A\nWORST: B"}))
    track = make_track(tmp_path / "trk", ks=(2,))
    monkeypatch.setenv("T22_KEY", KEY)
    monkeypatch.setenv("T22_ORG_SECRET", "org-secret-value-987")
    headers = ["X-Org=env:T22_ORG_SECRET", "X-Inline=inline-secret-654"]
    bodies = ['reasoning_effort="high"', "top_k=5"]
    args = [
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={track}",
        "--pstbench-model=m1",
        f"--pstbench-api-base={api.base}",
        "--pstbench-api-key-env=T22_KEY",
    ]
    if via_ini:
        pytester.makeini(
            "[pytest]\npstbench_header =\n    "
            + "\n    ".join(headers)
            + "\npstbench_extra_body =\n    "
            + "\n    ".join(bodies)
            + "\n"
        )
        args += ["-o", "pstbench_header=X-Inline=inline-secret-654"]  # the command line's override, redacted too
    else:
        args += [
            "--pstbench-header",
            headers[0],
            f"--pstbench-header={headers[1]}",
            *(a for b in bodies for a in ("--pstbench-extra-body", b)),
        ]
    pytester.runpytest_inprocess(*args).assert_outcomes(passed=1)
    assert api.seen
    for call in api.seen:
        if not via_ini:
            assert call["headers"]["X-Org"] == "org-secret-value-987"
        assert call["headers"]["X-Inline"] == "inline-secret-654"
        assert call["headers"]["Authorization"] == f"Bearer {KEY}"
        assert call["body"]["reasoning_effort"] == "high" and call["body"]["top_k"] == 5
    run = json.loads((pytester.path / "results" / "clienttrack" / "m1" / "run.json").read_text())
    assert run["judge"]["model_api"]["headers"] == (["X-Inline"] if via_ini else ["X-Inline", "X-Org"])
    assert run["judge"]["model_api"]["extra_body"] == {"reasoning_effort": "high", "top_k": 5}
    assert "<redacted>" in run["command"]
    for f in (pytester.path / "results").rglob("*"):
        if f.is_file():
            text = f.read_text(errors="replace")
            assert KEY not in text and "org-secret-value-987" not in text and "inline-secret-654" not in text, f


def test_plugin_header_options_are_parsed_as_vab_runs_and_need_a_model(tmp_path, pytester):
    track = make_track(tmp_path / "trk", ks=(2,))
    r = pytester.runpytest_inprocess(
        f"--pstbench-track={track}",
        "--pstbench-model=m1",
        "--pstbench-api-base=http://127.0.0.1:9/v1",
        "--pstbench-header",
        "Host=x",
    )
    assert r.ret == 4
    assert "pstbench: --pstbench-header Host: this header is set by the client; fix: drop it" in r.stderr.str()
    r = pytester.runpytest_inprocess(
        f"--pstbench-track={track}", "--pstbench-judge=x.py:f", "--pstbench-extra-body", "a=1"
    )
    assert r.ret == 4
    assert (
        "pstbench: --pstbench-extra-body: sent with the requests of --pstbench-model only; fix: give --pstbench-model "
        "NAME --pstbench-api-base URL, or drop the option"
    ) in r.stderr.str()


@pytest.mark.parametrize(
    "option, message",
    [
        (
            ["--header", "no-equals"],
            "--header 'no-equals': give NAME=VALUE with an HTTP header name (e.g. --header api-key=env:AZURE_KEY)",
        ),
        (["--header", "Host=x"], "--header Host: this header is set by the client; fix: drop it"),
        (
            ["--header", "X-A=env:T22_UNSET_VAR"],
            "--header X-A=env:T22_UNSET_VAR: environment variable T22_UNSET_VAR is not set; fix: export it first",
        ),
        (
            ["--extra-body", "max_tokens=5"],
            "--extra-body max_tokens=...: the kit sets max_tokens itself (from the protocol or its own option); fix: use --model / --temperature / --max-tokens, or drop the field",
        ),
        (
            ["--timeout", "0"],
            "--timeout 0.0: must be a positive number of seconds of at most 86400 (the limit of one whole "
            "API call); fix: e.g. --timeout 600",
        ),
        (
            ["--timeout", "inf"],
            "--timeout inf: must be a positive number of seconds of at most 86400 (the limit of one whole "
            "API call); fix: e.g. --timeout 600",
        ),
        (
            ["--temperature", "nan"],
            "--temperature nan: must be a finite number from 0 to 100 (the protocol's range for "
            "sampling.temperature); fix: e.g. --temperature 0",
        ),
        (
            ["--max-tokens", "0"],
            "--max-tokens 0: must be a whole number from 1 to 10000000; fix: e.g. --max-tokens 8192",
        ),
        (["--concurrency", "0"], "--concurrency 0: must be from 1 to 1000; fix: e.g. --concurrency 10"),
    ],
)
def test_bad_client_options_are_one_line_errors(tmp_path, capsys, option, message, monkeypatch):
    monkeypatch.delenv("T22_UNSET_VAR", raising=False)
    track = make_track(tmp_path, ks=(2,))
    assert cli_main(run_args(track, "http://127.0.0.1:9/v1", tmp_path, *option)) == 2
    assert capsys.readouterr().err == f"pstbench: error: {message}\n"


def test_connection_refused_is_retried_like_the_official_client(tmp_path, capsys, monkeypatch, no_sleep):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    calls = []
    real = chat_api.post
    monkeypatch.setattr(chat_api, "post", lambda *a, **kw: (calls.append(1), real(*a, **kw))[1])
    track = make_track(tmp_path, ks=(2,))
    assert cli_main(run_args(track, f"http://127.0.0.1:{port}/v1", tmp_path)) == 1
    lines = [json.loads(x) for x in (tmp_path / "answers.jsonl").read_text().splitlines()]
    assert len(lines) == 2 * 3  # k = 2: pick_best and pick_worst, 3 trials
    assert len(calls) == len(lines) * ATTEMPTS * (1 + HTTP_RETRIES)
    assert all(x["error"].startswith("ConnectionRefusedError") for x in lines)
