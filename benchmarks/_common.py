"""Shared by the benchmark scripts (run as `python benchmarks/bench_*.py`, so this folder is on sys.path)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path


def time_pstbench(args: list[str], cwd: Path, env: dict | None = None, quiet: bool = True) -> float:
    """Wall seconds of `pstbench ARGS` in a fresh process (start-up and imports included), as a user runs it."""
    out = subprocess.DEVNULL if quiet else None
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest_pstbench.cli", *args], env=env, cwd=cwd, check=True, stdout=out, stderr=out
    )
    return time.perf_counter() - t0


def seeded_cache(tmp: Path, *parts: str) -> Path:
    """A fresh PSTBENCH_CACHE under `tmp` holding copies of the user's cache folders `parts` (e.g. the
    LPIPS weights), so a benchmark measures its command and not one-time fetches."""
    from pytest_pstbench.core.paths import cache_dir

    cache = tmp / "cache"
    for part in parts:
        if (cache_dir() / part).is_dir():
            shutil.copytree(cache_dir() / part, cache / part, ignore=shutil.ignore_patterns(".*"))
    return cache
