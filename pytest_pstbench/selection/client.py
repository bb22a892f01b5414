"""`pstbench vab run`: ask a model behind an OpenAI-compatible chat-completions endpoint, as the
official VAB toolkit does, and append its answers to an answers file.

Per request (task, trial, prompt type; k = 2 tasks are not asked pick_best_and_worst): one user
message in the official layout (`answers.message_content`: the header text, then per image a text
part "\\nImage X:" and the image as a `data:image/jpeg;base64` URL of the protocol's re-encoding),
sent with the protocol's sampling (temperature 1.0, max_tokens 8192). An answer that does not parse
under the protocol, an HTTP error (429, 5xx, ...), a timeout or a dropped connection is retried up to
`answers.attempts.max` attempts in all, sleeping `answers.attempts.delays_s[i]` after failed attempt
i + 1; the last response is kept (an unparseable one as it is; a request whose last attempt failed
at the API is written as an `error` line). Requests run on `concurrency` threads. Each finished
request is appended to the answers file as one line (task_id, trial, prompt_type, attempt, response
or error, model); a later run with the same file asks only what is not there yet or ended in an API
error (resume), numbering a re-asked request's attempts on from its last line (the highest attempt
counts when the file is scored). The API key is read from an environment variable and sent as a Bearer token; it is
never written to any file. Only the standard library is used (no `openai` package needed).
"""
from __future__ import annotations

import base64
import http.client
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.selection.answers import ERROR, OK, encode_image, message_content, parse_response, read_answers
from pytest_pstbench.selection.permutations import orders_for

_sleep = time.sleep  # tests replace this to skip the official delays


@dataclass(frozen=True)
class RunSettings:
    model: str
    api_base: str
    temperature: float
    max_tokens: int
    concurrency: int
    timeout_s: float
    key_env: str

    def provenance(self) -> dict:  # what run.json records (never the key itself)
        return {"kind": "model-api", "model": self.model, "api_base": self.api_base, "endpoint": "chat/completions",
                "sampling": {"temperature": self.temperature, "max_tokens": self.max_tokens},
                "concurrency": self.concurrency, "timeout_s": self.timeout_s, "api_key_env": self.key_env}


class _ApiError(Exception):
    pass


