"""The position-bias test's false-positive rate and power on vab-demo's tasks (issue #53 item 10).

    python benchmarks/bench_position_bias.py [--sets N] [--seed S]

Simulated pick_best answers on vab-demo's 30 tasks (k = 2..6, six tasks each, three trials in the display orders
the protocol gives them). Position-blind judges, whose pick depends on the images only:

  consensus   picks the task's consensus best with a probability drawn per answer set in [0.3, 0.9], else a
              uniformly random candidate
  index0      picks dataset index 0 (which trial 0 shows at A) half the time, else a random candidate
  dirichlet   per task a preference over the candidates drawn from Dirichlet(0.5), each trial picks from it

and a planted slot-A preference: each trial picks the candidate shown at A with probability 0.5, else what the
consensus judge picks. For each, N answer sets are scored by `selection.position_bias.position_bias` (the
permutation test) and, for contrast, by the chi-square distribution's p-value of the same statistic (the test
before issue #53); it prints the share of sets called biased at the protocol's alpha per k and over all k.
"""

from __future__ import annotations

import argparse
import random
import time

from scipy.stats import chi2 as chi2_dist

from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.selection.permutations import orders_for
from pytest_pstbench.selection.position_bias import position_bias
from pytest_pstbench.selection.protocol import SelectionParams
from pytest_pstbench.selection.tracks import resolve_selection_track

PROTOCOL = load_protocol("vab")
PARAMS = SelectionParams.of(PROTOCOL)
ALPHA = PROTOCOL.data["comparison"]["alpha"]


def consensus(rng: random.Random):
    q = rng.uniform(0.3, 0.9)
    return lambda task, order, pref: task.best if rng.random() < q else rng.randrange(task.k)


def index0(rng: random.Random):
    return lambda task, order, pref: 0 if rng.random() < 0.5 else rng.randrange(task.k)


def dirichlet(rng: random.Random):
    return lambda task, order, pref: rng.choices(range(task.k), weights=pref[task.id])[0]


def planted(rng: random.Random):
    other = consensus(rng)
    return lambda task, order, pref: order[0] if rng.random() < 0.5 else other(task, order, pref)


JUDGES = {"consensus": consensus, "index0": index0, "dirichlet": dirichlet, "planted A 0.5": planted}


def answer_set(tasks, orders, judge, rng: random.Random) -> list[dict]:
    pref = {t.id: [rng.gammavariate(0.5, 1.0) for _ in range(t.k)] for t in tasks}
    out = []
    for task, task_orders in zip(tasks, orders):
        best = [{"best": judge(task, o, pref), "worst": None, "status": "ok"} for o in task_orders]
        missing = [{"best": None, "worst": None, "status": "missing"}] * len(task_orders)
        out.append({"pick_best": best, "pick_worst": missing, "pick_best_and_worst": missing})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", type=int, default=400, help="simulated answer sets per judge")
    ap.add_argument("--seed", type=int, default=53)
    args = ap.parse_args()
    track = resolve_selection_track("vab-demo")
    tasks = list(track.tasks)
    orders = [orders_for(t, PARAMS) for t in tasks]
    ks = sorted({t.k for t in tasks})
    print(f"vab-demo: {len(tasks)} tasks, k = {ks}, {PARAMS.trials} trials; alpha {ALPHA}; {args.sets} sets per judge")
    print(f"{'judge':<15}{'test':<13}" + "".join(f"{'k=' + str(k):>8}" for k in ks) + f"{'all k':>8}{'ms/set':>9}")
    for name, make in JUDGES.items():
        rng = random.Random(args.seed)
        perm = {k: 0 for k in [*ks, "all"]}
        chi = {k: 0 for k in [*ks, "all"]}
        spent = 0.0
        for _ in range(args.sets):
            answers = answer_set(tasks, orders, make(rng), rng)
            t0 = time.perf_counter()
            best = position_bias(tasks, answers, orders, PARAMS, ALPHA)["roles"]["best"]
            spent += time.perf_counter() - t0
            for k in ks:
                e = best["by_k"][str(k)]
                perm[k] += bool(e["biased"])
                chi[k] += e["df"] > 0 and chi2_dist.sf(e["chi2"], e["df"]) < ALPHA
            a = best["all_k"]
            perm["all"] += bool(a["biased"])
            chi["all"] += a["df"] > 0 and chi2_dist.sf(a["chi2"], a["df"]) < ALPHA
        for test, hits in (("permutation", perm), ("chi-square", chi)):
            rates = "".join(f"{hits[k] / args.sets:>8.3f}" for k in [*ks, "all"])
            ms = f"{1000 * spent / args.sets:>9.1f}" if test == "permutation" else ""
            print(f"{name:<15}{test:<13}{rates}{ms}")


if __name__ == "__main__":
    main()
