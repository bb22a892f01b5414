"""OpenAI Batch files of a model run, written and read one way (`vab run --batch`, `vab export --batch-file`,
`vab score --batch-output`).

Input (`input_lines`): JSON Lines, one request a line: {"custom_id", "method": "POST", "url": "/v1/chat/completions",
"body"}, the body exactly `requests.request_body`'s (what `vab run` posts), the custom_id naming the task, trial,
candidate order and prompt type (`custom_id`). vLLM's `run-batch` reads the same format.

Output (`read_output`): JSON Lines, {"custom_id", "response": {"status_code", "body": {choices, usage}}, "error"}.
Each line is checked against the requests that were asked (a custom_id not asked, a custom_id given twice, a line
that is not a JSON object: named in `Output.problems`, their requests left unanswered); a 200 body is read as
`chat_api.post` reads a reply (choices[0].message.content, `usage.from_reply`), anything else is an API error with
its status (a 429, or a 5xx without a body, never billed: `chat_api.unbilled_reason`). Each outcome becomes its
answers line by `attempts.answer_line`, as in `vab run`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pytest_pstbench.core.files.jsonfile import loads
from pytest_pstbench.selection.ask.chat_api import ApiError, Reply, error_snippet, unbilled_reason, without_secrets
from pytest_pstbench.selection.ask.requests import request_body
from pytest_pstbench.selection.ask.usage import from_reply

ENDPOINT = "/v1/chat/completions"
MAX_INPUT_BYTES = 200 * 1024 * 1024  # OpenAI's limit of a batch input file
MAX_INPUT_REQUESTS = 50_000  # ... and of its requests
MAX_OUTPUT_BYTES = 1024 * 1024 * 1024  # an output (or error) file read into memory: 1 GiB at most
MAX_LINE_BYTES = 64 * 1024 * 1024  # one output line (chat_api.MAX_RESPONSE_BYTES)
MAX_NAMED = 10  # problems named one a line; the rest counted


def custom_id(task_id: str, trial: int, order, ptype: str) -> str:
    """A request's custom_id: task, trial, candidate order (indices as presented) and prompt type."""
    return f"{task_id}|trial-{trial}|order-{'-'.join(str(i) for i in order)}|{ptype}"


def input_lines(
    settings,
    params,
    todo,
    urls,
    limit: int = MAX_INPUT_BYTES,
    split: bool = False,
    max_requests: int = MAX_INPUT_REQUESTS,
) -> tuple[bytes, dict]:
    """The batch input file of requests `todo` ((task, trial, order, ptype) each) and {custom_id: (task, trial, ptype)}.
    A file over `limit` bytes or `max_requests` requests raises ValueError (the caller names the fix); with `split`,
    the file holds the requests from the first that fit instead (a batch of a run cut into several; one request
    over the limit on its own still raises)."""
    if len(todo) > max_requests and not split:
        raise ValueError(f"{len(todo)} requests, over a batch's limit of {max_requests}")
    out = bytearray()
    ids = {}
    for task, t, order, ptype in todo:
        cid = custom_id(task.id, t, order, ptype)
        body = request_body(settings, params, task, order, ptype, urls)  # its bytes as they are: the body vab run posts
        line = (
            b'{"custom_id": '
            + json.dumps(cid).encode("utf-8")
            + b', "method": "POST", "url": "'
            + ENDPOINT.encode("ascii")
            + b'", "body": '
            + body
            + b"}\n"
        )
        if len(out) + len(line) > limit or len(ids) == max_requests:
            if split and ids:
                break
            raise ValueError(
                f"the batch input file is over {limit:,} bytes (at {len(ids) + 1} of {len(todo)} requests)"
            )
        out += line
        ids[cid] = (task, t, ptype)
    return bytes(out), ids


@dataclass
class Output:
    """What an output (and error) file says: custom_id -> Reply or ApiError; the lines it could not use."""

    outcomes: dict = field(default_factory=dict)
    problems: list = field(default_factory=list)  # one-line descriptions
    models: dict = field(default_factory=dict)  # custom_id -> the model the reply names

    def named(self) -> list[str]:
        shown = self.problems[:MAX_NAMED]
        if len(self.problems) > MAX_NAMED:
            shown.append(f"... and {len(self.problems) - MAX_NAMED} more")
        return shown


