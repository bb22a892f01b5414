"""Publishing a run folder's files on the Hub (`pstbench runs push RUN_DIR hf://datasets/OWNER/NAME[@BRANCH]/PATH`):
one commit (huggingface_hub's `create_commit`) holding the files, or none.

An existing PATH on the branch is replaced (deleted and written in the same commit) only with `replace`;
the commit names its parent, so a branch that moved in between is refused rather than overwritten. Every reply
of the Hub keeps the client's deadline and byte cap, those huggingface_hub reads itself included (creating the
repo, the commit's preupload and the commit: `limits.replies_bounded`). The
token is huggingface_hub's own (HF_TOKEN, `hf auth login`) and appears in no message. A run is checked before
it is published (`check_publishable`, by the one validating reader `core.store.reader.read_runs`): it must be
complete, and exactly the files the reader reads are published (run.json, summary.json and the kind's per-item
file: no outputs, no links), each under the size cap.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.hub import client
from pytest_pstbench.core.hub import endpoint as hub_endpoint
from pytest_pstbench.core.hub.client import HubError, hub_call
from pytest_pstbench.core.hub.limits import max_file_bytes, replies_bounded
from pytest_pstbench.core.hub.listing import answer_bounds, path_exists, revision_sha
from pytest_pstbench.core.hub.uri import HubURI, is_hub_uri, parse_uri


@dataclass
class PushResult:
    uri: HubURI
    commit: str
    replaced: bool
    files: list[str]

    @property
    def pinned_uri(self) -> str:
        return self.uri.text(self.commit)


def push_target(target: str) -> HubURI:
    """The push target `target` parsed: a branch (not a commit) and a folder in the repo."""
    uri = parse_uri(target, "push target")
    if uri.pinned:
        raise UserError(
            f"push target {target}: names a commit; a push adds a commit to a branch; fix: write "
            f"{uri.text('main')} (or another branch), or no revision for main"
        )
    if not uri.path:
        raise UserError(
            f"push target {target}: no folder in the repo; fix: name one, e.g. {uri.text(path='runs/TRACK/NAME')}"
        )
    return uri


def check_publishable(run_dir) -> tuple[object, list[Path]]:
    """(the run as the validating reader reads it, the files to publish) of a local complete run folder."""
    if is_hub_uri(run_dir):
        raise UserError(f"RUN_DIR {run_dir}: a published run; fix: give the local run folder to publish")
    run_dir = Path(run_dir)
    from pytest_pstbench.core.store.reader import read_runs

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


def push_files(
    uri: HubURI,
    target: str,
    files: list[Path],
    *,
    described: str,
    replace: bool = False,
    create: bool = False,
    private: bool = False,
    message: str | None = None,
    progress=None,
) -> PushResult:
    """`files` committed under `uri`'s folder on its branch, as one commit; `described` names what they are
    in the default commit message ("run NAME (TRACK)")."""
    say = progress or (lambda msg: None)
    if client.offline():
        raise UserError(f"push target {target}: HF_HUB_OFFLINE=1 forbids publishing; fix: unset it")
    if hub_endpoint.hub_token() is None:
        raise UserError(
            f"push target {target}: no Hugging Face token found; fix: log in with `hf auth login`, or set HF_TOKEN "
            "to a token with write access (it is read by huggingface_hub and never written by pstbench)"
        )
    branch = uri.revision or "main"
    head = _branch_head(uri, branch, create, private, say)
    exists = path_exists(uri.subject, f"checking {uri.path} at {head[:12]}", uri.repo_id, uri.path, head)
    if exists and not replace:
        raise UserError(
            f"push target {target}: {uri.path} already exists on {branch} (commit {head[:12]}); nothing was "
            "pushed; fix: pass --replace to replace it in one commit, or push to another path"
        )
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    ops = ([CommitOperationDelete(path_in_repo=uri.path + "/", is_folder=True)] if exists else []) + [
        CommitOperationAdd(path_in_repo=f"{uri.path}/{f.name}", path_or_fileobj=f.read_bytes()) for f in files
    ]
    title = message or f"pstbench: {'replace' if exists else 'publish'} {described} at {uri.path}"
    say(f"{target}: committing {len(files)} files to {uri.repo_id}@{branch} (parent {head[:12]}) ...")
    what = f"committing to {branch}"
    bounds = answer_bounds(uri.subject, what)  # the preupload's and the commit's replies: one deadline, a byte cap
    try:
        info = hub_call(
            uri.subject,
            what,
            lambda api: _within(
                bounds,
                lambda: api.create_commit(
                    uri.repo_id, ops, commit_message=title, repo_type="dataset", revision=branch, parent_commit=head
                ),
            ),
        )
    except UserError as exc:
        if getattr(exc, "category", None) == "limit" and any("/commit/" in path for _m, path in bounds.requests):
            raise UserError(
                f"{exc}; the Hub may have made the commit (its answer was not read in full): check {branch} "
                f"with `pstbench runs ls {uri.text()}` before pushing again"
            ) from None
        raise UserError(
            f"{exc}; the Hub made no commit (a push is one commit or none): nothing of the run is on {branch}"
        ) from None
    commit = str(getattr(info, "oid", "") or "")
    if len(commit) != 40:
        raise UserError(
            f"push target {target}: the Hub answered the commit without its id ({commit!r}); check the repo"
        )
    return PushResult(uri, commit, exists, [f.name for f in files])


def _within(bounds, call):
    """call() with every reply huggingface_hub reads in it within `bounds` (the Hub client's deadline and byte cap)."""
    with replies_bounded(bounds):
        return call()


def _branch_head(uri: HubURI, branch: str, create: bool, private: bool, say) -> str:
    what = f"reading branch {branch}"
    try:
        sha = revision_sha(uri.subject, what, uri.repo_id, branch, retry=False)
    except HubError as exc:
        if exc.category in ("repo", "gated"):
            if not create:
                raise UserError(
                    f"{uri.text()}: dataset repo {uri.repo_id} not found on {hub_endpoint.where()} (or your token cannot see "
                    f"it); nothing was pushed; fix: check OWNER/NAME, or pass --create to create it"
                    f"{' (private with --private)' if not private else ''}"
                ) from None
            say(f"{uri.text()}: creating dataset repo {uri.repo_id} ({'private' if private else 'public'}) ...")
            bounds = answer_bounds(uri.subject, "creating the repo")
            hub_call(
                uri.subject,
                "creating the repo",
                lambda api: _within(
                    bounds, lambda: api.create_repo(uri.repo_id, repo_type="dataset", private=private, exist_ok=True)
                ),
            )
            sha = revision_sha(uri.subject, what, uri.repo_id, branch)
        elif exc.category == "revision":
            raise UserError(
                f"{uri.text()}: branch {branch} does not exist in {uri.repo_id}; nothing was pushed; fix: create "
                "the branch on the Hub first, or push to main"
            ) from None
        else:
            raise
    if len(sha) != 40:
        raise UserError(f"{uri.text()}: the Hub answered branch {branch} without a commit ({sha!r})")
    return sha
