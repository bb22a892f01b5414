"""The reference rows of a selection track that are not runs, as `pstbench table` and `pstbench board` show them:
the random baseline (the analytic accuracy of a judge answering uniformly at random, `accuracy.aggregate`'s
`random` of summary.json's overall cell, the same in every run of a track) and the human reference row (summary.json
`human`, each expert scored leave-one-out: selection/human.py) where the track's runs carry one. Neither is a run:
no per-task outcomes, never ranked nor tested."""

from __future__ import annotations

from pytest_pstbench.core.errors import UserError

RANDOM = "Random"  # the random baseline row's name
RANDOM_NOTE = "the analytic accuracy of a judge answering uniformly at random (the runs' summary.json)"
HUMAN_NOTE = "the track's experts, each scored against the consensus of the others (leave-one-out)"
NO_HUMAN = (
    "No human reference row: the track's runs carry no expert votes (summary.json has no human section); "
    "score them with the track's votes file (track.yaml votes:, or --votes) to show one."
)


def overall_cell(summary: dict) -> dict | None:
    """The overall cell of a summary's (or a human section's) cells; None without one."""
    cells = summary.get("cells") if isinstance(summary, dict) else None
    return next((c for c in cells or [] if isinstance(c, dict) and c.get("group") == "overall"), None)


def random_baseline(runs, metric: str, agg: str) -> float | None:
    """The random baseline of `metric`, aggregation `agg`: the first run's overall value that carries one."""
    for run in runs:
        e = ((overall_cell(run.summary) or {}).get("metrics", {}).get(metric) or {}).get(agg) or {}
        if e.get("random") is not None:
            return e["random"]
    return None


def human_entry(human_overall: dict | None, metric: str, agg: str) -> dict:
    """The human row's entry (mean, pm, ci_low, ci_high) of `metric`, aggregation `agg` in its overall cell."""
    return ((human_overall or {}).get("metrics", {}).get(metric) or {}).get(agg) or {}


def board_references(runs, protocol, keys: list[str]) -> tuple[list[dict], list[str]]:
    """`pstbench board`'s reference rows of a selection track (the kind's `RunKind.board_references`): Random and,
    where the runs carry one, the human row (its label as its name), each key METRIC.OUTCOME's value as `pstbench
    table` shows it; where there is no human row, a note that says so (and why: no votes, or runs that disagree)."""
    from pytest_pstbench.core.text import one_line
    from pytest_pstbench.selection.human import human_row

    def values(entry_of) -> dict:
        out = {}
        for key in keys:
            e = entry_of(*key.split(".", 1))
            out[key] = {
                "mean": e.get("mean"),
                "low": e.get("ci_low"),
                "high": e.get("ci_high"),
                "higher_is_better": True,
            }
        return out

    rows = [{"name": RANDOM, "values": values(lambda m, a: {"mean": random_baseline(runs, m, a)}), "note": RANDOM_NOTE}]
    try:
        human = human_row([(r.path / "summary.json", r.summary) for r in runs])
    except UserError as exc:
        return rows, [f"No human reference row: {one_line(str(exc))}"]
    if human is None:
        return rows, [NO_HUMAN]
    overall = overall_cell(human)
    rows.append({"name": human["label"], "values": values(lambda m, a: human_entry(overall, m, a)), "note": HUMAN_NOTE})
    return rows, []
