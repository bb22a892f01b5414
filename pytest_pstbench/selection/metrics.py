"""Selection metrics: Top-1 / Bot-1 / TB-1 as ap@1 and pass^3, per cell, with random baselines.

Per task and trial: Top-1 is correct when the pick_best answer is the consensus best, Bot-1 when
the pick_worst answer is the consensus worst, TB-1 when the pick_best_and_worst answer has both
right (for k = 2 derived from pick_best). A missing or unparseable answer is wrong.

Per task: ap@1 = mean over the trials of single-trial correctness; pass^3 = 1 when all trials are
correct, else 0. A cell (overall, one domain, one topic, one k) reports the mean over its tasks, a
percentile bootstrap CI over tasks (`pytest_pstbench.stats.bootstrap_mean_ci`, protocol settings),
and the analytic random baseline: the mean over its tasks of 1/k (Top-1, Bot-1) or 1/(k(k-1))
(TB-1, k >= 3; 1/2 for k = 2) for ap@1, and of the cube of that (independent trials) for pass^3.
"""
from __future__ import annotations

from fractions import Fraction

CELL_GROUPS = ("overall", "domain", "topic", "k")


def random_ap1(metric: str, k: int) -> Fraction:
    """Single-trial accuracy of a judge answering uniformly at random on a task of size k."""
    if k < 2:
        raise ValueError("k must be at least 2")
    if metric in ("top1", "bot1"):
        return Fraction(1, k)
    if metric == "tb1":
        return Fraction(1, 2) if k == 2 else Fraction(1, k * (k - 1))
    raise ValueError(f"unknown metric {metric!r}")


def random_pass(metric: str, k: int, trials: int = 3) -> Fraction:
    """All `trials` trials correct under independent uniform random answers."""
    return random_ap1(metric, k) ** trials


def correctness(task, answers: dict[str, list[dict]], metrics) -> dict[str, list[bool]]:
    """Per metric, per trial: was the answer right? (answers hold dataset indices or None)"""
    out: dict[str, list[bool]] = {}
    for m in metrics:
        if m == "top1":
            out[m] = [a["best"] is not None and a["best"] == task.best for a in answers["pick_best"]]
        elif m == "bot1":
            out[m] = [a["worst"] is not None and a["worst"] == task.worst for a in answers["pick_worst"]]
        elif m == "tb1":
            out[m] = [
                a["best"] is not None and a["best"] == task.best and a["worst"] == task.worst
                for a in answers["pick_best_and_worst"]
            ]
        else:
            raise ValueError(f"unknown metric {m!r}")
    return out


def task_value(aggregation: str, trials_correct: list[bool]) -> float:
    if aggregation == "ap@1":
        return sum(trials_correct) / len(trials_correct)
    if aggregation == "pass^3":
        return 1.0 if all(trials_correct) else 0.0
    raise ValueError(f"unknown aggregation {aggregation!r}")


def cells_of(tasks) -> list[tuple[str, str, list[int]]]:
    """(group, value, task positions): overall, then each domain and topic (sorted), then each k."""
    cells = [("overall", "all", list(range(len(tasks))))]
    for group in ("domain", "topic"):
        for value in sorted({getattr(t, group) for t in tasks}):
            cells.append((group, value, [i for i, t in enumerate(tasks) if getattr(t, group) == value]))
    for k in sorted({t.k for t in tasks}):
        cells.append(("k", str(k), [i for i, t in enumerate(tasks) if t.k == k]))
    return cells


def aggregate(tasks, correct: list[dict[str, list[bool]]], params) -> list[dict]:
    """Every cell: n, and per metric and aggregation mean, CI, pm and the random baseline."""
    from ..stats import bootstrap_mean_ci

    boot = params.bootstrap
    trials = params.trials
    out = []
    for group, value, idx in cells_of(tasks):
        cell = {"group": group, "value": value, "n": len(idx), "metrics": {}}
        for m in params.metrics:
            entry = {}
            for agg in params.aggregations:
                values = [task_value(agg, correct[i][m]) for i in idx]
                ci = bootstrap_mean_ci(values, confidence=boot["confidence"], resamples=boot["resamples"], seed=boot["seed"])
                base = [random_ap1(m, tasks[i].k) if agg == "ap@1" else random_pass(m, tasks[i].k, trials) for i in idx]
                entry[agg] = {
                    "mean": ci.mean,
                    "ci_low": ci.ci_low,
                    "ci_high": ci.ci_high,
                    "pm": ci.pm,
                    "random": float(sum(base, Fraction(0)) / len(base)),
                }
            cell["metrics"][m] = entry
        out.append(cell)
    return out
