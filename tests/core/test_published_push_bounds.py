"""Issue #44 (leftover): a push's replies that huggingface_hub reads itself (create_repo, the preupload and the commit
of create_commit) had only per-read timeouts: a reply dripped byte by byte, or followed by megabytes of spaces, was
read whole. Every push request now keeps the Hub client's deadline (PSTBENCH_HUB_DEADLINE) and byte cap. The push
runs in a subprocess with a time limit (tests/core/test_published_hostile_server.py does the same for pulls), so that a
client without the bounds fails the test instead of hanging it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import helpers.hub_server as hub_server
import pytest
from helpers.hub_server import FakeHub, point_at

SHA = "2" * 40
TOKEN = "hf_pstbenchPUSHbounds0123456789abc"
LIMITS = {"PSTBENCH_HUB_DEADLINE": "1", "PSTBENCH_NETWORK_TIMEOUT": "0.5", "PSTBENCH_HUB_MAX_LISTING": "50"}
STEPS = {"/preupload/": "committing to main", "/commit/": "committing to main", "/repos/create": "creating the repo"}


@pytest.fixture
def hub(tmp_path, monkeypatch):
    h = FakeHub().start()
    point_at(h, tmp_path, monkeypatch)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    for name, value in LIMITS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(hub_server, "FLOOD_BYTES", 32 << 20)  # 32 MB after the JSON: far past the cap, quick to send
    h.add_commit("me/board", SHA, {"README.md": b"board\n"}, refs=["main"], lfs=False)
    h.tokens.add(TOKEN)
    (tmp_path / "run").mkdir()
    for name, text in {"run.json": '{"name": "a"}\n', "summary.json": "{}\n", "metrics.csv": "item\n"}.items():
        (tmp_path / "run" / name).write_text(text)
    yield h
    h.hostile = None
    h.stop()


def push(tmp_path, target: str, create: bool = False, limit: float = 30) -> tuple[int, str, float]:
    """`push_files` of the three files in tmp_path/run to `target`, in a subprocess: (exit status, stderr, seconds)."""
    code = (
        "import sys\nfrom pathlib import Path\nfrom pytest_pstbench.core.errors import UserError\n"
        "from pytest_pstbench.core.store.published.push import push_files, push_target\n"
        f"files = sorted(Path({str(tmp_path / 'run')!r}).iterdir())\n"
        f"try:\n    push_files(push_target({target!r}), {target!r}, files, described='a run', create={create})\n"
        "except UserError as exc:\n    sys.exit(f'pstbench: error: {exc}')\n"
    )
    t0 = time.monotonic()
    try:
        r = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=limit, env=dict(os.environ)
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"push to {target} still running after {limit} s")
    return r.returncode, r.stderr, time.monotonic() - t0


@pytest.mark.parametrize("how", ["drips", "floods-body"])
@pytest.mark.parametrize("step", list(STEPS))
def test_every_push_reply_keeps_the_deadline_and_the_cap(hub, tmp_path, step, how):
    """Issue #44 leftover: create_repo, preupload and commit replies dripped (a 1 s deadline: ~10 s before) or
    flooded (32 MB read whole before) end in one line naming the limit's variable, within the deadline."""
    hub.hostile, hub.hostile_paths = how, {step}
    target = "hf://datasets/me/fresh/runs/a" if step == "/repos/create" else "hf://datasets/me/board/runs/a"
    code, err, took = push(tmp_path, target, create=step == "/repos/create")
    lines = [ln for ln in err.splitlines() if ln.startswith("pstbench: error:")]
    assert code != 0 and len(lines) == 1 and "Traceback" not in err and TOKEN not in err, err
    var = "PSTBENCH_HUB_DEADLINE" if how == "drips" else "PSTBENCH_HUB_MAX_LISTING"
    assert var in lines[0] and STEPS[step] in lines[0] and took < 8, (took, err)
    if step == "/commit/":  # the commit's answer was not read: whether it was made is not known, and it says so
        assert "may have made the commit" in lines[0], lines[0]
    elif step == "/preupload/":
        assert hub.commits_made == [] and "the Hub made no commit" in lines[0], lines[0]
