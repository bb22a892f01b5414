"""Position bias of a selection judge (summary.json `position_bias`): per answer role and per k, how often each
displayed position is picked, against what a position-blind judge would show under the track's permutations.

Roles: `best` (pick_best), `worst` (pick_worst), `bw_best` / `bw_worst` (pick_best_and_worst, k >= 3 only: for
k = 2 it is derived from pick_best). A trial enters a role when its answer is ok and names a candidate; its
displayed position is where the trial's order (`permutations.orders_for`) showed the picked candidate.

The position-blind expectation. A judge that does not look at positions answers each of a task's trials from
the same images, so under that null the task's trials are exchangeable: given the candidates it picked in its
answered trials, each of them was as likely to be picked in any of those trials. A task with answered trials T
and picks x_s (s in T) therefore expects at position p the count (1/|T|) * sum_{t in T} sum_{s in T}
[order_t shows x_s at p]. This is conditional on which images the judge prefers, so a judge that is right
where the consensus best sits in dataset order (trial 0 shows dataset order) is not called biased; a judge
that picks the same image in every order expects exactly what it shows (no evidence either way).

The test: the exact conditional (permutation) test of Pearson's chi-square statistic of the observed counts
against the expected ones (over the positions with a non-zero expectation; df = those positions - 1, shown, not
used). Under the null each task's picks are equally likely to have fallen on its answered trials in any
assignment, independently across tasks; the p-value is the probability, over those assignments, of a chi-square
at least the observed one (per k; `all_k`: the chi-squares summed over k, every task reassigned together). It is
computed exactly (the distribution of the summed counts built task by task) where building that distribution takes at
most `EXACT_WORK` steps, else from `DRAWS` seeded random assignments as (1 + draws at least as extreme) / (1 +
DRAWS), which is also a valid p-value. The trials of a task vary less than a multinomial around the expectation,
so the chi-square distribution would be conservative (a false-positive rate of 0-1.5% at a nominal 5%); the
permutation distribution is the statistic's own (benchmarks/bench_position_bias.py measures both rates). Cohen's
w = sqrt(chi2 / n) is the effect size, and `biased` is p below the protocol's `comparison.alpha`.

Also per role and k: position consistency over the tasks with every trial answered (`same_image`: the same
candidate picked in every order; `same_slot`: the same position in every order while the candidate changed,
i.e. the pick followed the slot) and preference fairness (`tvd`: total variation distance of the observed from
the expected position rates; `favoured`: the label of the position with the largest excess, and that excess).

Everything is recomputed from per_task.csv's picks and run.json by `selection.run_check` (`summary_of`)."""

from __future__ import annotations

import math

ROLES = (
    ("best", "pick_best", "best"),
    ("worst", "pick_worst", "worst"),
    ("bw_best", "pick_best_and_worst", "best"),
    ("bw_worst", "pick_best_and_worst", "worst"),
)
TEST = (
    "exact conditional permutation test of the chi-square statistic against the position-blind expectation "
    "(each task's picks reassigned to its answered trials)"
)
EXACT_WORK = 10_000  # the most (outcome so far x task outcome) pairs the exact distribution may combine
DRAWS = 10_000  # random assignments where there are more
SEED = 20_250_046  # the draws' seed: a run's p-values are reproducible (the loader recomputes them)
HUMAN_WHY = (
    "not measured: a votes file records each expert's best and worst but not the display order the expert "
    "saw (one vote per task), so no position can be read from it"
)


def _picks(answers: dict, ptype: str, which: str, trials: int) -> dict[int, int]:
    """trial -> picked dataset index, for the trials whose answer is ok and names a candidate."""
    from pytest_pstbench.selection.answers import OK

    out = {}
    for t, a in enumerate((answers.get(ptype) or [])[:trials]):
        if a.get("status") == OK and a.get(which) is not None:
            out[t] = int(a[which])
    return out


def task_counts(k: int, orders: list[tuple[int, ...]], picks: dict[int, int]) -> tuple[list[int], list[float]]:
    """(observed count per position, position-blind expected count per position) of one task's picks."""
    obs = [0] * k
    exp = [0.0] * k
    if not picks:
        return obs, exp
    for t, x in picks.items():
        obs[orders[t].index(x)] += 1
    share = 1.0 / len(picks)
    for t in picks:
        for x in picks.values():
            exp[orders[t].index(x)] += share
    return obs, exp


