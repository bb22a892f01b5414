"""Issue #41: `pstbench history SOURCE...`: a method's runs over time, from a run folder's git history (read from
git's objects), from a published run path's Hub commits (tests/helpers/hub_server.FakeHub), or runs given in
order; each point's interval as its summary gives it, consecutive points tested with the protocol's paired test,
Holm over every test of the history, protocol changes as breaks, unreadable versions left out and named.

The runs are written by hand in the documented formats (helpers.paired_runs.write_run); the expected p-values
are computed here with scipy.stats.wilcoxon on the same pairs (the protocol's tie threshold, zero_method,
alternative and method) and Holm's step-down by hand.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from helpers.hub_server import FakeHub, point_at
from helpers.paired_runs import PROTOCOL, scores_from, write_run
from scipy.stats import wilcoxon

from pytest_pstbench.cli import main as cli_main

N = 20
RUN = "results/t/m"
rng = np.random.default_rng(7)
BASE = 30.0 + rng.normal(0, 1.0, N)
# (message, psnr per pair, protocol file or None, complete): commit 3 ("faster LUT") plants a step worse by ~1 dB
SERIES = [
    ("first run", BASE + rng.normal(0, 0.01, N), None, True),
    ("refactor", BASE + rng.normal(0, 0.01, N), None, True),
    ("faster LUT", BASE - 1.0 + rng.normal(0, 0.01, N), None, True),
    ("docs", BASE - 1.0 + rng.normal(0, 0.01, N), None, True),
    ("tidy", BASE - 1.0 + rng.normal(0, 0.01, N), None, True),
]


def cli(capsys, *args):
    code = cli_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def git(repo: Path, *args, date: str | None = None) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
        **({"GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": date} if date else {}),
    }
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def put_run(repo: Path, psnr, protocol: Path | None, complete: bool, tmp: Path) -> dict[str, bytes]:
    """Write the run folder RUN in `repo` (replacing it) and return its files."""
    stage = tmp / f"stage-{len(list(tmp.glob('stage-*')))}"
    sha = None
    if protocol is not None:
        import hashlib

        sha = hashlib.sha256(protocol.read_bytes()).hexdigest()
    d = write_run(stage, "m", scores_from({"psnr": np.asarray(psnr)}, N), protocol_sha=sha, complete=complete)
    if protocol is not None:
        run = json.loads((d / "run.json").read_text())
        run["protocol"]["path"] = str(protocol)
        (d / "run.json").write_text(json.dumps(run))
    target = repo / RUN
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(d, target)
    return {f.name: f.read_bytes() for f in sorted(target.iterdir())}


def make_repo(tmp: Path, series) -> tuple[Path, list[tuple[str, str, str, dict]]]:
    """A git repository with one commit per entry of `series` -> (repo, [(sha, date, message, files)])."""
    repo = tmp / "method"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    made = []
    for i, (message, psnr, protocol, complete) in enumerate(series):
        files = put_run(repo, psnr, protocol, complete, tmp)
        (repo / "src.txt").write_text(f"code {i}\n")
        date = (datetime(2026, 11, 1, 12, tzinfo=timezone.utc) + timedelta(days=i)).isoformat()
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", message, date=date)
        made.append((git(repo, "rev-parse", "HEAD").strip(), date, message, files))
    return repo, made


def expected_p(a, b) -> float:
    """The protocol's Wilcoxon test on the tied differences, computed here with scipy directly."""
    cfg = PROTOCOL.comparison
    d = np.asarray(b, float) - np.asarray(a, float)
    d[np.abs(d) < cfg.tie("psnr")] = 0.0
    if not np.any(d):
        return 1.0
    return float(wilcoxon(d, zero_method=cfg.zero_method, alternative=cfg.alternative, method=cfg.method).pvalue)


def holm_by_hand(ps: list[float]) -> list[float]:
    m = len(ps)
    order = sorted(range(m), key=lambda i: ps[i])
    out, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        out[i] = running
    return out


