"""Time `pstbench baseline` on the demo track: each method on its own, then `all` in one call.

    python benchmarks/bench_baselines.py

Uses a temporary PSTBENCH_CACHE (python-color-transfer copied from the user's cache when present,
so the idt timing excludes the one-time wheel fetch unless there is nothing to copy); the demo
track is built once before the timings. Each step runs in a fresh process, as a user runs it, so
every time includes Python start-up and imports. Prints wall times in seconds.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from _common import seeded_cache, time_pstbench

METHODS = ("identity", "reinhard", "mkl", "idt", "histmatch")


def run(args, env, cwd) -> float:
    return time_pstbench(args, cwd, env)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, PSTBENCH_CACHE=str(seeded_cache(tmp, "packages")))
        run(["baseline", "all", "--fetch-only"], env, tmp)
        run(["baseline", "identity", "--track", "demo", "--out", "warmup"], env, tmp)  # builds the demo track
        rows = [
            (f"pstbench baseline {m} --track demo", run(["baseline", m, "--track", "demo", "--out", m], env, tmp))
            for m in METHODS
        ]
        rows.append(
            (
                "pstbench baseline all --track demo",
                run(["baseline", "all", "--track", "demo", "--out", "all"], env, tmp),
            )
        )
    width = max(len(r[0]) for r in rows)
    for name, secs in rows:
        print(f"{name:<{width}}  {secs:6.2f} s")


if __name__ == "__main__":
    main()
