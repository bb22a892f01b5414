"""Time and memory of `pstbench history` over a 200-commit history (issue #41), cold and cached.

A small local track (scikit-image photographs, tests/helpers/tracks.py) is scored once in this process with
`pstbench score` for 4 method outputs (4 distinct, complete runs); a git repository made in a temporary
folder gets N commits (default 200) of the run folder `results/small/m`, the 4 runs committed in rotation
(each commit changes the run, so every commit is a point and 199 steps x 4 metrics are tested). The same
commits (same shas, dates and messages) are published on the local Hub server of tests/helpers/hub_server.py
(127.0.0.1). Each command runs in a fresh process, as a user runs it; its wall and CPU seconds (git's included:
the wall time of a shared machine is mostly waiting) and peak RSS are printed.
The peak RSS is the process's own high-water mark (VmHWM of /proc/self/status, read as it exits), not wait4's
ru_maxrss: Linux records in a child's ru_maxrss the RSS of the memory it had before exec, which is this
script's (torch and the scored runs: ~740 MiB), so every child read as big as the benchmark itself:

- git, 1st / 2nd call: `pstbench history RUN_DIR` (read from git's objects; nothing to cache);
- Hub, cold / cached: `pstbench history hf://datasets/bench/method/results/small/m` with an empty run cache,
  then again (only the commit listing is asked for; the request count is printed).

`--commits N` also gives the memory's growth with N (run it with a few values). Run:
``PYTHONPATH=. python benchmarks/bench_history.py [--commits N]``
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from _common import seeded_cache

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

RUN = "results/small/m"


def scored_runs(tmp: Path, k: int = 4) -> list[Path]:
    """`k` complete runs of one method on a small local track, scored in this process."""
    from helpers.tracks import make_outputs, make_track

    from pytest_pstbench.cli import main as cli

    manifest = make_track(tmp / "track", n=8)
    runs = []
    for i in range(k):
        outputs = make_outputs(manifest, tmp / f"outputs-{i}", strength=0.3 + 0.15 * i)
        results = tmp / f"scored-{i}"
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = cli(
                ["score", "--track", str(manifest), "--outputs", str(outputs), "--name", "m", "--results", str(results)]
            )
        assert code == 0, f"scoring run {i} failed"
        runs.append(results / "small" / "m")
    return runs


def git(repo: Path, *args: str, date: str | None = None) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@example.org",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@example.org",
        **({"GIT_COMMITTER_DATE": date, "GIT_AUTHOR_DATE": date} if date else {}),
    }
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def make_repo(tmp: Path, runs: list[Path], n: int) -> tuple[Path, list[tuple[str, str, str, dict]]]:
    """A git repository with `n` commits of RUN, the runs in rotation -> (repo, [(sha, date, message, files)])."""
    repo = tmp / "method"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    made = []
    for i in range(n):
        target = repo / RUN
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(runs[i % len(runs)], target)
        (repo / "src.txt").write_text(f"code {i}\n")
        date = (datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(hours=i)).isoformat()
        message = f"change {i}"
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", message, date=date)
        files = {f"{RUN}/{f.name}": f.read_bytes() for f in sorted(target.iterdir())}
        made.append((git(repo, "rev-parse", "HEAD").strip(), date, message, files))
    return repo, made


# `pstbench ARGS` as `python -m pytest_pstbench.cli` runs it; then into argv[1] the process's own peak RSS (VmHWM,
# kB) and its CPU seconds (its git children's included)
_CHILD = """import os, sys
from pytest_pstbench.cli import main
try:
    code = main(sys.argv[2:])
finally:
    with open("/proc/self/status") as fh:
        hwm = [ln.split()[1] for ln in fh if ln.startswith("VmHWM:")][0]
    t = os.times()
    with open(sys.argv[1], "w") as fh:
        fh.write(f"{hwm} {t.user + t.system + t.children_user + t.children_system}")
