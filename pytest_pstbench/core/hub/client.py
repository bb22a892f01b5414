"""The Hugging Face Hub client every Hub call of the kit goes through (dataset fetches, published runs):
the endpoint ($HF_ENDPOINT, checked before huggingface_hub is imported), bounded timeouts on
huggingface_hub's shared HTTP client, which exceptions are network failures, offline mode, the token kept
out of every message, the one retry loop (`hub_call`: a request that gets no answer is tried again with
backoff) and the one error map (`hub_error`: huggingface_hub's exception classified once - repository,
revision or file not found, gated, not authorised, branch moved, no answer and why (`network`) - and worded
by the caller's `Subject`, a run URI or a dataset, each message one line naming the fix; a damaged reply,
`damaged`), the one bounded read of a Hub API reply (`bounded_get`: a byte cap and a deadline, busy answers asked
again but never past the deadline) and the one download (`download`: capped by the listed size, with a deadline).
huggingface_hub is imported only inside the functions that talk to the Hub.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pytest_pstbench.core.envvars import env_number
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.hub.endpoint import check_token, endpoint, redact, where
from pytest_pstbench.core.hub.limits import (
    DEADLINE_ENV,
    MAX_FILE_ENV,
    bound_reply,
    deadline_seconds,
    listed_size,
    raise_for_status,
    retry_after,
    time_left,
)
from pytest_pstbench.core.hub.network import Cause, cause, explain, is_timeout, network_errors

NETWORK_TIMEOUT_ENV = "PSTBENCH_NETWORK_TIMEOUT"
DEFAULT_NETWORK_TIMEOUT = 30.0  # seconds: connect and each read of a Hub request
NETWORK_ATTEMPTS = 3  # tries of a Hub API request that timed out or could not connect, with backoff between


def network_timeout() -> float:
    return env_number(NETWORK_TIMEOUT_ENV, DEFAULT_NETWORK_TIMEOUT, unit="seconds", example=30)


#: the huggingface_hub module the bounded client was installed in, its own client's (class, event hooks, timeout
#: class), and the timeout installed: taken again when huggingface_hub is imported anew (pytester restores
#: sys.modules, so a second copy of huggingface_hub and its HTTP library can be loaded in one process)
_CLIENT: dict = {}


def bounded_hub_client() -> None:
    """Make huggingface_hub's shared HTTP client time out (its default waits forever for an endpoint that accepts
    a connection and never answers), through its public client API: `get_session()` gives the client it would use
    (its own event hooks: offline mode, request ids, debug logs), and `set_client_factory()` installs one like it
    whose requests each get `PSTBENCH_NETWORK_TIMEOUT` seconds where huggingface_hub passes none, and whose replies
    read inside `limits.replies_bounded` (a push) keep its byte cap and deadline. An older, requests-based
    huggingface_hub is left as it is (its calls that take a `timeout=` get one)."""
    check_token()
    timeout = network_timeout()
    endpoint()  # a broken HF_ENDPOINT is a one-line error, not a traceback from huggingface_hub's import
    try:
        import huggingface_hub as hf
    except ImportError:  # pragma: no cover
        return
    if _CLIENT.get("hf") is hf and _CLIENT.get("timeout") == timeout:
        return
    get_session, set_client_factory = getattr(hf, "get_session", None), getattr(hf, "set_client_factory", None)
    if get_session is None or set_client_factory is None:  # pragma: no cover - a requests-based huggingface_hub
        return
    if _CLIENT.get("hf") is not hf:
        base = get_session()
        if not hasattr(base, "build_request") or not hasattr(base, "event_hooks"):  # pragma: no cover - not httpx-like
            return
        # the timeout class of the client's own HTTP library (not whichever copy sys.modules holds now)
        _CLIENT.clear()
        _CLIENT.update(hf=hf, base=(type(base), {k: list(v) for k, v in base.event_hooks.items()}, type(base.timeout)))
    client_class, hooks, timeout_class = _CLIENT["base"]
    stream_class = getattr(client_class.send, "__globals__", {}).get("SyncByteStream")  # of the client's own library

    class _Client(client_class):
        def build_request(self, *args, **kwargs):
            if kwargs.get("timeout", "default") is None:  # huggingface_hub passes None ("wait forever") explicitly
                kwargs["timeout"] = self.timeout
            left = time_left()  # inside `limits.replies_bounded`: no wait past its deadline
            if left is not None:
                kwargs["timeout"] = timeout_class(max(0.05, min(timeout, left)))
            return super().build_request(*args, **kwargs)

    def factory():
        own = {k: list(v) for k, v in hooks.items()}
        if stream_class is not None:  # the replies huggingface_hub reads itself: capped, with a deadline
            own.setdefault("response", []).append(lambda response: bound_reply(response, stream_class))
        return _Client(event_hooks=own, follow_redirects=True, timeout=timeout_class(timeout))

    set_client_factory(factory)
    _CLIENT["timeout"] = timeout


def offline() -> bool:
    """HF_HUB_OFFLINE is set (read at call time: huggingface_hub reads it once, at its import)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE")


