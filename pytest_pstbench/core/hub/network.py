"""Why the Hub could not be reached, read from the exception's chain (`__cause__`, `__context__`, a `reason`),
each case in its own words with the fix that works for it (issue #45 item 1): the host name does not resolve,
no route to it, the connection refused, the TLS certificate not trusted or the handshake failed, no answer in
time, the connection cut, huggingface_hub in offline mode (the client says which exception that is). Only a
timeout names PSTBENCH_NETWORK_TIMEOUT:
waiting longer helps nothing else. Which exceptions are failures to reach the Hub at all (`is_timeout`,
`network_errors`) is said here too.
"""

from __future__ import annotations

import errno
import os
import socket
import ssl
from dataclasses import dataclass


def is_timeout(exc: BaseException) -> bool:
    """A failure to reach the endpoint at all (no answer, refused, cut), as opposed to an answer."""
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(
        names
        & {
            "TimeoutException",
            "ConnectError",
            "ConnectTimeout",
            "ReadTimeout",
            "TimeoutError",
            "NetworkError",
            "RemoteProtocolError",
            "ConnectionError",
        }
    )


def network_errors() -> tuple[type[BaseException], ...]:
    errs: list[type[BaseException]] = [OSError]  # HfHubHTTPError and requests' errors are OSErrors
    for mod in ("httpx2", "httpx"):
        try:
            errs.append(__import__(mod).HTTPError)
        except (ImportError, AttributeError):
            pass
    return tuple(errs)


@dataclass(frozen=True)
class Cause:
    """What stopped a request before any answer: `kind` one of "unresolved", "unreachable", "refused", "tls",
    "timeout", "cut", "offline", "connect" (none of these known); `detail` the lowest error's text; `retry`:
    whether asking again may help; `cert`: a certificate that is not trusted (kind "tls"); `requests`: raised
    through requests (a requests-based huggingface_hub), whose CA bundle variable differs."""

    kind: str
    detail: str
    retry: bool
    cert: bool = False
    requests: bool = False


def _chain(exc: BaseException):
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen and len(seen) < 32:
        seen.add(id(exc))
        yield exc
        reason = getattr(exc, "reason", None)  # urllib3's MaxRetryError / NewConnectionError keep theirs here
        nxt = exc.__cause__ or exc.__context__  # a suppressed context too: httpcore raises its errors `from None`
        exc = reason if isinstance(reason, BaseException) else nxt


def _kind(e: BaseException) -> tuple[str, bool] | None:
    """(kind, retry) of one link of the chain, or None when it says nothing precise."""
    names = {c.__name__ for c in type(e).__mro__}
    if isinstance(e, socket.gaierror):
        return "unresolved", e.errno == getattr(socket, "EAI_AGAIN", -3)  # "temporary failure": asked again
    if isinstance(e, ssl.SSLError) or "SSLError" in names:
        return "tls", False
    if isinstance(e, ConnectionRefusedError):
        return "refused", True
    if isinstance(e, OSError) and e.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN):
        return "unreachable", True
    if isinstance(e, TimeoutError) or names & {
        "TimeoutException",
        "Timeout",
        "ReadTimeoutError",
        "ConnectTimeoutError",
    }:
        return "timeout", True
    if isinstance(e, (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)) or names & {
        "RemoteProtocolError",
        "ReadError",
        "WriteError",
        "IncompleteRead",
        "ProtocolError",
        "ChunkedEncodingError",
    }:
        return "cut", True
    text = str(e)
    if "NameResolutionError" in names or "Name or service not known" in text or "nodename nor servname" in text:
        return "unresolved", False
    return None


def cause(exc: BaseException) -> Cause | None:
    """Why `exc` (raised while asking the Hub) got no answer: the first link of its chain that says it, outermost
    first; a failure to connect that none explains is "connect"; None for anything else (an answer)."""
    links = list(_chain(exc))
    requests = any(type(e).__module__.split(".")[0] in ("requests", "urllib3") for e in links)
    for e in links:
        found = _kind(e)
        if found is not None:
            text = " ".join(str(e).split()) or type(e).__name__
            cert = found[0] == "tls" and (
                isinstance(e, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in text
            )
            return Cause(found[0], text[:200], found[1], cert, requests)
    if is_timeout(exc):
        return Cause(
            "connect", (" ".join(str(links[-1]).split()) or type(links[-1]).__name__)[:200], True, False, requests
        )
    return None


def explain(c: Cause, where: str, timeout: float, timeout_env: str) -> tuple[str, str]:
    """(what happened, the fix that works for it) for cause `c` of a request to the Hub at `where` (the
    network's side only: the caller adds its own way round, a cached copy or a copy on disk); `timeout_env`: the
    variable that sets the `timeout` seconds, named only for a timeout."""
    from urllib.parse import urlsplit

    parts = urlsplit(where)
    host = parts.hostname or where
    port = parts.port or (443 if parts.scheme == "https" else 80)
    ep = os.environ.get("HF_ENDPOINT")
    mirror = "set HF_ENDPOINT to a Hub mirror you can reach"
    if c.kind == "unresolved":
        return (
            f"the host name {host} ({where}) does not resolve ({c.detail})",
            f"check the network connection and DNS{' and the host name in HF_ENDPOINT' if ep else ''}, or {mirror}",
        )
    if c.kind == "unreachable":
        return (
            f"no route to {host} ({c.detail})",
            f"check the network connection (a VPN, or a proxy: HTTPS_PROXY), or {mirror}",
        )
    if c.kind == "refused":
        return (
            f"{host}:{port} refused the connection (nothing listens there, or a firewall refuses it)",
            f"check that HF_ENDPOINT={ep} names a running Hub or mirror (host and port), or unset it for "
            "https://huggingface.co"
            if ep
            else f"check the network (a firewall, or a proxy: HTTPS_PROXY), or {mirror}",
        )
    if c.kind == "tls" and c.cert:
        var = "REQUESTS_CA_BUNDLE" if c.requests else "SSL_CERT_FILE"
        return (
            f"the TLS certificate of {host} is not trusted ({c.detail})",
            f"if {where} is a mirror or a proxy you trust, set {var} to the CA bundle (PEM) that signs its "
            "certificate; otherwise check HF_ENDPOINT and the proxy (HTTPS_PROXY)",
        )
    if c.kind == "tls":
        return (
            f"the TLS handshake with {host}:{port} failed ({c.detail})",
            "check HF_ENDPOINT's scheme and port (https:// for a TLS server, http:// for a plain one) and the "
            "proxy in between (HTTPS_PROXY)",
        )
    if c.kind == "timeout":
        return (
            f"no answer from {where} within {timeout:g} s",
            f"check the network and HF_ENDPOINT, or set {timeout_env} (seconds) to wait longer",
        )
    if c.kind == "cut":
        return (
            f"the connection to {where} was cut ({c.detail})",
            "run the command again; if it persists, check the network, the proxy (HTTPS_PROXY) and HF_ENDPOINT",
        )
    if c.kind == "offline":
        return (
            "huggingface_hub is in offline mode (HF_HUB_OFFLINE was set when it was imported)",
            "unset HF_HUB_OFFLINE and run again",
        )
    return f"could not connect to {where} ({c.detail})", f"check the network and HF_ENDPOINT, or {mirror}"
