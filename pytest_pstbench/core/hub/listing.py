"""What a repository holds at a revision, as the Hub lists it: the one tree listing (each file with its size
and digests: the LFS sha256, else the git blob id), whether a path exists, and the commits on its branches
and tags, and the commit a revision is at. Every listing goes through the client's `hub_call` and its error
map, and every reply of the Hub through `_Bounds`: a deadline and a byte cap; a listing's pages (`pages`) also
a cap on entries and pages (the limits of `limits`), the other replies (`reply`) read once.
"""

from __future__ import annotations

import re

from pytest_pstbench.core.hub import client
from pytest_pstbench.core.hub import endpoint as hub_endpoint
from pytest_pstbench.core.hub.client import DamagedReply, Subject, hub_call, missing_entry
from pytest_pstbench.core.hub.limits import (
    DEADLINE_ENV,
    MAX_LISTING_ENV,
    ReplyBounds,
    deadline_seconds,
    max_listing,
    remember_sizes,
)


def api_url(repo_type: str, repo_id: str, *parts: str) -> str:
    """`<endpoint>/api/<repo_type>s/<repo_id>/<parts...>`, each part quoted whole."""
    from urllib.parse import quote

    return f"{hub_endpoint.where()}/api/{repo_type}s/{repo_id}" + "".join("/" + quote(p, safe="") for p in parts if p)


def tree(
    subject: Subject, what: str, repo_id: str, revision: str, folder: str | None, *, repo_type: str = "dataset"
) -> list[tuple[str, dict | None]]:
    """Everything under `folder` (None: the repo's root) at `revision`, recursively, in the Hub's order:
    (path, {size, sha256 | None, git_oid, lfs}) for a file, (path, None) for anything else (a folder).
    Read through the capped listing (`pages`: entries, pages and a deadline), each page
    with huggingface_hub's own backoff (so tried once here); an entry that is not what the Hub sends is one
    line (`client.damaged`). The files' sizes become the byte caps of their downloads."""
    url = api_url(repo_type, repo_id, "tree", revision, folder or "")
    items = hub_call(
        subject,
        what,
        lambda api: [_entry(raw) for raw in pages(subject, what, url, {"recursive": True, "expand": False})],
        attempts=1,
    )
    remember_sizes(repo_type, repo_id, revision, {p: e["size"] for p, e in items if e is not None})
    return items


_HEX = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def _entry(raw) -> tuple[str, dict | None]:
    """One entry of a tree listing, checked: a file has a size in bytes, a git blob id and, for an LFS
    file, a sha256."""
    if not isinstance(raw, dict) or not isinstance(raw.get("path"), str) or not isinstance(raw.get("type"), str):
        raise DamagedReply(f"an entry of the listing has no path or type ({_short(raw)})")
    path = raw["path"]
    if raw["type"] != "file":
        return path, None
    size, oid, lfs = raw.get("size"), raw.get("oid"), raw.get("lfs")
    if type(size) is not int or size < 0:
        raise DamagedReply(f"the file {path!r} is listed without a size in bytes (size: {_short(size)})")
    if not isinstance(oid, str) or not _HEX.fullmatch(oid):
        raise DamagedReply(f"the file {path!r} is listed without a git blob id (oid: {_short(oid)})")
    if lfs is not None and not (
        isinstance(lfs, dict) and isinstance(lfs.get("oid"), str) and re.fullmatch(r"[0-9a-f]{64}", lfs["oid"])
    ):
        raise DamagedReply(f"the LFS file {path!r} is listed without a sha256 (lfs: {_short(lfs)})")
    return path, {"size": size, "sha256": lfs["oid"] if lfs else None, "git_oid": oid, "lfs": lfs is not None}


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def reply_bytes() -> int:
    """The bytes one reply (a listing's page, a revision's info) may have: 1 kB per listing entry, up to 10,000."""
    return 1024 * min(max_listing(), 10_000)


class _Bounds:
    """One Hub read's limits: its deadline (`deadline_seconds()` from now) and each reply's byte cap, each
    broken as one HubError naming the variable that raises it."""

    def __init__(self, subject: Subject, what: str, kind: str = "reply"):
        import time

        self.subject, self.what, self.kind = (
            subject,
            what,
            kind,
        )  # "listing" (pages), "reply" (one), "answer" (a push's)
        self.budget, self.cap = deadline_seconds(), reply_bytes()
        self.end = time.monotonic() + self.budget
        self.pages = self.entries = 0

    def late(self, waited: str = ""):
        counts = f" ({self.pages} pages, {self.entries} entries{waited})" if self.kind != "answer" else waited
        return client.limit_error(
            self.subject.name,
            f"the Hub's {self.kind} took longer than "
            f"{self.budget:g} s while {self.what}{counts}; "
            f"stopped; fix: check the network and HF_ENDPOINT, or raise {DEADLINE_ENV} (seconds)",
        )

    def big(self):
        what = "a page of the Hub's listing" if self.kind == "listing" else "the Hub's reply"
        return client.limit_error(
            self.subject.name,
            f"{what} is larger than {self.cap} bytes while {self.what}; stopped; "
            f"fix: check the path and HF_ENDPOINT, or raise {MAX_LISTING_ENV} (entries; a "
            f"{'page' if self.kind == 'listing' else 'reply'} may have 1 kB per entry, up to 10,000)",
        )

    def get(self, url: str, params: dict | None, retry: bool):
        """(the JSON of one GET of `url`, its next link or None), within these limits (`client.bounded_get`)."""
        return client.bounded_get(url, params, end=self.end, cap=self.cap, retry=retry, late=self.late, big=self.big)


