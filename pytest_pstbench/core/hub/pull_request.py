"""Opening a pull request of files on a Hub repository (a model's, for its `.eval_results/`): one commit made with
huggingface_hub's `create_commit(..., create_pr=True)`, which the Hub puts on a new ref `refs/pr/N` of the repo and
opens as pull request N against its main branch, from the commit main was at when the repository was first asked
(so a missing repository or a Hub that cannot be reached is named before anything is sent); main is unchanged.

The commit is sent once (`hub_call(retry=False)`): asking again after a request that got no answer could open a
second pull request. Every reply huggingface_hub reads for it keeps the client's deadline and byte cap
(`limits.replies_bounded`). The token is huggingface_hub's own (HF_TOKEN, `hf auth login`), checked before anything
is sent and never printed; every failure is one line naming the repository and the fix (`RepoSubject`).
"""

from __future__ import annotations

import re

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.hub import client
from pytest_pstbench.core.hub import endpoint as hub_endpoint
from pytest_pstbench.core.hub.client import Failure, Subject, hub_call
from pytest_pstbench.core.hub.limits import replies_bounded
from pytest_pstbench.core.hub.listing import answer_bounds, revision_sha

PR_URL = re.compile(r"https?://\S+/discussions/(\d+)")


class RepoSubject(Subject):
    """A Hub failure while writing to a repository: each message starts with the option, the repo it names and the
    repo's address on the Hub."""

    def __init__(self, repo_id: str, repo_type: str, option: str):
        self.repo_id, self.repo_type = repo_id, repo_type
        prefix = "" if repo_type == "model" else f"{repo_type}s/"
        self.name = f"{option} {repo_id} ({hub_endpoint.where()}/{prefix}{repo_id})"

    def failure(self, f: Failure) -> str:
        where, kind = hub_endpoint.where(), f"{self.repo_type} repo {self.repo_id}"
        if f.category in ("repo", "gated", "entry", "revision"):
            return (
                f"{kind} not found on {where} while {f.what} (or your token cannot see it); nothing was sent; "
                f"fix: check OWNER/NAME (the repo must exist: a pull request is opened on it, never created)"
            )
        if f.category == "auth":
            return (
                f"not authorised while {f.what} ({f.first}); fix: use a token that may open pull requests on "
                f"{self.repo_id} (a fine-grained token needs 'write access to contents/settings of all repos' or to "
                "this one; `hf auth login`, or HF_TOKEN)"
            )
        if f.network is not None:
            happened, fix = f.network
            return f"{happened} while {f.what}; no pull request is known to be open; fix: {fix}, then try again"
        return (
            f"the Hub at {where} refused {f.what} ({f.error}: {f.first}); fix: check the repo, then try again "
            "(look at its pull requests first: one may have been opened)"
        )

    def no_answer(self, what: str, attempts: int, timeout: float) -> str:
        return (
            f"no answer from {hub_endpoint.where()} within {timeout:g} s while {what}; fix: check the network and "
            f"HF_ENDPOINT, look at the pull requests of {self.repo_id} (one may have been opened), then try again"
        )


def open_pull_request(
    repo_id: str, files: dict[str, bytes], *, title: str, description: str = "", repo_type: str = "model", option: str
) -> str:
    """Open a pull request adding `files` (path in the repo -> bytes) to `repo_id`; its URL is returned. `option`
    names the repo in every message (`--push`)."""
    subject = RepoSubject(repo_id, repo_type, option)
    if client.offline():
        raise UserError(f"{subject.name}: HF_HUB_OFFLINE=1 forbids opening a pull request; fix: unset it")
    hub_endpoint.check_token()
    if hub_endpoint.hub_token() is None:
        raise UserError(
            f"{subject.name}: no Hugging Face token found; a pull request is opened under your account; fix: log in "
            "with `hf auth login`, or set HF_TOKEN (it is read by huggingface_hub and never written by pstbench)"
        )
    base = revision_sha(subject, f"reading {repo_id}'s main branch", repo_id, "main", repo_type=repo_type, retry=False)
    if not base:
        raise UserError(f"{subject.name}: the Hub answered branch main without a commit; fix: check the repo")
    from huggingface_hub import CommitOperationAdd

    ops = [CommitOperationAdd(path_in_repo=path, path_or_fileobj=data) for path, data in files.items()]
    what = f"opening a pull request on {repo_id}"
    bounds = answer_bounds(subject, what)

    def commit(api):
        with replies_bounded(bounds):
            return api.create_commit(
                repo_id,
                ops,
                commit_message=title,
                commit_description=description,
                repo_type=repo_type,
                create_pr=True,
                parent_commit=base,
            )

    info = hub_call(subject, what, commit, retry=False)
    url = getattr(info, "pr_url", None)
    if not isinstance(url, str) or not PR_URL.fullmatch(url):
        raise UserError(
            f"{subject.name}: the Hub answered without the pull request's address ({str(url)[:80]!r}); fix: look "
            f"at the pull requests of {repo_id} on {hub_endpoint.where()}"
        )
    return url
