"""run.json `git`: commit, branch and dirty flag of the outputs' and the working folder's repositories (issue #24)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track

from pytest_pstbench.cli import main
from pytest_pstbench.core.environment import git_info

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(repo, *args) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
        "HOME": str(repo),
        "GIT_CONFIG_NOSYSTEM": "1",
        "PATH": "/usr/bin:/bin:/usr/local/bin",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


@pytest.fixture
def method_repo(tmp_path):
    repo = tmp_path / "method"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "method.py").write_text("def run(content, style):\n    return content\n")
    track = make_track(tmp_path / "track", n=3)
    make_outputs(track, repo / "outputs")
    _git(repo, "add", "method.py")  # the outputs stay untracked (generated), as in most method repositories
    _git(repo, "commit", "-q", "-m", "first")
    return repo, track, protocol_without_lpips(tmp_path / "proto.yaml")


def _score(tmp_path, track, outputs, proto, name) -> dict:
    assert (
        main(
            [
                "score",
                "--track",
                str(track),
                "--outputs",
                str(outputs),
                "--protocol",
                str(proto),
                "--results",
                str(tmp_path / "results"),
                "--name",
                name,
            ]
        )
        == 0
    )
    return json.loads((tmp_path / "results" / "small" / name / "run.json").read_text())["git"]


def test_scored_run_records_commit_branch_and_dirty_flag(tmp_path, monkeypatch, method_repo):
    repo, track, proto = method_repo
    head = _git(repo, "rev-parse", "HEAD")
    monkeypatch.chdir(repo)
    git = _score(tmp_path, track, repo / "outputs", proto, "clean")
    expected = {"root": str(repo.resolve()), "commit": head, "branch": "main", "dirty": False}
    assert git == {"outputs": expected, "working_dir": expected}

    (repo / "method.py").write_text("def run(content, style):\n    return style\n")  # an uncommitted change
    git = _score(tmp_path, track, repo / "outputs", proto, "dirty")
    assert git["outputs"] == {**expected, "dirty": True} and git["working_dir"]["dirty"] is True

    _git(repo, "checkout", "-q", "--detach")
    assert git_info(repo)["branch"] is None and git_info(repo)["commit"] == head


def test_not_a_repository_or_no_git_gives_null(tmp_path, monkeypatch, method_repo):
    repo, track, proto = method_repo
    plain = tmp_path / "plain"
    shutil.copytree(repo / "outputs", plain)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # no repository above tmp_path counts
    assert _score(tmp_path, track, plain, proto, "plain") == {"outputs": None, "working_dir": None}
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # git not installed
    assert git_info(repo) is None
