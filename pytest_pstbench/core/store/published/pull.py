"""Pulling published runs into the cache (`pull`): the revision resolved to its 40-hex commit once (a full
commit needs no network; a branch resolved before is remembered for offline use), the cache looked up first,
else the Hub's tree listing at the commit read for the run folders under the URI's path (a folder holding
run.json), each run's files (run.json, summary.json and the kind's per-item file) downloaded through the Hub
client (`core.hub.client`) into a staging folder, checked against the Hub's digests, a size cap and then as a
run (`check_pulled`: the one validating reader, `core.store.reader.read_runs`; complete, with a track and a
dataset revision), then renamed into place. Nothing half-fetched is ever used: a pull builds in a staging
folder that is deleted when it fails or is interrupted.

huggingface_hub is imported only inside the functions that talk to the Hub.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.hub import client
from pytest_pstbench.core.hub import endpoint as hub_endpoint
from pytest_pstbench.core.hub.client import HubError
from pytest_pstbench.core.hub.digests import check_file
from pytest_pstbench.core.hub.limits import MAX_FILE_ENV, max_file_bytes
from pytest_pstbench.core.hub.listing import revision_sha, tree
from pytest_pstbench.core.hub.network import network_errors
from pytest_pstbench.core.hub.uri import COMMIT, HubURI, check_repo_path, parse_uri
from pytest_pstbench.core.store.folder import run_file_names
from pytest_pstbench.core.store.published.cache import (
    PULL_RECORD,
    PulledRun,
    cache_name,
    cached_problem,
    commit_dir,
    listing_file,
    lock_target,
    read_cached,
    ref_file,
)


@dataclass
class PullResult:
    uri: HubURI
    commit: str
    runs: list[PulledRun]
    downloaded: int  # files fetched now (0: all from the cache)

    @property
    def pinned_uri(self) -> str:
        return self.uri.text(self.commit)


class RunRefused(UserError):
    """A fetched run refused as a run (incomplete, invalid: `check_pulled`), not for the Hub's answer, a digest
    or the network: the same commit is refused again, so a history remembers it."""


def check_pulled(folder: Path, run_uri: str, protocol_spec: str | None) -> None:
    """The run fetched into `folder` against its own record: read by the one validating reader, complete,
    with a track and a dataset revision; else one line naming `run_uri` (a RunRefused)."""
    from pytest_pstbench.core.store.reader import read_runs

    try:
        _kind, runs, _protocol = read_runs([folder], protocol_spec=protocol_spec)
        rec = runs[0].record
        if not rec.complete:
            raise UserError(
                f"run.json says complete: false ({rec.n_scored} of {rec.n_items} scored); only complete runs are pulled"
            )
        for label in ("track", "dataset.revision"):
            if not rec.identity()[label]:
                raise UserError(f"run.json has no {label}; fix: score the run again")
    except UserError as exc:
        raise RunRefused(
            f"{run_uri}: refused: {str(exc).replace(str(folder) + os.sep, '').replace(str(folder), 'the run')}"
        ) from None


def pull(
    uri: HubURI | str,
    *,
    protocol_spec: str | None = None,
    progress=None,
    option: str = "run",
    check_run=check_pulled,
) -> PullResult:
    """The runs under `uri` at its commit, in the cache and verified (fetched only when not cached), each
    fetched run checked by `check_run(folder, run_uri, protocol_spec)` (a UserError refuses it; the tests
    of the transfer alone pass a check that accepts anything)."""
    uri = parse_uri(uri, option) if isinstance(uri, str) else uri
    say = progress or (lambda msg: None)
    commit = _resolve_commit(uri, option)
    if not uri.pinned:
        say(f"{uri.text()}: {uri.revision or 'main'} is commit {commit} (pinned: {uri.text(commit)})")
    cached = read_cached(uri, commit)
    if cached is not None:
        return PullResult(uri, commit, cached, 0)
    if client.offline():
        raise UserError(
            f"{uri.text()}: commit {commit[:12]} is not in the cache ({commit_dir(uri.repo_id, commit)}) and "
            f"HF_HUB_OFFLINE=1 forbids fetching it; fix: run `pstbench runs pull {uri.text(commit)}` with network access"
        )
    say(f"{uri.text()}: fetching the runs at commit {commit[:12]} from {hub_endpoint.where()} ...")

    def check(folder: Path, run_uri: str) -> None:
        check_run(folder, run_uri, protocol_spec)

    runs, downloaded = fetch_runs(uri, commit, check=check, say=say, commit_checked=not uri.pinned)
    return PullResult(uri, commit, runs, downloaded)


def _resolve_commit(uri: HubURI, option: str) -> str:
    """The 40-hex commit `uri`'s revision names: a full commit as it is (no network); a branch, tag or
    short commit asked from the Hub (and remembered, for offline use of the same branch). Without an answer
    from the Hub, a branch resolved here before is not taken as it was: one line says so and names the
    pinned URI and HF_HUB_OFFLINE=1, which read it."""
    from pytest_pstbench.core.files.write import write_atomic

    if uri.pinned:
        return uri.revision  # the cache is looked up first; `fetch_runs` asks the Hub whether the commit exists
    rev = uri.revision or "main"
    memo = ref_file(uri.repo_id, rev)
    if client.offline():
        sha = _remembered(memo)
        if sha is not None:
            return sha
        raise UserError(
            f"{uri.text()}: HF_HUB_OFFLINE=1 and revision {rev} was never resolved here, so its commit is "
            f"unknown; fix: run `pstbench runs pull {uri.text()}` with network access, or give the 40-hex commit"
        )
    try:
        sha = revision_sha(uri.subject, f"resolving revision {rev}", uri.repo_id, rev)
    except HubError as exc:
        known = _remembered(memo)
        if exc.category not in ("timeout", "network") or known is None:
            raise
        happened, net_fix = exc.network or (
            f"no answer from {hub_endpoint.where()}",
            "check the network and HF_ENDPOINT",
        )
        if read_cached(uri, known) is None:
            state, fix = "is not in the cache", f"{net_fix}, then run `pstbench runs pull {uri.text(known)}`"
        else:
            state, fix = (
                "is in the cache",
                f"use the pinned URI {uri.text(known)}, or set HF_HUB_OFFLINE=1 to read {rev} as last resolved",
            )
        raise UserError(
            f"{uri.text()}: {happened}, and a branch or tag cannot be resolved without the "
            f"network ({rev} was commit {known} when last resolved here, which {state}); fix: {fix}"
        ) from None
    if not COMMIT.fullmatch(sha):
        raise UserError(f"{uri.text()}: the Hub answered revision {rev} without a commit ({sha!r}); cannot pin it")
    try:
        write_atomic(
            memo,
            json.dumps({"revision": rev, "commit": sha}) + "\n",
            what="the branch record",
            fix="set PSTBENCH_CACHE to a writable folder",
        )
    except UserError:
        pass  # a read-only cache: the branch is resolved again next time
    return sha


def _remembered(memo: Path) -> str | None:
    """The commit a branch was last resolved to here (its record in the cache), or None."""
    from pytest_pstbench.core.files.jsonfile import read_json

    try:
        sha = read_json(memo).get("commit")
    except (OSError, ValueError, AttributeError):
        return None
    return sha if isinstance(sha, str) and COMMIT.fullmatch(sha) else None


def list_runs(uri: HubURI, commit: str, commit_checked: bool = False) -> dict[str, dict[str, dict]]:
    """{run folder path: {file name: {size, sha256 | None, git_oid, lfs}}} of the run folders under `uri`'s
    path at `commit` (a folder holding run.json; folders inside a run folder are not runs of their own).
    Only the run files are listed. Unsafe paths, entries that are not plain files and files over the size
    cap are refused."""
    if not commit_checked:  # a quick, clean answer first (a commit that does not exist, no network)
        sha = revision_sha(uri.subject, f"looking up commit {commit[:12]}", uri.repo_id, commit)
        if sha.lower() != commit:  # a branch or tag named like a commit: never taken for the commit
            raise UserError(
                f"{uri.text()}: revision {commit} looks like a commit, but the Hub resolves it to "
                f"{'commit ' + sha if COMMIT.fullmatch(sha.lower()) else repr(sha)} (a branch or tag of that "
                "name?); refused: a 40-hex revision must be that commit; fix: give the commit itself, or "
                "rename the branch or tag"
            )
    items = tree(
        uri.subject, f"listing {uri.path or 'the repo'} at {commit[:12]}", uri.repo_id, commit, uri.path or None
    )
    prefix = uri.path + "/" if uri.path else ""
    files: dict[str, dict] = {}
    others: set[str] = set()
    for path, entry in items:
        path = str(path)
        check_repo_path(path, f"{uri.text(commit)}: the Hub listed {path!r}")
        if prefix and not (path + "/").startswith(prefix) and path != uri.path:
            raise UserError(f"{uri.text(commit)}: the Hub listed {path!r}, outside {uri.path}; refused")
        if entry is not None:
            files[path] = entry
        else:
            others.add(path)
    bad = sorted(p for p in others if p.rsplit("/", 1)[-1] in run_file_names())
    if bad:
        raise UserError(
            f"{uri.text(commit)}: {bad[0]} is not a plain file (a folder or a link) in the repo; refused; "
            "fix: publish the run folder with `pstbench runs push`"
        )
    folders = sorted({p.rsplit("/", 1)[0] if "/" in p else "" for p in files if p.rsplit("/", 1)[-1] == "run.json"})
    folders = [f for f in folders if not any(f != g and (f + "/").startswith(g + "/" if g else "") for g in folders)]
    if not folders:
        raise UserError(
            f"{uri.text(commit)}: no run folder (a folder holding run.json) under {uri.path or 'the repo root'} at "
            f"commit {commit[:12]}; fix: check the path, or publish one with `pstbench runs push RUN_DIR {uri.text()}`"
        )
    cap = max_file_bytes()
    out: dict[str, dict[str, dict]] = {}
    for folder in folders:
        base = folder + "/" if folder else ""
        entries = {n: files[base + n] for n in run_file_names() if base + n in files}
        missing = [n for n in ("summary.json",) if n not in entries]
        if not any(n in entries for n in run_file_names()[2:]):
            missing.append(" or ".join(run_file_names()[2:]))
        if missing:
            raise UserError(
                f"{uri.text(commit, folder)}: not a complete run folder on the Hub (missing {', '.join(missing)}); "
                "fix: publish the whole run folder with `pstbench runs push`"
            )
        big = [f"{n} ({e['size']} bytes)" for n, e in entries.items() if e["size"] > cap]
        if big:
            raise UserError(
                f"{uri.text(commit, folder)}: {big[0]} is larger than the {cap} bytes a run file may have; refused "
                f"before fetching; fix: check the repo (raise {MAX_FILE_ENV} only for a repo you trust)"
            )
        out[folder] = entries
    return out


def fetch_runs(uri: HubURI, commit: str, *, check, say, commit_checked: bool = False) -> tuple[list[PulledRun], int]:
    """Fetch, check and cache every run under `uri`'s path at `commit` -> (the runs, files downloaded)."""
    from pytest_pstbench.core.files.lock import writer_lock
    from pytest_pstbench.core.files.write import write_atomic

    listing = list_runs(uri, commit, commit_checked)
    root = commit_dir(uri.repo_id, commit)
    downloaded = 0
    with writer_lock(
        lock_target(uri.repo_id, commit),
        namespace="hub-runs",
        what="pull of this commit",
        where="set PSTBENCH_CACHE to a writable folder",
        writes="pulled runs",
        fix="wait for the other pull to finish",
    ):
        for folder, entries in listing.items():
            target = root / cache_name(folder)
            _clear_leftovers(target)
            if cached_problem(target) is None:
                continue
            downloaded += _fetch_one(uri, commit, folder, entries, target, check, say)
        names = [cache_name(folder) for folder in listing]
        runs_rec = [{"path": f, "dir": n} for f, n in zip(listing, names)]
        write_atomic(
            listing_file(uri.repo_id, commit, uri.path),
            json.dumps({"path": uri.path, "runs": runs_rec}) + "\n",
            what="the pull listing",
            fix="set PSTBENCH_CACHE to a writable folder",
        )
    runs = [PulledRun(root / n, uri.text(commit, f), uri.repo_id, commit, f) for f, n in zip(listing, names)]
    return runs, downloaded