def answer_bounds(subject: Subject, what: str) -> ReplyBounds:
    """The bounds of the replies huggingface_hub reads itself in one step of a push (`limits.replies_bounded`):
    one deadline for all of them (`deadline_seconds()` from now) and each reply's byte cap (`reply_bytes()`)."""
    b = _Bounds(subject, what, "answer")
    return ReplyBounds(b.end, b.cap, b.late, b.big)


def reply(subject: Subject, what: str, url: str, params: dict | None = None):
    """The JSON of one Hub API reply (not a listing), read within the deadline and a byte cap (`_Bounds`); a
    request that gets no answer is the caller's to retry (`hub_call`)."""
    return _Bounds(subject, what).get(url, params, retry=False)[0]


def pages(subject: Subject, what: str, url: str, params: dict | None = None):
    """The entries of a paginated Hub listing (JSON lists, pages chained by `Link: <...>; rel="next"`), one by
    one, each page asked again on a busy or failed answer (`_Bounds.get`). Capped: at most `max_listing()`
    entries in all, a tenth as many pages (plus ten), 1 kB a page per entry (up to 10,000 entries), and
    `deadline_seconds()` for the whole listing, each page's body and each wait included; past a cap, one
    HubError naming the limit and the variable that raises it. A page that is not a JSON list is a
    `DamagedReply`."""
    client.bounded_hub_client()
    bounds = _Bounds(subject, what, "listing")
    limit = max_listing()
    max_pages = limit // 10 + 10
    while url:
        if bounds.pages >= max_pages:
            raise client.limit_error(
                subject.name,
                f"the Hub's listing goes on past {max_pages} pages while {what}; stopped; fix: check "
                f"the path and HF_ENDPOINT, or raise {MAX_LISTING_ENV} (entries; pages: a tenth of it, plus ten) "
                "for a repo you trust that lists that many",
            )
        page, url = bounds.get(url, params, retry=True)
        bounds.pages += 1
        if not isinstance(page, list):
            raise DamagedReply(f"a page of the listing is a JSON {type(page).__name__}, not a list")
        for entry in page:
            bounds.entries += 1
            if bounds.entries > limit:
                raise client.limit_error(
                    subject.name,
                    f"the Hub's listing holds more than {limit} entries while {what}; stopped; fix: "
                    f"check the path and HF_ENDPOINT, or raise {MAX_LISTING_ENV} (entries) for a repo you trust",
                )
            yield entry
        params = None  # the next link holds them


def path_exists(
    subject: Subject, what: str, repo_id: str, path: str, revision: str, *, repo_type: str = "dataset"
) -> bool:
    """Whether `path` (a file or a folder) is in the repo at `revision`: its listing's first page (`pages`)."""
    url = api_url(repo_type, repo_id, "tree", revision, path)

    def listing(api):
        try:
            return any(True for _ in pages(subject, what, url, {"expand": False}))
        except Exception as exc:
            if missing_entry(exc):
                return False
            raise

    return hub_call(subject, what, listing, attempts=1)


_REV = re.compile(r"[0-9a-fA-F]+")


def revision_sha(
    subject: Subject, what: str, repo_id: str, revision: str, repo_type: str = "dataset", retry: bool = True
) -> str:
    """The commit the Hub says `revision` (a branch, tag or commit) of `repo_id` is at ("" when it names none):
    its revision reply (`reply`: a deadline and a byte cap), tried again when it gets no answer (`hub_call`)."""
    url = api_url(repo_type, repo_id, "revision", revision)

    def sha(api):
        info = reply(subject, what, url)
        if not isinstance(info, dict):
            raise DamagedReply(
                f"the revision's reply is of the wrong type (a JSON {type(info).__name__}, not an object)"
            )
        value = info.get("sha")
        if value not in (None, "") and not (isinstance(value, str) and _REV.fullmatch(value)):
            raise DamagedReply(f"the revision's commit is not a hex id (sha: {_short(value)})")
        return value or ""

    return hub_call(subject, what, sha, retry=retry)


def repo_commits(
    subject: Subject, what: str, repo_id: str, *, repo_type: str = "dataset"
) -> tuple[list[str], set[str]]:
    """(the repo's branches and tags, ["main"] when it lists none; the ids of every commit reachable from
    them, lower case): its refs reply (`reply`) and each head's commit listing (`pages`: capped). Tried once:
    any failure is one line at once."""

    def commits(api):
        refs = reply(subject, what, api_url(repo_type, repo_id, "refs"))
        if not isinstance(refs, dict) or not all(isinstance(refs.get(k, []), list) for k in ("branches", "tags")):
            raise DamagedReply(f"the refs reply has no lists of branches and tags ({_short(refs)})")
        heads = []
        for ref in (*refs.get("branches", []), *refs.get("tags", [])):
            if not isinstance(ref, dict) or not isinstance(ref.get("name"), str) or not ref["name"]:
                raise DamagedReply(f"a branch or tag has no name ({_short(ref)})")
            heads.append(ref["name"])
        heads = heads or ["main"]
        seen: set[str] = set()
        for head in heads:
            for c in pages(subject, what, api_url(repo_type, repo_id, "commits", head)):
                if not isinstance(c, dict) or not isinstance(c.get("id"), str) or not _HEX.fullmatch(c["id"].lower()):
                    raise DamagedReply(f"a commit of {head} has no id ({_short(c)})")
                seen.add(c["id"].lower())
        return heads, seen

    return hub_call(subject, what, commits, retry=False)
