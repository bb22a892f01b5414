"""The versions of a method's run over time, for `pstbench history`, oldest first, each a local run folder
to read with the one validating reader (`core.store.reader.read_runs`), or the reason it cannot be:

- `git_versions`: a run folder inside a git repository: every commit of HEAD's first-parent history that
  changed the folder (`git rev-list --first-parent HEAD -- FOLDER`: ids only, each checked to be a commit id on
  HEAD's first-parent path), each one's date and subject read in one NUL-separated `git log -z` call whose
  records must name those ids in that order (`first_parent_commits`; else each commit is read alone), so no
  text a commit holds (control bytes, record separators, another commit's id) can split or forge a point; its
  run files read from git's objects (`git ls-tree`, `git cat-file`) into a temporary folder per commit: no
  checkout, the work tree untouched; uncommitted changes are not read (and `notes` says so); a shallow clone
  (a cut history) is said in one line with the fix (`shallow_note`);
- a published run path: every commit of the revision's history that changed a file under the path, each
  pulled and verified into the run cache (`core.store.published.versions.hub_versions`);
- run folders and Hub URIs given in order, each read as it is (`core.store.backends.versions`).

A branch rewritten between two calls (force-pushed, or reset): each call keeps the commits it listed for its
source (`rewritten`, a small record in the cache); a commit listed last time that is no longer in the
first-parent history is said in one line (the history shown is the branch's current one).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pytest_pstbench.core.errors import UserError


@dataclass
class Version:
    """One version of the run: where it came from and, unless `problem` says why not, the folder to read."""

    source: str  # the folder or URI as given, or FOLDER@SHORT / the pinned URI
    commit: str | None = None
    date: str | None = None
    message: str | None = None
    folder: Path | None = None
    problem: str | None = None


def run_files() -> tuple[str, ...]:
    from pytest_pstbench.core.store.folder import run_file_names

    return run_file_names()


# ---- git ------------------------------------------------------------------------------------------------
def _git(top: Path, *args: str, binary: bool = False, stdin: bytes | None = None):
    try:
        done = subprocess.run(["git", "-C", str(top), *args], input=stdin, capture_output=True, check=False)
    except OSError as exc:
        raise UserError(
            f"git: cannot run it ({exc.strerror or exc}); fix: install git, or give the runs in order"
        ) from None
    if done.returncode != 0:
        raise OSError(" ".join(done.stderr.decode("utf-8", "replace").split())[:200] or f"git {args[0]} failed")
    return done.stdout if binary else done.stdout.decode("utf-8", "replace")


def git_place(folder: Path) -> tuple[Path, str] | None:
    """(the repository's top folder, `folder`'s path in it with '/') when `folder` is inside a git work tree."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    try:
        top = Path(_git(folder, "rev-parse", "--show-toplevel").strip())
    except (OSError, UserError):
        return None
    rel = os.path.relpath(os.path.realpath(folder), os.path.realpath(top))
    return top, "" if rel == "." else rel.replace(os.sep, "/")


COMMIT_ID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")  # SHA-1 or SHA-256, as git prints them
ISO_DATE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:Z|[+-]\d\d:\d\d)")  # %cI


def commit_ids(listed: str, path: str) -> list[str]:
    """The commit ids of `git rev-list` output `listed` (one per line), each checked to be a commit id and to be
    on `path` (the output of `git rev-list --first-parent HEAD`). OSError when a line is anything else."""
    on_path = set(path.split())
    ids = listed.split()
    for sha in ids:
        if not COMMIT_ID.fullmatch(sha) or sha not in on_path:
            raise OSError(f"git rev-list gave {sha[:48]!r}, not a commit of HEAD's first-parent history")
    return ids


def parse_commit_records(raw: bytes, ids: list[str]) -> list[tuple[str, str]] | None:
    """(date, subject) per id of `ids`, from `git log -z --format=%H%x00%cI%x00%s` output `raw` for those ids in
    that order: NUL-separated fields, three per commit, each record naming its id and an ISO date. None when the
    output is not exactly that (a subject that held a NUL): the caller reads each commit alone."""
    fields = raw.split(b"\0")
    if fields[-1:] == [b""]:
        fields.pop()
    if len(fields) != 3 * len(ids):
        return None
    out = []
    for k, sha in enumerate(ids):
        got, date, subject = (f.decode("utf-8", "replace") for f in fields[3 * k : 3 * k + 3])
        if got != sha or not ISO_DATE.fullmatch(date):
            return None
        out.append((date, subject))
    return out


def first_parent_commits(top: Path, rel: str) -> list[tuple[str, str, str]]:
    """(id, committer date, subject) of each commit of HEAD's first-parent history that changed `rel`, oldest
    first: the ids alone first (hex, each on the first-parent path), then their dates and subjects, whose records
    must name those ids in order (a commit's text cannot add, split or move one). OSError when git cannot."""
    ids = commit_ids(
        _git(top, "rev-list", "--first-parent", "HEAD", "--", rel or "."),
        _git(top, "rev-list", "--first-parent", "HEAD"),
    )
    ids.reverse()
    if not ids:
        return []
    fmt = "--format=%H%x00%cI%x00%s"
    raw = _git(top, "log", "--no-walk=unsorted", "--stdin", "-z", fmt, binary=True, stdin="\n".join(ids).encode())
    records = parse_commit_records(raw, ids)
    if records is None:  # read each commit alone: its id is known, its date comes first
        records = []
        for sha in ids:
            date, _, subject = _git(top, "show", "-s", "--format=%cI%x00%s", sha).partition("\0")
            records.append((date.strip(), subject.rstrip("\n").replace("\0", " ")))
    return [(sha, date, subject) for sha, (date, subject) in zip(ids, records)]


