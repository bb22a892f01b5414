"""Hubs that cannot be reached, each for its own reason, made on this machine (issue #45 item 1): a host name that
does not resolve (`.invalid` is reserved for that, RFC 6761), a port nothing listens on, a TLS server whose
certificate the client does not trust (tests/helpers/tls), a server that accepts connections and never answers.
`endpoint(kind)` gives the HF_ENDPOINT of each; `SAYS[kind]` what a message about it must say (what happened, and
the fix that works for it); only a timeout may name PSTBENCH_NETWORK_TIMEOUT (`TIMEOUT_VAR`).
"""

from __future__ import annotations

import contextlib
import socket
import threading

KINDS = ("unresolved", "refused", "tls", "silent")
TIMEOUT_VAR = "PSTBENCH_NETWORK_TIMEOUT"
UNRESOLVED = "http://nonexistent.invalid"

#: words a message must hold, per kind: what happened, then the fix that works for that case
SAYS = {
    "unresolved": ("does not resolve", "DNS", "set HF_ENDPOINT to a Hub mirror you can reach"),
    "refused": ("refused the connection", "check that HF_ENDPOINT={url} names a running Hub or mirror"),
    "tls": ("TLS certificate", "is not trusted", "set SSL_CERT_FILE to the CA bundle"),
    "silent": ("no answer from {url}", TIMEOUT_VAR),
}


def says(kind: str, url: str, text: str) -> list[str]:
    """What `text` (an error message about the endpoint `url` of `kind`) fails to say (empty: it says it all)."""
    missing = [w.format(url=url) for w in SAYS[kind] if w.format(url=url) not in text]
    if kind != "silent" and TIMEOUT_VAR in text:
        missing.append(f"no {TIMEOUT_VAR} (waiting longer cannot help)")
    return missing


@contextlib.contextmanager
def endpoint(kind: str):
    """The HF_ENDPOINT of a Hub that cannot be reached as `kind` says, for the length of the block."""
    if kind == "unresolved":
        yield UNRESOLVED
    elif kind == "refused":
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens there now
        yield f"http://127.0.0.1:{port}"
    elif kind == "tls":
        from helpers.hub_server import FakeHub

        hub = FakeHub().start(tls=True)
        try:
            yield hub.url
        finally:
            hub.stop()
    elif kind == "silent":
        with silent() as url:
            yield url
    else:  # pragma: no cover
        raise ValueError(kind)


@contextlib.contextmanager
def silent():
    """A server that accepts every connection and never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.1)
    held, stop = [], threading.Event()

    def accept():
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        srv.close()
