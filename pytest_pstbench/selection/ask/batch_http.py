"""The bounded HTTP calls of a batch run (`pstbench vab run --batch`): GET a JSON object or a file's bytes, POST a
JSON object or a multipart file upload, against the same OpenAI-compatible origin as `chat_api.post`.

`chat_api.post` is the chat call (POST JSON, its reply read as choices[0].message); this is its sibling for the
files and batches endpoints, bounded the same ways: a deadline for the whole call (a watchdog closes the socket),
a byte limit on the reply, no redirect followed (the key goes only to --api-base's origin: every URL here is built
from it), and every secret of the request headers redacted from what comes back (`chat_api.secrets_of`).
Failures are `chat_api.ApiError` (status, kind) with the start of an error reply's body.
"""

from __future__ import annotations

import http.client
import json
import uuid
from urllib.parse import urlsplit

from pytest_pstbench.core.files.jsonfile import loads
from pytest_pstbench.core.text import redact
from pytest_pstbench.selection.ask.chat_api import ApiError, deadline_connection, error_snippet, secrets_of

_READ_CHUNK = 64 * 1024
MAX_JSON_BYTES = 4 * 1024 * 1024  # a batch object or a file's metadata: small


def _exchange(method: str, url: str, body: bytes | None, headers: dict, timeout: float, max_bytes: int) -> bytes:
    """One call; the body of a 2xx reply (at most `max_bytes`), else ApiError."""
    secrets = secrets_of(headers)
    try:
        return _call(method, url, body, headers, timeout, max_bytes, secrets)
    except ApiError as exc:
        exc.args = (redact(str(exc), secrets),)
        raise


def _call(method, url, body, headers, timeout, max_bytes, secrets) -> bytes:
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    conn, cut, held, timer = deadline_connection(parts, timeout)
    late = ApiError(f"{method} {path}: timed out after {timeout:g} s (--timeout)", kind="timeout")
    try:
        conn.connect()
        held.append(conn.sock)
        if cut.is_set():
            raise late
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        status, reason = resp.status, resp.reason
        limit = max_bytes if status < 300 else 65536
        length = resp.getheader("Content-Length")
        if status < 300 and length is not None and length.isdigit() and int(length) > max_bytes:
            raise ApiError(
                f"{method} {path}: HTTP {status}: reply of {int(length)} bytes is over the limit of {max_bytes} bytes",
                kind="body",
            )
        buf = bytearray()
        while not cut.is_set():
            chunk = resp.read(min(_READ_CHUNK, limit + 1 - len(buf)))
            if not chunk:
                break
            buf += chunk
            if len(buf) > limit:
                if status < 300:
                    raise ApiError(
                        f"{method} {path}: HTTP {status}: reply over the limit of {max_bytes} bytes", kind="body"
                    )
                break
        if cut.is_set():
            raise late
        if length is not None and length.isdigit() and len(buf) < min(int(length), limit):
            raise ApiError(f"{method} {path}: connection closed after {len(buf)} of {length} bytes", kind="connection")
    except ApiError:
        raise
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if cut.is_set() or isinstance(exc, TimeoutError):
            raise late from None
        raise ApiError(f"{method} {path}: {type(exc).__name__}: {exc}", kind="connection") from None
    finally:
        timer.cancel()
        conn.close()
    if 300 <= status < 400:
        raise ApiError(
            f"{method} {path}: HTTP {status} redirect not followed (the key is sent only to --api-base's origin); "
            "fix: give the final URL as --api-base",
            status=status,
            kind="redirect",
        )
    if status >= 400:
        text = error_snippet(bytes(buf), secrets)
        raise ApiError(f"{method} {path}: HTTP {status} {reason}" + (f": {text}" if text else ""), status=status)
    return bytes(buf)


def _object(raw: bytes, what: str, secrets) -> dict:
    try:
        obj = loads(raw, max_bytes=MAX_JSON_BYTES)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        raise ApiError(f"{what}: the reply is not a JSON object: {error_snippet(raw, secrets)}", kind="body")
    return obj


def get_json(url: str, headers: dict, timeout: float) -> dict:
    """GET `url`: its JSON object (at most MAX_JSON_BYTES)."""
    return _object(
        _exchange("GET", url, None, _plain(headers), timeout, MAX_JSON_BYTES),
        f"GET {urlsplit(url).path}",
        secrets_of(headers),
    )


def post_json(url: str, obj: dict, headers: dict, timeout: float) -> dict:
    """POST the JSON object `obj` to `url`: the reply's JSON object."""
    body = json.dumps(obj).encode("utf-8")
    return _object(
        _exchange("POST", url, body, {**headers, "Content-Type": "application/json"}, timeout, MAX_JSON_BYTES),
        f"POST {urlsplit(url).path}",
        secrets_of(headers),
    )


def get_bytes(url: str, headers: dict, timeout: float, max_bytes: int) -> bytes:
    """GET `url`: its body (a file's content), at most `max_bytes`."""
    return _exchange("GET", url, None, _plain(headers), timeout, max_bytes)


def upload(url: str, fields: dict, filename: str, data: bytes, headers: dict, timeout: float) -> dict:
    """POST a multipart/form-data upload (`fields` as text parts, then the file): the reply's JSON object."""
    boundary = "pstbench-" + uuid.uuid4().hex
    out = bytearray()
    for name, value in fields.items():
        out += (f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n').encode()
    out += (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        "Content-Type: application/jsonl\r\n\r\n"
    ).encode()
    out += data + f"\r\n--{boundary}--\r\n".encode()
    headers = {**_plain(headers), "Content-Type": f"multipart/form-data; boundary={boundary}"}
    return _object(
        _exchange("POST", url, bytes(out), headers, timeout, MAX_JSON_BYTES),
        f"POST {urlsplit(url).path}",
        secrets_of(headers),
    )


def _plain(headers: dict) -> dict:
    return {k: v for k, v in headers.items() if k.lower() != "content-type"}
