"""Time a cold build of the demo track (fresh temp dir) and a warm reuse of it.

Run: ``PYTHONPATH=. python benchmarks/bench_demo_build.py [--repeat N]``
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from pytest_pstbench.paired.demo import build_demo_track


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=3, help="cold builds to time (default 3)")
    args = ap.parse_args()

    cold, warm, revisions = [], [], set()
    for _ in range(max(1, args.repeat)):
        with tempfile.TemporaryDirectory(prefix="pstbench-bench-") as tmp:
            root = Path(tmp) / "demo"
            t0 = time.perf_counter()
            manifest = build_demo_track(root)
            cold.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            again = build_demo_track(root)
            warm.append(time.perf_counter() - t0)
            assert again == manifest
            data = yaml.safe_load(manifest.read_text(encoding="utf-8"))
            revisions.add(data["revision"])
            n_pairs = len(data["pairs"])
            size = sum(p.stat().st_size for p in root.rglob("*.png"))

    print(f"demo track: {n_pairs} pairs, {size / 2**20:.1f} MiB of PNG, revision(s) {', '.join(sorted(revisions))}")
    print(
        f"cold build : median {statistics.median(cold):.3f} s  (runs: {', '.join(f'{t:.3f}' for t in cold)}; first includes imports)"
    )
    print(
        f"warm reuse : median {statistics.median(warm) * 1000:.1f} ms (runs: {', '.join(f'{t * 1000:.1f}' for t in warm)})"
    )


if __name__ == "__main__":
    main()
