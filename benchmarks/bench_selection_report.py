"""Wall time and page size of `pstbench report` over selection runs (issue #42's bound): a synthetic track of 400
tasks with 6 candidates each (JPEG photographs-like noise, 640x480 by default; 8 domains, 40 topics) and three
judges, reported with the default --max-tasks.

The judges, scored in this process with `pstbench vab score` (not measured): a scoring function (`brightness`, a
generated judge file) and two models' answers files of parsed labels (one mostly right, one that prefers the
first displayed position). Then `pstbench report RUN RUN RUN --out DIR --track TRACK.yaml` runs in a fresh process, as a user runs
it (imports included); printed: its wall seconds, its CPU seconds and the load average (other work on the
machine stretches the wall time), its peak RSS, and the size of DIR (index.html, figures/,
thumbs/). The issue's bound: under 60 s on 2 cores and under 50 MB; the script exits 1 when either is over.
The package imported is the one on sys.path. Run:
``PYTHONPATH=. python benchmarks/bench_selection_report.py [--tasks 400] [--size 640x480] [--repeat 1]``
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

LIMIT_S, LIMIT_MB = 60.0, 50.0
JUDGE = """import numpy as np


def brightness(image: np.ndarray) -> float:
    return float(np.asarray(image)[::8, ::8].mean())
