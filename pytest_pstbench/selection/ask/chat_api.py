"""One call to an OpenAI-compatible chat-completions endpoint, as `pstbench vab run` makes it.

`post` is one HTTP call, bounded three ways: `--timeout` for the whole call (a watchdog closes the socket),
MAX_RESPONSE_BYTES of body, and redirects followed only to the same origin (the headers, the key among them,
never go to another host). `call` is one attempt of the official pipeline: `post`, made again on the
protocol's `answers.attempts.http` statuses, timeouts and dropped connections (litellm's openai client).
What comes back has the request headers' secrets redacted (`secrets_of`, `core.text.redact`): an endpoint
that echoes the request cannot put the key or a `--header` value into an answers file, run.json or the terminal.
Only the standard library is used (no `openai` package needed).
"""

from __future__ import annotations

import http.client
import threading
import time
from dataclasses import dataclass

from pytest_pstbench.core.files.jsonfile import loads
from pytest_pstbench.core.text import redact
from pytest_pstbench.selection.ask.usage import from_reply

pause = time.sleep  # every wait of a model run (HTTP backoff, the official delays); tests replace it


class ApiError(Exception):
    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        kind: str = "http",
        retry_after: float | None = None,
        unbilled: str | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.unbilled = unbilled  # why the call was never billed (`unbilled_reason`); None: it may have been
        self.kind = (
            kind  # "http" (a status), "timeout", "connection", "body" (a 200 without a usable answer), "redirect"
        )
        self.retry_after = retry_after


def unbilled_reason(status: int | None, has_body: bool, refused: bool = False) -> str | None:
    """Why an API error was never billed, or None when it may have been: a rate-limit refusal (429), a server error
    without a body (5xx: nothing was generated), a refused connection (nothing reached the server)."""
    if refused:
        return "not billed: the connection was refused"
    if status == 429:
        return "not billed: HTTP 429 (rate limited)"
    if status is not None and status >= 500 and not has_body:
        return f"not billed: HTTP {status} without a body"
    return None


@dataclass(frozen=True)
class Reply:
    """An answered call: the reply's choices[0].message (secrets redacted) and its token usage (`usage.from_reply`:
    None when the server sent none or sent damaged counts, `usage_problem` then saying which)."""

    message: dict
    usage: dict | None = None
    usage_problem: str | None = None


ERROR_BODY_CHARS = 300  # characters of an error response's body kept in the `error` line
MAX_RESPONSE_BYTES = 64 * 1024 * 1024  # a response body larger than this is an API error (memory stays bounded)
_READ_CHUNK = 64 * 1024
_MAX_REDIRECTS = 3


def _origin(parts) -> tuple:
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, (parts.hostname or "").lower(), port


SECRET_MIN_CHARS = (
    8  # a --header value this long or longer is a secret (a shorter one could not be told from answer text)
)


def secrets_of(headers: dict) -> list[str]:
    """The secrets among the request's headers: the Bearer token (the API key, whatever its length), and every
    other header's value of SECRET_MIN_CHARS characters or more (--header: a key, a token); Content-Type aside."""
    out = []
    for name, value in headers.items():
        value = str(value)
        if name.lower() == "content-type":
            continue
        scheme, _sp, token = value.partition(" ")
        if name.lower() == "authorization" and scheme.lower() == "bearer" and token.strip():
            out.append(token.strip())
        if len(value) >= SECRET_MIN_CHARS:
            out.append(value)
    return out


