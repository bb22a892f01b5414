"""Adaptive concurrency against a rate limit (issue #40): `pstbench vab run` at a fixed --concurrency 4, a fixed
--concurrency 32 and --concurrency auto, against the local OpenAI-compatible server of tests/helpers/openai_server.py
(127.0.0.1) enforcing a token bucket of R requests per second (burst B, Retry-After 1 s on a 429) and answering after
a latency drawn from 50-200 ms (so R x 0.125 s calls in flight are needed to reach the limit).

Per run it prints the wall seconds, the answered requests per second (over the span from the first request to the last
answer, and over the middle 80% of the answers: no start, no tail) as a share of R, the 429s (all, and per 100 requests), the HTTP calls, how many answers lines are not at
attempt 1 or are errors, whether the answers equal the fixed-4 run's (task, trial, prompt type -> response, attempt),
and, for auto, the limit's trace as run.json records it. Each run is a fresh process-free call of the CLI's entry point
in this process (the server runs in a thread). Run:
``PYTHONPATH=. python benchmarks/bench_rate_limit.py [--rates 20,40,80] [--requests 300] [--burst 4]``
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def answer_for(body: dict) -> str:
    """A deterministic answer that depends on the request (so equal answers mean the same request was answered)."""
    import hashlib

    digest = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).digest()
    letters = "ABC"
    best = letters[digest[0] % 3]
    worst = letters[(digest[0] % 3 + 1 + digest[1] % 2) % 3]
    return f"BEST: {best}\nWORST: {worst}"


def one_run(manifest: Path, tmp: Path, label: str, rate: float, burst: int, concurrency: list[str]) -> dict:
    from helpers.openai_server import OpenAIServer, throughput

    from pytest_pstbench.cli import main as cli

    server = OpenAIServer(answer_text=answer_for, rate_per_s=rate, burst=burst, retry_after=1.0, latency_s=(0.05, 0.2))
    answers = tmp / f"{label}-{rate:g}.jsonl"
    results = tmp / f"results-{label}-{rate:g}"
    args = [
        "vab",
        "run",
        "--track",
        str(manifest),
        "--model",
        "m",
        "--api-base",
        server.base,
        "--answers",
        str(answers),
        "--results",
        str(results),
        "--timeout",
        "30",
        "-q",
        "--name",
        "m",
        *concurrency,
    ]
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            code = cli(args)
    finally:
        server.close()
    wall = time.perf_counter() - t0
    lines = [json.loads(x) for x in answers.read_text().splitlines()]
    n429 = sum(1 for _t, s in server.log if s == 429)
    run_json = json.loads(next(results.rglob("run.json")).read_text())
    steady = throughput(server.log, middle=0.8) / rate  # the middle 80% of the answers (no start, no tail)
    return {
        "label": label,
        "code": code,
        "wall": wall,
        "rate": throughput(server.log) / rate,
        "steady": steady,
        "n": len(lines),
        "429": n429,
        "calls": len(server.log),
        "not_first": sum(1 for x in lines if x.get("attempt") != 1 or "error" in x),
        "answers": {(x["task_id"], x["trial"], x["prompt_type"]): (x.get("response"), x.get("attempt")) for x in lines},
        "pacing": run_json["judge"]["model_api"].get("pacing"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rates", default="20,40,80", help="rate limits to run against, requests per second")
    ap.add_argument(
        "--requests", type=int, default=300, help="about this many requests per run (tasks of 3 candidates: 9 each)"
    )
    ap.add_argument("--burst", type=int, default=4, help="the token bucket's burst")
    ap.add_argument("--runs", default="fixed-4,fixed-32,auto", help="which runs (the first is the answers' reference)")
    a = ap.parse_args()
    from helpers.openai_server import make_selection_track

    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        manifest = make_selection_track(tmp / "track", ks=(3,) * max(1, a.requests // 9), track_id="ratetrack")
        for rate in (float(r) for r in a.rates.split(",")):
            print(f"rate limit {rate:g}/s, burst {a.burst}, latency 50-200 ms:")
            chosen = {
                "fixed-4": ["--concurrency", "4"],
                "fixed-32": ["--concurrency", "32"],
                "auto": ["--concurrency", "auto"],
            }
            runs = [one_run(manifest, tmp, label, rate, a.burst, chosen[label]) for label in a.runs.split(",")]
            ref = runs[0]["answers"]
            for r in runs:
                same = "same" if r["answers"] == ref else "DIFFERENT"
                print(
                    f"  {r['label']:>8}: {r['wall']:6.2f} s, {r['rate']:6.1%} of the limit ({r['steady']:6.1%} in the middle 80%), {r['429']:4d} x 429 "
                    f"({100 * r['429'] / r['n']:5.1f} per 100 requests), {r['calls']} calls, {r['not_first']} lines not at "
                    f"attempt 1, answers {same} as fixed-4, exit {r['code']}"
                )
                if r["pacing"]:
                    print(f"            trace [s, limit]: {json.dumps(r['pacing']['trace'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
