"""The Hugging Face Hub client of `pstbench data fetch`: bounded timeouts and retries, the mapping
of huggingface_hub's errors to one-line UserErrors, the file listing at a commit, and the resolution
of a revision (branch, tag, full or abbreviated commit) to a commit.

huggingface_hub is imported only inside the functions that talk to the Hub.
"""

from __future__ import annotations

import os
import re

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.data.manifest import DatasetManifest


def _endpoint() -> str | None:
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
        raise UserError(f"HF_ENDPOINT={ep!r}: not a usable Hub address ({problem}); fix: set it to the Hub's URL, "
                        "e.g. https://huggingface.co or http://127.0.0.1:8080, or unset it")
    return ep.rstrip("/")


NETWORK_TIMEOUT_ENV = "PSTBENCH_NETWORK_TIMEOUT"
DEFAULT_NETWORK_TIMEOUT = 30.0  # seconds: connect and each read of a Hub request
NETWORK_ATTEMPTS = 3  # tries of a Hub API request that timed out or could not connect, with backoff between


def network_timeout() -> float:
    raw = os.environ.get(NETWORK_TIMEOUT_ENV)
    if raw in (None, ""):
        return DEFAULT_NETWORK_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not (0 < value < float("inf")):
        raise UserError(f"{NETWORK_TIMEOUT_ENV}={raw!r}: expected a number of seconds > 0; fix: set it to e.g. 30 or unset it")
    return value


_CLIENT_TIMEOUT: list[float] = []
_DEFAULT_CLIENT: list = []  # (client class, event hooks) of huggingface_hub's own client, taken once


def _bounded_hub_client() -> None:
    """Make huggingface_hub's shared HTTP client time out (its default client waits forever for an
    endpoint that accepts a connection and never answers), through its public client API:
    `huggingface_hub.get_session()` gives the client it would use (its own event hooks: offline mode,
    request ids, debug logs), and `huggingface_hub.set_client_factory()` installs one like it whose
    requests each get `PSTBENCH_NETWORK_TIMEOUT` seconds where huggingface_hub passes none. A
    huggingface_hub without these functions (older, requests-based) is left as it is: the calls that
    take a `timeout=` get one per request (`repo_info(..., timeout=...)`)."""
    timeout = network_timeout()
    if _CLIENT_TIMEOUT == [timeout]:
        return
    _endpoint()  # a broken HF_ENDPOINT is a one-line error, not a traceback from huggingface_hub's import
    try:
        import huggingface_hub as hf
    except ImportError:  # pragma: no cover
        return
    get_session, set_client_factory = getattr(hf, "get_session", None), getattr(hf, "set_client_factory", None)
    if get_session is None or set_client_factory is None:  # pragma: no cover - a requests-based huggingface_hub
        return
    if not _DEFAULT_CLIENT:
        base = get_session()
        if not hasattr(base, "build_request") or not hasattr(base, "event_hooks"):  # pragma: no cover - not httpx-like
            return
        _DEFAULT_CLIENT[:] = [type(base), {k: list(v) for k, v in base.event_hooks.items()}]
    client_class, hooks = _DEFAULT_CLIENT
    timeout_class = getattr(__import__(client_class.__module__.split(".")[0]), "Timeout")

    class _Client(client_class):
        def build_request(self, *args, **kwargs):
            if kwargs.get("timeout", "default") is None:  # huggingface_hub passes None ("wait forever") explicitly
                kwargs["timeout"] = self.timeout
            return super().build_request(*args, **kwargs)

    def factory():
        return _Client(event_hooks={k: list(v) for k, v in hooks.items()}, follow_redirects=True,
                       timeout=timeout_class(timeout))

    set_client_factory(factory)
    _CLIENT_TIMEOUT[:] = [timeout]


def _is_timeout(exc: BaseException) -> bool:
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"TimeoutException", "ConnectError", "ConnectTimeout", "ReadTimeout", "TimeoutError",
                         "NetworkError", "RemoteProtocolError", "ConnectionError"})


def _hub_call(m: "DatasetManifest", what: str, call, attempts: int = NETWORK_ATTEMPTS):
    """`call()` with the client's timeouts, tried `attempts` times with backoff when the endpoint does not
    answer; then one UserError naming the endpoint and the fix. (Calls that huggingface_hub already
    retries with backoff, such as tree listings, are tried once here.)"""
    import time

    _bounded_hub_client()
    timeout = network_timeout()
    for attempt in range(attempts):
        try:
            return call()
        except _network_errors() as exc:
            if not _is_timeout(exc):
                raise _hub_error(m, exc, what) from None
            if attempt + 1 < attempts:
                time.sleep(min(2.0 ** attempt, timeout))
    where = _endpoint() or "https://huggingface.co"
    tries = f"{attempts} attempts" if attempts > 1 else "after huggingface_hub's retries with backoff"
    raise UserError(
        f"{m.repo_id}: no answer from {where} within {timeout:g} s while {what} ({tries}); "
        f"fix: check the network and HF_ENDPOINT, set {NETWORK_TIMEOUT_ENV} (seconds) to wait longer, "
        "or register a copy you have with --from DIR"
    )


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE")


def _network_errors() -> tuple[type[BaseException], ...]:
    errs: list[type[BaseException]] = [OSError]  # HfHubHTTPError and requests' errors are OSErrors
    for mod in ("httpx2", "httpx"):
        try:
            errs.append(__import__(mod).HTTPError)
        except (ImportError, AttributeError):
            pass
    return tuple(errs)


