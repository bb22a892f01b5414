"""Time a gate against a published 1,024-pair baseline run vs against the same local folder.

A baseline and a candidate run of N pairs (default 1,024; written in the documented run formats, values
drawn at random, the candidate a little worse on PSNR) are made; the baseline is published on the local
Hub server of tests/helpers/hub_server.py (on 127.0.0.1). The gate is `pstbench compare BASELINE CANDIDATE
--fail-on-worse` (the gate without pytest: the same resolver, reader and tests as `--pstbench-baseline`),
run in this process after one warm-up, K times each:

- local:  the baseline as a local folder;
- pull:   `pstbench runs pull URI` alone into an empty cache (the download, with its checks);
- cold:   the gate on the pinned URI with an empty cache (pull + gate);
- warm:   the gate on the pinned URI again (from the cache; the Hub server's request log must stay empty).

The claim checked: cold - local <= pull (the Hub adds no more than the download) and warm ~ local with no
request at all. Run: ``PYTHONPATH=. python benchmarks/bench_hub_gate.py [--pairs N] [--repeat K]``
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def write_run(root: Path, name: str, values, protocol) -> Path:
    from pytest_pstbench.paired.aggregation import summary_entry

    names = protocol.metric_names
    d = root / "t" / name
    d.mkdir(parents=True)
    ids = [f"p{i:04d}" for i in range(len(values))]
    lines = ["pair_id," + ",".join(names)] + [
        pid + "," + ",".join(repr(float(v[m])) for m in names) for pid, v in zip(ids, values)
    ]
    (d / "metrics.csv").write_text("\n".join(lines) + "\n")
    summary = {m: summary_entry([v[m] for v in values], protocol, m) for m in names}
    (d / "summary.json").write_text(
        json.dumps(
            {
                "track": "t",
                "protocol": protocol.id,
                "dataset_revision": "r1",
                "name": name,
                "n": len(values),
                "complete": True,
                "metrics": summary,
            }
        )
    )
    (d / "run.json").write_text(
        json.dumps(
            {
                "protocol": {"id": protocol.id, "sha256": protocol.sha256},
                "name": name,
                "track": "t",
                "dataset": {"id": "t", "revision": "r1"},
                "complete": True,
                "n_pairs": len(values),
                "n_scored": len(values),
            }
        )
    )
    return d


def runs(root: Path, n: int):
    import numpy as np

    from pytest_pstbench.core.protocol import load_protocol

    protocol = load_protocol()
    rng = np.random.default_rng(0)
    base = [{m: float(rng.uniform(0.1, 30 if m == "psnr" else 1)) for m in protocol.metric_names} for _ in range(n)]
    cand = [{m: v[m] - (float(rng.normal(0.05, 0.3)) if m == "psnr" else 0.0) for m in v} for v in base]
    return write_run(root, "baseline", base, protocol), write_run(root, "candidate", cand, protocol)


def gate(baseline: str, candidate: Path) -> tuple[float, int, str]:
    from pytest_pstbench.cli import main

    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["compare", baseline, str(candidate), "--fail-on-worse"])
    return time.perf_counter() - t0, code, out.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    from helpers.hub_server import FakeHub

    with tempfile.TemporaryDirectory(prefix="pstbench-bench-hub-") as tmp:
        tmp = Path(tmp)
        os.environ["HF_HOME"] = str(tmp / "hf")
        hub = FakeHub().start()
        os.environ["HF_ENDPOINT"] = hub.url
        os.environ.pop("HF_HUB_OFFLINE", None)
        base, cand = runs(tmp / "runs", args.pairs)
        sha = "b" * 40
        hub.add_commit(
            "bench/baselines", sha, {f"t/baseline/{f.name}": f.read_bytes() for f in base.iterdir()}, refs=("main",)
        )
        uri = f"hf://datasets/bench/baselines@{sha}/t/baseline"
        size = sum(f.stat().st_size for f in base.iterdir())

        def fresh_cache(i: int) -> None:
            os.environ["PSTBENCH_CACHE"] = str(tmp / f"cache-{i}")

        fresh_cache(0)
        gate(str(base), cand)  # warm-up: imports
        local, pulls, cold, warm, warm_requests = [], [], [], [], []
        outputs = set()
        from pytest_pstbench.cli import main as cli

        for i in range(args.repeat):
            t, code, out = gate(str(base), cand)
            local.append(t)
            outputs.add((code, out))
            fresh_cache(1000 + i)
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                t0 = time.perf_counter()
                assert cli(["runs", "pull", uri]) == 0
                pulls.append(time.perf_counter() - t0)
            fresh_cache(2000 + i)
            t, code, out = gate(uri, cand)
            cold.append(t)
            outputs.add((code, out))
            hub.log.clear()
            t, code, out = gate(uri, cand)
            warm.append(t)
            warm_requests.append(len(hub.log))
            outputs.add((code, out))
        hub.stop()

    med = statistics.median
    print(
        f"baseline: {args.pairs} pairs, {size / 1024:.0f} KiB of run files; {args.repeat} repeats, medians (all runs)"
    )
    for label, xs in (
        ("gate, local folder", local),
        ("pull alone (cold)", pulls),
        ("gate, Hub URI, cold cache", cold),
        ("gate, Hub URI, warm cache", warm),
    ):
        print(f"  {label:27s} {med(xs):.3f} s  ({', '.join(f'{x:.3f}' for x in xs)})")
    print(
        f"  cold - local = {med(cold) - med(local):.3f} s vs pull {med(pulls):.3f} s; warm - local = {med(warm) - med(local):+.3f} s; "
        f"requests during warm gates: {sum(warm_requests)}"
    )
    print(
        f"  same verdict and output for all {len(outputs) == 1 and 'runs' or 'NOT all runs'} (exit {next(iter(outputs))[0]})"
    )


if __name__ == "__main__":
    main()