def test_git_history_reports_exactly_the_planted_step(tmp_path, capsys):
    """issue #41: 5 commits of a run folder, commit 3 makes PSNR worse: exactly that step, with its sha, date and
    message, p and p_holm equal to scipy's Wilcoxon and Holm by hand over every test of the history."""
    repo, made = make_repo(tmp_path, SERIES)
    code, out, err = cli(capsys, "history", repo / RUN, "--json")
    assert code == 0, err
    h = json.loads(out)
    assert [p["commit"] for p in h["points"]] == [m[0] for m in made]
    assert [p["message"] for p in h["points"]] == [m[2] for m in made]
    ranked = PROTOCOL.ranked_metrics
    assert h["n_tests"] == 4 * len(ranked)
    # the family: every metric of every step; only psnr moves, the others are all ties (p = 1)
    family = []
    for i in range(1, len(SERIES)):
        for metric in ranked:
            family.append(expected_p(SERIES[i - 1][1], SERIES[i][1]) if metric == "psnr" else 1.0)
    adjusted = holm_by_hand(family)
    (step,) = h["steps"]
    sha, date, message, _ = made[2]
    assert (step["commit"], step["date"], step["message"], step["metric"], step["direction"]) == (
        sha,
        date,
        "faster LUT",
        "psnr",
        "worse",
    )
    k = 1 * len(ranked) + ranked.index("psnr")
    assert step["p"] == pytest.approx(family[k], rel=1e-12)
    assert step["p_holm"] == pytest.approx(adjusted[k], rel=1e-12)
    assert step["mean_diff"] == pytest.approx(float(np.mean(SERIES[2][1] - SERIES[1][1])), rel=1e-9)
    assert h["breaks"] == [] and h["left_out"] == []
    code, text, err = cli(capsys, "history", repo / RUN)
    assert code == 0
    assert f'psnr worse by {abs(step["mean_diff"]):.4g} at {sha[:7]} 2026-11-03 "faster LUT"' in text
    assert text.count(" worse by ") == 1


def _other_protocol(tmp_path: Path) -> Path:
    p = tmp_path / "pstbench-v2.yaml"
    p.write_bytes(PROTOCOL.path.read_bytes() + b"\n# v2: the same rules, another file\n")
    return p


def test_protocol_change_is_a_break_and_an_incomplete_run_is_left_out(tmp_path, capsys):
    """issue #41: a run under another protocol starts a new segment (never tested across); an incomplete run is
    left out and named with its reason; uncommitted changes are ignored and said."""
    v2 = _other_protocol(tmp_path)
    series = [
        *SERIES[:2],
        ("half run", BASE, None, False),
        ("protocol v2", BASE, v2, True),
        ("after", SERIES[1][1], v2, True),
    ]
    repo, made = make_repo(tmp_path, series)
    (repo / RUN / "metrics.csv").write_text("edited, not committed\n")
    code, out, err = cli(capsys, "history", repo / RUN, "--json")
    assert code == 0, err
    h = json.loads(out)
    assert [p["commit"] for p in h["points"]] == [made[0][0], made[1][0], made[3][0], made[4][0]], h["left_out"]
    assert [p["segment"] for p in h["points"]] == [0, 0, 1, 1]
    assert [b["commit"] for b in h["breaks"]] == [made[3][0]] and "protocol.sha256" in h["breaks"][0]["reason"]
    assert [x["commit"] for x in h["left_out"]] == [made[2][0]] and "complete" in h["left_out"][0]["reason"]
    assert h["left_out"][0]["reason"].startswith(f"{repo / RUN}@{made[2][0][:7]}"), h["left_out"]
    assert h["n_tests"] == 2 * len(PROTOCOL.ranked_metrics)  # 1 -> 2 and 4 -> 5, nothing across the break
    assert any("uncommitted changes" in n for n in h["notes"])
    code, text, _ = cli(capsys, "history", repo / RUN)
    assert f"break at {made[3][0][:7]}" in text, text
    assert f"left out {made[2][0][:7]}" in text and "uncommitted" in text


@pytest.fixture
def hub(tmp_path, monkeypatch):
    h = FakeHub().start()
    point_at(h, tmp_path, monkeypatch)
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    yield h
    h.stop()


