"""`pstbench board`'s history sparklines (issue #52): a run folder committed three times in a git repository and a
published run path with three Hub commits each give a three-point sparkline whose values equal the summary.json
means read independently at each commit (`git show COMMIT:PATH`; the files given to the fake Hub); a hostile
commit subject is escaped (and, where Chromium is installed, no element comes from it in the rendered DOM); a
board over a folder outside git reads no history; a board's published runs share one commit listing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers.dom import HAS_CHROMIUM, Elements, chromium
from helpers.hostile_git import git, init, put_files, raw_commit
from helpers.hub_server import hub  # noqa: F401 (a fixture)
from helpers.paired_runs import scores_from, write_run

from pytest_pstbench.board.sparkline import MAX_POINTS
from pytest_pstbench.cli import main as cli_main

N = 12
HOSTILE_SUBJECT = b"<script>alert(1)</script><img src=x onerror=alert(2)> \xe2\x80\xae & \x1b[31m"


def run_files(tmp: Path, name: str, offset: float) -> dict[str, bytes]:
    rng = np.random.default_rng(int(offset * 100))
    d = write_run(tmp, name, scores_from({"psnr": np.arange(N) * 0.5 + offset + rng.normal(0, 0.3, N)}, N))
    files = {f.name: f.read_bytes() for f in sorted(d.iterdir())}
    shutil.rmtree(d)
    return files


def board(capsys, *args) -> tuple[int, str, str]:
    code = cli_main(["board", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def psnr_mean(summary: bytes) -> float:
    return json.loads(summary)["metrics"]["psnr"]["mean"]


def git_board_repo(tmp_path: Path) -> tuple[Path, list[str]]:
    """A repository whose results/t/m is committed three times (the third with a hostile subject), results/t/n once."""
    repo = init(tmp_path / "repo")
    shas, parents = [], []
    for k, subject in enumerate([b"first", b"second", HOSTILE_SUBJECT]):
        put_files(repo, "results/t/m", run_files(tmp_path / "w", "m", 0.5 * k))
        if k == 0:
            put_files(repo, "results/t/n", run_files(tmp_path / "w", "n", 0.2))
        shas.append(raw_commit(repo, subject, parents, when=1_790_000_000 + 86400 * k))
        parents = [shas[-1]]
    git(repo, "checkout", "-q", "-f", "main")
    return repo, shas


def test_git_history_sparkline(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    repo, shas = git_board_repo(tmp_path)
    code, _, err = board(capsys, repo / "results", "--out", tmp_path / "site")
    assert code == 0, err
    data = json.loads((tmp_path / "site" / "board.json").read_text())
    rows = {r["name"]: r for r in data["tracks"][0]["rows"]}
    hist = rows["m"]["history"]
    assert [p["commit"] for p in hist] == shas
    expected = [psnr_mean(git(repo, "show", f"{sha}:results/t/m/summary.json").encode()) for sha in shas]
    assert [p["value"] for p in hist] == expected
    assert [p["commit"] for p in rows["n"]["history"]] == [shas[0]]
    page = (tmp_path / "site" / "t" / "index.html").read_text()
    assert page.count("<svg ") == 2 and "<script" not in page and "<img" not in page and "\u202e" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in page
    for sha, value in zip(shas, expected):
        assert f"{sha[:7]} " in page and f"{value:.2f}" in page  # each point in the text alternative


def test_results_folder_outside_git_reads_no_history(tmp_path, capsys, monkeypatch):
    import pytest_pstbench.core.history as history

    def refuse(*a, **k):
        raise AssertionError("history read for a folder outside git")

    monkeypatch.setattr(history, "read_history", refuse)
    for name, offset in [("a", 0.0), ("b", 1.0)]:
        d = tmp_path / "results" / "t" / name
        d.mkdir(parents=True)
        for f, data in run_files(tmp_path / "w", name, offset).items():
            (d / f).write_bytes(data)
    code, _, err = board(capsys, tmp_path / "results", "--out", tmp_path / "site")
    assert code == 0, err
    data = json.loads((tmp_path / "site" / "board.json").read_text())
    assert all(r["history"] is None for r in data["tracks"][0]["rows"])
    assert "<svg" not in (tmp_path / "site" / "t" / "index.html").read_text()


def test_hub_history_sparkline_one_listing(hub, tmp_path, capsys):
    files: dict[str, bytes] = {}
    shas, parent, summaries = [], None, []
    for k in range(3):
        sha = f"{k + 1:x}" * 40
        for name in ("a", "b"):
            if name == "a" or k == 0:
                for f, data in run_files(tmp_path / "w", name, 0.4 * k + (name == "b")).items():
                    files[f"t/{name}/{f}"] = data
        summaries.append(files["t/a/summary.json"])
        subject = "<b>bold</b>" if k == 1 else f"push {k}"
        hub.add_commit("me/h", sha, files, refs=["main"], lfs=False, parent=parent, title=subject)
        shas.append(sha)
        parent = sha
    code, _, err = board(capsys, "hf://datasets/me/h@main/t", "--out", tmp_path / "site")
    assert code == 0, err
    data = json.loads((tmp_path / "site" / "board.json").read_text())
    rows = {r["name"]: r for r in data["tracks"][0]["rows"]}
    assert [p["commit"] for p in rows["a"]["history"]] == shas
    assert [p["value"] for p in rows["a"]["history"]] == [psnr_mean(s) for s in summaries]
    assert [p["commit"] for p in rows["b"]["history"]] == [shas[0]]  # b did not change after its first commit
    listings = [path for method, path, *_ in hub.log if method == "GET" and "/commits/" in path]
    assert len(listings) == 1, listings  # one commit listing for the revision, shared by its runs
    page = (tmp_path / "site" / "t" / "index.html").read_text()
    assert "<b>bold" not in page and "&lt;b&gt;bold&lt;/b&gt;" in page


def test_newest_points_only(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    repo = init(tmp_path / "repo")
    parents: list[str] = []
    for k in range(MAX_POINTS + 3):
        put_files(repo, "results/t/m", run_files(tmp_path / "w", "m", 0.1 * k))
        parents = [raw_commit(repo, f"c{k}".encode(), parents, when=1_790_000_000 + k)]
    git(repo, "checkout", "-q", "-f", "main")
    code, _, err = board(capsys, repo / "results", "--out", tmp_path / "site")
    assert code == 0, err
    (row,) = json.loads((tmp_path / "site" / "board.json").read_text())["tracks"][0]["rows"]
    newest = git(repo, "rev-list", "--reverse", "HEAD").split()[-MAX_POINTS:]
    assert [p["commit"] for p in row["history"]] == newest


@pytest.mark.skipif(not HAS_CHROMIUM, reason="chromium is not installed")
def test_sparkline_in_headless_chromium(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    repo, shas = git_board_repo(tmp_path)
    assert board(capsys, repo / "results", "--out", tmp_path / "site")[0] == 0
    dom = chromium("--dump-dom", (tmp_path / "site" / "t" / "index.html").as_uri())
    parsed = Elements()
    parsed.feed(dom)
    assert "script" not in parsed.tags and "img" not in parsed.tags  # none came from the commit subject
    assert parsed.tags.count("svg") == 2 and parsed.tags.count("title") == 3  # the page's and one per sparkline
    text = "".join(parsed.text)
    assert "<script>alert(1)</script><img src=x onerror=alert(2)>" in text  # shown literally
    assert all(sha[:7] in text for sha in shas)


def test_hostile_commit_listing_costs_one_bounded_failure(hub, tmp_path, capsys, monkeypatch):
    """The runs pull, then the commit listing floods pages: every row is shown without history, the failure asked
    once for the revision (shared by its runs), in bounded time."""
    import time

    monkeypatch.setenv("PSTBENCH_HUB_MAX_LISTING", "50")
    monkeypatch.setenv("PSTBENCH_HUB_DEADLINE", "0.5")
    files = {
        f"t/{name}/{f}": data
        for k, name in enumerate("abcdef")
        for f, data in run_files(tmp_path / "w", name, 0.3 * k).items()
    }
    hub.add_commit("me/h", "a" * 40, files, refs=["main"], lfs=False)
    hub.hostile, hub.hostile_paths = "floods-pages", {"/commits/"}
    start = time.monotonic()
    code, _, err = board(capsys, "hf://datasets/me/h@main/t", "--out", tmp_path / "site")
    took = time.monotonic() - start
    assert code == 0, err
    rows = json.loads((tmp_path / "site" / "board.json").read_text())["tracks"][0]["rows"]
    assert len(rows) == 6 and all(r["history"] is None for r in rows)
    listings = [path for method, path, *_ in hub.log if method == "GET" and "/commits/" in path]
    assert 0 < len(listings) <= 51  # one capped listing (50 pages at most), not one per run
    assert took < 30
