"""examples/method-repo: its CI workflow's `run:` steps, run as they are in a temporary copy of the example.

The workflow YAML is parsed and every `run:` step is run with bash, in order, in the copy, with the
workflow's `env:` and a `$GITHUB_OUTPUT` file, exactly as written. Two things differ from CI:

- the track: `PSTBENCH_TRACK` points at a local track (id `pst50-paired`, made from scikit-image
  photographs) instead of the remote PST50 track, so no Hub is needed;
- the `pip install` step is NOT run: it needs the network (it installs pytest-pstbench from its git
  repository). The test checks its form (a git URL at a tag or commit, not the package index) and
  runs the other steps with the pytest-pstbench of this checkout, installed in this virtualenv.

`uses:` steps (checkout, setup-python, cache, upload-artifact) are GitHub actions and not run; the
test checks that the cache key includes the track's revision output by the `track` step. The copy is made a
git repository with the baseline committed (as the README says), as checkout's full clone gives it in CI, for
the `pstbench history` step (issue #41).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import yaml
from helpers.tracks import make_track
from PIL import Image

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "method-repo"


def _local_track(root: Path) -> Path:
    """A local track with id pst50-paired (standing in for the remote one): conftest's photographs, with the
    style made from the same scene (shifted) under the reference's look, as in PST50, so that the example's
    method (Reinhard colour transfer) stays within the example's LPIPS bound."""
    manifest = make_track(
        root, n=8, size=(128, 96), track_id="pst50-paired"
    )  # 8 pairs: enough for a significant Wilcoxon-Holm verdict
    for p in yaml.safe_load(manifest.read_text())["pairs"]:
        ref = np.asarray(Image.open(root / p["reference"]))
        Image.fromarray(np.roll(ref, 13, axis=1)).save(root / p["style"])
    return manifest


def _workflow() -> dict:
    return yaml.safe_load((EXAMPLE / ".github" / "workflows" / "pstbench.yml").read_text())


def _path(tmp_path: Path) -> str:
    """PATH with this interpreter's scripts (pstbench) first, and a `pytest` command running this interpreter's
    pytest (a virtualenv may lack the `pytest` script; CI's pip install provides it)."""
    shim = tmp_path / "bin"
    shim.mkdir(exist_ok=True)
    (shim / "pytest").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pytest "$@"\n')
    (shim / "pytest").chmod(0o755)
    return os.pathsep.join([str(shim), str(Path(sys.executable).parent), os.environ.get("PATH", "")])


def _git(repo: Path, *args: str) -> None:
    ident = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
    }
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env={**os.environ, **ident})


def _bash(cmd: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )


def test_install_step_uses_the_repository_at_a_tag_or_commit():
    wf = _workflow()
    pip = [s["run"] for s in wf["jobs"]["score"]["steps"] if "pip install" in s.get("run", "")]
    assert len(pip) == 1 and '"$PSTBENCH_PIP"' in pip[0]
    spec = wf["env"]["PSTBENCH_PIP"]
    assert re.fullmatch(r"pytest-pstbench @ git\+https://\S+/pytest-pstbench@(v\d+\.\d+\.\d+|[0-9a-f]{40})", spec), spec
    readme = (EXAMPLE / "README.md").read_text()
    assert "git+https://" in readme and "tag or a commit" in readme