def _without(value, secrets):
    """`value` (a reply's text, or the strings of a message's fields) with every secret redacted."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {k: _without(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_without(v, secrets) for v in value]
    return value


def _snippet(raw, secrets=()) -> str:
    """The start of a reply's body for an error line: secrets redacted before it is cut (no half key)."""
    text = redact(
        bytes(raw[: ERROR_BODY_CHARS * 4 + 4 + 4 * sum(map(len, secrets))]).decode("utf-8", "replace"), secrets
    )
    text = redact(" ".join(text.split()), secrets)
    return text[:ERROR_BODY_CHARS] + ("..." if len(text) > ERROR_BODY_CHARS else "")


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def post(url: str, body: bytes, headers: dict, timeout: float, max_bytes: int = MAX_RESPONSE_BYTES) -> Reply:
    """POST `body` to `url`; the response's choices[0].message and usage (`Reply`). One call, bounded three ways: `timeout`
    seconds for the whole call (connect, send, headers and body; a watchdog closes the socket at the
    deadline, so a server dripping bytes is cut), `max_bytes` of response body, and redirects followed
    only to the same origin (scheme, host, port) with the method and body kept (307 / 308): the headers,
    the key among them, never go to another host. What comes back (the message's text and fields, an
    error's message and body) has the headers' secrets redacted (`secrets_of`): an endpoint that echoes
    the request cannot put the key into the answers file or the terminal."""
    secrets = secrets_of(headers)
    try:
        reply = _post(url, body, headers, timeout, max_bytes, secrets)
        return Reply(_without(reply.message, secrets), reply.usage, reply.usage_problem)
    except ApiError as exc:
        exc.args = (redact(str(exc), secrets),)
        raise


def deadline_connection(parts, seconds: float):
    """(conn, cut, held, timer): an HTTP(S) connection to `parts`' host, not yet connected, and a started watchdog
    that at `seconds` sets `cut` and shuts the connection's socket and every socket in `held` (the caller appends
    conn.sock once connected: http.client lets go of it, conn.sock = None, on `Connection: close`), so a server
    dripping bytes is cut; the caller cancels `timer` and closes `conn` when the call ends."""
    import socket
    import ssl

    if parts.scheme == "https":
        conn = http.client.HTTPSConnection(
            parts.hostname, parts.port, timeout=seconds, context=ssl.create_default_context()
        )
    else:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=seconds)
    cut = threading.Event()
    held: list = []

    def watchdog():
        cut.set()
        for sock in (conn.sock, *held):
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    timer = threading.Timer(seconds, watchdog)
    timer.daemon = True
    timer.start()
    return conn, cut, held, timer