sys.exit(code)
"""


def measure(args: list[str], env: dict, cwd: Path) -> tuple[float, float, float, str]:
    """(wall seconds, CPU seconds, peak RSS in MiB, stdout) of `pstbench ARGS` in a fresh process; the peak is the child's own
    VmHWM (see the module docstring: wait4's ru_maxrss would give this script's RSS before the child's exec)."""
    hwm_file = cwd / "child-vmhwm.txt"
    hwm_file.unlink(missing_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, str(hwm_file), *args],
            env=env,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        wall = time.perf_counter() - t0
        out.seek(0)
        text = out.read().decode()
    if proc.returncode != 0 or not hwm_file.is_file():
        raise SystemExit(f"pstbench {' '.join(args)} failed with exit {proc.returncode}")
    hwm, cpu = hwm_file.read_text().split()
    return wall, float(cpu), int(hwm) / 1024, text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commits", type=int, default=200)
    ap.add_argument("--no-hub", action="store_true", help="time the git source only")
    args = ap.parse_args()

    from helpers.hub_server import FakeHub

    with tempfile.TemporaryDirectory(prefix="pstbench-bench-history-") as tmp:
        tmp = Path(tmp)
        env = dict(
            os.environ,
            PSTBENCH_CACHE=str(seeded_cache(tmp, "weights")),
            HF_HOME=str(tmp / "hf"),
            PSTBENCH_DATA=str(tmp / "data"),
        )
        env.pop("HF_HUB_OFFLINE", None)
        os.environ.update({k: env[k] for k in ("PSTBENCH_CACHE", "HF_HOME", "PSTBENCH_DATA")})
        t0 = time.perf_counter()
        runs = scored_runs(tmp / "runs")
        repo, made = make_repo(tmp, runs, args.commits)
        setup = time.perf_counter() - t0
        rows = []
        for label in ("git, 1st call", "git, 2nd call"):
            wall, cpu, rss, out = measure(["history", str(repo / RUN), "--json"], env, tmp)
            rows.append((label, wall, cpu, rss))
        import json

        h = json.loads(out)
        assert len(h["points"]) == args.commits and not h["left_out"], (len(h["points"]), h["left_out"][:2])
        requests = None
        if not args.no_hub:
            hub = FakeHub().start()
            try:
                parent = None
                for sha, date, message, files in made:
                    hub.add_commit(
                        "bench/method", sha, files, refs=("main",), lfs=False, parent=parent, title=message, date=date
                    )
                    parent = sha
                env_hub = dict(env, HF_ENDPOINT=hub.url, PSTBENCH_CACHE=str(tmp / "hub-cache"))
                shutil.copytree(env["PSTBENCH_CACHE"], env_hub["PSTBENCH_CACHE"])
                uri = f"hf://datasets/bench/method/{RUN}"
                wall, cpu, rss, out_cold = measure(["history", uri, "--json"], env_hub, tmp)
                rows.append(("Hub, cold cache", wall, cpu, rss))
                hub.log.clear()
                wall, cpu, rss, out_warm = measure(["history", uri, "--json"], env_hub, tmp)
                rows.append(("Hub, cached", wall, cpu, rss))
                requests = len(hub.log)
            finally:
                hub.stop()
            cold, warm = json.loads(out_cold), json.loads(out_warm)
            assert cold == warm and [p["commit"] for p in cold["points"]] == [p["commit"] for p in h["points"]]

    print(
        f"history of {args.commits} commits (4 runs of 8 pairs in rotation; {len(h['points'])} points, {h['n_tests']} tests, "
        f"{len(h['steps'])} steps); setup {setup:.1f} s"
    )
    for label, wall, cpu, rss in rows:
        print(f"  {label:16s} {wall:7.2f} s wall  {cpu:6.2f} s CPU   peak RSS {rss:6.0f} MiB")
    if requests is not None:
        print(
            f"  Hub requests during the cached call: {requests} (the commit listing only); cold and cached outputs equal"
        )


if __name__ == "__main__":
    main()