def shallow_note(top: Path, where: str, n: int) -> str | None:
    """One line when the repository is a shallow clone (its history is cut: the oldest points are missing), with
    the fix; None for a full clone."""
    try:
        shallow = _git(top, "rev-parse", "--is-shallow-repository").strip() == "true"
    except OSError:
        return None
    if not shallow:
        return None
    return (
        f"{where}: the repository is a shallow clone, so the history holds only the {n} commit(s) fetched "
        "(the older ones are missing); fix: fetch the full history (git fetch --unshallow; in GitHub Actions "
        "actions/checkout with fetch-depth: 0)"
    )


# ---- a branch rewritten between two calls ---------------------------------------------------------------
def rewritten(key: str, where: str, shas: list[str], say, notes: list[str] | None) -> None:
    """Compare the commits `shas` listed now for the source `key` with those listed by the call before (kept in
    the cache), say in one line which of those are gone (the branch was rewritten), and keep `shas`."""
    import hashlib
    import json

    from pytest_pstbench.core.files.jsonfile import read_json
    from pytest_pstbench.core.files.write import write_atomic
    from pytest_pstbench.core.paths import cache_dir

    record = cache_dir() / "history-seen" / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".json")
    try:
        before = read_json(record)
    except (OSError, ValueError):
        before = None
    now = set(shas)
    if isinstance(before, dict) and before.get("key") == key and isinstance(before.get("commits"), list):
        gone = [c for c in before["commits"] if isinstance(c, str) and c not in now]
        if gone:
            line = (
                f"{where}: rewritten since the last call (force-pushed?): {len(gone)} commit(s) listed then are no "
                f"longer in its first-parent history ({', '.join(c[:7] for c in gone[:5])}"
                f"{', ...' if len(gone) > 5 else ''}); the history shown is the current one"
            )
            say(line)
            if notes is not None:
                notes.append(line)
    if isinstance(before, dict) and before.get("commits") == shas:
        return
    try:
        write_atomic(
            record,
            json.dumps({"key": key, "commits": shas}) + "\n",
            what="the history record",
            fix="set PSTBENCH_CACHE to a writable folder",
        )
    except UserError:
        pass  # not kept: the next call cannot say what changed, and reads as before


def git_versions(
    folder, work: Path, notes: list[str], say, said: list[str] | None = None, *, newest: int | None = None
) -> list[Version]:
    """The versions of the run folder `folder` in its git repository (see the module docstring); each
    commit's run files are written under `work`, only the `newest` commits' when given (all are listed, for
    `rewritten`). A commit git cannot read is a Version with its problem."""
    place = git_place(Path(folder))
    if place is None:
        raise UserError(
            f"SOURCE {folder}: not a run folder inside a git repository; fix: give a run folder committed in "
            "git, a Hub URI (hf://datasets/OWNER/NAME/PATH), or several run folders in order"
        )
    top, rel = place
    try:
        commits = first_parent_commits(top, rel)
    except OSError as exc:
        raise UserError(
            f"SOURCE {folder}: git cannot read the repository's history ({exc}); fix: commit the run folder first"
        ) from None
    try:
        dirty = _git(top, "status", "--porcelain", "--", rel or ".").strip()
    except OSError:
        dirty = ""
    if dirty:
        notes.append(f"{folder}: uncommitted changes there are ignored (the history reads commits only)")
    try:
        branch = _git(top, "symbolic-ref", "-q", "HEAD").strip()
    except OSError:
        branch = "HEAD"  # detached
    rewritten(
        f"git\0{os.path.realpath(top)}\0{branch}\0{rel}",
        f"SOURCE {folder} ({branch.removeprefix('refs/heads/')})",
        [c[0] for c in commits],
        say,
        said,
    )
    if not commits:
        raise UserError(f"SOURCE {folder}: no commit of HEAD's history holds it; fix: commit the run folder first")
    shallow = shallow_note(top, f"SOURCE {folder}", len(commits))
    if shallow:
        notes.append(shallow)
    if newest is not None:
        commits = commits[-newest:]
    out = []
    prefix = rel + "/" if rel else ""
    names = run_files()
    for i, (sha, date, message) in enumerate(commits, 1):
        if i == 1 or i % 20 == 0 or i == len(commits):
            say(f"history: reading commit {i}/{len(commits)} ({sha[:7]})")
        v = Version(f"{folder}@{sha[:7]}", sha, date, message)
        try:
            listed = _git(top, "ls-tree", "-z", sha, "--", prefix or ".")
            blobs = {}
            for line in listed.split("\0"):
                meta, _, path = line.partition("\t")
                parts = meta.split()
                if len(parts) == 3 and parts[1] == "blob" and path.startswith(prefix) and path[len(prefix) :] in names:
                    blobs[path[len(prefix) :]] = parts[2]
            if "run.json" not in blobs:
                v.problem = "the run folder is not in this commit (deleted or moved)"
            else:
                target = work / sha
                target.mkdir(parents=True)
                for name, oid in blobs.items():
                    (target / name).write_bytes(_git(top, "cat-file", "blob", oid, binary=True))
                v.folder = target
        except OSError as exc:
            v.problem = f"git cannot read this commit ({exc})"
        out.append(v)
    return out
