"""The run store's one interface: a run address - a local run folder, or a published run
`hf://datasets/OWNER/NAME@REVISION/PATH` (the URI form of `huggingface_hub.HfFileSystem`) - is answered by
the backend its form chooses (`backend_for`): read (`resolve`: local, readable run folders, `RunSource`,
which the one validating reader `core.store.reader.read_runs` then reads like any other folder) and
`versions` (a local folder's git commits, a published path's Hub commits: `pstbench history`); a published
run is also pulled (`pull`) and a local run pushed (`push`) through the Hub backend. Callers ask the store
what an address is (`is_published`) instead of reading its form themselves.

`resolve_runs` is the one resolver every command and front door passes its run arguments through
(compare, table, report, the pytest gate's baselines, the API, `runs ls`). The local-folder backend keeps
a path as it is (never expanded). The Hub backend pulls a URI into the cache, verified
(`core.store.published.pull`): a URI names one run folder (a folder holding run.json) or a folder of run
folders, its revision resolved to the 40-hex commit once (a full commit needs no network), each run's
files checked against the Hub's digests and the run against its own record; a cached run is re-hashed at
every use and read without any network call; offline, an uncached commit is a one-line error naming the
command that fetches it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.hub.uri import URI_HELP, is_hub_uri, parse_uri


@dataclass(frozen=True)
class RunSource:
    """A run address resolved: the local folder read, and for a Hub run where it came from (pinned)."""

    path: Path
    uri: str | None = None  # hf://datasets/OWNER/NAME@COMMIT/PATH
    repo_id: str | None = None
    commit: str | None = None
    path_in_repo: str | None = None
    requested: str | None = None  # the argument as given (a branch, tag or commit)

    def record(self) -> dict:
        """What run.json records for a baseline: the pinned URI and commit (never a branch name), or the folder."""
        if self.uri is None:
            return {"path": str(Path(os.path.abspath(self.path)))}
        return {
            "uri": self.uri,
            "repo": self.repo_id,
            "commit": self.commit,
            "path": self.path_in_repo,
            **({"requested": self.requested} if self.requested != self.uri else {}),
        }

    def __str__(self) -> str:
        return self.uri or str(self.path)


@dataclass(frozen=True)
class Request:
    """How a command asks for its runs: the option its messages name, the protocol the runs were made under,
    whether a Hub run must be pinned to a commit (a gate's baseline; a branch with `allow_branch`), whether
    an address must hold exactly one run, and where progress lines go."""

    option: str = "RUN_DIR"
    protocol_spec: str | None = None
    pinned: bool = False
    allow_branch: bool = False
    one: bool = False
    progress: object = None


class LocalFolders:
    """The local-folder backend: the address is the run folder itself; its versions are its git commits."""

    @staticmethod
    def claims(address) -> bool:
        return not is_hub_uri(address)

    @staticmethod
    def resolve(address, request: Request) -> list[RunSource]:
        return [RunSource(Path(address))]

    @staticmethod
    def versions(address, work: Path, notes: list[str], say, said: list[str] | None = None, newest=None) -> list:
        from pytest_pstbench.core.store.versions import git_versions

        return git_versions(address, work, notes, say, said, newest=newest)


class HubRuns:
    """The Hub backend: the runs under a published address, pulled into the cache and verified; its
    versions are the commits of its revision that changed the run path."""

    @staticmethod
    def claims(address) -> bool:
        return is_hub_uri(address)

    @staticmethod
    def resolve(address, request: Request) -> list[RunSource]:
        from pytest_pstbench.core.store.published.pull import pull

        option = request.option
        uri = parse_uri(address, option)
        if request.pinned and not uri.pinned and not request.allow_branch:
            raise UserError(
                f"{option} {address}: a gate's baseline must be pinned to a commit ({'no revision' if uri.revision is None else repr(uri.revision)}"
                f" can move); fix: give the 40-hex commit ({uri.text('<commit>')}; `pstbench runs pull {address}` prints it), "
                "or allow a branch with --pstbench-baseline-allow-branch (the commit it points to is recorded)"
            )
        runs = pull(uri, protocol_spec=request.protocol_spec, progress=request.progress, option=option).runs
        if request.one and len(runs) != 1:
            raise UserError(
                f"{option} {address}: holds {len(runs)} runs ({', '.join(r.path_in_repo for r in runs[:4])}); "
                "fix: name one run folder"
            )
        return [RunSource(r.path, r.uri, r.repo_id, r.commit, r.path_in_repo, str(address)) for r in runs]

    @staticmethod
    def versions(address, work: Path, notes: list[str], say, said: list[str] | None = None, newest=None) -> list:
        from pytest_pstbench.core.store.published.versions import hub_versions

        return hub_versions(str(address), say, said, newest=newest)


BACKENDS = (HubRuns, LocalFolders)  # asked in order; the local folder takes whatever no other claims


def backend_for(address):
    """The backend that answers for `address`, chosen by its form."""
    return next(b for b in BACKENDS if b.claims(address))


def is_published(address) -> bool:
    """Whether `address` names a published run (the Hub backend answers for it), not a local folder."""
    return backend_for(address) is HubRuns


def resolve_runs(
    args,
    *,
    option: str = "RUN_DIR",
    protocol_spec: str | None = None,
    pinned: bool = False,
    allow_branch: bool = False,
    one: bool = False,
    progress=None,
) -> list[RunSource]:
    """Each run address as RunSources, resolved by its backend: a local path as it is; a Hub URI pulled into
    its runs. With `pinned` a URI must name a 40-hex commit (a gate's baseline), unless `allow_branch`
    (then the commit it resolves to now is recorded); with `one` it must hold one run."""
    request = Request(option, protocol_spec, pinned, allow_branch, one, progress)
    return [source for address in args for source in backend_for(address).resolve(address, request)]


def run_paths(args, **kwargs) -> list[Path]:
    """`resolve_runs`' local folders: what a command that takes run folders reads."""
    return [s.path for s in resolve_runs(args, **kwargs)]


def versions(
    sources, work: Path, notes: list[str], say, said: list[str] | None = None, newest: int | None = None
) -> list:
    """The versions of a run over time (`core.store.versions.Version`, oldest first): several sources are a
    series in the order given (each resolved like any run address); one source is asked of its backend (a
    folder: its git commits, with its run files written under `work`; a Hub URI: its revision's commits), only
    the `newest` versions read when given (a board's sparkline)."""
    from pytest_pstbench.core.store.versions import Version

    sources = [str(s) for s in sources]
    if len(sources) > 1:
        out = []
        for a in sources:
            s = resolve_runs([a], option="SOURCE", one=True, progress=say)[0]
            out.append(Version(str(a), s.commit, None, None, s.path))
        return out
    return backend_for(sources[0]).versions(sources[0], work, notes, say, said, newest)


def check_published(address, option: str) -> None:
    """One line unless `address` names a published run."""
    if not is_published(address):
        raise UserError(f"{option} {address}: not a Hub URI; fix: give {URI_HELP}")


def pull(address, *, protocol_spec: str | None = None, progress=None, option: str = "run"):
    """The published runs under `address` at its commit (`core.store.published.pull.PullResult`), in the
    cache and verified; one line when `address` is not a Hub URI."""
    from pytest_pstbench.core.store.published.pull import pull as pull_published

    check_published(address, option)
    return pull_published(address, protocol_spec=protocol_spec, progress=progress, option=option)


def push(
    run_dir,
    target: str,
    *,
    replace: bool = False,
    create: bool = False,
    private: bool = False,
    message: str | None = None,
    progress=None,
):
    """Publish the complete local run folder `run_dir` at the Hub URI `target` as one commit
    (`core.store.published.push.PushResult`)."""
    from pytest_pstbench.core.store.published.push import push as push_published

    return push_published(
        run_dir, target, replace=replace, create=create, private=private, message=message, progress=progress
    )
