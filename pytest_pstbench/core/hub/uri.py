"""The URI form of a published run, `hf://datasets/OWNER/NAME@REVISION/PATH` (as `huggingface_hub.HfFileSystem`
writes it), and its rules: `parse_uri` (one line naming the option for anything else), `check_repo_path`
(a plain relative path inside a repo), and the words a Hub failure about a run URI is named in
(`HubURI.subject`: each message starts with the URI and names the fix; never the token).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.hub import endpoint as hub_endpoint
from pytest_pstbench.core.hub.client import NETWORK_TIMEOUT_ENV, Failure, Subject
from pytest_pstbench.core.text import one_line

PREFIX = "hf://"
URI_HELP = "hf://datasets/OWNER/NAME@REVISION/PATH (the URI form of huggingface_hub's HfFileSystem)"
COMMIT = re.compile(r"[0-9a-f]{40}")
_REPO_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")


def is_hub_uri(value) -> bool:
    return str(value).startswith(PREFIX)


@dataclass(frozen=True)
class HubURI:
    repo_id: str
    revision: str | None  # as given; None: the default branch (main)
    path: str  # inside the repo, "" for its root

    def text(self, revision: str | None = None, path: str | None = None) -> str:
        from urllib.parse import quote

        rev = revision if revision is not None else self.revision
        p = self.path if path is None else path
        return f"{PREFIX}datasets/{self.repo_id}" + (f"@{quote(rev, safe='')}" if rev else "") + (f"/{p}" if p else "")

    @property
    def pinned(self) -> bool:
        return self.revision is not None and COMMIT.fullmatch(self.revision) is not None

    @property
    def subject(self) -> URISubject:
        """This URI as the subject of a Hub call's messages."""
        return URISubject(self)


def check_repo_path(path: str, what: str) -> str:
    """A path inside a repo, as the kit accepts it: relative, '/'-separated, no '.' or '..' part, no
    backslash or control character. Returns it without a trailing '/'; UserError otherwise."""
    if path.startswith("/"):
        raise UserError(f"{what}: an absolute path inside the repo; fix: give the path relative to the repo's root")
    parts = path.rstrip("/").split("/") if path.rstrip("/") else []
    bad = next(
        (p for p in parts if p in ("", ".", "..") or "\\" in p or any(ord(c) < 32 or ord(c) == 127 for c in p)), None
    )
    if bad is not None:
        raise UserError(
            f"{what}: the path part {bad!r} is not allowed (no '..', '.', empty part, backslash or control "
            "character); fix: give a plain relative path"
        )
    return "/".join(parts)


def check_repo_id(text: str, option: str, kind: str = "dataset") -> str:
    """`text` as a Hub repo id OWNER/NAME (each part as the Hub spells it: letters, digits, '.', '_', '-', no
    '..'); anything else is one UserError naming `option` and the `kind` of repo it should name."""
    owner, sep, name = str(text).partition("/")
    if not sep or not _REPO_PART.fullmatch(owner) or not _REPO_PART.fullmatch(name) or ".." in text:
        raise UserError(
            f"{option} {one_line(str(text)[:100])}: not a {kind} repo id; fix: write it as OWNER/NAME, as in "
            f"https://huggingface.co/{'datasets/' if kind == 'dataset' else ''}OWNER/NAME"
        )
    return str(text)


