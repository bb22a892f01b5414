"""Issue #41 (damaged sources): a branch force-pushed between two `pstbench history` calls is said in one line on
stderr, naming the commits the call before listed that are gone from the first-parent history; the rest of the
series (the branch's current history) is shown; a third call says nothing more. Both sources: a local git
repository (reset and committed anew) and the local Hub server (tests/helpers/hub_server.FakeHub)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers.hub_server import FakeHub, point_at
from helpers.paired_runs import scores_from, write_run

from pytest_pstbench.cli import main as cli_main

N = 12
RUN = "results/t/m"
rng = np.random.default_rng(3)
BASE = 30.0 + rng.normal(0, 1.0, N)


def cli(capsys, *args):
    code = cli_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def git(repo: Path, *args) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
    }
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def run_files(tmp: Path, i: int) -> dict[str, bytes]:
    d = write_run(tmp / f"stage-{i}", "m", scores_from({"psnr": BASE + 0.001 * i}, N))
    return {f.name: f.read_bytes() for f in sorted(d.iterdir())}


def commit(repo: Path, tmp: Path, i: int) -> str:
    (repo / RUN).mkdir(parents=True, exist_ok=True)
    for name, data in run_files(tmp, i).items():
        (repo / RUN / name).write_bytes(data)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"change {i}")
    return git(repo, "rev-parse", "HEAD").strip()


def rewritten_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if "rewritten since the last call" in ln]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))


def test_a_reset_git_branch_is_said_in_one_line(tmp_path, capsys):
    repo = tmp_path / "method"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    shas = [commit(repo, tmp_path, i) for i in range(4)]
    code, out, err = cli(capsys, "history", repo / RUN, "--json")
    assert code == 0, err
    assert [p["commit"] for p in json.loads(out)["points"]] == shas and not rewritten_lines(err)
    git(repo, "reset", "-q", "--hard", shas[1])  # force-push: the last two commits replaced by another one
    new = commit(repo, tmp_path, 9)
    code, out, err = cli(capsys, "history", repo / RUN, "--json")
    assert code == 0, err
    (line,) = rewritten_lines(err)
    assert "2 commit(s)" in line and shas[2][:7] in line and shas[3][:7] in line and "(main)" in line, line
    h = json.loads(out)
    assert [p["commit"] for p in h["points"]] == [*shas[:2], new]
    assert line in h["notes"]
    code, text, err = cli(capsys, "history", repo / RUN)
    assert code == 0 and not rewritten_lines(err) and not rewritten_lines(text), err  # said once, to the call after
    git(repo, "reset", "-q", "--hard", shas[1])
    code, text, err = cli(capsys, "history", repo / RUN)
    assert code == 0 and len(rewritten_lines(err)) == 1 and not rewritten_lines(text)  # on stderr only
    assert shas[1][:7] in text and new[:7] not in text


def test_a_force_pushed_hub_branch_is_said_in_one_line(tmp_path, capsys, monkeypatch):
    hub = FakeHub().start()
    try:
        point_at(hub, tmp_path, monkeypatch)
        monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))

        def publish(sha, parent, i):
            files = {f"{RUN}/{n}": b for n, b in run_files(tmp_path, i).items()}
            hub.add_commit(
                "me/board",
                sha,
                files,
                refs=("main",),
                lfs=False,
                parent=parent,
                title=f"change {i}",
                date=f"2026-10-{i + 1:02d}T00:00:00Z",
            )

        shas, parent = [f"{i + 1:x}" * 40 for i in range(4)], None
        for i, sha in enumerate(shas):
            publish(sha, parent, i)
            parent = sha
        uri = f"hf://datasets/me/board/{RUN}"
        code, out, err = cli(capsys, "history", uri, "--json")
        assert code == 0, err
        assert [p["commit"] for p in json.loads(out)["points"]] == shas and not rewritten_lines(err)
        new = "a" * 40
        publish(new, shas[1], 9)  # main now: shas[0] -> shas[1] -> new
        code, out, err = cli(capsys, "history", uri, "--json")
        assert code == 0, err
        (line,) = rewritten_lines(err)
        assert "2 commit(s)" in line and shas[2][:7] in line and shas[3][:7] in line and "(main)" in line, line
        assert [p["commit"] for p in json.loads(out)["points"]] == [*shas[:2], new]
        code, out, err = cli(capsys, "history", uri)
        assert code == 0 and not rewritten_lines(err), err
    finally:
        hub.stop()
