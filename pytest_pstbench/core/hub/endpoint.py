"""Where the Hub is and who the kit is to it: the endpoint ($HF_ENDPOINT, checked before huggingface_hub is
imported) and the token huggingface_hub would send (checked before it is sent, and kept out of every message).
The Hub client (`client`) sends both; the messages of the Hub modules name the endpoint (`where`).
"""

from __future__ import annotations

import os

from pytest_pstbench.core.errors import UserError


def endpoint() -> str | None:
    """$HF_ENDPOINT (without a trailing slash), or None for huggingface.co. Checked before huggingface_hub
    is imported (its import parses the variable): a value that is not an http(s) URL with a host and a
    port in 0-65535 is one UserError naming HF_ENDPOINT and the fix."""
    ep = os.environ.get("HF_ENDPOINT")
    if not ep:
        return None
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(ep)
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
        problem = None if parts.scheme in ("http", "https") and parts.hostname else "expected http(s)://HOST[:PORT]"
    except ValueError as exc:
        problem = " ".join(str(exc).split())
    if problem:
        raise UserError(
            f"HF_ENDPOINT={ep!r}: not a usable Hub address ({problem}); fix: set it to the Hub's URL, "
            "e.g. https://huggingface.co or http://127.0.0.1:8080, or unset it"
        )
    return ep.rstrip("/")


def where() -> str:
    """The Hub's address as messages name it."""
    return endpoint() or "https://huggingface.co"


def hub_token() -> str | None:
    """The token huggingface_hub would send (HF_TOKEN, `hf auth login`), or None; never printed."""
    try:
        from huggingface_hub import get_token
    except ImportError:  # pragma: no cover
        return None
    try:
        return get_token() or None
    except Exception:  # noqa: BLE001 - an unreadable token file: no token
        return None


def check_token() -> None:
    """A token huggingface_hub would send must be ASCII without control characters (an HTTP header cannot
    carry anything else): else one UserError naming where it comes from (HF_TOKEN, or the token file) and
    the fix. The token itself is never printed."""
    token = hub_token()
    if token is None:
        return
    bad = next((i for i, c in enumerate(token) if not (32 < ord(c) < 127)), None)
    if bad is None:
        return
    source = "HF_TOKEN" if os.environ.get("HF_TOKEN") else "the Hugging Face token (the token file of `hf auth login`)"
    raise UserError(
        f"{source}: holds a character that is not printable ASCII (position {bad + 1} of {len(token)}), which "
        "no HTTP header can carry; a Hugging Face token is ASCII (hf_...); fix: set HF_TOKEN to the token "
        "exactly as the Hub shows it, or unset it and log in with `hf auth login`"
    )


def redact(text: str) -> str:
    """`text` with the token (and an `Authorization: Bearer ...` value) replaced by `***`."""
    import re

    from pytest_pstbench.core.text import redact as without

    token = hub_token()
    if token:
        text = without(text, [token], "***")  # as sent, JSON-escaped or percent-encoded
    return re.sub(r"(?i)(bearer\s+)[A-Za-z0-9_\-\.]{8,}", r"\1***", text)