# ---- errors ------------------------------------------------------------------------------------------
def classify(exc: BaseException) -> tuple[str, str]:
    """(category, the error's first line, token redacted) of an exception raised by huggingface_hub: "revision",
    "gated", "repo" (not found, or private without access), "entry" (a file or folder not at this revision), "auth"
    (401/403 on a write), "conflict" (409/412: the branch moved), "timeout", "network" (no answer, and why) or "other"."""
    from huggingface_hub import errors as E

    text = str(exc).strip()
    first = redact(text.splitlines()[0] if text else type(exc).__name__)
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(exc, E.RevisionNotFoundError):
        return "revision", first
    if isinstance(exc, E.GatedRepoError):
        return "gated", first
    if isinstance(exc, E.RepositoryNotFoundError):
        return "repo", first
    if isinstance(exc, E.RemoteEntryNotFoundError):
        return "entry", first
    if status in (401, 403):
        return "auth", first
    if status in (409, 412):
        return "conflict", first
    why = hub_cause(exc)
    if why is not None:
        return ("timeout" if why.kind in ("timeout", "connect") else "network"), first
    if is_timeout(exc):
        return "timeout", first
    return "other", first


def hub_cause(exc: BaseException) -> Cause | None:
    """Why `exc` got no answer (`network.cause`); huggingface_hub's offline mode is "offline" (not asked again)."""
    from huggingface_hub import errors as E

    return Cause("offline", str(exc), False) if isinstance(exc, E.OfflineModeIsEnabled) else cause(exc)


# ---- the one error map ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Failure:
    """A failed Hub call, classified: what a `Subject` words its message from."""

    category: str  # as `classify` names it
    first: str  # the error's first line, token redacted
    what: str  # what the call was doing ("listing ...", "resolving revision ...")
    error: str  # the exception's class name
    network: tuple[str, str] | None = None  # no answer: (what happened, the fix), `network.explain`
    attempts: int = 1  # the requests made


class Subject:
    """What a Hub call is about (a run URI, a dataset), as its messages name it: every message starts with
    `name`; a subclass words each failure (`failure`) and the end of the retries (`no_answer`)."""

    name: str = "the Hub"

    def failure(self, f: Failure) -> str:
        raise NotImplementedError

    def no_answer(self, what: str, attempts: int, timeout: float) -> str:
        raise NotImplementedError


class HubError(UserError):
    """A Hub call's failure, one line; `category` as `classify` names it, `unresolved` when the Hub did not
    resolve a revision (unknown, or a form it does not take) rather than failing otherwise."""

    def __init__(self, message: str, category: str = "other", unresolved: bool = False, network: tuple | None = None):
        super().__init__(message)
        self.category = category
        self.unresolved = unresolved
        self.network = network  # (what happened, the fix) of a request that got no answer


def hub_error(subject: Subject, exc: BaseException, what: str, attempts: int = 1) -> HubError:
    """huggingface_hub's exception `exc`, raised while `what`, as one line in `subject`'s words (no answer: what
    happened and the fix that works for it, `network.explain`)."""
    from huggingface_hub import errors as E

    category, first = classify(exc)
    status = getattr(getattr(exc, "response", None), "status_code", None)
    unresolved = (
        not is_timeout(exc)
        and (isinstance(exc, E.RevisionNotFoundError) or status in (400, 404, 422))
        and not isinstance(exc, (E.RepositoryNotFoundError, E.GatedRepoError))
    )
    why = hub_cause(exc) if category in ("timeout", "network") else None
    net = explain(why, where(), network_timeout(), NETWORK_TIMEOUT_ENV) if why is not None else None
    message = subject.failure(Failure(category, first, what, type(exc).__name__, net, attempts))
    return HubError(f"{subject.name}: {message}", category, unresolved, net)


