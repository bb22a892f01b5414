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

The test: Pearson's chi-square goodness of fit of the observed counts against the expected ones
(`scipy.stats.chi2`, df = positions with a non-zero expectation - 1; per k, and `all_k`: the chi-squares and
df summed over k), its p-value, Cohen's w = sqrt(chi2 / n) as the effect size, and `biased` when p is below the
protocol's `comparison.alpha`. Under the null the trials of a task vary less than the multinomial the
chi-square assumes, so the test is conservative (its false-positive rate stays at most alpha; checked by
simulation in tests/selection/test_position_bias.py).

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
TEST = "chi-square goodness of fit against the position-blind expectation (trials exchangeable within a task)"
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


def _p(chi2: float, df: int) -> float | None:
    if df < 1:
        return None
    from scipy.stats import chi2 as chi2_dist

    return float(chi2_dist.sf(chi2, df))


def _entry(
    k: int, obs: list[int], exp: list[float], tasks: int, same_image: int, same_slot: int, alpha, labels
) -> dict:
    n = sum(obs)
    chi2, df = chi_square(obs, exp)
    p = _p(chi2, df)
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
        "same_image": same_image / tasks if tasks else None,
        "same_slot": same_slot / tasks if tasks else None,
    }


def position_bias(tasks, answers: list[dict], orders: list[list[tuple[int, ...]]], params, alpha) -> dict:
    """summary.json `position_bias` from the scored tasks (each with `.k`), their answers (prompt type -> per
    trial {best, worst, status}) and their display orders, in the same order."""
    labels = params.labels
    trials = params.trials
    roles = {}
    for role, ptype, which in ROLES:
        by_k: dict[int, dict] = {}
        for task, a, order in zip(tasks, answers, orders):
            if ptype not in params.prompt_types_for(task.k):
                continue  # k = 2 best+worst: derived from pick_best, not an answer of its own
            picks = _picks(a, ptype, which, trials)
            obs, exp = task_counts(task.k, order, picks)
            acc = by_k.setdefault(
                task.k, {"obs": [0] * task.k, "exp": [0.0] * task.k, "tasks": 0, "image": 0, "slot": 0}
            )
            acc["obs"] = [x + y for x, y in zip(acc["obs"], obs)]
            acc["exp"] = [x + y for x, y in zip(acc["exp"], exp)]
            if len(picks) == trials:
                acc["tasks"] += 1
                same_image = len(set(picks.values())) == 1
                acc["image"] += same_image
                acc["slot"] += (not same_image) and len({order[t].index(x) for t, x in picks.items()}) == 1
        if not by_k:
            continue
        entries = {
            str(k): _entry(k, v["obs"], v["exp"], v["tasks"], v["image"], v["slot"], alpha, labels)
            for k, v in sorted(by_k.items())
        }
        chi2 = sum(e["chi2"] for e in entries.values())
        df = sum(e["df"] for e in entries.values())
        p = _p(chi2, df)
        roles[role] = {
            "by_k": entries,
            "all_k": {
                "n": sum(e["n"] for e in entries.values()),
                "chi2": chi2,
                "df": df,
                "p": p,
                "biased": None if p is None or alpha is None else bool(p < alpha),
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