def chi_square(obs: list[int], exp: list[float]) -> tuple[float, int]:
    """Pearson's chi-square over the positions with a non-zero expectation, and its degrees of freedom."""
    cells = [(o, e) for o, e in zip(obs, exp) if e > 1e-12]
    return float(sum((o - e) ** 2 / e for o, e in cells)), max(len(cells) - 1, 0)


MAX_ENUMERATED_TRIALS = 7  # a task with more answered trials is drawn by random permutations, not enumerated


def _positions(orders: list[tuple[int, ...]], picks: dict[int, int]) -> list[list[int]]:
    """pos[i][j]: the position at which the i-th answered trial's order shows the j-th pick (the null reassigns
    the picks to the answered trials)."""
    return [[orders[t].index(x) for x in picks.values()] for t in picks]


def _assignment_counts(k: int, pos: list[list[int]]) -> list[tuple[int, ...]]:
    """The count vector of every assignment of a task's picks to its answered trials (m! of them, equally likely)."""
    import itertools

    out = []
    for perm in itertools.permutations(range(len(pos))):
        c = [0] * k
        for i, j in enumerate(perm):
            c[pos[i][j]] += 1
        out.append(tuple(c))
    return out


def _exact(k: int, tasks: list[list[list[int]]], exp: list[float]) -> dict[float, float] | None:
    """chi-square -> probability under the null, built task by task over the summed count vectors; None when a
    task has too many trials to enumerate or building it would take more than EXACT_WORK steps."""
    states = {tuple([0] * k): 1.0}
    work = 0
    for pos in tasks:
        if len(pos) > MAX_ENUMERATED_TRIALS:
            return None
        counts = _assignment_counts(k, pos)
        share = 1.0 / len(counts)
        step: dict[tuple[int, ...], float] = {}
        for c in counts:
            step[c] = step.get(c, 0.0) + share
        work += len(states) * len(step)
        if work > EXACT_WORK:
            return None
        new: dict[tuple[int, ...], float] = {}
        for s, p in states.items():
            for c, q in step.items():
                key = tuple(a + b for a, b in zip(s, c))
                new[key] = new.get(key, 0.0) + p * q
        states = new
    dist: dict[float, float] = {}
    for s, p in states.items():
        v = chi_square(list(s), exp)[0]
        dist[v] = dist.get(v, 0.0) + p
    return dist


def _convolve(dists: list[dict[float, float]]) -> dict[float, float] | None:
    """The distribution of the sum of independent chi-squares (None past EXACT_WORK steps)."""
    total = {0.0: 1.0}
    work = 0
    for d in dists:
        work += len(total) * len(d)
        if work > EXACT_WORK:
            return None
        new: dict[float, float] = {}
        for a, p in total.items():
            for b, q in d.items():
                key = round(a + b, 9)
                new[key] = new.get(key, 0.0) + p * q
        total = new
    return total


def _drawn(k: int, tasks: list[list[list[int]]], exp: list[float], rng):
    """The chi-square of DRAWS random reassignments (every task's picks to its answered trials, independently)."""
    import numpy as np

    counts = np.zeros((DRAWS, k), dtype=np.int64)
    for pos in tasks:
        m = len(pos)
        if m <= MAX_ENUMERATED_TRIALS:
            table = np.array(_assignment_counts(k, pos), dtype=np.int64)
            counts += table[rng.integers(0, len(table), size=DRAWS)]
        else:
            perms = rng.permuted(np.tile(np.arange(m), (DRAWS, 1)), axis=1)
            shown = np.asarray(pos)[np.arange(m), perms]  # (DRAWS, m): the position of trial i's reassigned pick
            for p in range(k):
                counts[:, p] += (shown == p).sum(axis=1)
    e = np.asarray(exp)
    keep = e > 1e-12
    return (((counts[:, keep] - e[keep]) ** 2) / e[keep]).sum(axis=1)


def _at_least(dist: dict[float, float], chi2: float) -> float:
    floor = chi2 - 1e-9 * max(1.0, chi2)
    return min(1.0, sum(p for v, p in dist.items() if v >= floor))


def _drawn_p(draws, chi2: float) -> float:
    floor = chi2 - 1e-9 * max(1.0, chi2)
    return float((1 + int((draws >= floor).sum())) / (1 + DRAWS))