def missing_entry(exc: BaseException) -> bool:
    """`exc` says the file or folder asked for is not at that revision."""
    from huggingface_hub import errors as E

    return isinstance(exc, E.RemoteEntryNotFoundError)


class DamagedReply(ValueError):
    """A Hub answer that is not what the Hub API sends (`str`: what is wrong with it)."""


def raised_in_huggingface_hub(exc: BaseException) -> bool:
    """`exc` was raised inside huggingface_hub (its reading of a reply the kit lets it parse, e.g. a commit's
    answer), not in the kit's own code: where its traceback ends."""
    import huggingface_hub

    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    root = os.path.dirname(os.path.abspath(huggingface_hub.__file__)) + os.sep
    return tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(root)


def damaged(subject: Subject, what: str, exc: BaseException) -> HubError:
    """A reply that could not be read (not JSON, a key missing, a field of the wrong type) as one line in
    `subject`'s name."""
    import json

    if isinstance(exc, DamagedReply):
        detail = str(exc)
    elif isinstance(exc, json.JSONDecodeError):
        detail = "its body is not JSON"
    elif isinstance(exc, KeyError):
        detail = f"a field is missing ({exc})"
    else:
        detail = f"a field is missing or of the wrong type ({type(exc).__name__}: {str(exc)})"
    detail = redact(" ".join(detail.split()))
    detail = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in detail)[:200]
    return HubError(
        f"{subject.name}: the Hub at {where()} sent a damaged reply while {what}: {detail}; fix: check that "
        "HF_ENDPOINT names a Hugging Face Hub (or a sound mirror of it), then try again",
        "damaged",
    )


def limit_error(subject_name: str, message: str) -> HubError:  # a limit of `limits` reached
    return HubError(f"{subject_name}: {message}", "limit")


# ---- the one retry loop --------------------------------------------------------------------------------
def hub_call(subject: Subject, what: str, call, attempts: int | None = None, retry: bool = True):
    """`call(api)` with the kit's client (an `HfApi` on the endpoint, bounded timeouts). A request the Hub
    does not answer is tried `attempts` (3) times with backoff (1 for calls huggingface_hub retries itself,
    such as tree listings), then one UserError in `subject`'s words (`no_answer`; a refused or cut connection:
    `hub_error`, which says so); one that asking again cannot help (a host name that does not resolve, TLS) and
    any other failure is `hub_error` at once. Without `retry` every failure, no answer included, is `hub_error` at once."""
    import time

    from huggingface_hub import HfApi

    bounded_hub_client()
    api = HfApi(endpoint=endpoint())
    attempts = (attempts or NETWORK_ATTEMPTS) if retry else 1
    for attempt in range(attempts):
        try:
            return call(api)
        except network_errors() as exc:
            why, last = hub_cause(exc), attempt + 1 >= attempts
            # asking again cannot help (TLS, ...); or the last try of one that says why (refused, cut): in its own words
            if (
                not retry
                or not is_timeout(exc)
                or (why is not None and (not why.retry or last and why.kind != "timeout"))
            ):
                raise hub_error(subject, exc, what, attempt + 1) from None
            if not last:
                time.sleep(min(2.0**attempt, network_timeout()))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            if not (isinstance(exc, DamagedReply) or raised_in_huggingface_hub(exc)):
                raise  # a bug of the kit's own is not the Hub's damaged reply
            raise damaged(subject, what, exc) from None  # an answer, but not what the Hub sends
    raise HubError(f"{subject.name}: {subject.no_answer(what, attempts, network_timeout())}", "timeout")


# ---- the one bounded read -----------------------------------------------------------------------------
RETRY_STATUSES = (408, 429, 500, 502, 503, 504)  # an answer with one of these is asked again (huggingface_hub's)
READ_TRIES = 6  # tries of one read (huggingface_hub's backoff: 5 retries, 1 s doubling to 8 s)