def _clear_leftovers(target: Path) -> None:
    """Staging folders of a pull that was killed (under the commit's lock: none is in use)."""
    from pytest_pstbench.core.files.write import glob_escape

    if target.parent.is_dir():
        for leftover in target.parent.glob(f".{glob_escape(target.name)}.pull-*"):
            shutil.rmtree(leftover, ignore_errors=True)


def _fetch_one(uri: HubURI, commit: str, folder: str, entries: dict[str, dict], target: Path, check, say) -> int:
    from concurrent.futures import ThreadPoolExecutor

    from pytest_pstbench.core.files.write import replace_stale_dir, staging_dir, write_new
    from pytest_pstbench.core.paths import file_sha256

    run_uri = uri.text(commit, folder)
    fix = "set PSTBENCH_CACHE to a writable folder with free space"
    with staging_dir(target, what="pull the run into the cache", fix=fix, tag="pull") as stage:
        dl, run = stage / "dl", stage / "run"
        run.mkdir()

        def one(name: str) -> str | None:
            repo_path = f"{folder}/{name}" if folder else name
            try:
                got = client.download(
                    uri.repo_id,
                    repo_path,
                    repo_type="dataset",
                    revision=commit,
                    local_dir=dl,
                    max_bytes=max_file_bytes(),
                    subject=uri.subject,
                )
            except network_errors() as exc:
                raise client.hub_error(uri.subject, exc, f"downloading {repo_path}") from None
            problem = check_file(got, entries[name], full=True)
            if problem:
                return f"{name}: {problem}"
            write_new(run / name, got.read_bytes())  # the verified bytes, through the one writer
            return None

        client.bounded_hub_client()
        with ThreadPoolExecutor(max_workers=min(4, len(entries))) as pool:
            problems = [p for p in pool.map(one, list(entries)) if p]
        if problems:
            raise UserError(
                f"{run_uri}: the downloaded files do not match the Hub's digests ({'; '.join(problems)}); nothing "
                "was cached; fix: pull again; if it persists, the repo's files or the connection are not sound"
            )
        check(run, run_uri)
        record = {
            "format": 1,
            "uri": run_uri,
            "repo": uri.repo_id,
            "commit": commit,
            "path": folder,
            "files": {n: {**e, "sha256_local": file_sha256(run / n)} for n, e in entries.items()},
        }
        write_new(run / PULL_RECORD, json.dumps(record, indent=2) + "\n")
        for name in [*entries, PULL_RECORD]:
            os.chmod(run / name, 0o444)  # read-only: the cache holds what the commit holds
        replace_stale_dir(run, target, what="pulled run", current=lambda: cached_problem(target) is None)
    say(f"{run_uri}: {len(entries)} files fetched and verified")
    return len(entries)
