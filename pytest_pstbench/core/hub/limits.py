"""The Hub client's limits, each raised by one environment variable: the bytes a published run file may
have (PSTBENCH_HUB_MAX_FILE_BYTES), the seconds a tree listing or one download may take in all
(PSTBENCH_HUB_DEADLINE), the entries (and pages) of one tree listing (PSTBENCH_HUB_MAX_LISTING); and the
sizes the tree listings gave, the byte cap of each later download of those files; an error answer's
body, read only in part for its message; and the bounds of the replies huggingface_hub reads itself (a push's
create_repo, preupload and commit: `replies_bounded`, applied by the Hub client's response hook `bound_reply`).
"""

from __future__ import annotations

import contextlib
import contextvars
import time

from pytest_pstbench.core.envvars import env_number

DEADLINE_ENV = "PSTBENCH_HUB_DEADLINE"
DEFAULT_DEADLINE = 120.0  # seconds: a whole tree listing, or one download (plus a second per MB of its listed size)
MAX_LISTING_ENV = "PSTBENCH_HUB_MAX_LISTING"
DEFAULT_MAX_LISTING = 200_000  # entries of one tree listing (and a tenth as many pages, plus ten)


MAX_FILE_ENV = "PSTBENCH_HUB_MAX_FILE_BYTES"
DEFAULT_MAX_FILE = 64 * 1024 * 1024  # bytes: a run file larger than this is refused before it is fetched


def max_file_bytes() -> int:
    """$PSTBENCH_HUB_MAX_FILE_BYTES: the bytes a published run file may have."""
    return env_number(MAX_FILE_ENV, DEFAULT_MAX_FILE, unit="bytes", example=DEFAULT_MAX_FILE, whole=True)


def deadline_seconds() -> float:
    """$PSTBENCH_HUB_DEADLINE: the seconds a tree listing, or one download, may take in all."""
    return env_number(DEADLINE_ENV, DEFAULT_DEADLINE, unit="seconds", example=f"{DEFAULT_DEADLINE:g}")


def max_listing() -> int:
    """$PSTBENCH_HUB_MAX_LISTING: the entries one tree listing may hold."""
    return env_number(MAX_LISTING_ENV, DEFAULT_MAX_LISTING, unit="entries", example=DEFAULT_MAX_LISTING, whole=True)


_LISTED: dict[tuple[str, str, str, str], int] = {}  # (repo type, repo, revision, path) -> size the listing gave


def remember_sizes(repo_type: str, repo_id: str, revision: str, sizes: dict[str, int]) -> None:
    """The sizes a tree listing gave, the byte cap of a later `download` of the same file at the same revision."""
    _LISTED.update(((repo_type, repo_id, revision, p), n) for p, n in sizes.items())


def listed_size(repo_type: str, repo_id: str, revision: str, path: str) -> int | None:
    """The size a tree listing gave for `path` at `revision`, or None when none listed it."""
    return _LISTED.get((repo_type, repo_id, revision, path))


def retry_after(value: str | None) -> float | None:
    """A Retry-After header's seconds (a date, or anything else, is None)."""
    try:
        after = float(value) if value is not None else None
    except ValueError:
        return None
    return after if after is not None and after >= 0 else None


ERROR_BODY_BYTES = 1 << 16  # bytes of an error answer read for its message


def raise_for_status(response, end: float) -> None:
    """huggingface_hub's exception for an error answer of a streamed request (`hf_raise_for_status`), its body
    read only up to ERROR_BODY_BYTES and until `end` (time.monotonic()): an error page is never read whole."""
    import time

    from huggingface_hub.utils import hf_raise_for_status

    if response.status_code < 400:
        return
    body = b""
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) >= ERROR_BODY_BYTES or time.monotonic() > end:
            break
    headers = {
        k: v
        for k, v in response.headers.items()
        if k.lower() not in ("content-length", "content-encoding", "transfer-encoding")
    }
    hf_raise_for_status(
        type(response)(response.status_code, headers=headers, content=body[:ERROR_BODY_BYTES], request=response.request)
    )


# ---- replies huggingface_hub reads itself (a push: create_repo, preupload, commit) ---------------------------
class ReplyBounds:
    """A deadline (`end`, time.monotonic()) and a byte cap for every reply read inside `replies_bounded`, each
    broken as the exception `late()` or `big()` gives; `requests`: (method, path) of each request answered."""

    def __init__(self, end: float, cap: int, late, big):
        self.end, self.cap, self.late, self.big = end, cap, late, big
        self.requests: list[tuple[str, str]] = []


_SCOPE: contextvars.ContextVar[ReplyBounds | None] = contextvars.ContextVar("pstbench_hub_reply_bounds", default=None)


@contextlib.contextmanager
def replies_bounded(bounds: ReplyBounds):
    """Every reply the Hub client reads in this block (this thread) within `bounds`: the client's response hook
    (`bound_reply`) caps its body and stops it at the deadline, and each request's timeout is the time left."""
    token = _SCOPE.set(bounds)
    try:
        yield bounds
    finally:
        _SCOPE.reset(token)


def time_left() -> float | None:
    """Seconds left before the deadline of the `replies_bounded` block around this call (None: none)."""
    bounds = _SCOPE.get()
    return None if bounds is None else bounds.end - time.monotonic()


def bound_reply(response, stream_class) -> None:
    """The Hub client's response hook: inside `replies_bounded`, the response's body (`response.stream`, a
    `stream_class` of its HTTP library) is read within the byte cap and the deadline; a Content-Length over the
    cap, or an answer past the deadline, is refused before its body is read."""
    bounds = _SCOPE.get()
    if bounds is None:
        return
    bounds.requests.append((response.request.method, response.request.url.path))
    length = response.headers.get("Content-Length", "")
    if length.isdigit() and int(length) > bounds.cap:
        raise bounds.big()
    if time.monotonic() > bounds.end:
        raise bounds.late()
    response.stream = _bounded_stream(stream_class)(response.stream, bounds)


_STREAMS: dict[type, type] = {}


def _bounded_stream(base: type) -> type:
    if base not in _STREAMS:

        class Bounded(base):
            def __init__(self, inner, bounds: ReplyBounds):
                self.inner, self.bounds = inner, bounds

            def __iter__(self):
                got = 0
                for chunk in self.inner:
                    got += len(chunk)
                    if got > self.bounds.cap:
                        raise self.bounds.big()
                    if time.monotonic() > self.bounds.end:
                        raise self.bounds.late()
                    yield chunk

            def close(self) -> None:
                self.inner.close()

            @property
            def elapsed(self):
                return getattr(self.inner, "elapsed", None)

        _STREAMS[base] = Bounded
    return _STREAMS[base]
