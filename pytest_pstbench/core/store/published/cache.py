"""The cache of pulled runs: its layout (`<cache>/hub-runs/ENDPOINT/datasets/OWNER/NAME/COMMIT/PATH`, ENDPOINT
a digest of the Hub's normalised URL, PATH with each part that starts with '@' written with one more '@' so
that the repo's root, `@root`, is no folder's name; a listing of the run folders under each pulled path,
the commit a branch was last resolved to) and its checks: a cached run
folder is used only when its files still hash to its pull record (`.pstbench-pull.json`), re-hashed at
every use, so a cached run needs no network.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from pytest_pstbench.core.hub.uri import HubURI

PULL_RECORD = ".pstbench-pull.json"


@dataclass(frozen=True)
class PulledRun:
    """A run folder pulled into the cache and verified, with where it came from (pinned to its commit)."""

    path: Path
    uri: str  # hf://datasets/OWNER/NAME@COMMIT/PATH
    repo_id: str
    commit: str
    path_in_repo: str


def endpoint_key() -> str:
    """The cache folder of the Hub the kit talks to: a digest of its URL normalised (scheme and host in
    lower case, the scheme's default port and a trailing '/' dropped), so that two spellings of one Hub
    share it and two Hubs never do."""
    from urllib.parse import urlsplit

    from pytest_pstbench.core.hub.endpoint import where

    parts = urlsplit(where())
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    port = parts.port if parts.port not in (None, {"http": 80, "https": 443}.get(scheme)) else None
    host = f"[{host}]" if ":" in host else host
    url = f"{scheme}://{host}{f':{port}' if port else ''}{parts.path.rstrip('/')}"
    return hashlib.sha256(url.encode()).hexdigest()[:24]


def hub_dir() -> Path:
    from pytest_pstbench.core.paths import cache_dir

    return cache_dir() / "hub-runs" / endpoint_key()


def commit_dir(repo_id: str, commit: str) -> Path:
    return hub_dir() / "datasets" / repo_id / commit


def lock_target(repo_id: str, commit: str) -> Path:
    """What a pull of `commit` locks: the repo and commit, whatever the endpoint (pulls of one commit from
    two mirrors wait for each other; each writes its own endpoint's folder)."""
    from pytest_pstbench.core.paths import cache_dir

    return cache_dir() / "hub-runs" / "datasets" / repo_id / commit


def cache_name(path_in_repo: str) -> str:
    """The cache folder (below the commit's) of the run folder at `path_in_repo`: "@root" for the repo's root,
    else the path with '@' put before each part that starts with '@' (`@root/x` -> `@@root/x`), so that no
    two paths share a folder."""
    if not path_in_repo:
        return "@root"
    return "/".join("@" + part if part.startswith("@") else part for part in path_in_repo.split("/"))


def listing_file(repo_id: str, commit: str, path: str) -> Path:
    return commit_dir(repo_id, commit) / ".listings" / (hashlib.sha256(path.encode()).hexdigest()[:32] + ".json")


def ref_file(repo_id: str, revision: str) -> Path:
    return hub_dir() / "refs" / "datasets" / repo_id / (hashlib.sha256(revision.encode()).hexdigest()[:32] + ".json")


def cached_problem(folder: Path) -> str | None:
    """None when `folder` is a finished pull whose files still hash to its record, else why not."""
    from pytest_pstbench.core.files.jsonfile import read_json
    from pytest_pstbench.core.paths import file_sha256

    try:
        rec = read_json(folder / PULL_RECORD)
    except (OSError, ValueError):
        return "not in the cache" if not folder.exists() else "no pull record"
    files = rec.get("files") if isinstance(rec, dict) else None
    if not isinstance(files, dict) or not files:
        return "a damaged pull record"
    for name, entry in files.items():
        p = folder / name
        if not p.is_file() or p.is_symlink():
            return f"{name} is missing"
        if file_sha256(p) != entry.get("sha256_local"):
            return f"{name} was modified in the cache"
    return None


def read_cached(uri: HubURI, commit: str) -> list[PulledRun] | None:
    """The cached runs under `uri`'s path at `commit`, when the listing and every run verify; else None."""
    from pytest_pstbench.core.files.jsonfile import read_json

    try:
        listing = read_json(listing_file(uri.repo_id, commit, uri.path))
    except (OSError, ValueError):
        folder = commit_dir(uri.repo_id, commit) / cache_name(uri.path)  # one run pulled before as part of a folder
        if cached_problem(folder) is None:
            return [PulledRun(folder, uri.text(commit, uri.path), uri.repo_id, commit, uri.path)]
        return None
    runs = listing.get("runs") if isinstance(listing, dict) and listing.get("path") == uri.path else None
    if not isinstance(runs, list) or not runs:
        return None
    out = []
    for entry in runs:
        rp = entry.get("path") if isinstance(entry, dict) else None
        if not isinstance(rp, str) or entry.get("dir") != cache_name(rp):
            return None
        folder = commit_dir(uri.repo_id, commit) / cache_name(rp)
        if cached_problem(folder) is not None:
            return None
        out.append(PulledRun(folder, uri.text(commit, rp), uri.repo_id, commit, rp))
    return out