def _hub_error(m: DatasetManifest, exc: BaseException, what: str) -> UserError:
    from huggingface_hub import errors as E

    where = _endpoint() or "https://huggingface.co"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, E.RevisionNotFoundError):
        return UserError(
            f"{m.repo_id}: revision not found on {where} while {what} ({first}); fix: check the --revision you gave, "
            f"or the revision in {m.path}"
        )
    if isinstance(exc, E.GatedRepoError):
        return UserError(
            f"{m.repo_id}: gated dataset; your account has no access on {where} while {what}; fix: accept its terms "
            f"on https://huggingface.co/datasets/{m.repo_id} and log in (`hf auth login`, or set HF_TOKEN)"
        )
    if isinstance(exc, E.RepositoryNotFoundError):
        return UserError(
            f"{m.repo_id}: dataset not found (or not accessible) on {where} while {what}; "
            f"fix: check repo_id in {m.path}, or log in with `hf auth login` if it is gated"
        )
    if isinstance(exc, E.RemoteEntryNotFoundError):
        return UserError(f"{m.repo_id}: {what}: not found at this revision ({first}); fix: correct the layout in {m.path}")
    return UserError(
        f"{m.repo_id}: could not reach the Hub at {where} while {what} ({type(exc).__name__}: {first}); "
        "fix: check the network and HF_ENDPOINT, or register a copy you have with --from DIR"
    )


def _remote_listing(m: DatasetManifest, requested: str, splits: list[str]) -> tuple[str, dict[str, dict]]:
    """(full commit sha, {path: {size, sha256 | None, git_oid, lfs}}) for the splits' folders."""
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    api = HfApi(endpoint=_endpoint())
    sha = resolve_revision(api, m, requested)
    listing: dict[str, dict] = {}
    for split in splits:
        folder = str(m.splits[split]["folder"]).strip("/")
        items = _hub_call(
            m, f"listing split folder {folder}/ at {sha[:12]}",
            lambda folder=folder: list(api.list_repo_tree(m.repo_id, path_in_repo=folder, recursive=True, revision=sha,
                                                          repo_type=m.repo_type)),
            attempts=1,
        )
        for item in items:
            if isinstance(item, RepoFile):
                listing[item.path] = {
                    "size": int(item.size),
                    "sha256": item.lfs.sha256 if item.lfs else None,
                    "git_oid": item.blob_id,
                    "lfs": item.lfs is not None,
                }
    return sha, listing


def resolve_revision(api, m: DatasetManifest, requested: str) -> str:
    """The full 40-hex commit `requested` (a branch, tag, full commit or commit prefix) names on the Hub.

    The Hub's revision endpoint is asked first. When it does not resolve a revision that looks like a
    commit prefix (7 to 39 hex digits; the Hub may not resolve short ids), the repository's commits are
    listed (``list_repo_commits`` from each branch and tag) and the one commit with that prefix is used;
    none, or more than one, is refused with the candidates named.
    """
    from huggingface_hub import errors as E

    not_resolved = object()

    def ask():
        try:
            return api.repo_info(m.repo_id, repo_type=m.repo_type, revision=requested, timeout=network_timeout())
        except _network_errors() as exc:
            short = re.fullmatch(r"[0-9a-f]{7,39}", requested.lower()) is not None
            status = getattr(getattr(exc, "response", None), "status_code", None)
            if _is_timeout(exc) or not short or not (isinstance(exc, E.RevisionNotFoundError) or status in (400, 404, 422)) \
                    or isinstance(exc, (E.RepositoryNotFoundError, E.GatedRepoError)):
                raise  # _hub_call retries a timeout, and turns anything else into one line
            return not_resolved

    info = _hub_call(m, f"resolving revision {requested}", ask)
    if info is not_resolved:
        return _commit_by_prefix(api, m, requested.lower())
    sha = str(info.sha or "")
    if not re.fullmatch(r"[0-9a-f]{40}", sha):
        raise UserError(f"{m.repo_id}: the Hub answered revision {requested} without a commit sha ({sha!r}); cannot pin")
    return sha


def _commit_by_prefix(api, m: DatasetManifest, prefix: str) -> str:
    where = _endpoint() or "https://huggingface.co"
    try:
        refs = api.list_repo_refs(m.repo_id, repo_type=m.repo_type)
        heads = [r.name for r in (*refs.branches, *refs.tags)] or ["main"]
        seen: set[str] = set()
        for head in heads:
            for c in api.list_repo_commits(m.repo_id, repo_type=m.repo_type, revision=head):
                seen.add(c.commit_id.lower())
    except _network_errors() as exc:
        raise _hub_error(m, exc, f"listing the commits to resolve the commit prefix {prefix}") from None
    hits = sorted(c for c in seen if c.startswith(prefix))
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise UserError(
            f"{m.repo_id}: revision {prefix} not found on {where}: the revision endpoint does not resolve it and none "
            f"of the {len(seen)} commits on its branches and tags ({', '.join(heads)}) starts with it; "
            f"fix: write the full 40-hex commit as `revision` in {m.path} (or pass it with --revision)"
        )
    raise UserError(
        f"{m.repo_id}: commit prefix {prefix} is ambiguous on {where}: {len(hits)} commits start with it "
        f"({', '.join(hits)}); refused; fix: write the full 40-hex commit as `revision` in {m.path} "
        "(or pass it with --revision)"
    )
