"""Selection metrics: Top-1 / Bot-1 / TB-1 as ap@1 and pass^3, per cell, with random baselines,
counted as the official VAB toolkit's summarize.py counts them.

Per task and trial: Top-1 is correct when the pick_best answer is the consensus best, Bot-1 when
the pick_worst answer is the consensus worst, TB-1 when the pick_best_and_worst answer has both
right (for k = 2 derived from the same trial's pick_best). A trial whose answer is not `ok`
(missing, an API error, unparseable) enters by the protocol's `answers.records` rule:

* counted: in the trial's ap@1 denominator and among the trials pass^3 needs, as wrong;
* dropped: in no ap@1 denominator and not among pass^3's trials, but the task still counts in pass^3;
* absent: as if there were no record; a task whose trials of a prompt type are all absent is left
  out of that metric (official: error-only groups are skipped).

pass^3 per task = 1 when at least `trials.count` trials are counted and all of them are right, else 0;
a cell's pass^3 is the mean over its tasks that have a record. ap@1 ("avg pass@1") of a cell = for
each trial t, right / counted records of trial t; then the mean over the trials with a counted
record. With every trial counted this is the mean over tasks of the per-task accuracy. A cell with
nothing counted reports None (the official summary prints 0 there). The CI is a percentile bootstrap
over the cell's tasks (same random stream as `pytest_pstbench.core.stats.bootstrap_mean_ci`), recomputing
the statistic on each resample. Random baselines are the official ones: per task 1/k (Top-1, Bot-1),
1/(k(k-1)) (TB-1, k >= 3; 1/2 for k = 2), cubed for pass^3, averaged over the cell's tasks, summed in
track order in floating point as summarize.py does.

Each cell also carries `tb1_parts`: `best_only` / `worst_only`, the same two aggregations of "the best (the worst)
inside the best+worst answer is right" over the same records (summarize.py's accuracy_best /
accuracy_worst); every entry carries `per_trial`, the accuracy of each trial (`per_trial[0]`: trial 0,
the dataset order).
"""

from __future__ import annotations

from fractions import Fraction

CELL_GROUPS = ("overall", "domain", "topic", "k")
COUNTED, DROPPED, ABSENT = "counted", "dropped", "absent"
_PROMPT = {"top1": "pick_best", "bot1": "pick_worst", "tb1": "pick_best_and_worst"}


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


def _random_float(metric: str, agg: str, k: int, trials: int) -> float:
    """The official summarize.py's float terms: 1.0/k, 0.5, 1.0/(k*(k-1)), and these ** trials."""
    if metric == "tb1":
        p1 = 0.5 if k == 2 else 1.0 / (k * (k - 1))
    else:
        p1 = 1.0 / k
    return p1 if agg == "ap@1" else p1**trials


def trial_outcomes(task, answers: dict[str, list[dict]], params) -> dict[str, list[dict]]:
    """Per metric, per trial: {rule: counted|dropped|absent, correct, best, worst} (best/worst: was that
    half of the answer right; None where the answer has no label)."""
    out: dict[str, list[dict]] = {}
    for m in params.metrics:
        ptype = _PROMPT[m]
        recs = []
        for a in answers[ptype]:
            b_ok = None if a.get("best") is None else a["best"] == task.best
            w_ok = None if a.get("worst") is None else a["worst"] == task.worst
            if a["status"] == "ok":
                rule = COUNTED
                correct = bool(b_ok) if m == "top1" else bool(w_ok) if m == "bot1" else bool(b_ok and w_ok)
            else:
                rule, correct = params.record_rule(a["status"], ptype), False
                if rule != COUNTED:
                    b_ok = w_ok = None
            recs.append({"rule": rule, "correct": correct, "best": b_ok, "worst": w_ok})
        out[m] = recs
    return out


