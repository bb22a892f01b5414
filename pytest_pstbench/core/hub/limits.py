"""The Hub client's limits, each raised by one environment variable: the bytes a published run file may
have (PSTBENCH_HUB_MAX_FILE_BYTES), the seconds a tree listing or one download may take in all
(PSTBENCH_HUB_DEADLINE), the entries (and pages) of one tree listing (PSTBENCH_HUB_MAX_LISTING); and the
sizes the tree listings gave, the byte cap of each later download of those files; and an error answer's
body, read only in part for its message.
"""
from __future__ import annotations


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
    headers = {k: v for k, v in response.headers.items() if k.lower() not in ("content-length", "content-encoding",
                                                                              "transfer-encoding")}
    hf_raise_for_status(type(response)(response.status_code, headers=headers, content=body[:ERROR_BODY_BYTES],
                                       request=response.request))
