"""Time and memory of the human reference row and of `pstbench vab study` on large generated inputs.

    python benchmarks/bench_human.py [--experts 500] [--tasks 20000] [--timeout 120]

Generates, in a temporary folder, (1) a selection track of 2 tasks with a votes file of `--experts`
experts per task (k = 2, about 13 kB for 500 experts; and the same with k = 3), and (2) an annotations
CSV of `--tasks` tasks (2 annotators x 2 images each, about 1.1 MB for 20,000 tasks). Each step runs in a
fresh process: the human row (`selection.human.human_reference`, what `vab score` computes before asking
a judge) and the study (`selection.study.run_study`, what `pstbench vab study` computes). Prints wall
seconds of the step and its peak resident memory above the process after imports and after parsing its
input (ru_maxrss), or "> TIMEOUT s" when the step did not finish. The package imported is the one on
sys.path (PYTHONPATH=/path/to/checkout measures another checkout).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

STEP = r"""
import json, resource, sys, time
from pathlib import Path
kind, path = sys.argv[1], sys.argv[2]
def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
import numpy, scipy.stats  # imports outside the measurement
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.selection.protocol import SelectionParams
params = SelectionParams.of(load_protocol("vab"))
if kind == "human":
    from pytest_pstbench.selection.human import human_reference
    from pytest_pstbench.selection.tracks import load_selection_manifest
    track = load_selection_manifest(Path(path))
    base, t = rss(), time.perf_counter()
    human_reference(track, track.votes, params)
else:
    from pytest_pstbench.selection.annotations import read_annotations
    from pytest_pstbench.selection.study import run_study
    tasks = read_annotations(path, k_range=(params.k_min, params.k_max), protocol_id="vab")
    base, t = rss(), time.perf_counter()  # the parsed file is held while the study runs (it parses it again)
    run_study(path)
print(json.dumps({"seconds": time.perf_counter() - t, "above_mb": (rss() - base) / 2**20}))
"""


def votes_track(root: Path, experts: int, k: int, tasks: int = 2, seed: int = 0) -> Path:
    """A track of `tasks` tasks with `k` candidates and a votes file of `experts` experts per task (80 % vote
    the label)."""
    import yaml
    from PIL import Image

    root.mkdir(parents=True)
    rng = random.Random(seed)
    entries, rows = [], []
    for t in range(tasks):
        names = []
        for c in range(k):
            Image.new("RGB", (4, 4), (t * 10 % 255, c * 40, 0)).save(root / f"t{t}_{c}.png")
            names.append(f"t{t}_{c}.png")
        entries.append(
            {
                "id": f"T{t}",
                "domain": "d",
                "topic": "x",
                "candidates": names,
                "best": 0,
                **({"worst": k - 1} if k >= 3 else {}),
            }
        )
        for e in range(experts):
            b = 0 if rng.random() < 0.8 else rng.randrange(1, k)
            w = ""
            if k >= 3:
                w = k - 1 if rng.random() < 0.8 and b != k - 1 else rng.choice([i for i in range(k) if i != b])
            rows.append(f"T{t},{k},e{e:03d},{b},{w}")
    (root / "votes.csv").write_text("task_id,k,judge,best,worst\n" + "\n".join(rows) + "\n")
    (root / "track.yaml").write_text(
        yaml.safe_dump(
            {"kind": "selection", "id": "big", "revision": "b1", "tasks": entries, "votes": "votes.csv"},
            sort_keys=False,
        )
    )
    return root / "track.yaml"


def annotations(path: Path, tasks: int, seed: int = 0) -> Path:
    """`tasks` tasks, 2 annotators x 2 images each, scores 0-10 and ranks."""
    rng = random.Random(seed)
    lines = ["task_id,annotator,image,score,rank"]
    for t in range(tasks):
        for a in ("a", "b"):
            order = [0, 1]
            rng.shuffle(order)
            lines += [f"{t},{a},{i},{rng.randint(0, 10)},{r + 1}" for r, i in enumerate(order)]
    path.write_text("\n".join(lines) + "\n")
    return path


def step(kind: str, path: Path, timeout: float) -> str:
    try:
        out = subprocess.run(
            [sys.executable, "-c", STEP, kind, str(path)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
            cwd=path.parent,
        ).stdout  # the package: from sys.path / PYTHONPATH
    except subprocess.TimeoutExpired:
        return f"> {timeout:g} s"
    r = json.loads(out.strip().splitlines()[-1])
    return f"{r['seconds']:7.2f} s  {r['above_mb']:6.0f} MB above the parsed input"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--experts", type=int, default=500, help="experts per task in the votes files (default 500)")
    ap.add_argument("--tasks", type=int, default=20000, help="tasks in the annotations file (default 20000)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds before a step is given up (default 120)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rows = []
        for experts, k in ((args.experts, 2), (args.experts, 3), (100, 3)):  # 100 x k = 3: the exact null's worst
            folder = tmp / f"e{experts}k{k}"
            track = votes_track(folder, experts, k)
            size = (folder / "votes.csv").stat().st_size
            rows.append(
                (
                    f"human row: {experts} experts x 2 tasks, k = {k} ({size / 1e3:.0f} kB votes)",
                    step("human", track, args.timeout),
                )
            )
        ann = annotations(tmp / "annotations.csv", args.tasks)
        rows.append(
            (
                f"vab study: {args.tasks} tasks ({ann.stat().st_size / 1e6:.1f} MB annotations)",
                step("study", ann, args.timeout),
            )
        )
    width = max(len(r[0]) for r in rows)
    for name, result in rows:
        print(f"{name:<{width}}  {result}")


if __name__ == "__main__":
    main()