def correctness(task, answers: dict[str, list[dict]], metrics) -> dict[str, list[bool]]:
    """Per metric, per trial: was the answer right? (a trial that is not ok is False)"""
    out: dict[str, list[bool]] = {}
    for m in metrics:
        ptype = _PROMPT.get(m)
        if ptype is None:
            raise ValueError(f"unknown metric {m!r}")
        res = []
        for a in answers[ptype]:
            ok = a["status"] == "ok"
            if m == "top1":
                res.append(ok and a["best"] is not None and a["best"] == task.best)
            elif m == "bot1":
                res.append(ok and a["worst"] is not None and a["worst"] == task.worst)
            else:
                res.append(ok and a["best"] is not None and a["best"] == task.best and a["worst"] == task.worst)
        out[m] = res
    return out


def pass_value(recs: list[dict], key: str, trials: int):
    """pass^3 of one task (None: no record at all)."""
    if all(r["rule"] == ABSENT for r in recs):
        return None
    counted = [r for r in recs if r["rule"] == COUNTED]
    return 1 if len(counted) >= trials and all(bool(r[key]) for r in counted) else 0


def _trial_counts(recs_list: list[list[dict]], key: str, trials: int) -> tuple[list[int], list[int]]:
    """Per trial: counted records and right ones, over the given tasks."""
    den, num = [0] * trials, [0] * trials
    for recs in recs_list:
        for t, r in enumerate(recs[:trials]):
            if r["rule"] == COUNTED:
                den[t] += 1
                num[t] += int(bool(r[key]))
    return den, num


def mean_of_trial_accuracies(den: list[int], num: list[int]):
    """The official avg pass@1: mean over trials with a counted record of right / counted (None if none)."""
    accs = [c / n for c, n in zip(num, den) if n > 0]
    return sum(accs) / len(accs) if accs else None


def _ratio_bootstrap(D, N, boot) -> tuple[float, float]:
    """Percentile bootstrap over tasks of mean_of_trial_accuracies (D, N: tasks x trials 0/1 arrays)."""
    import numpy as np

    D = np.asarray(D, dtype=np.float64)
    N = np.asarray(N, dtype=np.float64)
    n = D.shape[0]
    resamples, chunk = int(boot["resamples"]), 1000
    rng = np.random.default_rng(int(boot["seed"]))
    stats = np.empty(resamples, dtype=np.float64)
    done = 0
    while done < resamples:
        m = min(chunk, resamples - done)
        idx = rng.integers(0, n, size=(m, n))
        den = D[idx].sum(axis=1)
        num = N[idx].sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            acc = np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)
        has = (den > 0).sum(axis=1)
        stats[done : done + m] = np.where(
            has > 0, np.nansum(np.nan_to_num(acc, nan=0.0), axis=1) / np.maximum(has, 1), np.nan
        )
        done += m
    alpha = (1.0 - float(boot["confidence"])) / 2.0
    low, high = np.nanquantile(stats, [alpha, 1.0 - alpha])
    return float(low), float(high)


def _pass_values(recs_list: list[list[dict]], key: str, trials: int) -> list[int]:
    """pass^3 of each task that has a record."""
    return [v for v in (pass_value(r, key, trials) for r in recs_list) if v is not None]


def entry_mean(agg: str, recs_list: list[list[dict]], key: str, trials: int):
    """The value of one aggregation over a cell's tasks (None: nothing counted): pass^3, the mean over the
    tasks with a record; ap@1, the official mean of the trials' accuracies. `_entry` (with the CI) and the
    human reference (`selection.human`, one value per expert) both compute it here."""
    if agg == "pass^3":
        values = _pass_values(recs_list, key, trials)
        return sum(values) / len(values) if values else None
    return mean_of_trial_accuracies(*_trial_counts(recs_list, key, trials))


def cell_means(tasks, outcomes: list[dict[str, list[dict]]], params) -> dict[tuple[str, str], dict]:
    """Per cell (group, value) of `cells_of(tasks)`: {metric: {aggregation: value}} (`entry_mean`, no CI)."""
    out = {}
    for group, value, idx in cells_of(tasks):
        out[(group, value)] = {
            m: {
                agg: entry_mean(agg, [outcomes[i][m] for i in idx], "correct", params.trials)
                for agg in params.aggregations
            }
            for m in params.metrics
        }
    return out


