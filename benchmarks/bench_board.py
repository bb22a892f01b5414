"""`pstbench board` over synthetic run folders: 2 tracks x N runs (default 100 each: 200 runs) written by hand in
the documented formats (tests/helpers/paired_runs.write_run), 20 pairs each. Prints the board's wall time and the
process's CPU time and peak RSS (ru_maxrss) before and after the board, run in a fresh process.

    python benchmarks/bench_board.py [--runs-per-track 100] [--pairs 20]

Measured (issue #52, a 2-core machine shared with other jobs, so the CPU time is the number to compare), 200 runs,
9,702 tests: 28.4 s CPU (43 s wall), peak RSS 125 MB, when the board's tests were `compare_two`'s (each with an unused
10,000-resample bootstrap interval); 9.9 s CPU (14 s wall), 125 MB with `RunKind.pairwise_tests` (the test only, each
run's values read once). `--runs-per-track 30`: 2.8 s -> 1.2 s CPU. What is left is scipy's Wilcoxon per pair and the
runs' reading and validation (which holds the peak memory).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import resource, sys, time
from pytest_pstbench.cli import main
import pytest_pstbench.paired.compare, scipy.stats  # imports outside the timing
r0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
code = main(["board", sys.argv[1], "--out", sys.argv[2]])
dt = time.perf_counter() - t0
r1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
print(f"RESULT {code} {dt:.2f} {cpu:.2f} {r0.ru_maxrss / 1024:.0f} {r1.ru_maxrss / 1024:.0f}")
"""


def write_runs(root: Path, per_track: int, pairs: int) -> None:
    import numpy as np

    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.paired_runs import scores_from, write_run

    for track in ("ta", "tb"):
        ident = write_run(root, "identity", scores_from({"psnr": np.arange(pairs) * 0.5 - 4}, pairs), track=track)
        rec = json.loads((ident / "run.json").read_text())
        (ident / "run.json").write_text(json.dumps({**rec, "method": {"method": "identity"}}))
        for k in range(per_track - 1):
            rng = np.random.default_rng(k)
            psnr = np.arange(pairs) * 0.5 + 0.02 * k + rng.normal(0, 0.5, pairs)
            write_run(root, f"m{k:03d}", scores_from({"psnr": psnr}, pairs), track=track)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs-per-track", type=int, default=100)
    ap.add_argument("--pairs", type=int, default=20)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results"
        t0 = time.perf_counter()
        write_runs(results, a.runs_per_track, a.pairs)
        print(f"wrote {2 * a.runs_per_track} runs ({a.pairs} pairs each) in {time.perf_counter() - t0:.1f} s")
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(results), str(Path(tmp) / "site")],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT")), None)
        if line is None:
            sys.exit(f"board failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
        _, code, secs, cpu, before, after = line.split()
        tests = 2 * (a.runs_per_track - 1) * (a.runs_per_track - 2) // 2
        print(
            f"board: exit {code}, {secs} s wall, {cpu} s CPU for {2 * a.runs_per_track} runs ({tests} pairwise "
            f"tests); peak RSS {before} MB before, {after} MB after"
        )


if __name__ == "__main__":
    main()
