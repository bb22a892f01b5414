"""The worst tasks of a comparison of selection runs, the analog of the paired kind's worst pairs
(`paired/worst.py`): for a metric the candidate failed the gate on, the tasks whose pass^3 outcome went from
right to wrong (every trial right in the baseline, not every trial in the candidate). Ordered by the trials
the candidate got wrong, most first, then in track order; a task right in both, wrong in both, or gained is
never listed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LostTask:
    metric: str
    task: str
    right_baseline: int  # trials right in the baseline (all of them) and in the candidate
    right_candidate: int
    trials: int


def lost_tasks(base, cand, metric: str, protocol, n: int) -> list[LostTask]:
    """The `n` tasks on which `cand` lost the pass^3 outcome of `metric` that `base` had."""
    from pytest_pstbench.selection.protocol import SelectionParams

    params = SelectionParams.of(protocol)
    trials = params.trials
    a, b = _passes(base, metric, params), _passes(cand, metric, params)
    lost = [
        LostTask(metric, tid, a[tid][1], b[tid][1], trials)
        for tid in base.task_ids
        if tid in a and tid in b and a[tid][0] == 1 and b[tid][0] == 0
    ]
    lost.sort(key=lambda t: t.right_candidate)  # stable: track order among equals
    return lost[:n]


def _passes(run, metric: str, params) -> dict[str, tuple[int | None, int]]:
    """Task id -> (its pass^3 as the run's summary counts it, None: no record; its trials right), from the
    outcomes the run's files give (`run_check.rebuilt`)."""
    from pytest_pstbench.selection.accuracy import COUNTED, pass_value
    from pytest_pstbench.selection.run_check import rebuilt

    tasks, outcomes, _ = rebuilt(run, params)
    return {
        t.id: (
            pass_value(o[metric], "correct", params.trials),
            sum(1 for r in o[metric] if r["rule"] == COUNTED and r["correct"]),
        )
        for t, o in zip(tasks, outcomes)
    }


def gate_worst(row, base, cand, protocol, n: int, files: dict | None = None):
    """A failed gate's summaries (`RunKind.gate_worst`): for the metric of `row` (pass^3 or ap@1 worse against
    `base`), the `n` tasks whose pass^3 outcome went from right to wrong."""
    from pytest_pstbench.core.gate import WorstItems

    lost = lost_tasks(base, cand, row.metric, protocol, n)
    return WorstItems(
        title=(
            f"{row.metric} against baseline run {base.name}: {len(lost)} task{'' if len(lost) == 1 else 's'} whose "
            "pass^3 outcome went from right (baseline) to wrong (candidate), most trials lost first"
        ),
        headers=("task", "baseline trials right", "candidate trials right"),
        rows=tuple((t.task, f"{t.right_baseline}/{t.trials}", f"{t.right_candidate}/{t.trials}") for t in lost),
        note="" if lost else "no task went from right to wrong on pass^3 (the candidate lost single trials only)",
    )