def parse_uri(text: str, option: str = "run") -> HubURI:
    """`hf://datasets/OWNER/NAME[@REVISION][/PATH]` -> HubURI; anything else is one line naming `option`."""
    from urllib.parse import unquote

    form = "hf://datasets/OWNER/NAME@REVISION/PATH"
    text = str(text)
    if not text.startswith(PREFIX + "datasets/"):
        raise UserError(f"{option} {text}: only dataset repos are read (expected {form}); fix: write it as {form}")
    rest = text[len(PREFIX + "datasets/") :]
    owner, _, rest = rest.partition("/")
    name_rev, sep, path = rest.partition("/")
    name, at, rev = name_rev.partition("@")
    if not _REPO_PART.fullmatch(owner or "") or not _REPO_PART.fullmatch(name or "") or ".." in owner + name:
        raise UserError(f"{option} {text}: {owner}/{name} is not a repo id; fix: write it as {form}")
    if at and not rev:
        raise UserError(f"{option} {text}: '@' without a revision; fix: write a commit, branch or tag after '@'")
    rev = unquote(rev) if at else None
    if rev is not None and (any(ord(c) < 33 for c in rev) or ".." in rev):
        raise UserError(f"{option} {text}: revision {rev!r} is not a commit, branch or tag name")
    return HubURI(f"{owner}/{name}", rev, check_repo_path(path, f"{option} {text}") if sep else "")


class URISubject(Subject):
    """A Hub failure about a run URI: each message starts with the URI; one not in the cache names the
    command that fetches it."""

    def __init__(self, uri: HubURI):
        self.uri = uri
        self.name = uri.text()

    def failure(self, f: Failure) -> str:
        uri, where = self.uri, hub_endpoint.where()
        token = hub_endpoint.hub_token() is not None
        if f.category == "repo":
            why = (
                "it does not exist, or it is private and your token has no access to it"
                if token
                else "it does not exist, or it is private and no token was found (HF_TOKEN, `hf auth login`)"
            )
            fix = "check OWNER/NAME" + (
                "" if token else ", or log in with `hf auth login` (or set HF_TOKEN) if it is private"
            )
            return f"dataset repo {uri.repo_id} not found on {where} while {f.what}: {why}; fix: {fix}"
        if f.category == "revision":
            return (
                f"revision {uri.revision or 'main'} not found in {uri.repo_id} while {f.what} ({f.first}); "
                "fix: check the commit, branch or tag after '@'"
            )
        if f.category == "entry":
            return (
                f"{uri.path or 'the path'} not found in {uri.repo_id} at that revision while {f.what}; "
                "fix: check the path after the revision"
            )
        if f.category == "gated":
            return (
                f"{uri.repo_id} is gated and your account has no access to it ({f.what}); fix: request "
                f"access on the Hub and log in (`hf auth login`, or set HF_TOKEN)"
            )
        if f.category == "auth":
            return f"not authorised while {f.what} ({f.first}); fix: " + (
                "use a token with write access to " + uri.repo_id
                if token
                else "log in with `hf auth login` (or set HF_TOKEN) with a token that has write access"
            )
        if f.category == "conflict":
            return (
                f"{uri.revision or 'main'} moved while {f.what} (another push?) ({f.first}); fix: run the command again"
            )
        if f.network is not None:  # no answer, and why: in its own words, with the fix that works for it
            happened, fix = f.network
            tries = f" ({f.attempts} attempts)" if f.attempts > 1 else ""
            return f"{happened} while {f.what}{tries}{self.not_cached}; fix: {fix}{self.then}"
        if f.category == "timeout":
            return (
                f"could not reach {where} while {f.what} ({f.first}), and it is not in the cache; "
                f"fix: check the network and HF_ENDPOINT, then fetch it with `pstbench runs pull {uri.text()}`"
            )
        return f"the Hub at {where} refused {f.what} ({f.error}: {f.first}); fix: check the URI and try again"

    @property
    def not_cached(self) -> str:
        return ", and it is not in the cache"

    @property
    def then(self) -> str:
        return f", then fetch it with `pstbench runs pull {self.uri.text()}`"

    def no_answer(self, what: str, attempts: int, timeout: float) -> str:
        return (
            f"no answer from {hub_endpoint.where()} within {timeout:g} s while {what} ({attempts} attempt{'s' if attempts > 1 else ''}), and it is "
            f"not in the cache; fix: check the network and HF_ENDPOINT (or set {NETWORK_TIMEOUT_ENV}, seconds, to wait longer), "
            f"then fetch it with `pstbench runs pull "
            f"{self.uri.text()}` (a pulled run is read by its 40-hex commit without the network)"
        )