def bounded_get(url: str, params: dict | None, *, end: float, cap: int, retry: bool, late, big):
    """(the JSON of one GET of `url` with the kit's client, its Link header's next URL or None): every Hub API reply
    the kit reads (listings' pages, revisions, refs) is read here, its body within `cap` bytes (past it: `big()` is
    raised) and until `end` (time.monotonic(); past it: `late(note)`); an error answer is huggingface_hub's
    exception (`limits.raise_for_status`). With `retry`, an answer with one of RETRY_STATUSES and a request that
    got no answer are asked again, up to READ_TRIES in all, after huggingface_hub's backoff or the server's
    Retry-After, never past `end`. A body that is not JSON is a `DamagedReply`."""
    import json
    import time

    from huggingface_hub import get_session
    from huggingface_hub.utils import build_hf_headers

    from pytest_pstbench.core.files.jsonfile import loads

    headers, wait, tries = build_hf_headers(), 1.0, READ_TRIES if retry else 1
    for attempt in range(tries):
        last = attempt + 1 >= tries
        if time.monotonic() >= end:
            raise late("")
        try:
            with get_session().stream(
                "GET", url, params=params, headers=headers, timeout=network_timeout(), follow_redirects=True
            ) as r:
                if r.status_code in RETRY_STATUSES and not last:
                    after = retry_after(r.headers.get("Retry-After"))
                    pause = wait if after is None else after
                    if time.monotonic() + pause >= end:
                        raise late(f"; the Hub answered {r.status_code} and asked to wait {pause:g} s")
                    time.sleep(pause)
                    wait = min(8.0, wait * 2)
                    continue
                raise_for_status(r, end)
                body = bytearray()
                for chunk in r.iter_bytes():  # read within the deadline and the cap, however it is sent
                    body += chunk
                    if len(body) > cap:
                        raise big()
                    if time.monotonic() > end:
                        raise late("")
                nxt = (r.links.get("next") or {}).get("url")
        except network_errors() as exc:
            why = cause(exc)  # asking again cannot help (a name that does not resolve, TLS): at once, in its words
            if last or not is_timeout(exc) or isinstance(exc, HubError) or (why is not None and not why.retry):
                raise
            pause = min(wait, network_timeout())  # never longer than one request may take (as `hub_call`)
            if time.monotonic() + pause >= end:
                raise late("") from None
            time.sleep(pause)
            wait = min(8.0, wait * 2)
            continue
        try:
            return loads(bytes(body)), nxt
        except ValueError as exc:  # not JSON (or past the JSON reader's bounds)
            raise DamagedReply(
                "its body is not JSON"
                if isinstance(exc, json.JSONDecodeError)
                else f"its body is not JSON the kit reads ({exc})"
            ) from None
    raise AssertionError("unreachable")  # pragma: no cover


# ---- the one download: capped and with a deadline ------------------------------------------------------
@dataclass
class _Transfer:
    """One download's bounds and progress: the byte cap and the words that say where it comes from, the
    deadline (`budget` seconds, ending at `end` on the monotonic clock), the bytes received, the bar fed."""

    name: str
    path: str
    cap: int | None
    source: str
    budget: float
    end: float
    bar: object = None
    got: int = 0

    def over(self, kind: str) -> HubError:
        if kind == "bytes":
            return limit_error(
                self.name,
                f"the Hub sent more than {self.source} while downloading {self.path}; stopped, nothing was "
                f"kept; fix: check the repo and HF_ENDPOINT (raise {MAX_FILE_ENV} only for a repo you trust)",
            )
        return limit_error(
            self.name,
            f"downloading {self.path} took longer than {self.budget:g} s ({self.got} bytes received); stopped, "
            f"nothing was kept; fix: check the network and HF_ENDPOINT, or raise {DEADLINE_ENV} (seconds, plus one "
            "per MB of the file)",
        )

    def restart(self, fh) -> None:
        """The server ignored the Range of a resumed download: the file starts again."""
        fh.seek(0)
        fh.truncate()
        if self.bar is not None:
            self.bar.update(-self.got)
        self.got = 0

    def receive(self, fh, response) -> None:
        """The response's body written to `fh` in huggingface_hub's chunks, within the byte cap and the deadline."""
        import time

        from huggingface_hub import constants as hf_constants

        step = max(1, hf_constants.DOWNLOAD_CHUNK_SIZE)  # written and shown in huggingface_hub's chunks
        for chunk in (b[i : i + step] for b in response.iter_bytes() for i in range(0, len(b), step)):
            self.got += len(chunk)
            if self.cap is not None and self.got > self.cap:
                raise self.over("bytes")
            fh.write(chunk)
            if self.bar is not None:
                self.bar.update(len(chunk))
            if time.monotonic() > self.end:
                raise self.over("time")


