"""examples/method-repo/.github/workflows/pstbench-hub.yml: its `run:` steps, run as they are in a temporary
copy of the example, against the local Hub server (tests/helpers/hub_server.py): the release job publishes a
baseline run, the board job rebuilds the leaderboard from the published path (the site GitHub Pages deploys), the
pull-request job gates on the pinned URI it printed.

As in tests/project/test_example_ci_workflow.py: PSTBENCH_TRACK points at a local track with id pst50-paired,
and the `pip install` step is not run. Two more things stand in for GitHub: the `${{ secrets.HF_TOKEN }}` and
`${{ github.ref_name }}` of a step's `env:` are given values, and PSTBENCH_BASELINE is set to the pinned URI
the publish job printed (as a maintainer pastes it into the workflow), PSTBENCH_PUBLISH to the local Hub's repo.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import yaml
from helpers.hub_server import FakeHub
from test_example_ci_workflow import EXAMPLE, _bash, _local_track, _path

TOKEN = "hf_exampleWORKFLOWsecret987654321"
WORKFLOW = EXAMPLE / ".github" / "workflows" / "pstbench-hub.yml"


def _steps(wf: dict, job: str) -> list[dict]:
    return [s for s in wf["jobs"][job]["steps"] if "run" in s and not s["run"].lstrip().startswith("pip install")]


def _step_env(step: dict) -> dict:
    values = {"${{ secrets.HF_TOKEN }}": TOKEN, "${{ github.ref_name }}": "v0.2.0"}
    return {k: values.get(str(v), str(v)) for k, v in (step.get("env") or {}).items()}


def test_workflow_pins_the_baseline_and_publishes_to_a_branch():
    wf = yaml.safe_load(WORKFLOW.read_text())
    assert re.fullmatch(r"hf://datasets/OWNER/[\w.-]+@[0-9a-f]{40}/\S+", wf["env"]["PSTBENCH_BASELINE"])
    assert "@" not in wf["env"]["PSTBENCH_PUBLISH"]
    gate = " ".join(s["run"] for s in _steps(wf, "gate"))
    assert '--pstbench-baseline="$PSTBENCH_BASELINE"' in gate and "allow-branch" not in gate
    cache = next(s for s in wf["jobs"]["gate"]["steps"] if str(s.get("uses", "")).startswith("actions/cache"))
    assert "PSTBENCH_BASELINE" in cache["with"]["key"]
    assert any("secrets.HF_TOKEN" in str(s.get("env", {})) for s in wf["jobs"]["publish"]["steps"])
    # the board: after the push, built from the published track path, uploaded as the Pages artifact and deployed
    board = wf["jobs"]["board"]
    assert board["needs"] == "publish" and board["permissions"] == {"pages": "write", "id-token": "write"}
    assert wf["env"]["PSTBENCH_PUBLISH"].startswith(wf["env"]["PSTBENCH_BOARD"].replace("@main", "") + "/")
    run = next(s["run"] for s in _steps(wf, "board"))
    out = re.search(r"--out (\S+)", run).group(1)
    uses = {str(s.get("uses", "")).split("@")[0]: s for s in board["steps"]}
    assert uses["actions/upload-pages-artifact"]["with"]["path"] == out and "actions/deploy-pages" in uses
    assert not any("HF_TOKEN" in str(s.get("env", {})) for s in board["steps"])  # reads public runs only


def test_publish_then_gate_against_the_local_hub(tmp_path):
    hub = FakeHub().start()
    hub.tokens.add(TOKEN)
    try:
        _run(tmp_path, hub)
    finally:
        hub.stop()


def _run(tmp_path: Path, hub: FakeHub) -> None:
    repo = tmp_path / "method-repo"
    shutil.copytree(EXAMPLE, repo)
    manifest = _local_track(tmp_path / "local-track")
    wf = yaml.safe_load(WORKFLOW.read_text())
    summary = tmp_path / "step-summary.md"
    env = {
        **os.environ,
        **{k: str(v) for k, v in wf["env"].items()},
        "PSTBENCH_TRACK": str(manifest),
        "PSTBENCH_PUBLISH": wf["env"]["PSTBENCH_PUBLISH"].replace("OWNER", "me"),
        "PSTBENCH_BOARD": wf["env"]["PSTBENCH_BOARD"].replace("OWNER", "me"),
        "PSTBENCH_CACHE": str(tmp_path / "cache"),
        "GITHUB_OUTPUT": str(tmp_path / "github_output"),
        "GITHUB_STEP_SUMMARY": str(summary),
        "PSTBENCH_DATA": str(tmp_path / "data"),
        "HF_ENDPOINT": hub.url,
        "HF_HOME": str(tmp_path / "hf"),
        "PATH": _path(tmp_path),
    }
    for key in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "HF_TOKEN", "HF_HUB_OFFLINE"):
        env.pop(key, None)

    # the release job: score, publish (one commit), the pinned URI in the job summary
    for step in _steps(wf, "publish"):
        proc = _bash(step["run"], repo, {**env, **_step_env(step)})
        assert proc.returncode == 0, f"step {step['run']!r} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert len(hub.commits_made) == 1
    commit = hub.commits_made[0]
    pinned = f"hf://datasets/me/pstbench-baselines@{commit}/pst50-paired/baseline"
    assert f"pinned: {pinned}" in (repo / "push.txt").read_text() and f"pinned: {pinned}" in summary.read_text()
    files = hub.repos["me/pstbench-baselines"].commits[commit].files
    local = repo / "results" / "pst50-paired" / "baseline"
    assert {p: files[p] for p in files if p.startswith("pst50-paired/")} == {
        f"pst50-paired/baseline/{n}": (local / n).read_bytes() for n in ("metrics.csv", "run.json", "summary.json")
    }

    # the board job: the site from the published path, the baseline's row pinned to the commit, its history one point
    for step in _steps(wf, "board"):
        proc = _bash(step["run"], repo, {**env, **_step_env(step)})
        assert proc.returncode == 0, f"step {step['run']!r} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    board = json.loads((repo / "site" / "board.json").read_text())
    (row,) = board["tracks"][0]["rows"]
    assert row["name"] == "baseline" and row["provenance"]["uri"] == pinned
    assert [p["commit"] for p in row["history"]] == [commit]
    assert (repo / "site" / board["tracks"][0]["folder"] / "index.html").is_file()

    # the pull-request job, on the pinned URI
    env["PSTBENCH_BASELINE"] = pinned
    ran = []
    for step in _steps(wf, "gate"):
        proc = _bash(step["run"], repo, {**env, **_step_env(step)})
        assert proc.returncode == 0, f"step {step['run']!r} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        ran.append((step["run"], proc))
    out = ran[-1][1].stdout
    assert "pstbench gate passed" in out and f"baseline {pinned}: published run at commit {commit}" in out, out[-3000:]
    run = json.loads((repo / "results" / "pst50-paired" / "candidate" / "run.json").read_text())
    assert run["baselines"] == [
        {"uri": pinned, "repo": "me/pstbench-baselines", "commit": commit, "path": "pst50-paired/baseline"}
    ]
    # a worse method fails the same step
    test_method = repo / "test_method.py"
    test_method.write_text(test_method.read_text().replace("return reinhard_lab(content, style)", "return content"))
    proc = _bash(ran[-1][0], repo, env)
    assert proc.returncode != 0 and "pstbench gate FAILED" in proc.stdout, proc.stdout[-3000:]
    for path in [*repo.rglob("*"), summary]:
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