def read_output(raw: bytes, asked: dict, where: str, secrets=(), into: Output | None = None) -> Output:
    """The lines of one output or error file `raw` (`where`: its name in messages) for the requests `asked`
    ({custom_id: ...}); several files read into one Output (a custom_id in two of them is a duplicate)."""
    out = into or Output()
    seen_twice = set()
    for n, line in enumerate(bytes(raw).split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            obj = loads(line.decode("utf-8"), max_bytes=MAX_LINE_BYTES)  # strict UTF-8: no lone surrogate gets through
        except UnicodeDecodeError:
            out.problems.append(f"{where} line {n}: not UTF-8 text")
            continue
        except ValueError as exc:
            out.problems.append(f"{where} line {n}: not JSON ({str(exc)[:80]}; a line cut short?)")
            continue
        cid = obj.get("custom_id") if isinstance(obj, dict) else None
        if not isinstance(cid, str):
            out.problems.append(f"{where} line {n}: no custom_id string")
            continue
        shape = _shape_problem(obj)
        if shape:
            out.problems.append(f"{where} line {n}: {shape}")
            continue
        shown = redact_text(cid[:80], secrets)
        if cid not in asked:
            out.problems.append(f"{where} line {n}: custom_id {shown!r} was not asked")
            continue
        if cid in out.outcomes or cid in seen_twice:
            out.problems.append(f"{where} line {n}: custom_id {shown!r} answered twice (neither answer is used)")
            out.outcomes.pop(cid, None)
            seen_twice.add(cid)
            continue
        out.outcomes[cid] = _outcome(obj, secrets)
        body = (obj.get("response") or {}).get("body") if isinstance(obj.get("response"), dict) else None
        if isinstance(body, dict) and isinstance(body.get("model"), str):
            out.models[cid] = body["model"]
    for cid in seen_twice:
        out.outcomes.pop(cid, None)
    return out


def _shape_problem(obj: dict) -> str | None:
    """What makes an output line not one of the Batch API's: a `response` (null, or an object with an integer
    status_code and a body) and an `error` (null, or an object or text); at least one of them given."""
    resp, error = obj.get("response"), obj.get("error")
    if resp is not None:
        if not isinstance(resp, dict):
            return f"response is {type(resp).__name__}, not an object"
        code = resp.get("status_code")
        if isinstance(code, bool) or not isinstance(code, int) or not 100 <= code <= 599:
            return f"response.status_code {str(code)[:20]!r} is not an HTTP status"
        if "body" in resp and not isinstance(resp["body"], (dict, str, type(None))):
            return f"response.body is {type(resp['body']).__name__}, not an object"
    if error is not None and not isinstance(error, (dict, str)):
        return f"error is {type(error).__name__}, not an object"
    if resp is None and error is None:
        return "neither a response nor an error"
    return None


def redact_text(text: str, secrets) -> str:
    from pytest_pstbench.core.text import redact

    return redact(text, list(secrets)) if secrets else text


def _outcome(obj: dict, secrets) -> Reply | ApiError:
    """One output line as `chat_api.post` would give it: the Reply of a 200 with a message, else an ApiError."""
    resp, error = obj.get("response"), obj.get("error")
    status = resp.get("status_code") if isinstance(resp, dict) else None
    body = resp.get("body") if isinstance(resp, dict) else None
    if isinstance(status, bool) or not isinstance(status, int):
        status = None
    if status is not None and status < 300 and isinstance(body, dict):
        try:
            message = body["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            return ApiError(
                f"malformed response body (no choices[0].message): {json_snippet(body, secrets)}", kind="body"
            )
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            return ApiError("empty response from model (message.content is not a string)", kind="body")
        counts, problem = from_reply(body.get("usage"))
        return Reply(without_secrets(message, list(secrets)), counts, problem)
    what = error if error is not None else body
    if status is not None:  # a 429 or a 5xx without a body is never billed, as for an interactive call
        return ApiError(
            f"HTTP {status}" + (f": {json_snippet(what, secrets)}" if what is not None else ""),
            status=status,
            unbilled=unbilled_reason(status, body not in (None, "", {})),
        )
    return ApiError(f"batch error: {json_snippet(what, secrets)}", kind="connection")


def json_snippet(value, secrets) -> str:
    return error_snippet(json.dumps(value, ensure_ascii=False).encode("utf-8"), list(secrets))