def _entry(agg: str, recs_list: list[list[dict]], key: str, trials: int, boot, random: float | None) -> dict:
    from pytest_pstbench.core.stats import bootstrap_mean_ci

    den, num = _trial_counts(recs_list, key, trials)
    per_trial = [(c / d if d else None) for c, d in zip(num, den)]
    if agg == "pass^3":
        values = _pass_values(recs_list, key, trials)
        if values and boot is None:  # the mean only (run_check: a cell whose CI is not recomputed)
            mean, low, high, pm = entry_mean(agg, recs_list, key, trials), None, None, None
        elif values:
            ci = bootstrap_mean_ci(
                values, confidence=boot["confidence"], resamples=boot["resamples"], seed=boot["seed"]
            )
            mean, low, high, pm = entry_mean(agg, recs_list, key, trials), ci.ci_low, ci.ci_high, ci.pm
        else:
            mean = low = high = pm = None
        e = {"mean": mean, "ci_low": low, "ci_high": high, "pm": pm, "n": len(values)}
    else:
        mean = entry_mean(agg, recs_list, key, trials)
        if mean is None or boot is None:
            low = high = pm = None
        else:
            rows = [[1 if r["rule"] == COUNTED else 0 for r in recs[:trials]] for recs in recs_list]
            hits = [[1 if (r["rule"] == COUNTED and r[key]) else 0 for r in recs[:trials]] for recs in recs_list]
            low, high = _ratio_bootstrap(rows, hits, boot)
            low, high = min(low, mean), max(high, mean)
            pm = (high - low) / 2.0
        e = {
            "mean": mean,
            "ci_low": low,
            "ci_high": high,
            "pm": pm,
            "n": sum(1 for r in recs_list if any(x["rule"] == COUNTED for x in r)),
        }
    e["trials_counted"] = den
    e["per_trial"] = per_trial
    if random is not None:
        e["random"] = random
    return e


def cells_of(tasks) -> list[tuple[str, str, list[int]]]:
    """(group, value, task positions): overall, then each domain and topic (sorted), then each k."""
    cells = [("overall", "all", list(range(len(tasks))))]
    for group in ("domain", "topic"):
        for value in sorted({getattr(t, group) for t in tasks}):
            cells.append((group, value, [i for i, t in enumerate(tasks) if getattr(t, group) == value]))
    for k in sorted({t.k for t in tasks}):
        cells.append(("k", str(k), [i for i, t in enumerate(tasks) if t.k == k]))
    return cells


def aggregate(tasks, outcomes: list[dict[str, list[dict]]], params, ci_groups=None) -> list[dict]:
    """Every cell: n (tasks scored), and per metric and aggregation mean, CI, pm, the random baseline,
    the tasks / trials counted and the per-trial accuracies; and tb1_parts (best_only / worst_only).
    `ci_groups`: the groups whose CIs are computed (default all; elsewhere ci_low, ci_high and pm are None)."""
    trials = params.trials
    out = []
    for group, value, idx in cells_of(tasks):
        boot = params.bootstrap if ci_groups is None or group in ci_groups else None
        cell = {"group": group, "value": value, "n": len(idx), "metrics": {}}
        for m in params.metrics:
            recs_list = [outcomes[i][m] for i in idx]
            entry = {}
            for agg in params.aggregations:
                total = 0.0
                for i in idx:  # the official float sum, in track order
                    total += _random_float(m, agg, tasks[i].k, trials)
                entry[agg] = _entry(agg, recs_list, "correct", trials, boot, total / len(idx))
            cell["metrics"][m] = entry
            if m == "tb1":
                cell["tb1_parts"] = {
                    part: {agg: _entry(agg, recs_list, key, trials, boot, None) for agg in params.aggregations}
                    for part, key in (("best_only", "best"), ("worst_only", "worst"))
                }
        out.append(cell)
    return out