def _post(url: str, body: bytes, key: str | None, timeout: float) -> str:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        raise _ApiError(f"HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, TimeoutError, http.client.HTTPException) as exc:  # refused, dropped, cut short, timed out
        reason = getattr(exc, "reason", exc)
        raise _ApiError(f"{type(exc).__name__}: {reason}") from None
    try:
        text = json.loads(raw)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise _ApiError("malformed response body (no choices[0].message.content)") from None
    if not isinstance(text, str):
        raise _ApiError("empty response from model")
    return text


def _requests(track, params):
    for task in track.tasks:
        for t, order in enumerate(orders_for(task, params)):
            for ptype in params.prompt_types_for(task.k):
                yield task, t, order, ptype


def _done_keys(path: Path, track, params) -> tuple[set, dict]:
    """Requests already answered in `path` (latest attempt not an API error: not asked again), and the
    latest attempt number of those that ended in an API error (asked again, numbering on from there)."""
    if not path.is_file() or path.stat().st_size == 0:
        return set(), {}
    data = path.read_bytes()
    if not data.endswith(b"\n"):  # a line cut short by an interrupted run: drop it, it is asked again
        path.write_bytes(data[: data.rfind(b"\n") + 1])
    answer_set = read_answers(path, track, params)
    done = {key for key, entry in answer_set.entries.items() if entry[1] != ERROR}
    failed = {key: entry[4] for key, entry in answer_set.entries.items() if entry[1] == ERROR}
    return done, failed


def run_model(track, protocol, settings: RunSettings, answers_path: Path, progress=None) -> dict:
    """Ask every request not yet answered in `answers_path`; append each answer. Returns counts."""
    from pytest_pstbench.selection.protocol import SelectionParams

    params = SelectionParams.of(protocol)
    key = os.environ.get(settings.key_env) or None
    url = settings.api_base.rstrip("/") + "/chat/completions"
    answers_path = Path(answers_path)
    answers_path.parent.mkdir(parents=True, exist_ok=True)
    done, failed = _done_keys(answers_path, track, params)
    todo = [r for r in _requests(track, params) if (r[0].id, r[1], r[3]) not in done]
    att = params.attempts
    image_spec = (params.message or {}).get("image")
    lock = threading.Lock()
    counts = {"asked": len(todo), "skipped": len(done), "ok": 0, "unparseable": 0, "error": 0, "calls": 0}
    url_cache: dict = {}

    def data_url(src: Path) -> str:
        with lock:
            if src in url_cache:
                return url_cache[src]
        data, _suffix = encode_image(src, image_spec)
        mime = "image/jpeg" if image_spec else "application/octet-stream"
        u = f"data:{mime};base64," + base64.b64encode(data).decode("ascii")
        with lock:
            url_cache[src] = u
        return u

    def ask(task, t, order, ptype) -> dict:
        labels = params.labels[: task.k]
        paths = [task.candidates[i] for i in order]
        content = []
        for part in message_content(params, ptype, labels, [str(p) for p in paths]):
            if part["type"] == "image":
                content.append({"type": "image_url", "image_url": {"url": data_url(Path(part["path"]))}})
            else:
                content.append(part)
        body = json.dumps({"model": settings.model, "messages": [{"role": "user", "content": content}],
                           "temperature": settings.temperature, "max_tokens": settings.max_tokens}).encode("utf-8")
        line = {"task_id": task.id, "trial": t, "prompt_type": ptype, "model": settings.model}
        first = failed.get((task.id, t, ptype), 0)  # a resumed request numbers its attempts on (the highest counts)
        for i in range(1, att["max"] + 1):
            attempt = first + i
            with lock:
                counts["calls"] += 1
            try:
                text = _post(url, body, key, settings.timeout_s)
            except _ApiError as exc:
                result = {**line, "attempt": attempt, "error": str(exc)}
                retry = "error" in att["retry_on"]
            else:
                _found, status, _detail = parse_response(text, ptype, task.k, params)
                result = {**line, "attempt": attempt, "response": text}
                retry = status != OK and "unparseable" in att["retry_on"]
            if not retry or i == att["max"]:
                return result
            delays = att["delays_s"]
            if i - 1 < len(delays):
                _sleep(float(delays[i - 1]))
        return result  # pragma: no cover

    n = len(todo)
    finished = 0
    say = progress or (lambda _d, _n: None)
    with open(answers_path, "ab") as fh, ThreadPoolExecutor(max_workers=max(1, settings.concurrency)) as pool:
        futures = [pool.submit(ask, *r) for r in todo]
        for fut in as_completed(futures):
            result = fut.result()
            with lock:
                fh.write((json.dumps(result, ensure_ascii=False) + "\n").encode("utf-8"))
                fh.flush()
                if "error" in result:
                    counts["error"] += 1
                else:
                    task = track.task(result["task_id"])
                    st = parse_response(result["response"], result["prompt_type"], task.k, params)[1]
                    counts["ok" if st == OK else "unparseable"] += 1
                finished += 1
            say(finished, n)
    return counts


def terminal_progress(done: int, total: int, width: int = 30) -> None:
    """A one-line progress bar on stderr (the official toolkit's layout)."""
    filled = int(width * done / total) if total else width
    end = "\n" if done >= total else ""
    print(f"\r  [{'=' * filled}{' ' * (width - filled)}] {done}/{total}", end=end, file=sys.stderr, flush=True)


def settings_from_args(args, params) -> RunSettings:
    sampling = params.sampling
    temperature = args.temperature if args.temperature is not None else float(sampling.get("temperature", 1.0))
    max_tokens = args.max_tokens if args.max_tokens is not None else int(sampling.get("max_tokens", 8192))
    if not args.api_base.startswith(("http://", "https://")):
        raise UserError(f"--api-base {args.api_base}: not an http(s) URL; fix: give the endpoint's base, e.g. http://127.0.0.1:8000/v1")
    if args.concurrency < 1:
        raise UserError(f"--concurrency {args.concurrency}: must be at least 1")
    return RunSettings(args.model, args.api_base, float(temperature), int(max_tokens), int(args.concurrency),
                       float(args.timeout), args.api_key_env)
