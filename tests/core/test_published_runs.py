"""Published runs (issue #31): `pstbench runs push|pull|ls`, and a Hub URI (hf://datasets/OWNER/NAME@REV/PATH)
wherever a run folder is taken (compare, table, report, --pstbench-baseline, the API), against the local
Hub server of tests/helpers/hub_server.py (what huggingface_hub asks it for: tests/helpers/hub_server_notes.md).

The paired runs here are written by hand in the documented formats (helpers.paired_runs.write_run); the gate
tests score a small local track in pytest subprocesses (conftest.gated_track).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers.hub_server import FakeHub, point_at
from helpers.paired_runs import scores_from, write_run
from helpers.tracks import make_outputs

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.store.published.cache import commit_dir

TOKEN = "hf_pstbenchSECRETtoken0123456789"
N = 12


@pytest.fixture
def hub(tmp_path, monkeypatch):
    h = FakeHub().start()
    h.tokens.add(TOKEN)
    point_at(h, tmp_path, monkeypatch)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))  # the pulled runs of this test only
    yield h
    h.stop()


@pytest.fixture
def runs(tmp_path):
    """Paired runs of track t: identity, a (better than identity) and b (a little worse than a on PSNR)."""
    root = tmp_path / "runs"
    identity = write_run(root, "identity", scores_from({"psnr": np.arange(N) - 3.0}, N))
    run = json.loads((identity / "run.json").read_text())
    (identity / "run.json").write_text(json.dumps({**run, "method": {"method": "identity"}}))  # as the kit writes it
    return {
        "identity": identity,
        "a": write_run(root, "a", scores_from({"psnr": np.arange(N) * 1.0}, N)),
        "b": write_run(root, "b", scores_from({"psnr": np.arange(N) - 0.5}, N)),
    }


def cli(capsys, *args) -> tuple[int, str, str]:
    code = cli_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def push(capsys, run_dir, uri, *extra) -> str:
    code, out, err = cli(capsys, "runs", "push", run_dir, uri, *extra)
    assert code == 0, err
    return re.search(r"^pinned: (\S+)$", out, re.M).group(1)


def one_error(err: str) -> bool:
    """The command failed with one line (progress lines on stderr aside), no traceback."""
    return len([ln for ln in err.splitlines() if ln.startswith("pstbench: error:")]) == 1 and "Traceback" not in err


def requests(hub: FakeHub) -> list[str]:
    return [f"{m} {p}" for m, p, _ in hub.log if not p.startswith("/api/agent-harnesses")]


# ---- push -> pull ------------------------------------------------------------------------------------
def test_push_pull_round_trip_is_byte_identical_and_pinned(hub, runs, capsys):
    pinned = push(capsys, runs["a"], "hf://datasets/me/board/t/a", "--create")
    commit = hub.repos["me/board"].refs["main"]
    assert pinned == f"hf://datasets/me/board@{commit}/t/a"
    assert hub.commits_made == [commit]  # one commit for the run folder
    assert sorted(p for p in hub.repos["me/board"].commits[commit].files if p.startswith("t/")) == [
        "t/a/metrics.csv",
        "t/a/run.json",
        "t/a/summary.json",
    ]
    code, out, err = cli(capsys, "runs", "pull", pinned)
    assert code == 0, err
    local = Path(re.search(r"  ->  (.+)$", out, re.M).group(1))
    for name in ("metrics.csv", "run.json", "summary.json"):
        assert (local / name).read_bytes() == (runs["a"] / name).read_bytes()
        assert not os.access(local / name, os.W_OK) or os.geteuid() == 0  # read-only in the cache
    assert f"{commit}" in out and "from the cache" in out  # the push pulled it back already


def test_push_refuses_what_is_not_a_complete_run_and_existing_paths(hub, runs, tmp_path, capsys):
    push(capsys, runs["a"], "hf://datasets/me/board/t/a", "--create")
    head = hub.repos["me/board"].refs["main"]
    code, _, err = cli(capsys, "runs", "push", runs["b"], "hf://datasets/me/board/t/a")
    assert code == 2 and "t/a already exists on main" in err and "--replace" in err and one_error(err)
    assert hub.repos["me/board"].refs["main"] == head
    partial = write_run(tmp_path / "p", "partial", scores_from({}, N), complete=False)
    code, _, err = cli(capsys, "runs", "push", partial, "hf://datasets/me/board/t/p")
    assert code == 2 and "complete: false" in err
    code, _, err = cli(capsys, "runs", "push", tmp_path, "hf://datasets/me/board/t/x")
    assert code == 2 and "not a complete" in err or "run folder not found" in err
    link = tmp_path / "linked"
    shutil.copytree(runs["b"], link)
    (link / "metrics.csv").unlink()
    (link / "metrics.csv").symlink_to(runs["b"] / "metrics.csv")
    code, _, err = cli(capsys, "runs", "push", link, "hf://datasets/me/board/t/l")
    assert code == 2 and "not a plain file" in err
    assert hub.repos["me/board"].refs["main"] == head  # nothing was committed
    # --replace: one commit, the old files gone, the new ones in place
    pinned = push(capsys, runs["b"], "hf://datasets/me/board/t/a", "--replace")
    files = hub.repos["me/board"].commits[hub.repos["me/board"].refs["main"]].files
    assert files["t/a/metrics.csv"] == (runs["b"] / "metrics.csv").read_bytes()
    assert pinned.endswith("/t/a") and len(hub.commits_made) == 2


def test_push_cut_half_way_leaves_no_commit_and_no_token_anywhere(hub, runs, tmp_path, capsys):
    push(capsys, runs["a"], "hf://datasets/me/board/t/a", "--create")
    head = hub.repos["me/board"].refs["main"]
    hub.fail_commit = 1
    hub.echo_auth = True  # the server repeats the Authorization header in its error messages
    code, out, err = cli(capsys, "runs", "push", runs["b"], "hf://datasets/me/board/t/b")
    assert code == 2 and "no commit" in err and one_error(err)
    assert hub.repos["me/board"].refs["main"] == head and len(hub.commits_made) == 1
    code, out2, err2 = cli(capsys, "runs", "pull", "hf://datasets/me/missing@main/t")  # 404 with the header echoed
    assert code == 2 and "not found" in err2
    hub.private.add("me/board")
    code, out3, err3 = cli(capsys, "runs", "ls", "hf://datasets/me/board/t")
    assert code == 0, err3
    everything = out + err + out2 + err2 + out3 + err3
    assert TOKEN not in everything
    for path in tmp_path.rglob("*"):
        if path.is_file() and "hf" not in path.relative_to(tmp_path).parts[:1]:  # huggingface_hub's own home aside
            assert TOKEN.encode() not in path.read_bytes(), path


def test_repo_not_found_or_private_without_a_token_says_which(hub, runs, capsys, monkeypatch):
    push(capsys, runs["a"], "hf://datasets/me/board/t/a", "--create")
    hub.private.add("me/board")
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    code, _, err = cli(capsys, "compare", "hf://datasets/me/board@main/t/a", runs["a"])
    assert code == 2 and one_error(err)
    assert "does not exist, or it is private and no token was found" in err and "hf auth login" in err
    monkeypatch.setenv("HF_TOKEN", "hf_another_token_without_access")
    code, _, err = cli(capsys, "compare", "hf://datasets/me/board@main/t/a", runs["a"])
    assert code == 2 and "private and your token has no access" in err and "hf_another" not in err


# ---- every command that takes a run folder -----------------------------------------------------------
def test_compare_table_report_and_api_read_a_hub_uri_as_the_local_folder(hub, runs, capsys):
    for name, d in runs.items():
        push(capsys, d, f"hf://datasets/me/board/t/{name}", *(["--create"] if name == "identity" else []))
    local = [runs["a"], runs["b"]]
    hubbed = ["hf://datasets/me/board@main/t/a", "hf://datasets/me/board@main/t/b"]
    for extra in ([], ["--json"], ["--fail-on-worse"]):
        l_code, l_out, _ = cli(capsys, "compare", *local, *extra)
        h_code, h_out, _ = cli(capsys, "compare", *hubbed, *extra)
        assert (l_code, l_out) == (h_code, h_out)
    # a leaderboard: table over a Hub folder of runs == table over the same local folders
    l_code, l_table, _ = cli(capsys, "table", runs["identity"], runs["a"], runs["b"], "--format", "json")
    h_code, h_table, _ = cli(capsys, "table", "hf://datasets/me/board@main/t", "--format", "json")
    assert l_code == h_code == 0
    assert json.loads(l_table) == json.loads(h_table)
    import pytest_pstbench as pst

    assert pst.load_run(hubbed[0]).scores == pst.load_run(runs["a"]).scores
    a = pst.compare(baseline=hubbed[0], candidate=hubbed[1])
    b = pst.compare(baseline=runs["a"], candidate=runs["b"])
    assert a.to_json() == b.to_json()
    code, out, err = cli(capsys, "runs", "ls", "hf://datasets/me/board@main/t", "--against", runs["a"])
    assert code == 0, err
    assert re.search(r"^t/b\s+b\s+paired\s+t\s+-\s+pstbench\s+12/12\s+yes$", out, re.M), out
    other = write_run(runs["a"].parent.parent / "o", "other", scores_from({}, N), revision="r2")
    code, out, _ = cli(capsys, "runs", "ls", "hf://datasets/me/board@main/t", "--against", other)
    assert "no: run.json dataset.revision" in out


def test_selection_runs_through_the_hub(hub, capsys, tmp_path):
    from helpers.selection_runs import BAD, GOOD, pattern, score

    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.tracks import resolve_selection_track

    demo, params = resolve_selection_track("vab-demo"), SelectionParams.of(load_protocol("vab"))
    good = score(tmp_path, "good", demo, params, pattern(1, GOOD))
    bad = score(tmp_path, "bad", demo, params, pattern(2, BAD))
    p_good = push(capsys, good, "hf://datasets/me/judges/vab-demo/good", "--create")
    p_bad = push(capsys, bad, "hf://datasets/me/judges/vab-demo/bad")
    local = cli(capsys, "compare", good, bad, "--json")
    remote = cli(capsys, "compare", p_good, p_bad, "--json")
    assert local[0] == remote[0] and json.loads(local[1])["tests"] == json.loads(remote[1])["tests"]
    l_table = cli(capsys, "table", bad, good, "--format", "json")[1]  # a Hub folder lists its runs by path
    h_table = cli(capsys, "table", "hf://datasets/me/judges/vab-demo", "--format", "json")[1]
    assert json.loads(l_table) == json.loads(h_table)


# ---- what a pull checks --------------------------------------------------------------------------------
def _publish(hub: FakeHub, runs: dict, files_extra=None, sha="1" * 40, lfs=False) -> str:
    files = {f"t/{n}/{f.name}": f.read_bytes() for n, d in runs.items() for f in d.iterdir()}
    files.update(files_extra or {})
    hub.add_commit("me/board", sha, files, refs=("main",), lfs=lfs)
    return sha


@pytest.mark.parametrize("lfs", [False, True], ids=["git-blob-id", "lfs-sha256"])
def test_a_tampered_file_is_refused_and_nothing_is_cached(hub, runs, capsys, lfs):
    sha = _publish(hub, runs, lfs=lfs)
    good = (runs["a"] / "metrics.csv").read_bytes()
    hub.corrupt["t/a/metrics.csv"] = good.replace(b"0.5", b"0.6", 1)  # same size, other bytes
    assert len(hub.corrupt["t/a/metrics.csv"]) == len(good)
    code, _, err = cli(capsys, "runs", "pull", f"hf://datasets/me/board@{sha}/t/a")
    assert code == 2 and one_error(err)
    assert (
        ("git_oid" if not lfs else "sha256") in err
        and "do not match the Hub's digests" in err
        and "nothing was cached" in err
    )
    cache = commit_dir("me/board", sha)
    assert not (cache / "t" / "a").exists() and not list(cache.rglob("metrics.csv"))
    del hub.corrupt["t/a/metrics.csv"]
    code, _, err = cli(capsys, "runs", "pull", f"hf://datasets/me/board@{sha}/t/a")
    assert code == 0, err
    # a file changed in the cache is seen at the next use, and fetched again
    target = cache / "t" / "a" / "metrics.csv"
    os.chmod(target, 0o644)
    target.write_bytes(hub.repos["me/board"].commits[sha].files["t/a/metrics.csv"].replace(b"0.5", b"0.7", 1))
    hub.log.clear()
    code, out, err = cli(capsys, "runs", "pull", f"hf://datasets/me/board@{sha}/t/a")
    assert code == 0 and target.read_bytes() == good and any("/resolve/" in r for r in requests(hub))


def test_an_interrupted_pull_leaves_nothing_half_cached(hub, runs, capsys):
    sha = _publish(hub, runs)
    hub.fail_get.add("t/a/summary.json")
    code, _, err = cli(capsys, "runs", "pull", f"hf://datasets/me/board@{sha}/t/a")
    assert code == 2 and one_error(err)
    cache = commit_dir("me/board", sha)
    assert not (cache / "t" / "a").exists() and not [
        p for p in cache.rglob("*") if p.is_file() and "locks" not in str(p)
    ]
    hub.fail_get.clear()
    hub.cut_once.add("t/a/metrics.csv")  # the connection drops half-way: huggingface_hub resumes, the kit verifies
    code, _, err = cli(capsys, "runs", "pull", f"hf://datasets/me/board@{sha}/t/a")
    assert code == 0, err
    assert (cache / "t" / "a" / "metrics.csv").read_bytes() == (runs["a"] / "metrics.csv").read_bytes()


@pytest.mark.parametrize(
    "uri, message",
    [
        ("hf://datasets/me/board@{sha}/t/../t/a", "'..' is not allowed"),
        ("hf://datasets/me/board@{sha}//etc", "an absolute path"),
        ("hf://models/me/board/t/a", "only dataset repos"),
        ("hf://datasets/me/board@{sha}/t/none", "not found in me/board"),
        ("hf://datasets/me/nothere@{sha}/t/a", "dataset repo me/nothere not found"),
        ("hf://datasets/me/board@{other}/t/a", "revision " + "2" * 40 + " not found"),
        ("hf://datasets/me/board@{sha}/big", "larger than the 4096 bytes"),
        ("hf://datasets/me/board@{sha}/dir", "is not a plain file"),
        ("hf://datasets/me/board@{sha}/half", "not a complete run folder on the Hub (missing summary.json"),
        ("hf://datasets/me/board@{sha}/unknown", "no protocol file with that hash"),
        ("hf://datasets/me/board@{sha}/incomplete", "complete: false"),
    ],
)
def test_bad_input_is_one_line(hub, runs, capsys, monkeypatch, uri, message):
    a = runs["a"]
    run = json.loads((a / "run.json").read_text())
    extra = {
        "big/run.json": (a / "run.json").read_bytes(),
        "big/summary.json": (a / "summary.json").read_bytes(),
        "big/metrics.csv": (a / "metrics.csv").read_bytes() + b"#" * 5000,
        "dir/run.json/x": b"{}",
        "half/run.json": (a / "run.json").read_bytes(),
        "half/metrics.csv": b"",
        "unknown/run.json": json.dumps({**run, "protocol": {"id": "mine", "sha256": "f" * 64}}).encode(),
        "unknown/summary.json": (a / "summary.json").read_bytes(),
        "unknown/metrics.csv": (a / "metrics.csv").read_bytes(),
        "incomplete/run.json": json.dumps({**run, "complete": False}).encode(),
        "incomplete/summary.json": json.dumps(
            {**json.loads((a / "summary.json").read_text()), "complete": False}
        ).encode(),
        "incomplete/metrics.csv": (a / "metrics.csv").read_bytes(),
    }
    sha = _publish(hub, runs, extra)
    monkeypatch.setenv("PSTBENCH_HUB_MAX_FILE_BYTES", "4096")
    code, out, err = cli(capsys, "runs", "pull", uri.format(sha=sha, other="2" * 40))
    assert code == 2 and out == "" and one_error(err) and "Traceback" not in err
    assert message in err, err
    cache = commit_dir("me/board", sha).parent.parent.parent
    assert not [p for p in cache.rglob("*") if p.is_file() and ".listings" not in str(p)] if cache.exists() else True


# ---- offline -----------------------------------------------------------------------------------------
def test_offline_with_and_without_the_commit_cached(hub, runs, capsys, monkeypatch):
    sha = _publish(hub, runs)
    uri = f"hf://datasets/me/board@{sha}/t/a"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = cli(capsys, "compare", uri, runs["b"])
    assert code == 2 and one_error(err)
    assert uri in err and f"pstbench runs pull {uri}" in err and "HF_HUB_OFFLINE=1" in err
    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert cli(capsys, "runs", "pull", "hf://datasets/me/board@main/t")[0] == 0
    hub.log.clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    local = cli(capsys, "compare", runs["a"], runs["b"])
    assert cli(capsys, "compare", uri, runs["b"]) == local
    code, out, err = cli(capsys, "compare", "hf://datasets/me/board@main/t/a", runs["b"])  # the branch as last resolved
    assert (code, out) == local[
        :2
    ] and err == f"hf://datasets/me/board@main/t/a: main is commit {sha} (pinned: {uri})\n"
    assert hub.log == []
    monkeypatch.delenv("HF_HUB_OFFLINE")
    hub.hang.add("/")  # no answer from the Hub at all: the cached commit still works
    monkeypatch.setenv("PSTBENCH_NETWORK_TIMEOUT", "0.2")
    assert cli(capsys, "compare", uri, runs["b"]) == local
    other = f"hf://datasets/me/board@{'3' * 40}/t/a"
    code, _, err = cli(capsys, "compare", other, runs["b"])
    assert code == 2 and one_error(err) and ("could not reach" in err or "no answer" in err)
    assert f"pstbench runs pull {other}" in err


# ---- the gate --------------------------------------------------------------------------------------------
def _gate_table(result) -> list[str]:
    lines = result.stdout.lines
    start = next(i for i, ln in enumerate(lines) if ln.startswith("baseline gate"))
    return [ln for ln in lines[start : start + 8] if ln.strip()]


def test_gate_against_a_hub_baseline_is_the_gate_against_the_local_folder(pytester, gated_track, hub, capsys):
    s = gated_track
    pinned = push(capsys, s.baseline, "hf://datasets/me/base/small/baseline", "--create")
    bad = make_outputs(s.manifest, pytester.path / "bad", strength=0.3)
    for outputs, code in ((s.good, pytest.ExitCode.OK), (bad, pytest.ExitCode.TESTS_FAILED)):
        local = pytester.runpytest_subprocess(
            *s.base, f"--pstbench-outputs={outputs}", "--pstbench-name=cand", f"--pstbench-baseline={s.baseline}"
        )
        remote = pytester.runpytest_subprocess(
            *s.base, f"--pstbench-outputs={outputs}", "--pstbench-name=cand", f"--pstbench-baseline={pinned}"
        )
        assert local.ret == remote.ret == code
        assert _gate_table(local) == _gate_table(remote)  # same tests, same p-values
        run = json.loads((pytester.path / "results" / "small" / "cand" / "run.json").read_text())
        commit = pinned.split("@")[1].split("/")[0]
        assert run["baselines"] == [{"uri": pinned, "repo": "me/base", "commit": commit, "path": "small/baseline"}]


def test_a_moved_branch_does_not_move_a_pinned_gate(pytester, gated_track, hub, capsys):
    s = gated_track
    pinned = push(capsys, s.baseline, "hf://datasets/me/base/small/baseline", "--create")
    first = hub.repos["me/base"].refs["main"]
    # main moves: the baseline is replaced by a much better run (the candidate would fail against it)
    best = make_outputs(s.manifest, pytester.path / "best", strength=1.0)
    r = pytester.runpytest_subprocess(*s.base, f"--pstbench-outputs={best}", "--pstbench-name=best")
    r.assert_outcomes(passed=8)
    push(capsys, pytester.path / "results" / "small" / "best", "hf://datasets/me/base/small/baseline", "--replace")
    moved = hub.repos["me/base"].refs["main"]
    assert moved != first
    gate = (*s.base, f"--pstbench-outputs={s.good}", "--pstbench-name=cand")  # the pinned baseline's outputs
    r = pytester.runpytest_subprocess(*gate, f"--pstbench-baseline={pinned}")
    assert r.ret == pytest.ExitCode.OK
    run = json.loads((pytester.path / "results" / "small" / "cand" / "run.json").read_text())
    assert run["baselines"][0]["commit"] == first
    r = pytester.runpytest_subprocess(*gate, "--pstbench-baseline=hf://datasets/me/base@main/small/baseline")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "a gate's baseline must be pinned to a commit" in r.stderr.str() and "Traceback" not in r.stderr.str()
    r = pytester.runpytest_subprocess(
        *gate, "--pstbench-baseline=hf://datasets/me/base@main/small/baseline", "--pstbench-baseline-allow-branch"
    )
    assert r.ret == pytest.ExitCode.TESTS_FAILED  # against the moved branch's run
    run = json.loads((pytester.path / "results" / "small" / "cand" / "run.json").read_text())
    assert run["baselines"][0]["commit"] == moved and run["baselines"][0]["uri"] == pinned.replace(first, moved)
    assert run["baselines"][0]["requested"] == "hf://datasets/me/base@main/small/baseline"


def test_xdist_workers_read_the_baseline_once(pytester, gated_track, hub, capsys):
    s = gated_track
    pinned = push(capsys, s.baseline, "hf://datasets/me/base/small/baseline", "--create")
    shutil.rmtree(Path(os.environ["PSTBENCH_CACHE"]) / "hub-runs")  # a cold cache
    hub.log.clear()
    r = pytester.runpytest_subprocess(
        *s.base, f"--pstbench-outputs={s.good}", "--pstbench-name=cand", f"--pstbench-baseline={pinned}", "-n", "2"
    )
    assert r.ret == pytest.ExitCode.OK
    got = requests(hub)
    assert [x for x in got if x.startswith("GET")] == sorted(set(x for x in got if x.startswith("GET")), key=got.index)
    assert sum("/tree/" in x for x in got) == 1 and sum(x.startswith("GET /datasets/") for x in got) == 3
    hub.log.clear()  # a second gate uses the cache: no network call at all
    r = pytester.runpytest_subprocess(
        *s.base, f"--pstbench-outputs={s.good}", "--pstbench-name=cand", f"--pstbench-baseline={pinned}", "-n", "2"
    )
    assert r.ret == pytest.ExitCode.OK and hub.log == []


def test_update_baseline_refuses_a_published_run(pytester, gated_track, hub, capsys):
    s = gated_track
    pinned = push(capsys, s.baseline, "hf://datasets/me/base/small/baseline", "--create")
    r = pytester.runpytest_subprocess(
        *s.base, f"--pstbench-outputs={s.good}", f"--pstbench-baseline={pinned}", "--pstbench-update-baseline"
    )
    assert r.ret == pytest.ExitCode.USAGE_ERROR and "never replaced in place" in r.stderr.str()


def test_uri_parsing():
    from pytest_pstbench.core.hub.uri import parse_uri

    u = parse_uri("hf://datasets/o/n@refs%2Fpr%2F1/a/b")
    assert (u.repo_id, u.revision, u.path) == ("o/n", "refs/pr/1", "a/b")
    assert parse_uri("hf://datasets/o/n").path == "" and parse_uri("hf://datasets/o/n").revision is None
    assert parse_uri("hf://datasets/o/n@" + "a" * 40 + "/x/").pinned
    for bad in ("hf://datasets/o", "hf://datasets/o/n@/x", "hf://datasets/o/n/a\\b", "hf://datasets/o/../n/x"):
        with pytest.raises(UserError):
            parse_uri(bad)


def test_report_reads_published_runs(hub, tmp_path, capsys):
    from helpers.protocols import protocol_without_lpips
    from helpers.tracks import make_track

    manifest = make_track(tmp_path / "track", n=4)
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    local = []
    for name, strength in (("alpha", 0.3), ("beta", 0.7)):
        out = make_outputs(manifest, tmp_path / "outs" / name, strength=strength)
        assert (
            cli_main(
                [
                    "score",
                    "--track",
                    str(manifest),
                    "--outputs",
                    str(out),
                    "--name",
                    name,
                    "--results",
                    str(tmp_path / "results"),
                    "--protocol",
                    str(proto),
                    "--no-cache",
                ]
            )
            == 0
        )
        local.append(tmp_path / "results" / "small" / name)
        push(capsys, local[-1], f"hf://datasets/me/rep/small/{name}", *(["--create"] if name == "alpha" else []))
    capsys.readouterr()
    code, _, err = cli(capsys, "report", *local, "--out", tmp_path / "local-report", "--track", manifest)
    assert code == 0, err
    code, _, err = cli(
        capsys, "report", "hf://datasets/me/rep@main/small", "--out", tmp_path / "hub-report", "--track", manifest
    )
    assert code == 0, err
    figures = sorted(p.name for p in (tmp_path / "local-report" / "figures").iterdir())
    assert figures and figures == sorted(p.name for p in (tmp_path / "hub-report" / "figures").iterdir())
    page = (tmp_path / "hub-report" / "index.html").read_text()
    assert "alpha" in page and "beta" in page


def test_push_without_a_token_or_to_a_commit_or_without_a_path(hub, runs, capsys, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    code, _, err = cli(capsys, "runs", "push", runs["a"], "hf://datasets/me/board/t/a", "--create")
    assert code == 2 and one_error(err) and "no Hugging Face token found" in err and "hf auth login" in err
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    code, _, err = cli(capsys, "runs", "push", runs["a"], f"hf://datasets/me/board@{'a' * 40}/t/a")
    assert code == 2 and one_error(err) and "names a commit" in err
    code, _, err = cli(capsys, "runs", "push", runs["a"], "hf://datasets/me/board")
    assert code == 2 and one_error(err) and "no folder in the repo" in err
    code, _, err = cli(capsys, "runs", "push", runs["a"], "hf://datasets/me/board/t/a")
    assert code == 2 and one_error(err) and "not found" in err and "--create" in err
    assert hub.log == [] or all("/api/repos/create" not in p for _, p, _ in hub.log)