def permutation_p(groups: dict[int, dict]) -> tuple[dict[int, float | None], float | None]:
    """The per-k and all-k p-values of the conditional test. groups: k -> {"tasks": per task the positions
    (`_positions`), "obs", "exp"}. A k whose chi-square has df < 1 has no p-value (nothing can vary)."""
    import numpy as np

    stat = {k: chi_square(g["obs"], g["exp"]) for k, g in groups.items()}
    exact = {k: _exact(k, g["tasks"], g["exp"]) for k, g in groups.items()}
    draws = None
    if any(d is None for d in exact.values()) or (all_k := _convolve(list(exact.values()))) is None:
        rng = np.random.default_rng(SEED)
        draws = {k: _drawn(k, groups[k]["tasks"], groups[k]["exp"], rng) for k in sorted(groups)}
    per_k = {}
    for k, (chi2, df) in stat.items():
        if df < 1:
            per_k[k] = None
        else:
            per_k[k] = _at_least(exact[k], chi2) if exact[k] is not None else _drawn_p(draws[k], chi2)
    chi2_all = sum(c for c, _ in stat.values())
    if sum(df for _, df in stat.values()) < 1:
        return per_k, None
    if draws is None:
        return per_k, _at_least(all_k, chi2_all)
    return per_k, _drawn_p(sum(draws.values()), chi2_all)


def _entry(k: int, acc: dict, p: float | None, alpha, labels) -> dict:
    obs, exp, tasks = acc["obs"], acc["exp"], acc["tasks_all"]
    n = sum(obs)
    chi2, df = chi_square(obs, exp)
    rates = [o / n for o in obs] if n else [None] * k
    expected = [e / n for e in exp] if n else [None] * k
    excess = [r - e for r, e in zip(rates, expected)] if n else []
    top = max(range(k), key=lambda i: (excess[i], -i)) if n else None
    if top is not None and excess[top] <= 1e-12:  # the picks are what a position-blind judge shows: none favoured
        top = None
    return {
        "n": n,
        "counts": obs,
        "rates": rates,
        "expected_rates": expected,
        "chi2": chi2,
        "df": df,
        "p": p,
        "effect_w": math.sqrt(chi2 / n) if n else None,
        "biased": None if p is None or alpha is None else bool(p < alpha),
        "tvd": 0.5 * sum(abs(x) for x in excess) if n else None,
        "favoured": labels[top] if top is not None else None,
        "excess": excess[top] if top is not None else None,
        "tasks_all_trials": tasks,
        "same_image": acc["image"] / tasks if tasks else None,
        "same_slot": acc["slot"] / tasks if tasks else None,
    }


def _accumulate(tasks, answers, orders, params, ptype: str, which: str) -> dict[int, dict]:
    """k -> the role's summed observed and expected counts, each task's positions (for the test) and the
    consistency counts over the tasks with every trial answered."""
    trials = params.trials
    by_k: dict[int, dict] = {}
    for task, a, order in zip(tasks, answers, orders):
        if ptype not in params.prompt_types_for(task.k):
            continue  # k = 2 best+worst: derived from pick_best, not an answer of its own
        picks = _picks(a, ptype, which, trials)
        obs, exp = task_counts(task.k, order, picks)
        acc = by_k.setdefault(
            task.k, {"obs": [0] * task.k, "exp": [0.0] * task.k, "tasks": [], "tasks_all": 0, "image": 0, "slot": 0}
        )
        acc["obs"] = [x + y for x, y in zip(acc["obs"], obs)]
        acc["exp"] = [x + y for x, y in zip(acc["exp"], exp)]
        if picks:
            acc["tasks"].append(_positions(order, picks))
        if len(picks) == trials:
            acc["tasks_all"] += 1
            same_image = len(set(picks.values())) == 1
            acc["image"] += same_image
            acc["slot"] += (not same_image) and len({order[t].index(x) for t, x in picks.items()}) == 1
    return by_k


def position_bias(tasks, answers: list[dict], orders: list[list[tuple[int, ...]]], params, alpha) -> dict:
    """summary.json `position_bias` from the scored tasks (each with `.k`), their answers (prompt type -> per
    trial {best, worst, status}) and their display orders, in the same order."""
    roles = {}
    for role, ptype, which in ROLES:
        by_k = _accumulate(tasks, answers, orders, params, ptype, which)
        if not by_k:
            continue
        p_k, p_all = permutation_p(by_k)
        entries = {str(k): _entry(k, v, p_k[k], alpha, params.labels) for k, v in sorted(by_k.items())}
        roles[role] = {
            "by_k": entries,
            "all_k": {
                "n": sum(e["n"] for e in entries.values()),
                "chi2": sum(e["chi2"] for e in entries.values()),
                "df": sum(e["df"] for e in entries.values()),
                "p": p_all,
                "biased": None if p_all is None or alpha is None else bool(p_all < alpha),
            },
        }
    return {"test": TEST, "alpha": alpha, "roles": roles}