def _post(url: str, body: bytes, headers: dict, timeout: float, max_bytes: int, secrets: list) -> Reply:
    from urllib.parse import urlsplit

    deadline = time.monotonic() + timeout
    origin = _origin(urlsplit(url))
    for _hop in range(_MAX_REDIRECTS + 1):
        parts = urlsplit(url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ApiError(f"timed out after {timeout:g} s (--timeout)", kind="timeout")
        conn, cut, held, timer = deadline_connection(parts, remaining)
        try:
            conn.connect()
            held.append(conn.sock)
            if cut.is_set():  # the deadline passed while connecting (a server's full backlog: SYNs resent after 1 s),
                raise ApiError(
                    f"timed out after {timeout:g} s (--timeout)", kind="timeout"
                )  # before the socket was held
            conn.request("POST", path, body=body, headers=headers)
            resp = conn.getresponse()
            status = resp.status
            raw = _read_body(resp, max_bytes, cut, timeout)
            location = resp.getheader("Location")
            retry_after = _retry_after(resp.getheader("Retry-After"))
            reason = resp.reason
        except ApiError:
            raise
        except (OSError, http.client.HTTPException, ValueError) as exc:  # refused, dropped, cut short, timed out
            if cut.is_set() or isinstance(exc, TimeoutError):
                raise ApiError(f"timed out after {timeout:g} s (--timeout)", kind="timeout") from None
            refused = isinstance(exc, ConnectionRefusedError)
            raise ApiError(
                f"{type(exc).__name__}: {exc}", kind="connection", unbilled=unbilled_reason(None, False, refused)
            ) from None
        finally:
            timer.cancel()
            conn.close()
        if status in (301, 302, 303, 307, 308):
            url = _redirect_target(url, location, status, origin)
            continue
        if status >= 300:
            text = _snippet(raw, secrets)  # a server may repeat the key it was sent: redacted before the cut
            raise ApiError(
                f"HTTP {status} {reason}" + (f": {text}" if text else ""),
                status=status,
                retry_after=retry_after,
                unbilled=unbilled_reason(status, bool(raw.strip())),
            )
        return _reply(raw, max_bytes, secrets)
    raise ApiError(f"more than {_MAX_REDIRECTS} redirects", kind="redirect")


def _read_body(resp, max_bytes: int, cut, timeout: float):
    """The body of `resp`, read to `max_bytes` at most (an error's: its start only), cut short by the deadline."""
    status = resp.status
    length = resp.getheader("Content-Length")
    if length is not None and length.isdigit() and int(length) > max_bytes:
        raise ApiError(
            f"HTTP {status}: response body of {int(length)} bytes is over the limit of {max_bytes} bytes",
            kind="body",
        )
    buf = bytearray()  # grows to the limit at most (no second copy: json.loads reads it as it is)
    size = 0
    limit = max_bytes if status < 300 else min(max_bytes, 65536)  # an error's body: only its start is kept
    while True:
        chunk = resp.read(min(_READ_CHUNK, limit + 1 - size))
        if not chunk:
            break
        buf += chunk
        size += len(chunk)
        if size > limit:
            if status < 300:
                raise ApiError(f"HTTP {status}: response body over the limit of {max_bytes} bytes", kind="body")
            break
        if cut.is_set():
            break
    if cut.is_set():
        raise ApiError(f"timed out after {timeout:g} s (--timeout)", kind="timeout")
    if length is not None and length.isdigit() and size < min(int(length), limit):
        raise ApiError(f"connection closed after {size} of {length} bytes of the response", kind="connection")
    return bytes(buf) if status >= 300 else buf


def _redirect_target(url: str, location, status: int, origin) -> str:
    """Where a redirect of the POST goes: only a 307 / 308 to the same origin is followed."""
    from urllib.parse import urljoin, urlsplit

    target = urljoin(url, location or "")
    if not location or _origin(urlsplit(target)) != origin:
        raise ApiError(
            f"HTTP {status} redirect to another origin ({target if location else 'no Location'}) not followed: "
            "the key is sent only to --api-base's host; fix: give the final URL as --api-base",
            status=status,
            kind="redirect",
        )
    if status not in (307, 308):
        raise ApiError(
            f"HTTP {status} redirect to {target} not followed (it would turn the POST into a GET); "
            "fix: give the final URL as --api-base",
            status=status,
            kind="redirect",
        )
    return target


def _reply(raw, max_bytes: int, secrets: list) -> Reply:
    """A 2xx body read as choices[0].message and its usage."""
    try:
        obj = loads(raw, max_bytes=max_bytes)
        message = obj["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise ApiError(
            f"malformed response body (no choices[0].message): {_snippet(raw, secrets)}", kind="body"
        ) from None
    if not isinstance(message, dict) or not isinstance(message.get("content"), str):
        raise ApiError("empty response from model (message.content is not a string)", kind="body")
    counts, problem = from_reply(obj.get("usage"))
    return Reply(message, counts, problem)


def call(
    url: str,
    body: bytes,
    headers: dict,
    timeout: float,
    http_rules: dict,
    max_bytes: int = MAX_RESPONSE_BYTES,
    count=None,
    send=None,
) -> Reply:
    """One attempt: `post`, made again on the statuses, timeouts and connection errors of the protocol's
    answers.attempts.http (as litellm's OpenAI-compatible path does inside one eval.py attempt). `send`: what
    makes each HTTP call instead of `post` (`pacing.AdaptiveLimiter.send`, --concurrency auto)."""
    statuses = http_rules["retry_statuses"]
    billed = False  # a failed try of this attempt that may have been billed: the attempt's error is not "unbilled"
    for i in range(http_rules["retries"] + 1):
        if count is not None:
            count()
        try:
            if send is not None:
                return send(post, url, body, headers, timeout, max_bytes)
            return post(url, body, headers, timeout, max_bytes)
        except ApiError as exc:
            billed = billed or exc.unbilled is None
            if billed:
                exc.unbilled = None
            if exc.kind == "http":
                again = exc.status in statuses or ("5xx" in statuses and exc.status >= 500)
            else:
                again = exc.kind in http_rules["retry_on"]
            if not again or i == http_rules["retries"]:
                raise
            backoff = http_rules["backoff_s"]
            wait = backoff[min(i, len(backoff) - 1)] if backoff else 0.0
            if exc.retry_after is not None and 0 < exc.retry_after <= http_rules["retry_after_max_s"]:
                wait = exc.retry_after
            pause(wait)
    raise AssertionError("unreachable")  # pragma: no cover


error_snippet = _snippet  # the start of a reply's body, secrets redacted (batch_http, batch_file)
without_secrets = _without  # a reply's message with every secret redacted (batch_file)
