"""A dataset on the Hub, asked through the Hub client (`core.hub`): the words a failure about a dataset is
named in (`DatasetSubject`: its repo id, the manifest to correct, `--from DIR` as the way round), the
resolution of the revision a manifest pins or a user names (a branch, tag, full or abbreviated commit) to
its commit, and the files of the manifest's split folders at that commit.
"""

from __future__ import annotations

import re

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.hub import client
from pytest_pstbench.core.hub import endpoint as hub_endpoint
from pytest_pstbench.core.hub.client import Failure, HubError, Subject
from pytest_pstbench.core.hub.listing import repo_commits, revision_sha, tree
from pytest_pstbench.data.manifest import DatasetManifest


class DatasetSubject(Subject):
    """A Hub failure about dataset `m`: each message starts with its repo id and names the manifest's field
    or the command's option to correct."""

    def __init__(self, m: DatasetManifest):
        self.m = m
        self.name = m.repo_id

    def failure(self, f: Failure) -> str:
        m, where = self.m, hub_endpoint.where()
        if f.category == "revision":
            return (
                f"revision not found on {where} while {f.what} ({f.first}); fix: check the --revision you gave, "
                f"or the revision in {m.path}"
            )
        if f.category == "gated":
            return (
                f"gated dataset; your account has no access on {where} while {f.what}; fix: accept its terms "
                f"on https://huggingface.co/datasets/{m.repo_id} and log in (`hf auth login`, or set HF_TOKEN)"
            )
        if f.category == "repo":
            return (
                f"dataset not found (or not accessible) on {where} while {f.what}; "
                f"fix: check repo_id in {m.path}, or log in with `hf auth login` if it is gated"
            )
        if f.category == "entry":
            return f"{f.what}: not found at this revision ({f.first}); fix: correct the layout in {m.path}"
        if f.network is not None:  # no answer, and why: in its own words, with the fix that works for it
            happened, fix = f.network
            tries = f" ({f.attempts} attempts)" if f.attempts > 1 else ""
            return f"{happened} while {f.what}{tries}; fix: {fix}{self.way_round()}"
        return (
            f"could not reach the Hub at {where} while {f.what} ({f.error}: {f.first}); "
            "fix: check the network and HF_ENDPOINT, or register a copy you have with --from DIR"
        )

    def way_round(self) -> str:
        """The ways that need no Hub: the copy fetched before (HF_HUB_OFFLINE=1), where there is one; a copy on disk."""
        from pytest_pstbench.data.dataset_lock import LOCK_NAME, dataset_dir

        root = dataset_dir(self.m.name)
        cached = (
            f", or set HF_HUB_OFFLINE=1 to use the copy fetched before ({root})" if (root / LOCK_NAME).is_file() else ""
        )
        return f"{cached}, or register a copy you have with --from DIR"

    def no_answer(self, what: str, attempts: int, timeout: float) -> str:
        tries = f"{attempts} attempts" if attempts > 1 else "after huggingface_hub's retries with backoff"
        return (
            f"no answer from {hub_endpoint.where()} within {timeout:g} s while {what} ({tries}); "
            f"fix: check the network and HF_ENDPOINT, set {client.NETWORK_TIMEOUT_ENV} (seconds) to wait longer, "
            "or register a copy you have with --from DIR"
        )


def remote_listing(m: DatasetManifest, requested: str, splits: list[str]) -> tuple[str, dict[str, dict]]:
    """(full commit sha, {path: {size, sha256 | None, git_oid, lfs}}) for the splits' folders."""
    sha = resolve_revision(m, requested)
    listing: dict[str, dict] = {}
    for split in splits:
        folder = str(m.splits[split]["folder"]).strip("/")
        items = tree(
            DatasetSubject(m),
            f"listing split folder {folder}/ at {sha[:12]}",
            m.repo_id,
            sha,
            folder,
            repo_type=m.repo_type,
        )
        listing.update((path, entry) for path, entry in items if entry is not None)
    return sha, listing


def resolve_revision(m: DatasetManifest, requested: str) -> str:
    """The full 40-hex commit `requested` (a branch, tag, full commit or commit prefix) names on the Hub.

    The Hub's revision endpoint is asked first. When it does not resolve a revision that looks like a
    commit prefix (7 to 39 hex digits; the Hub may not resolve short ids), the repository's commits are
    listed (``list_repo_commits`` from each branch and tag) and the one commit with that prefix is used;
    none, or more than one, is refused with the candidates named.
    """
    short = re.fullmatch(r"[0-9a-f]{7,39}", requested.lower()) is not None
    try:
        sha = revision_sha(
            DatasetSubject(m), f"resolving revision {requested}", m.repo_id, requested, repo_type=m.repo_type
        )
    except HubError as exc:
        if short and exc.unresolved:
            return _commit_by_prefix(m, requested.lower())
        raise
    if not re.fullmatch(r"[0-9a-f]{40}", sha):
        raise UserError(
            f"{m.repo_id}: the Hub answered revision {requested} without a commit sha ({sha!r}); cannot pin"
        )
    return sha


def _commit_by_prefix(m: DatasetManifest, prefix: str) -> str:
    where = hub_endpoint.where()
    heads, seen = repo_commits(
        DatasetSubject(m),
        f"listing the commits to resolve the commit prefix {prefix}",
        m.repo_id,
        repo_type=m.repo_type,
    )
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