def alpha_of(protocol):
    """The protocol's comparison.alpha (None where it has no comparison section)."""
    cfg = protocol.data.get("comparison")
    return cfg.get("alpha") if isinstance(cfg, dict) else None


def summary_of(tasks, answers, orders, params, protocol, human: bool) -> dict:
    """summary.json `position_bias` as a run writes it (with `human`: why the human row has none)."""
    out = position_bias(tasks, answers, orders, params, alpha_of(protocol))
    if human:
        out["human"] = HUMAN_WHY
    return out


# ---- what tables and reports show -----------------------------------------------------------------------
def rows(summary: dict, params) -> list[dict]:
    """One row per role and k of a run's summary.json (`position_bias`; [] without it): what a table or a plot
    shows (role, k, n, labels, observed and expected rates, p, w, biased, same_image, same_slot, favoured,
    excess, tvd). The HTML report calls this for its plot per judge."""
    pb = summary.get("position_bias") if isinstance(summary, dict) else None
    if not isinstance(pb, dict):
        return []
    out = []
    for role, entry in (pb.get("roles") or {}).items():
        for k, e in (entry.get("by_k") or {}).items():
            out.append({"role": role, "k": int(k), "labels": params.labels[: int(k)], **e})
    return out


def _f(v, spec=".2f") -> str:
    return "-" if v is None else format(v, spec)


def table(summary: dict, params, tablefmt: str = "simple") -> str | None:
    """The position-bias table of `vab score` (None without `position_bias`): one row per role and k."""
    from tabulate import tabulate

    body = []
    for r in rows(summary, params):
        shown = " ".join(f"{lab} {_f(o)}/{_f(e)}" for lab, o, e in zip(r["labels"], r["rates"], r["expected_rates"]))
        body.append(
            [
                r["role"],
                str(r["k"]),
                str(r["n"]),
                shown,
                _f(r["chi2"], ".2f"),
                _f(r["p"], ".3g"),
                _f(r["effect_w"], ".3f"),
                "yes" if r["biased"] else "no" if r["biased"] is False else "-",
                f"{r['favoured']} {_f(r['excess'], '+.2f')}" if r["favoured"] else "-",
                _f(r["tvd"], ".3f"),
                _f(r["same_image"]),
                _f(r["same_slot"]),
            ]
        )
    if not body:
        return None
    pb = summary["position_bias"]
    heading = (
        f"position bias (picked rate per displayed position / a position-blind judge's under these permutations; "
        f"{pb['test']}; alpha={pb['alpha']})"
    )
    headers = [
        "role",
        "k",
        "n",
        "observed/expected per position",
        "chi2",
        "p",
        "w",
        "biased",
        "favoured",
        "tvd",
        "same image",
        "same slot",
    ]
    text = (
        heading
        + "\n"
        + ("\n" if tablefmt == "github" else "")
        + tabulate(body, headers=headers, tablefmt=tablefmt, disable_numparse=True)
    )
    if pb.get("human"):
        text += f"\nhuman row: {pb['human']}"
    return text


def line(summary: dict) -> str | None:
    """One line per run for `pstbench table`'s notes: each role's all-k test and the most favoured position."""
    pb = summary.get("position_bias") if isinstance(summary, dict) else None
    if not isinstance(pb, dict) or not pb.get("roles"):
        return None
    parts = []
    for role, entry in pb["roles"].items():
        a = entry["all_k"]
        if not a["n"]:
            continue
        k, top = max(entry["by_k"].items(), key=lambda ke: ke[1]["excess"] if ke[1]["excess"] is not None else -1)
        favoured = (
            f"most favoured {top['favoured']} at k={k} ({_f(top['excess'], '+.2f')})"
            if top["favoured"]
            else "no position favoured"
        )
        parts.append(f"{role} p={_f(a['p'], '.3g')}{' (biased)' if a['biased'] else ''}, {favoured}")
    return "; ".join(parts) or None