"""


def make_track(root: Path, tasks: int, k: int, size: tuple[int, int], seed: int = 0) -> Path:
    """A selection track.yaml of `tasks` tasks of `k` JPEG candidates, best 0 and worst k - 1 by the track."""
    import yaml
    from PIL import Image

    rng = np.random.default_rng(seed)
    w, h = size
    (root / "img").mkdir(parents=True)
    yy, xx = np.mgrid[0:h, 0:w]
    entries = []
    for t in range(tasks):
        base = (np.sin(xx / (17 + t % 23)) + np.cos(yy / (11 + t % 19))) * 60 + 128
        names = []
        for c in range(k):
            noise = rng.normal(0, 12 + 4 * c, (h, w, 3))
            tint = np.array([(t * 37 + c * 50) % 80, (t * 11) % 60, (c * 29) % 70])
            img = np.clip(base[..., None] + noise + tint - 40, 0, 255).astype(np.uint8)
            name = f"img/t{t:04d}_{c}.jpg"
            Image.fromarray(img).save(root / name, quality=90)
            names.append(name)
        entries.append(
            {
                "id": f"T{t:04d}",
                "domain": f"domain-{t % 8}",
                "topic": f"topic-{t % 40:02d}",
                "candidates": names,
                "best": 0,
                "worst": k - 1,
            }
        )
    (root / "track.yaml").write_text(
        yaml.safe_dump({"kind": "selection", "id": "bench", "revision": "b1", "tasks": entries}, sort_keys=False)
    )
    return root / "track.yaml"


def write_answers(path: Path, manifest: Path, right: float, first_bias: float, seed: int) -> Path:
    """Parsed labels of every trial and prompt type: the track's label with probability `right`, else the
    displayed position A with probability `first_bias`, else a random other position."""
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection.permutations import orders_for
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.tracks import resolve_selection_track

    params = SelectionParams.of(load_protocol("vab"))
    track = resolve_selection_track(str(manifest))
    rng = random.Random(seed)

    def pick(order, want: int, avoid: int | None = None) -> str:
        if rng.random() < right:
            pos = order.index(want)
        elif rng.random() < first_bias:
            pos = 0
        else:
            pos = rng.randrange(len(order))
        if avoid is not None and pos == avoid:
            pos = (pos + 1) % len(order)
        return params.labels[pos]

    lines = []
    for task in track.tasks:
        for t, order in enumerate(orders_for(task, params)):
            for ptype in params.prompt_types_for(task.k):
                base = {"task_id": task.id, "trial": t, "prompt_type": ptype}
                if ptype == "pick_best":
                    lines.append({**base, "best": pick(order, task.best)})
                elif ptype == "pick_worst":
                    lines.append({**base, "worst": pick(order, task.worst)})
                else:
                    b = pick(order, task.best)
                    lines.append({**base, "best": b, "worst": pick(order, task.worst, params.labels.index(b))})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def score(args: list[str]) -> None:
    from pytest_pstbench.cli import main as cli

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = cli(["vab", "score", *args])
    assert code == 0, f"vab score {args} failed"


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def timed_report(runs: list[Path], out: Path, manifest: Path) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds (user + system), peak RSS MB) of `pstbench report RUNS --out OUT --track MANIFEST` in a fresh process (a local
    track's run.json names the track's id, not its path: the page needs --track to find the candidates)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest_pstbench.cli",
            "report",
            *map(str, runs),
            "--out",
            str(out),
            "--track",
            str(manifest),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"pstbench report failed:\n{err}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=400)
    ap.add_argument("--candidates", type=int, default=6)
    ap.add_argument("--size", default="640x480", help="candidate image size WxH (default 640x480)")
    ap.add_argument("--repeat", type=int, default=1, help="report this many times (the fastest is the result)")
    ap.add_argument(
        "--keep", default=None, metavar="DIR", help="build in DIR (a new folder) and keep it, to look at the page"
    )
    a = ap.parse_args()
    size = tuple(int(x) for x in a.size.split("x"))
    ap_keep = a.keep
    with contextlib.nullcontext(ap_keep) if ap_keep else tempfile.TemporaryDirectory(prefix="bench-selreport-") as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        manifest = make_track(tmp / "track", a.tasks, a.candidates, size)
        (tmp / "judges.py").write_text(JUDGE)
        results = tmp / "results"
        score(["--track", str(manifest), "--judge", f"{tmp / 'judges.py'}:brightness", "--results", str(results)])
        for name, right, bias, seed in (("model-a", 0.7, 0.2, 1), ("model-b", 0.4, 0.6, 2)):
            answers = write_answers(tmp / f"{name}.jsonl", manifest, right, bias, seed)
            score(["--track", str(manifest), "--answers", str(answers), "--results", str(results)])
        runs = [results / "bench" / n for n in ("brightness", "model-a", "model-b")]
        print(
            f"setup (not measured): {a.tasks} tasks x {a.candidates} candidates ({a.size} JPEG), 3 judges scored "
            f"in {time.perf_counter() - t0:.1f} s; {os.cpu_count()} cores"
        )
        best = None
        for _ in range(a.repeat):
            out = tmp / "page"
            wall, cpu, rss = timed_report(runs, out, manifest)
            best = wall if best is None else min(best, wall)
            print(
                f"pstbench report (default --max-tasks): {wall:.2f} s wall, {cpu:.2f} s CPU (user+sys), peak RSS {rss:.0f} MB"
                f"; load average {os.getloadavg()[0]:.1f}"
            )
        html = (out / "index.html").read_text(encoding="utf-8")
        mb = folder_bytes(out) / 1e6
        parts = ", ".join(
            f"{p}: {folder_bytes(out / p) / 1e6:.1f} MB ({len(list((out / p).iterdir()))} files)"
            for p in ("figures", "thumbs")
        )
        print(f"page folder: {mb:.1f} MB (index.html {len(html.encode()) / 1e6:.1f} MB, {parts})")
        if "could not be opened" in html or "not shown" in html:
            print("warning: the page notes that candidate images or answers were not shown")
        over = [f"wall {best:.1f} s >= {LIMIT_S:g} s"] if best >= LIMIT_S else []
        over += [f"size {mb:.1f} MB >= {LIMIT_MB:g} MB"] if mb >= LIMIT_MB else []
        print("bound (< 60 s on 2 cores, < 50 MB):", "OVER: " + "; ".join(over) if over else "met")
        return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
