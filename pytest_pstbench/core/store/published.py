"""The run store's Hub side: a published run pulled into the cache (`pull`, through `core.hub.pull`) is
checked as a run before it is kept, and a local run folder is checked before it is published (`push`,
through `core.hub.push`), both by the one validating reader (`core.store.reader.read_runs`: the kind's
loader and checks, its protocol found by id and sha256). A pulled run must be complete, with a track and a
dataset revision; a published one must be complete, and exactly the files the reader reads are published
(run.json, summary.json and the kind's per-item file: no outputs, no links), each under the size cap.
"""

from __future__ import annotations

import os
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.hub.limits import max_file_bytes
from pytest_pstbench.core.hub.pull import PullResult, pull_runs
from pytest_pstbench.core.hub.push import PushResult, push_files, push_target
from pytest_pstbench.core.hub.uri import HubURI, is_hub_uri
from pytest_pstbench.core.store.reader import read_runs


def pull(uri: HubURI | str, *, protocol_spec: str | None = None, progress=None, option: str = "run") -> PullResult:
    """The runs under `uri` at its commit, in the cache and verified (fetched only when not cached)."""
    return pull_runs(
        uri,
        check=lambda folder, run_uri: check_pulled(folder, run_uri, protocol_spec),
        progress=progress,
        option=option,
    )


def check_pulled(folder: Path, run_uri: str, protocol_spec: str | None) -> None:
    """The run fetched into `folder` against its own record: read by the one validating reader, complete,
    with a track and a dataset revision; else one line naming `run_uri`."""
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
        raise UserError(
            f"{run_uri}: refused: {str(exc).replace(str(folder) + os.sep, '').replace(str(folder), 'the run')}"
        ) from None


def check_publishable(run_dir) -> tuple[object, list[Path]]:
    """(the run as the validating reader reads it, the files to publish) of a local complete run folder."""
    if is_hub_uri(run_dir):
        raise UserError(f"RUN_DIR {run_dir}: a published run; fix: give the local run folder to publish")
    run_dir = Path(run_dir)
    kind, runs, _protocol = read_runs([run_dir])
    run = runs[0]
    if not run.record.complete:
        raise UserError(
            f"{run_dir}: run.json says complete: false ({run.record.n_scored} of {run.record.n_items} scored); "
            "only complete runs are published; fix: score every item, then push"
        )
    files = [run_dir / name for name in kind.run_files]
    cap = max_file_bytes()
    for f in files:
        if f.is_symlink() or not f.is_file():
            raise UserError(
                f"{f}: not a plain file (a link?); a published run holds its own files; fix: copy the run "
                "folder's files in place of the links"
            )
        if f.stat().st_size > cap:
            raise UserError(f"{f}: {f.stat().st_size} bytes, over the {cap} bytes a published run file may have")
    return run, files


def push(
    run_dir,
    target: str,
    *,
    replace: bool = False,
    create: bool = False,
    private: bool = False,
    message: str | None = None,
    progress=None,
) -> PushResult:
    """Publish the complete run folder `run_dir` at `target` (hf://datasets/OWNER/NAME[@BRANCH]/PATH) as one commit."""
    uri = push_target(target)
    run, files = check_publishable(run_dir)
    return push_files(
        uri,
        target,
        files,
        described=f"run {run.record.name} ({run.record.track})",
        replace=replace,
        create=create,
        private=private,
        message=message,
        progress=progress,
    )
