"""Time `pstbench sensitivity` on the demo track: the five reference baselines, every shipped variant.

    python benchmarks/bench_sensitivity.py [--variants ID ...] [--device cpu]

Writes the baselines once with `pstbench baseline all --track demo --out <tmp>/baselines` (not timed;
it also builds the demo track and fetches the baseline packages on first use), then runs

    pstbench sensitivity --track demo identity=<tmp>/baselines/identity reinhard=... mkl=... idt=... \
        histmatch=... --out <tmp>/sensitivity

in a fresh process, as a user runs it (so the time includes Python start-up, imports and loading the
LPIPS weights from the cache). Prints the wall time, then the engine's own timings and counts from
analysis.json: total, scoring and analysis seconds, seconds per variant (shared work counted under
the first variant that needs it), metric computations, and LPIPS backbone passes. The user's
PSTBENCH_CACHE is used, so the LPIPS weights and the baseline packages are not fetched again.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from _common import time_pstbench

METHODS = ("identity", "reinhard", "mkl", "idt", "histmatch")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", nargs="+", default=None, help="variant ids (default: every shipped variant)")
    ap.add_argument("--device", default="cpu", help="LPIPS device (default: cpu)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        time_pstbench(["baseline", "all", "--track", "demo", "--out", str(tmp / "baselines")], tmp)
        cmd = [
            "sensitivity",
            "--track",
            "demo",
            *[f"{m}={tmp / 'baselines' / m}" for m in METHODS],
            "--out",
            str(tmp / "sensitivity"),
            "--device",
            args.device,
        ]
        if args.variants:
            cmd += ["--variants", *args.variants]
        wall = time_pstbench(cmd, tmp)
        a = json.loads((tmp / "sensitivity" / "analysis.json").read_text(encoding="utf-8"))
    t, c = a["timings"], a["computations"]
    print(
        f"pstbench sensitivity --track demo ({len(METHODS)} methods x {len(a['variants'])} variants, protocol "
        f"included, {a['n_pairs']} pairs): wall {wall:.1f} s"
    )
    print(f"engine: total {t['total_s']:.1f} s, scoring {t['scoring_s']:.1f} s, analysis {t['analysis_s']:.1f} s")
    if t.get("lpips_backbone_s"):
        print(
            f"LPIPS backbone passes: {t['lpips_backbone_s']:.1f} s; ratio scoring / backbone passes "
            f"{t['scoring_s'] / t['lpips_backbone_s']:.2f} (target <= 1.3)"
        )
    print("per variant: " + ", ".join(f"{k} {s:.1f} s" for k, s in t["per_variant_s"].items()))
    print("computations: " + ", ".join(f"{k} {v}" for k, v in c.items()))
    if a["unavailable"]:
        print("unavailable: " + ", ".join(f"{u['variant']}/{u['metric']}" for u in a["unavailable"]))


if __name__ == "__main__":
    main()
