"""A published run path's commits, for `pstbench history`: the commits of a revision as the Hub lists them
(`branch_log`: the commit listing huggingface_hub's `list_repo_commits` reads, through the client's one
bounded, capped listing `listing.pages`), and what the run path holds at each commit (`path_state`: the run
files' git blob ids, from the tree listing `pull.list_runs` reads), cached by commit: a path at a commit never
changes, so a second call asks the Hub only for the commits it has not seen. Inside `shared_logs()` (a board
reading the history of many runs of one repository) a revision's listing is asked once, its answer (or its
failure) shared by every run path.
"""

from __future__ import annotations

import hashlib
import json
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.hub.client import DamagedReply, HubError, hub_call
from pytest_pstbench.core.hub.listing import api_url, pages
from pytest_pstbench.core.hub.uri import COMMIT, HubURI
from pytest_pstbench.core.store.published.cache import commit_dir

_FIELD = 2000  # characters kept of a commit's date or message (the Hub's text is a stranger's)


@dataclass(frozen=True)
class HubCommit:
    sha: str
    date: str
    message: str  # the first line of the commit's message (its title)


def _text(value, name: str, sha: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise DamagedReply(f"commit {sha[:12]}'s {name} is not text")
    return value[:_FIELD]


_SHARED: ContextVar[dict | None] = ContextVar("pstbench_shared_logs", default=None)


@contextmanager
def shared_logs():
    """While inside, `branch_log` asks the Hub once per (endpoint, repository, revision): its commits or its
    failure are kept for the other run paths of that revision."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def branch_log(uri: HubURI) -> list[HubCommit]:
    """The commits of `uri`'s revision (default main), oldest first, as the Hub's commit listing gives them
    (newest first, paginated; capped like every listing). Tried once: a failure is one line."""
    from pytest_pstbench.core.store.published.cache import endpoint_key

    shared = _SHARED.get()
    if shared is None:
        return _branch_log(uri)
    key = (endpoint_key(), uri.repo_id, uri.revision or "main")
    if key not in shared:
        try:
            shared[key] = _branch_log(uri)
        except UserError as exc:
            shared[key] = exc
    if isinstance(shared[key], UserError):
        raise shared[key]
    return shared[key]


def _branch_log(uri: HubURI) -> list[HubCommit]:
    rev = uri.revision or "main"
    what = f"listing the commits of {rev}"

    def listing(api):
        out = []
        for c in pages(uri.subject, what, api_url("dataset", uri.repo_id, "commits", rev)):
            sha = c.get("id") if isinstance(c, dict) else None
            if not isinstance(sha, str) or not COMMIT.fullmatch(sha.lower()):
                raise DamagedReply("a commit of the listing has no 40-hex id")
            title = _text(c.get("title"), "title", sha) or _text(c.get("message"), "message", sha)
            out.append(HubCommit(sha.lower(), _text(c.get("date"), "date", sha), title.split("\n", 1)[0]))
        return out

    return list(reversed(hub_call(uri.subject, what, listing, retry=False)))


def _state_file(uri: HubURI, commit: str):
    return commit_dir(uri.repo_id, commit) / ".history" / (hashlib.sha256(uri.path.encode()).hexdigest()[:32] + ".json")


def remembered(uri: HubURI, commit: str) -> dict | None:
    """What `remember` kept of `uri`'s path at `commit`, or None."""
    from pytest_pstbench.core.files.jsonfile import read_json

    try:
        data = read_json(_state_file(uri, commit))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("path") == uri.path else None


def remember(uri: HubURI, commit: str, state: dict) -> None:
    """Keep `state` (what the path holds at `commit`, or why its run was refused) in the cache; a cache that
    cannot be written is read again next time."""
    from pytest_pstbench.core.files.write import write_atomic

    try:
        write_atomic(
            _state_file(uri, commit),
            json.dumps({**state, "path": uri.path}, sort_keys=True) + "\n",
            what="the history record",
            fix="set PSTBENCH_CACHE to a writable folder",
        )
    except UserError:
        pass


_MISSING = re.compile(r"no run folder|not found|does not exist", re.I)


def path_state(uri: HubURI, commit: str) -> dict:
    """What `uri`'s path holds at `commit`: {"files": {run folder: {file: git blob id}}}, {"absent": reason}
    when no run folder is there, or {"problem": reason} when the Hub's answer could not be read. An absent path
    is remembered at once; the files a listing names only once their run is verified (`remember`, by the
    caller), so that nothing a lying listing said is kept."""
    from pytest_pstbench.core.store.published.pull import list_runs

    known = remembered(uri, commit)
    if known is not None and ("files" in known or "absent" in known):
        return known
    try:
        listing = list_runs(uri, commit, commit_checked=True)
    except HubError as exc:
        if not (exc.category == "entry" or exc.unresolved):
            return {"problem": str(exc)}
        state = {"absent": str(exc)}
    except UserError as exc:
        if not _MISSING.search(str(exc)):
            return {"problem": str(exc)}
        state = {"absent": str(exc)}
    else:
        return {
            "files": {
                folder: {n: e.get("git_oid") or e.get("sha256") for n, e in entries.items()}
                for folder, entries in listing.items()
            }
        }
    remember(uri, commit, state)
    return state