def test_workflow_run_steps_in_a_copy_of_the_example(tmp_path):
    repo = tmp_path / "method-repo"
    shutil.copytree(EXAMPLE, repo)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "the example")
    manifest = _local_track(tmp_path / "local-track")  # stands in for the remote pst50-paired
    wf = _workflow()
    steps = wf["jobs"]["score"]["steps"]
    gh_output = tmp_path / "github_output"
    gh_output.touch()
    env = {
        **os.environ,
        **{k: str(v) for k, v in wf.get("env", {}).items()},
        **{k: str(v) for k, v in wf["jobs"]["score"].get("env", {}).items()},
        "PSTBENCH_TRACK": str(manifest),  # the one change: a local track in place of the remote one
        "GITHUB_OUTPUT": str(gh_output),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "step_summary"),
        "PSTBENCH_DATA": str(tmp_path / "data"),
        "PATH": _path(tmp_path),
    }
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)

    # The cache key includes the track's revision (output of the `track` step).
    cache = next(s for s in steps if str(s.get("uses", "")).startswith("actions/cache"))
    assert "steps.track.outputs.revision" in cache["with"]["key"] and "PSTBENCH_TRACK" in cache["with"]["key"]
    assert cache["with"]["path"] == "~/.cache/pstbench"

    # The baseline, made once as the example's README says (its command, with the local track).
    readme = (repo / "README.md").read_text()
    baseline_cmd = next(line for line in readme.splitlines() if line.startswith("pytest -o pstbench_baseline="))
    proc = _bash(f'{baseline_cmd} --pstbench-track="$PSTBENCH_TRACK"', repo, env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (repo / "baseline" / "pst50-paired" / "baseline" / "run.json").is_file()
    git_add = next(line for line in readme.splitlines() if line.startswith("git add baseline/"))
    assert _bash(git_add, repo, env).returncode == 0
    _git(repo, "commit", "-q", "-m", "the baseline")

    ran = []
    for step in steps:
        cmd = step.get("run")
        if cmd is None:
            continue
        if cmd.lstrip().startswith("pip install"):
            continue  # needs the network (git+https); this checkout's pytest-pstbench is installed here instead
        proc = _bash(cmd, repo, env)
        assert proc.returncode == 0, f"step {cmd!r} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        ran.append((cmd, proc))
    assert len(ran) == 5  # revision, weights, data fetch, pytest, history

    from pytest_pstbench.paired.tracks import load_manifest

    assert gh_output.read_text().strip() == f"revision={load_manifest(manifest).revision}"
    assert "not a remote track; nothing to fetch" in ran[2][1].stdout
    pytest_out = ran[3][1].stdout
    print(pytest_out[-4000:])
    run_dir = repo / "results" / "pst50-paired" / "candidate"
    assert (run_dir / "run.json").is_file() and (run_dir / "metrics.csv").is_file()
    junit = ET.parse(repo / "pstbench.xml").getroot()
    suite = junit if junit.tag == "testsuite" else junit.find("testsuite")
    assert int(suite.get("tests")) >= 8 and int(suite.get("failures")) == 0 and int(suite.get("errors")) == 0
    assert "pstbench gate passed" in pytest_out
    # the history of the committed baseline (one commit: one point), its plots uploaded with the run
    assert ran[4][1].stdout.startswith("history: 1 points"), ran[4][1].stdout + ran[4][1].stderr
    assert "history: 1 points" in (tmp_path / "step_summary").read_text()
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert "history/" in upload["with"]["path"].split("\n")
    plots = list((repo / "history").iterdir())
    assert plots and all(p.suffix == ".png" for p in plots), plots
    checkout = next(s for s in steps if str(s.get("uses", "")).startswith("actions/checkout"))
    assert checkout["with"]["fetch-depth"] == 0  # a shallow clone would hold one commit of the baseline's history

    # the same pytest step fails the job when the method gets worse (here: it returns the content unchanged)
    test_method = repo / "test_method.py"
    test_method.write_text(test_method.read_text().replace("return reinhard_lab(content, style)", "return content"))
    proc = _bash(ran[3][0], repo, env)
    assert proc.returncode != 0 and "pstbench gate FAILED" in proc.stdout, proc.stdout[-3000:]


def test_workflow_revision_step_for_the_remote_track(tmp_path):
    """Unchanged PSTBENCH_TRACK: the key holds PST50's pin, known without the network."""
    wf = _workflow()
    step = next(s for s in wf["jobs"]["score"]["steps"] if s.get("id") == "track")
    gh_output = tmp_path / "out"
    env = {
        **os.environ,
        **{k: str(v) for k, v in wf["env"].items()},
        "GITHUB_OUTPUT": str(gh_output),
        "PATH": _path(tmp_path),
    }
    proc = _bash(step["run"], tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    assert gh_output.read_text() == "revision=6ed86e3\n"
