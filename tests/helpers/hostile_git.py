"""Git repositories a stranger can make (issue #54: history that git cannot fool): commits written as raw objects
(`git hash-object --literally`), so a subject, body or author name may hold any byte git's own `commit` would
refuse or clean (control bytes, record separators, another commit's id, NUL); side branches merged into the
first-parent line; shallow clones. Independent of the kit: plain git commands only."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.org",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    env = {**os.environ, **ENV, "HOME": str(repo)}
    done = subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, check=True, env=env)
    return done.stdout.decode("utf-8", "replace")


def init(repo: Path) -> Path:
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    return repo


def raw_commit(
    repo: Path, message: bytes, parents: list[str], *, author: bytes = b"t", when: int = 1_790_000_000
) -> str:
    """A commit of the index's tree with `message` and `author`'s name taken byte for byte (no cleanup), its
    parents as given; HEAD's branch moves to it. -> its id."""
    tree = git(repo, "write-tree").strip()
    body = b"tree " + tree.encode() + b"\n"
    body += b"".join(b"parent " + p.encode() + b"\n" for p in parents)
    body += b"author " + author + b" <a@example.org> %d +0000\n" % when
    body += b"committer c <c@example.org> %d +0000\n\n" % when
    sha = git(repo, "hash-object", "-t", "commit", "-w", "--literally", "--stdin", stdin=body + message).strip()
    git(repo, "update-ref", "HEAD", sha)
    return sha


def put_files(repo: Path, folder: str, files: dict[str, bytes]) -> None:
    """Write `files` into `folder` of the work tree and stage the whole tree."""
    target = repo / folder
    target.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (target / name).write_bytes(data)
    git(repo, "add", "-A")


def rerun(files: dict[str, bytes], stamp: str) -> dict[str, bytes]:
    """The same run scored again: per-item values and summary unchanged, only run.json's timestamp differs."""
    run = json.loads(files["run.json"])
    run["finished_at"] = stamp
    return {**files, "run.json": json.dumps(run).encode()}


def first_parent(repo: Path, folder: str | None = None) -> list[str]:
    """HEAD's first-parent commits (that changed `folder`), oldest first: what a history may list."""
    return git(repo, "rev-list", "--first-parent", "--reverse", "HEAD", *(["--", folder] if folder else [])).split()


def forged_subject(side_sha: str, date: str = "2001-01-01T00:00:00+00:00", message: str = "forged") -> bytes:
    """A subject that holds a record of the old `git log` format (%H %x1f %cI %x1f %s %x1e) naming a side
    branch's commit, and NUL-separated fields of the `-z` format too."""
    rec = f"\x1e{side_sha}\x1f{date}\x1f{message}\x1e"
    return f"innocent{rec}".encode() + b"\0" + f"{side_sha}\0{date}\0{message}".encode()


def shallow_clone(repo: Path, target: Path, depth: int) -> Path:
    subprocess.run(
        ["git", "clone", "-q", "--depth", str(depth), f"file://{repo}", str(target)],
        check=True,
        capture_output=True,
        env={**os.environ, **ENV, "HOME": str(target.parent)},
    )
    return target
