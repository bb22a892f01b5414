"""A Hub that answers slowly, endlessly or wrongly (issue #44, items 12-17), against the local server of
tests/hub_server.py: every download has a byte cap and a deadline, every listing a cap on pages, entries
and time; a damaged reply, a branch named like a commit, another mirror, no network and a token that no
HTTP header can carry each end in one line. The pulls that must fail run in a subprocess with a time limit,
so that a client without the caps fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from helpers.hub_server import FakeHub, point_at

SHA = "1" * 40
URI = f"hf://datasets/me/board@{SHA}/t/a"
TOKEN = "hf_pstbenchHOSTILEtoken0123456789"


def run_files(tag: str, size: int = 0) -> dict[str, bytes]:
    """What a run folder's files look like to the Hub (their content is never read by these tests' pulls)."""
    run = json.dumps({"name": tag, "pad": "x" * size}).encode()
    return {
        "run.json": run,
        "summary.json": b'{"tag": "%s"}' % tag.encode(),
        "metrics.csv": b"item,psnr\n1,%d\n" % len(tag),
    }


def publish(
    hub: FakeHub, sha: str = SHA, files: dict[str, bytes] | None = None, refs=("main",), **kwargs
) -> dict[str, bytes]:
    files = files if files is not None else {f"t/a/{n}": d for n, d in run_files("a").items()}
    hub.add_commit("me/board", sha, files, refs=refs, lfs=False, **kwargs)
    return files


@pytest.fixture
def hub(tmp_path, monkeypatch):
    h = FakeHub().start()
    point_at(h, tmp_path, monkeypatch)
    monkeypatch.delenv("HF_TOKEN", raising=False)  # and no token file: HF_HOME is this test's
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    for name in (
        "PSTBENCH_HUB_MAX_FILE_BYTES",
        "PSTBENCH_HUB_DEADLINE",
        "PSTBENCH_HUB_MAX_LISTING",
        "PSTBENCH_NETWORK_TIMEOUT",
    ):
        monkeypatch.delenv(name, raising=False)
    yield h
    h.stop()


def pstbench(*args: str, limit: float = 60) -> tuple[int, str, str, float]:
    """`pstbench ARGS` in a subprocess (this process's environment) -> (exit status, stdout, stderr, seconds);
    a command still running after `limit` seconds fails the test."""
    t0 = time.monotonic()
    try:
        r = subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from pytest_pstbench.cli import main; sys.exit(main(sys.argv[1:]))",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=limit,
            env=dict(os.environ),
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"pstbench {' '.join(args)} was still running after {limit} s")
    return r.returncode, r.stdout, r.stderr, time.monotonic() - t0


def one_line(err: str) -> bool:
    """The command failed with one error line (progress lines aside), no traceback."""
    return len([ln for ln in err.splitlines() if ln.startswith("pstbench: error:")]) == 1 and "Traceback" not in err


def pull(uri: str):
    """The core pull without the run check (the runs here are not real runs): what the cache serves."""
    from pytest_pstbench.core.store.published.pull import pull as pull_published

    return pull_published(uri, check_run=lambda folder, run_uri, protocol_spec: None)


# ---- 12: caps and deadlines ------------------------------------------------------------------------------
def test_a_body_larger_than_listed_is_stopped_at_the_listed_size(hub):
    publish(hub)
    hub.corrupt["t/a/run.json"] = b" " * 30_000_000  # listed at a few bytes, served as 30 MB
    code, out, err, took = pstbench("runs", "pull", URI)
    assert code == 2 and out == "" and one_line(err), err
    assert (
        "bytes the Hub's listing gives for it while downloading t/a/run.json" in err
        and "PSTBENCH_HUB_MAX_FILE_BYTES" in err
    )
    assert "Traceback" not in err and took < 30


def test_an_endless_listing_stops_at_the_page_cap_or_the_deadline(hub, monkeypatch):
    publish(hub)
    hub.endless.add("me/board")
    monkeypatch.setenv("PSTBENCH_HUB_MAX_LISTING", "200")  # 200 entries, 30 pages
    code, out, err, took = pstbench("runs", "pull", URI)
    assert code == 2 and one_line(err) and "past 30 pages" in err and "PSTBENCH_HUB_MAX_LISTING" in err, err
    monkeypatch.setenv("PSTBENCH_HUB_MAX_LISTING", "100000")
    monkeypatch.setenv("PSTBENCH_HUB_DEADLINE", "1")
    code, out, err, took = pstbench("runs", "pull", URI)
    assert code == 2 and one_line(err) and "listing took longer than 1 s" in err and "PSTBENCH_HUB_DEADLINE" in err, err
    assert took < 30


def test_a_dripped_or_huge_listing_page_stops_at_the_deadline_or_the_page_cap(hub, monkeypatch):
    publish(hub)
    tree = f"/api/datasets/me/board/tree/{SHA}/t/a"
    entry = {"type": "file", "path": "t/a/x.txt", "size": 1, "oid": "a" * 40}
    hub.replies[tree] = json.dumps([entry] * 100).encode()
    hub.drip[tree] = 0.01  # 5,000 bytes, 50 s
    monkeypatch.setenv("PSTBENCH_NETWORK_TIMEOUT", "3")
    monkeypatch.setenv("PSTBENCH_HUB_DEADLINE", "1")
    code, _, err, took = pstbench("runs", "pull", URI, limit=30)
    assert code == 2 and one_line(err) and "listing took longer than 1 s" in err and "PSTBENCH_HUB_DEADLINE" in err, err
    assert took < 20
    del hub.drip[tree]
    monkeypatch.delenv("PSTBENCH_HUB_DEADLINE")
    monkeypatch.setenv("PSTBENCH_HUB_MAX_LISTING", "4")  # 4 kB a page
    code, _, err, _ = pstbench("runs", "pull", URI)
    assert code == 2 and one_line(err) and "a page of the Hub's listing is larger than 4096 bytes" in err, err


def test_an_entry_cap_holds_on_full_pages(hub, monkeypatch):
    hub.page_size = 50
    publish(
        hub,
        files={f"t/a/{i:04d}.txt": b"%d" % i for i in range(300)} | {f"t/a/{n}": d for n, d in run_files("a").items()},
    )
    monkeypatch.setenv("PSTBENCH_HUB_MAX_LISTING", "120")
    code, _, err, _ = pstbench("runs", "pull", URI)
    assert code == 2 and one_line(err) and "more than 120 entries" in err and "PSTBENCH_HUB_MAX_LISTING" in err, err


def test_a_dripped_download_stops_at_the_deadline(hub, monkeypatch):
    publish(hub, files={f"t/a/{n}": d for n, d in run_files("a", size=3000).items()})
    hub.drip["t/a/run.json"] = 0.02  # a byte every 20 ms: a minute for the file, each read well within the timeout
    monkeypatch.setenv("PSTBENCH_NETWORK_TIMEOUT", "3")
    monkeypatch.setenv("PSTBENCH_HUB_DEADLINE", "1")
    code, out, err, took = pstbench("runs", "pull", URI, limit=30)
    assert code == 2 and one_line(err), err
    assert "downloading t/a/run.json took longer than" in err and "PSTBENCH_HUB_DEADLINE" in err and took < 20


@pytest.mark.parametrize(
    "name, value",
    [("PSTBENCH_HUB_DEADLINE", "soon"), ("PSTBENCH_HUB_MAX_LISTING", "-3"), ("PSTBENCH_HUB_MAX_LISTING", "1.5")],
)
def test_a_bad_limit_is_one_line(hub, monkeypatch, name, value):
    publish(hub)
    monkeypatch.setenv(name, value)
    code, _, err, _ = pstbench("runs", "pull", URI)
    assert code == 2 and one_line(err) and f"{name}={value!r}" in err and "fix:" in err, err


# ---- 13: damaged replies -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "path, body, what",
    [
        ("/api/datasets/me/board/revision/main", b"<html>busy</html>", "its body is not JSON"),
        ("/api/datasets/me/board/revision/main", b"[1, 2]", "wrong type"),
        (f"/api/datasets/me/board/tree/{SHA}/t", b"not json", "its body is not JSON"),
        (f"/api/datasets/me/board/tree/{SHA}/t", b'{"error": "nope"}', "not a list"),
        (
            f"/api/datasets/me/board/tree/{SHA}/t",
            json.dumps([{"type": "file", "path": "t/a/run.json", "size": "big", "oid": "a" * 40}]).encode(),
            "without a size in bytes",
        ),
        (
            f"/api/datasets/me/board/tree/{SHA}/t",
            json.dumps([{"type": "file", "path": "t/a/run.json"}]).encode(),
            "without a size in bytes",
        ),
        (
            f"/api/datasets/me/board/tree/{SHA}/t",
            json.dumps(
                [{"type": "file", "path": "t/a/run.json", "size": 3, "oid": "a" * 40, "lfs": {"oid": 7}}]
            ).encode(),
            "without a sha256",
        ),
        (f"/api/datasets/me/board/tree/{SHA}/t", json.dumps([["t/a/run.json"]]).encode(), "has no path or type"),
    ],
    ids=[
        "revision-not-json",
        "revision-a-list",
        "tree-not-json",
        "tree-a-dict",
        "size-a-string",
        "keys-missing",
        "lfs-without-sha256",
        "entry-a-list",
    ],
)
def test_a_damaged_reply_is_one_line(hub, path, body, what):
    publish(hub)
    hub.replies[path] = body
    uri = "hf://datasets/me/board@main/t" if "/revision/" in path else f"hf://datasets/me/board@{SHA}/t"
    code, out, err, _ = pstbench("runs", "pull", uri)
    assert code == 2 and out == "" and one_line(err), err
    assert (
        f"error: {uri}: the Hub at {hub.url} sent a damaged reply while " in err and what in err and "fix: check" in err
    )


# ---- 14: a revision that looks like a commit is that commit -----------------------------------------------
def test_a_branch_named_like_a_commit_is_refused(hub):
    from pytest_pstbench.core.errors import UserError

    publish(hub)
    branch = "c" * 40  # a branch whose name is 40 hex digits, at another commit
    publish(hub, "2" * 40, {f"t/a/{n}": d for n, d in run_files("moved").items()}, refs=(branch,), parent=SHA)
    with pytest.raises(UserError) as info:
        pull(f"hf://datasets/me/board@{branch}/t/a")
    assert f"revision {branch} looks like a commit, but the Hub resolves it to commit {'2' * 40}" in str(info.value)
    assert "\n" not in str(info.value)
    runs = pull(URI).runs  # the commit itself is read
    assert [(r.commit, r.path_in_repo) for r in runs] == [(SHA, "t/a")]


# ---- 15: the cache is keyed by endpoint, and no two paths share a folder -----------------------------------
def test_another_endpoint_is_not_served_what_the_first_sent(hub, monkeypatch):
    first = publish(hub)
    other = FakeHub().start()
    try:
        other.add_commit(
            "me/board", SHA, {f"t/a/{n}": d for n, d in run_files("mirror").items()}, refs=("main",), lfs=False
        )
        run = pull(URI).runs[0]
        assert (run.path / "run.json").read_bytes() == first["t/a/run.json"]
        monkeypatch.setenv("HF_ENDPOINT", other.url)
        run = pull(URI).runs[0]
        assert (run.path / "run.json").read_bytes() == other.repos["me/board"].commits[SHA].files["t/a/run.json"]
        assert other.downloads() and sorted(other.downloads()) == [
            "t/a/metrics.csv",
            "t/a/run.json",
            "t/a/summary.json",
        ]
        hub.log.clear()  # the first Hub spelled another way: its cache, no request
        monkeypatch.setenv("HF_ENDPOINT", hub.url.replace("http://", "HTTP://") + "/")
        run = pull(URI).runs[0]
        assert (run.path / "run.json").read_bytes() == first["t/a/run.json"]
        assert [p for _, p, _ in hub.log if not p.startswith("/api/agent-harnesses")] == []
    finally:
        other.stop()


def test_the_repo_root_and_a_folder_named_at_root_are_two_runs(hub):
    root, at_root = run_files("root"), run_files("at-root")
    publish(hub, files={**root, **{f"@root/{n}": d for n, d in at_root.items()}})
    top = pull(f"hf://datasets/me/board@{SHA}").runs
    assert [r.path_in_repo for r in top] == [""] and (top[0].path / "run.json").read_bytes() == root["run.json"]
    inner = pull(f"hf://datasets/me/board@{SHA}/@root").runs
    assert [r.path_in_repo for r in inner] == ["@root"]
    assert (inner[0].path / "run.json").read_bytes() == at_root["run.json"] and inner[0].path != top[0].path


def test_cache_names_never_collide():
    from pytest_pstbench.core.store.published.cache import cache_name

    paths = ["", "@root", "@@root", "a", "a/@root", "a/@@root", "@a/b", "@@a/b", "root", "a/b"]
    assert len({cache_name(p) for p in paths}) == len(paths)


# ---- 16: no network, a branch that was resolved here before -----------------------------------------------
def test_no_network_says_a_branch_cannot_be_resolved_and_what_works(hub, monkeypatch):
    from pytest_pstbench.core.errors import UserError

    publish(hub)
    branch_uri = "hf://datasets/me/board@main/t/a"
    cached = pull(branch_uri).runs[0]
    hub.hang.add("/")  # the Hub gives no answer at all
    monkeypatch.setenv("PSTBENCH_NETWORK_TIMEOUT", "0.3")
    with pytest.raises(UserError) as info:
        pull(branch_uri)
    msg = str(info.value)
    assert "a branch or tag cannot be resolved without the network" in msg and f"main was commit {SHA}" in msg, msg
    assert f"use the pinned URI {URI}" in msg and "HF_HUB_OFFLINE=1" in msg and "is in the cache" in msg
    assert "not in the cache" not in msg and "\n" not in msg
    assert pull(URI).runs[0].path == cached.path  # the pinned URI reads the cache without the network
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert pull(branch_uri).runs[0].path == cached.path  # offline: the branch as last resolved here


# ---- 17: a token no HTTP header can carry ------------------------------------------------------------------
def test_a_non_ascii_token_is_one_line_in_pull_and_push(hub, monkeypatch, tmp_path):
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.core.store.published.push import push_files, push_target

    publish(hub)
    monkeypatch.setenv("HF_TOKEN", "hf_caf\u00e9" + "x" * 30)
    code, out, err, _ = pstbench("runs", "pull", URI)
    assert (
        code == 2
        and one_line(err)
        and "HF_TOKEN: holds a character that is not printable ASCII (position 7 of 37)" in err
    ), err
    assert "\u00e9" not in err and "hf_caf" not in err
    f = tmp_path / "run.json"
    f.write_bytes(b"{}")
    target = "hf://datasets/me/board/t/b"
    with pytest.raises(UserError) as info:
        push_files(push_target(target), target, [f], described="run b")
    assert str(info.value).startswith("HF_TOKEN: holds a character that is not printable ASCII")
    assert hub.commits_made == []


def test_a_non_ascii_token_is_one_line_in_the_gate(pytester, gated_track, hub, monkeypatch, capsys):
    import re
    import shutil

    from pytest_pstbench.cli import main as cli_main

    s = gated_track
    hub.tokens.add(TOKEN)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert cli_main(["runs", "push", str(s.baseline), "hf://datasets/me/base/small/baseline", "--create"]) == 0
    pinned = re.search(r"^pinned: (\S+)$", capsys.readouterr().out, re.M).group(1)
    shutil.rmtree(os.path.join(os.environ["PSTBENCH_CACHE"], "hub-runs"))  # the gate must pull it
    monkeypatch.setenv("HF_TOKEN", "hf_caf\u00e9" + "x" * 30)
    r = pytester.runpytest_subprocess(
        *s.base, f"--pstbench-outputs={s.good}", "--pstbench-name=cand", f"--pstbench-baseline={pinned}"
    )
    everything = r.stdout.str() + r.stderr.str()
    assert r.ret == pytest.ExitCode.USAGE_ERROR and "INTERNALERROR" not in everything and "Traceback" not in everything
    assert "HF_TOKEN: holds a character that is not printable ASCII" in r.stderr.str()