def test_the_hub_history_gives_the_git_history_and_reads_each_commit_once(tmp_path, capsys, hub):
    """issue #41: the same commits published on the Hub (same shas, dates and messages, plus a commit that changes
    nothing under the path) give the same points and steps; a second call asks the Hub only for the commit list."""
    repo, made = make_repo(tmp_path, SERIES)
    parent = None
    for i, (sha, date, message, files) in enumerate(made):
        extra = {"README.md": f"commit {i}".encode()}
        hub.add_commit(
            "me/board",
            sha,
            {**{f"{RUN}/{n}": b for n, b in files.items()}, **extra},
            refs=("main",),
            lfs=False,
            parent=parent,
            title=message,
            date=date,
        )
        parent = sha
        if i == 1:  # a commit that touches only the README: not a point
            noise = "d" * 40
            hub.add_commit(
                "me/board",
                noise,
                {**{f"{RUN}/{n}": b for n, b in files.items()}, "README.md": b"x"},
                refs=("main",),
                lfs=False,
                parent=parent,
                title="readme",
                date=date,
            )
            parent = noise
    code, out, err = cli(capsys, "history", repo / RUN, "--json")
    assert code == 0, err
    local = json.loads(out)
    code, out, err = cli(capsys, "history", f"hf://datasets/me/board/{RUN}", "--json")
    assert code == 0, err
    remote = json.loads(out)

    def same(h):
        return (
            [(p["commit"], p["date"], p["message"], p["metrics"]) for p in h["points"]],
            [{k: v for k, v in s.items() if k != "source"} for s in h["steps"]],
            h["breaks"],
            h["left_out"],
        )

    assert same(remote) == same(local)
    before = len(hub.log)
    code, out2, err = cli(capsys, "history", f"hf://datasets/me/board/{RUN}", "--json")
    assert code == 0, err
    asked = [p for _m, p, _ in hub.log[before:]]
    assert asked and all("/commits/" in p for p in asked), asked
    assert json.loads(out2) == remote


