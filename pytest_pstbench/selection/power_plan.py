"""`pstbench power` on a selection run: the exact McNemar gate planned per cell (metric, outcome) with the model
and simulation of selection/power.py: the drop of accuracy detectable at the run's units, and the tasks a given
drop needs, at a discordance from a candidate, `--discordance`, or the named assumption 2 p (1 - p)."""

from __future__ import annotations

from pytest_pstbench.selection.power import Plan, minimum_detectable_drop, power, uniforms

#: `pstbench power --effect` on selection runs: the most tasks it searches.
MAX_TASKS = 100_000


def discordance_source(candidate, discordance: float | None) -> str:
    """Where the plan's discordance comes from (the first line `pstbench power` prints)."""
    if candidate is not None:
        return f"the observed discordance (b + c) / n between the run and {candidate.path}, per cell"
    if discordance is not None:
        return f"a discordance of {discordance:g} per unit (--discordance)"
    return (
        "ASSUMING the two judges err independently: discordance 2 p (1 - p) per cell, p the run's accuracy (not "
        "measured); fix: give a candidate run, or --discordance PSI (the share of units on which they disagree)"
    )


def tasks_needed(per_task: float, drop: float, accuracy: float, discordance: float, plan: Plan, settings) -> int | None:
    """The fewest tasks (each `per_task` units) in which a drop of `drop` is detected with power >= target (the same
    uniforms for every n tried: doubling, then bisection); None beyond MAX_TASKS or when the drop exceeds the accuracy."""
    if drop > accuracy:
        return None
    u = uniforms(settings.simulations, settings.seed)

    def reaches(t: int) -> bool:
        return power(u, max(1, round(t * per_task)), drop, discordance, accuracy, plan) >= settings.target

    t = 1
    while not reaches(t):
        if t >= MAX_TASKS:
            return None
        t = min(2 * t, MAX_TASKS)
    lo, hi = t // 2, t
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reaches(mid) else (mid, hi)
    return hi


def planning_rows(runs: list, protocol, metrics, *, tasks=None, effects=None, discordance=None) -> list[dict]:
    """`pstbench power` on selection runs: per tested cell (metric, outcome) the baseline's accuracy p and units n,
    the discordance (observed against a candidate, else `discordance`, else 2 p (1 - p): judges erring
    independently), the minimum detectable drop at n (and with `tasks` tasks), and the tasks a drop in `effects`
    ({metric: drop}) needs. Holm over the cells, as a gate on them."""
    from pytest_pstbench.selection.compare import compare_two
    from pytest_pstbench.selection.protocol import comparison_params

    cells = compare_two(runs[0], runs[-1], protocol, metrics)
    cfg = comparison_params(protocol)
    settings = cfg.power
    n_tasks = len(runs[0].task_ids)
    plan = Plan(cfg.alpha, len(cells))
    out = []
    for r in cells:
        p = r.acc_baseline
        if len(runs) > 1:
            psi = (r.b + r.c) / r.n if r.n else 0.0
        else:
            psi = discordance if discordance is not None else 2 * p * (1 - p)
        per_task = r.n / n_tasks if n_tasks else 0.0
        row = {"metric": r.metric, "outcome": r.outcome, "n": r.n, "tasks": n_tasks, "accuracy": p}
        row.update(discordance=psi, tests=len(cells), power=settings.target, simulations=settings.simulations)
        row.update(seed=settings.seed, mde=minimum_detectable_drop(r.n, p, psi, plan, settings) if r.n else None)
        if tasks is not None:
            row["tasks_planned"] = tasks
            row["mde_at_tasks"] = minimum_detectable_drop(max(1, round(tasks * per_task)), p, psi, plan, settings)
        if effects and r.metric in effects:
            row["effect"] = effects[r.metric]
            row["tasks_needed"] = tasks_needed(per_task, effects[r.metric], p, psi, plan, settings) if r.n else None
        out.append(row)
    return out


def planning_text(rows: list[dict], runs: list, protocol, discordance=None) -> str:
    """What `pstbench power` prints for selection runs: the discordance's source, the settings, one line per cell."""
    from pytest_pstbench.selection.protocol import SelectionParams

    params = SelectionParams.of(protocol)
    first = rows[0]
    lines = [
        f"discordance: {discordance_source(runs[1] if len(runs) > 1 else None, discordance)}",
        f"track: {runs[0].summary.get('track')}   protocol: {protocol.id}   {first['tasks']} tasks   "
        f"power target {first['power'] * 100:g}% ({first['simulations']} simulations of the exact McNemar test, "
        f"seed {first['seed']}; Holm over {first['tests']} tests)",
    ]

    def drop(v):
        return "none (no drop is detectable)" if v is None else f"{v:.3f}"

    for r in rows:
        label = params.metrics[r["metric"]].get("label", r["metric"])
        text = f"{label} {r['outcome']}: minimum detectable drop of accuracy {drop(r['mde'])} at n={r['n']}"
        if "tasks_planned" in r:
            text += f"; {drop(r['mde_at_tasks'])} with {r['tasks_planned']} tasks"
        if "effect" in r:
            need = r["tasks_needed"]
            text += (
                f"; a drop of {r['effect']:g} needs {need} tasks"
                if need is not None
                else f"; a drop of {r['effect']:g} needs more than {MAX_TASKS} tasks (or exceeds the accuracy)"
            )
        lines.append(f"{text}   [accuracy {r['accuracy']:.3f}, discordance {r['discordance']:.3f}]")
    return "\n".join(lines)
