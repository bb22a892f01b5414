"""A local OpenAI-compatible server for tests of model runs (`pstbench vab run`): 127.0.0.1 only.

`/v1/chat/completions` answers every request with `answer_text(body)` (default: "BEST: A\\nWORST: B") and a
`usage` object computed from the request (`usage_for`: deterministic, so a test can recompute what the server
sent): prompt_tokens from the body's text and image count, completion_tokens from the answer's length,
reasoning and cached details. `usage_mode` chooses what is sent: "full", "plain" (no details), "none" (no
usage field), or a callable(body) -> the usage value to send (damaged values). A rate limit (`rate_per_s`,
requests per second, a token bucket of `burst`) answers 429 with Retry-After when exceeded; every request,
429s included, is logged with its time. `latency_s` (seconds, or a (low, high) range drawn from a seeded
generator) delays every admitted answer, as a model's time to answer (429s come back at once), so that the
number of requests in flight matters.

Further endpoints (files, batches) are added by the tests that need them through `routes`:
{(method, path prefix): handler(server, request_handler, raw_body) -> (status, headers, body bytes)}.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

IMAGE_TOKENS = 85  # what the server charges per image part


def usage_for(body: dict, answer: str, mode="full"):
    """The usage this server sends for a request body and its answer text (recomputable by a test)."""
    content = body["messages"][0]["content"]
    texts = "".join(p.get("text", "") for p in content if p.get("type") == "text")
    images = sum(1 for p in content if p.get("type") == "image_url")
    prompt = len(texts) // 4 + IMAGE_TOKENS * images + 7
    completion = len(answer) // 4 + 3
    if callable(mode):
        return mode(body)
    if mode == "none":
        return None
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if mode == "full":
        usage["completion_tokens_details"] = {"reasoning_tokens": completion // 2}
        usage["prompt_tokens_details"] = {"cached_tokens": IMAGE_TOKENS if images > 1 else 0}
    return usage


class OpenAIServer:
    def __init__(
        self,
        *,
        answer_text=None,
        usage_mode="full",
        rate_per_s: float | None = None,
        burst: int = 1,
        retry_after: float | None = 1.0,
        routes=None,
        latency_s=None,
        seed: int = 0,
    ):
        self.answer_text = answer_text or (lambda body: "BEST: A\nWORST: B")
        self.usage_mode = usage_mode
        self.rate_per_s, self.burst, self.retry_after = rate_per_s, burst, retry_after
        self.routes = dict(routes or {})
        self.latency = _latency(latency_s, seed)
        self.lock = threading.Lock()
        self.log: list[tuple[float, int]] = []  # (time, status) of every chat request
        self.sent: list[tuple[dict, object]] = []  # (request body, usage sent) of every answered chat request
        self._tokens = float(burst)
        self._last = time.monotonic()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _reply(self, status, body: bytes, headers=()):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def _dispatch(self, method):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                for (m, prefix), handler in server.routes.items():
                    if m == method and self.path.startswith(prefix):
                        status, headers, body = handler(server, self, raw)
                        return self._reply(status, body, headers)
                if method == "POST" and self.path == "/v1/chat/completions":
                    return self._reply(*server.chat(raw))
                return self._reply(404, b'{"error": "not found"}')

            def do_POST(self):
                self._dispatch("POST")

            def do_GET(self):
                self._dispatch("GET")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def _admit(self) -> bool:
        if self.rate_per_s is None:
            return True
        now = time.monotonic()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.rate_per_s)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def chat(self, raw: bytes):
        body = json.loads(raw)
        with self.lock:
            admitted = self._admit()
            self.log.append((time.monotonic(), 200 if admitted else 429))
        if not admitted:
            headers = [("Retry-After", f"{self.retry_after:g}")] if self.retry_after is not None else []
            return 429, b'{"error": {"message": "rate limit exceeded"}}', headers
        if self.latency is not None:
            time.sleep(self.latency())
        text = self.answer_text(body)
        usage = usage_for(body, text, self.usage_mode)
        reply = {"choices": [{"message": {"role": "assistant", "content": text}}]}
        if usage is not None:
            reply["usage"] = usage
        with self.lock:
            self.sent.append((body, usage))
        return 200, json.dumps(reply).encode(), []

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _latency(latency_s, seed: int):
    """The answer delay: None, a fixed number of seconds, or a (low, high) uniform range (seeded)."""
    if latency_s is None:
        return None
    if isinstance(latency_s, (int, float)):
        return lambda: float(latency_s)
    import random

    low, high = latency_s
    rng, lock = random.Random(seed), threading.Lock()

    def draw():
        with lock:
            return rng.uniform(low, high)

    return draw


def throughput(log, middle: float | None = None) -> float:
    """Answered (200) requests per second over the span from the first request to the last answer; with `middle`
    (e.g. 0.8), over the middle share of the answers only (the sustained rate: no start, no tail)."""
    times = sorted(t for t, status in log if status == 200)
    if len(times) < 2:
        return 0.0
    if middle is None:
        return len(times) / (times[-1] - min(t for t, _s in log))
    cut = int(len(times) * (1 - middle) / 2)
    inner = times[cut : len(times) - cut]
    return (len(inner) - 1) / (inner[-1] - inner[0])


def make_selection_track(root, ks=(3, 4, 2), track_id: str = "usagetrack"):
    """A small local selection track (distinct images, so every request body differs); its track.yaml path."""
    import yaml
    from PIL import Image

    tasks = []
    for i, k in enumerate(ks):
        files = []
        for c in range(k):
            p = root / f"t{i}" / f"c{c}.png"
            p.parent.mkdir(parents=True, exist_ok=True)
            Image.new("RGB", (5 + c, 4 + i), (40 * i, 50 * c, 7)).save(p)
            files.append(f"t{i}/c{c}.png")
        tasks.append({"id": f"t{i}", "domain": "photograph", "candidates": files, "best": 0, "worst": k - 1})
    manifest = root / "track.yaml"
    manifest.write_text(
        yaml.safe_dump({"kind": "selection", "id": track_id, "revision": "r1", "tasks": tasks}, sort_keys=False)
    )
    return manifest


# ---- the files and batches endpoints (#40 batch submission) -------------------------------------------------
class BatchService:
    """OpenAI's /v1/files and /v1/batches on an OpenAIServer (`OpenAIServer(routes=service.routes)`).

    POST /v1/files (multipart, purpose=batch) keeps the file; POST /v1/batches creates a batch that goes
    validating -> in_progress -> (its end) one step per GET /v1/batches/{id}, staying in_progress for
    `polls_in_progress` polls. Its end (`end`): "completed" (every line answered by the server's chat route,
    so usage and answers are the interactive ones), "expired" (only the first `answered` lines answered, the
    rest in no file), "failed" (validation failed: no file), "lies" (completed, no output file), or a callable
    (lines, outputs, errors) -> (status, outputs, errors) that damages what is served. `error_ids`: custom_ids
    answered with a per-request error in the error file (`error_reply`: its status and body, by default 500 with an
    error body; with `errors_once`, only the first time the custom_id is asked). `.uploads` / `.created`: what was sent.
    """

    def __init__(
        self,
        *,
        end="completed",
        polls_in_progress: int = 1,
        answered: int | None = None,
        error_ids=(),
        counts=None,
        error_reply=(500, {"error": {"message": "server error"}}),
        errors_once: bool = False,
    ):
        self.end, self.polls_in_progress, self.answered, self.error_ids = (
            end,
            polls_in_progress,
            answered,
            set(error_ids),
        )
        self.error_reply, self.errors_once = error_reply, errors_once
        self.counts = counts  # a callable(batch) -> request_counts to serve (damaged counts), or None
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.uploads: list[bytes] = []
        self.created: list[dict] = []
        self.polls = 0
        self.routes = {
            ("POST", "/v1/files"): self._upload,
            ("GET", "/v1/files/"): self._content,
            ("POST", "/v1/batches"): self._create,
            ("GET", "/v1/batches/"): self._get,
        }

    def _json(self, status, obj):
        return status, [], json.dumps(obj).encode()

    def _upload(self, server, handler, raw):
        import email
        import email.policy

        msg = email.message_from_bytes(
            b"Content-Type: " + handler.headers["Content-Type"].encode() + b"\r\n\r\n" + raw,
            policy=email.policy.default,
        )
        parts = {
            p.get_param("name", header="content-disposition"): p.get_payload(decode=True) for p in msg.iter_parts()
        }
        if parts.get("purpose") != b"batch" or "file" not in parts:
            return self._json(400, {"error": {"message": "purpose=batch and a file are required"}})
        fid = f"file-in{len(self.files) + 1}"
        self.files[fid] = parts["file"]
        self.uploads.append(parts["file"])
        return self._json(200, {"id": fid, "object": "file", "purpose": "batch", "bytes": len(parts["file"])})

    def _create(self, server, handler, raw):
        req = json.loads(raw)
        if req.get("input_file_id") not in self.files or req.get("endpoint") != "/v1/chat/completions":
            return self._json(400, {"error": {"message": "bad input_file_id or endpoint"}})
        self.created.append(req)
        bid = f"batch_{len(self.batches) + 1}"
        lines = [json.loads(x) for x in self.files[req["input_file_id"]].splitlines()]
        self.batches[bid] = {
            "id": bid,
            "object": "batch",
            "endpoint": req["endpoint"],
            "status": "validating",
            "input_file_id": req["input_file_id"],
            "completion_window": req.get("completion_window"),
            "output_file_id": None,
            "error_file_id": None,
            "_lines": lines,
            "_polls": 0,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
        }
        return self._json(200, self._public(self.batches[bid]))

    def _public(self, b):
        return {k: v for k, v in b.items() if not k.startswith("_")}

    def _get(self, server, handler, raw):
        self.polls += 1
        b = self.batches.get(handler.path.rsplit("/", 1)[-1])
        if b is None:
            return self._json(404, {"error": {"message": "no such batch"}})
        b["_polls"] += 1
        if b["status"] == "validating":
            b["status"] = "in_progress"
        elif b["status"] == "in_progress" and b["_polls"] > self.polls_in_progress:
            self._finish(server, b)
        return self._json(200, self._public(b))

    def _finish(self, server, b):
        lines = b["_lines"]
        take = lines if self.end != "expired" else lines[: self.answered or 0]
        outputs, errors = [], []
        for n, line in enumerate(take):
            if line["custom_id"] in self.error_ids:
                if self.errors_once:
                    self.error_ids.discard(line["custom_id"])
                status, body = self.error_reply
                errors.append(
                    {
                        "id": f"req_{n}",
                        "custom_id": line["custom_id"],
                        "response": {"status_code": status, "body": body},
                        "error": None,
                    }
                )
                continue
            status, body, _h = server.chat(json.dumps(line["body"]).encode())
            reply = json.loads(body)
            reply["model"] = line["body"]["model"]
            outputs.append(
                {
                    "id": f"req_{n}",
                    "custom_id": line["custom_id"],
                    "response": {"status_code": status, "request_id": f"r{n}", "body": reply},
                    "error": None,
                }
            )
        status = {"completed": "completed", "expired": "expired", "failed": "failed", "lies": "completed"}.get(
            self.end, "completed"
        )
        if self.end == "failed":
            outputs, errors = [], []
            b["errors"] = {"data": [{"code": "invalid_request", "message": "bad line"}]}
        out_bytes = "".join(json.dumps(o) + "\n" for o in outputs).encode()
        err_bytes = "".join(json.dumps(o) + "\n" for o in errors).encode()
        if callable(self.end):
            status, out_bytes, err_bytes = self.end(lines, out_bytes, err_bytes)
        if out_bytes and self.end != "lies":
            b["output_file_id"] = f"file-out-{b['id']}"
            self.files[b["output_file_id"]] = out_bytes
        if err_bytes and self.end != "lies":
            b["error_file_id"] = f"file-err-{b['id']}"
            self.files[b["error_file_id"]] = err_bytes
        b["status"] = status
        b["request_counts"] = {"total": len(lines), "completed": len(outputs), "failed": len(errors)}
        if self.counts is not None:
            b["request_counts"] = self.counts(b)

    def _content(self, server, handler, raw):
        fid = handler.path[len("/v1/files/") :].removesuffix("/content")
        if fid not in self.files:
            return self._json(404, {"error": {"message": "no such file"}})
        return 200, [], self.files[fid]