def test_explicit_series_and_plots(tmp_path, capsys):
    """issue #41: run folders given in order are a series; --plot writes one PNG per metric, replaced whole."""
    root = tmp_path / "runs"
    folders = [
        write_run(root, f"v{i}", scores_from({"psnr": np.asarray(psnr)}, N))
        for i, (_m, psnr, _p, _c) in enumerate(SERIES)
    ]
    code, out, err = cli(capsys, "history", *folders, "--json", "--plot", tmp_path / "plots", "--metric", "psnr")
    assert code == 0, err
    h = json.loads(out)
    assert [s["source"] for s in h["steps"]] == [str(folders[2])]
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == ["psnr.png"]
    assert (tmp_path / "plots" / "psnr.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "args, words",
    [
        (["{tmp}"], "not a run folder inside a git repository"),
        (["hf://nope"], "SOURCE"),
        (["{run}", "{run}", "--metric", "nosuch"], "--metric nosuch"),
        (["{run}", "{run}", "--plot", "{run}"], "--plot"),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, args, words):
    """issue #41: a source that is not a git run folder, a bad URI, an unknown metric, a --plot folder that
    holds other files: one line each, no traceback."""
    run = write_run(tmp_path / "runs", "a", scores_from({"psnr": BASE}, N))
    (tmp_path / "empty").mkdir()
    argv = [a.format(tmp=tmp_path / "empty", run=run) for a in args]
    code, out, err = cli(capsys, "history", *argv)
    assert code != 0
    errors = [ln for ln in err.splitlines() if "error" in ln]
    assert len(errors) == 1 and words in errors[0] and "Traceback" not in err, err


def test_hub_history_names_an_incomplete_run_and_a_deleted_path_and_caches_them(tmp_path, capsys, hub):
    """issue #41: on the Hub, a commit whose run is incomplete and a commit that deletes the run path are left out,
    each named with its reason; the rest of the series is shown; a second call asks only for the commit list."""
    stage = tmp_path / "stage"
    stage.mkdir()
    repo = stage / "r"
    plan = [
        ("ok 1", SERIES[0][1], True),
        ("half", SERIES[0][1] + 0.5, False),
        ("ok 2", SERIES[1][1], True),
        ("deleted", None, True),
        ("ok 3", SERIES[2][1], True),
    ]
    parent, shas = None, []
    for i, (message, psnr, complete) in enumerate(plan):
        files = {} if psnr is None else {f"{RUN}/{n}": b for n, b in put_run(repo, psnr, None, complete, stage).items()}
        sha = f"{i + 1:x}" * 40
        hub.add_commit(
            "me/board",
            sha,
            {**files, "README.md": message.encode()},
            refs=("main",),
            lfs=False,
            parent=parent,
            title=message,
            date=f"2026-10-{i + 1:02d}T00:00:00Z",
        )
        parent = sha
        shas.append(sha)
    code, out, err = cli(capsys, "history", f"hf://datasets/me/board/{RUN}", "--json")
    assert code == 0, err
    h = json.loads(out)
    assert [p["commit"] for p in h["points"]] == [shas[0], shas[2], shas[4]]
    assert [x["commit"] for x in h["left_out"]] == [shas[1], shas[3]]
    assert "complete: false" in h["left_out"][0]["reason"] and "not in this commit" in h["left_out"][1]["reason"]
    before = len(hub.log)
    code, out2, err = cli(capsys, "history", f"hf://datasets/me/board/{RUN}", "--json")
    assert code == 0, err
    asked = [p for _m, p, _ in hub.log[before:]]
    assert asked and all("/commits/" in p for p in asked), asked
    assert json.loads(out2) == h


def test_selection_runs_in_order_are_tested_with_mcnemar(tmp_path, capsys):
    """issue #41 (selection runs): a judge's accuracy per point with its interval, McNemar between consecutive points
    as `compare` makes it, Holm over the whole history: the history's p_holm are compare's over the same tests."""
    from helpers.selection_runs import BAD, GOOD, pattern, score

    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection.compare import compare_two, finish_comparison
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.runs import load_selection_run
    from pytest_pstbench.selection.tracks import resolve_selection_track

    demo = resolve_selection_track("vab-demo")
    protocol = load_protocol("vab")
    params = SelectionParams.of(protocol)
    runs = [
        score(tmp_path, n, demo, params, pattern(seed, rates))
        for n, seed, rates in (("g1", 1, GOOD), ("b1", 2, BAD), ("g2", 3, GOOD))
    ]
    capsys.readouterr()
    code, out, err = cli(capsys, "history", *runs, "--json")
    assert code == 0, err
    h = json.loads(out)
    loaded = [load_selection_run(r) for r in runs]
    rows = compare_two(loaded[0], loaded[1], protocol) + compare_two(loaded[1], loaded[2], protocol)
    comp = finish_comparison(rows, protocol)
    assert h["n_tests"] == len(rows)
    want = sorted(
        (f"{r.metric}.{r.outcome}", r.verdict, r.p_holm) for r in comp.rows if r.verdict in ("worse", "better")
    )
    got = sorted((s["metric"], s["direction"], s["p_holm"]) for s in h["steps"])
    assert got == want and got
    top = h["points"][0]["metrics"]
    assert set(top) == {f"{m}.{o}" for m in params.metrics for o in protocol.data["comparison"]["outcomes"]}
    assert all(v["low"] <= v["mean"] <= v["high"] for v in top.values())


def test_a_force_pushed_branch_gives_the_new_history_and_reuses_the_commits_in_both(tmp_path, capsys, hub):
    """issue #41 (damaged sources: a branch force-pushed between two calls): main is rewritten after its third
    commit to another history; the second call lists the new history's commits only (no commit of the old
    history, cached or not), asks the Hub nothing about the commits both histories share, and reads the new ones."""
    stage = tmp_path / "stage"
    stage.mkdir()
    repo = stage / "r"

    def publish(sha, parent, message, psnr, day):
        files = {f"{RUN}/{n}": b for n, b in put_run(repo, psnr, None, True, stage).items()}
        hub.add_commit(
            "me/board",
            sha,
            {**files, "README.md": message.encode()},
            refs=("main",),
            lfs=False,
            parent=parent,
            title=message,
            date=f"2026-10-{day:02d}T00:00:00Z",
        )

    shared = ["a" * 40, "b" * 40, "c" * 40]
    old, new = ["d" * 40, "e" * 40], ["f" * 40, "0" * 39 + "1"]
    chain = None
    for i, sha in enumerate(shared + old):
        publish(sha, chain, f"old {i}", SERIES[i][1], i + 1)
        chain = sha
    uri = f"hf://datasets/me/board/{RUN}"
    code, out, err = cli(capsys, "history", uri, "--json")
    assert code == 0, err
    first = json.loads(out)
    assert [p["commit"] for p in first["points"]] == shared + old
    assert [s["commit"] for s in first["steps"]] == [shared[2]]  # the planted step ("faster LUT")

    # force-push: main now goes shared[2] -> new[0] -> new[1]; new[0] holds old[0]'s very run (same files)
    publish(new[0], shared[2], "rewritten 0", SERIES[3][1], 10)
    publish(new[1], new[0], "rewritten 1", BASE + 0.5 + rng.normal(0, 0.01, N), 11)
    before = len(hub.log)
    code, out, err = cli(capsys, "history", uri, "--json")
    assert code == 0, err
    second = json.loads(out)
    assert [p["commit"] for p in second["points"]] == shared + new
    assert [p["message"] for p in second["points"]] == ["old 0", "old 1", "old 2", "rewritten 0", "rewritten 1"]
    assert not any(sha in json.dumps(second) for sha in old)
    assert second["left_out"] == [] and second["breaks"] == []
    assert [(s["commit"], s["direction"]) for s in second["steps"]] == [(shared[2], "worse"), (new[1], "better")]
    asked = [p for _m, p, _ in hub.log[before:]]
    assert not [p for p in asked if any(sha in p for sha in shared + old)], asked
    assert all(any(sha in p for p in asked) for sha in new), asked