def _transfer(repo_type: str, repo_id: str, revision: str, path: str, max_bytes, subject) -> _Transfer:
    """The bounds of downloading `path`: the size the tree listing gave for it (within `max_bytes`), else
    `max_bytes`; the deadline plus a second per MB of that size."""
    import time

    name = subject.name if subject is not None else f"{repo_id}@{revision[:12]}"
    listed = listed_size(repo_type, repo_id, revision, path)
    if listed is not None and (max_bytes is None or listed <= max_bytes):
        cap, source = listed, f"the {listed} bytes the Hub's listing gives for it"
    else:
        cap, source = max_bytes, f"the {max_bytes} bytes a run file may have ({MAX_FILE_ENV})"
    budget = deadline_seconds() + (cap or 0) / 1e6
    return _Transfer(name, path, cap, source, budget, time.monotonic() + budget)


def _stream(t: _Transfer, fh, url: str) -> None:
    """`url`'s body into `fh`, resumed with a Range request when the connection drops (a timeout), at most
    NETWORK_ATTEMPTS tries, within `t`'s bounds."""
    import time

    from huggingface_hub import get_session
    from huggingface_hub.utils import build_hf_headers

    for attempt in range(NETWORK_ATTEMPTS):
        headers = build_hf_headers()
        if t.got:
            headers["Range"] = f"bytes={t.got}-"
        try:
            with get_session().stream(
                "GET", url, headers=headers, timeout=network_timeout(), follow_redirects=True
            ) as response:
                raise_for_status(response, t.end)
                if t.got and response.status_code != 206:  # the Range was ignored: start again
                    t.restart(fh)
                t.receive(fh, response)
            return
        except network_errors() as exc:
            if is_timeout(exc) and time.monotonic() > t.end:
                raise t.over("time") from None
            if not is_timeout(exc) or attempt + 1 >= NETWORK_ATTEMPTS:
                raise


def download(
    repo_id: str,
    path: str,
    *,
    repo_type: str,
    revision: str,
    local_dir: Path,
    tqdm_class=None,
    max_bytes: int | None = None,
    subject: Subject | None = None,
) -> Path:
    """One file of the repo at `revision` downloaded to `local_dir / path` (written whole or not at all) -> that
    path: the one download of the kit (datasets and published runs). Streamed with the kit's client, resumed
    with a Range request when the connection drops. Bounded: at most the bytes the tree listing gave for it
    (`limits.remember_sizes`) and `max_bytes`, and `deadline_seconds()` plus a second per MB of that size in all; past
    either, one HubError (starting with `subject`'s name) naming the limit and the variable that raises it.
    huggingface_hub's exceptions for an answer (not found, gated, ...) and for no answer are raised as they
    are: the caller maps them. `tqdm_class`: a progress bar class fed with the bytes as they arrive."""
    import uuid

    from huggingface_hub import hf_hub_url

    bounded_hub_client()
    t = _transfer(repo_type, repo_id, revision, path, max_bytes, subject)
    url = hf_hub_url(repo_id, path, repo_type=repo_type, revision=revision, endpoint=where())
    dest = Path(local_dir) / path
    part = Path(local_dir) / ".cache" / "huggingface" / "download" / f"{path}.{uuid.uuid4().hex[:12]}.incomplete"
    part.parent.mkdir(parents=True, exist_ok=True)
    t.bar = tqdm_class(total=t.cap, initial=0, desc=path, unit="B") if tqdm_class is not None else None
    try:
        with open(part, "wb") as fh:
            _stream(t, fh, url)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.is_symlink():  # written where the link points, as huggingface_hub's download did (a loop: OSError)
            __import__("shutil").copyfile(part, dest)
        else:
            os.replace(part, dest)
    finally:
        part.unlink(missing_ok=True)
        if t.bar is not None:
            t.bar.close()
    return dest
