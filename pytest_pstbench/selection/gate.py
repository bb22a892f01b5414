"""The selection kind's gate: bounds on the overall means and the baseline comparison (exact McNemar,
`selection.compare`), each holding only on values that count enough of the track's tasks (the
protocol's `comparison.min_counted_fraction`)."""

from __future__ import annotations

from pathlib import Path

from pytest_pstbench.selection.compare import overall_means
from pytest_pstbench.selection.protocol import comparison_params


def counted_tasks(summary: dict) -> dict[str, int]:
    """summary.json's overall cell as {"METRIC.AGGREGATION": tasks counted in that value}."""
    cell = next((c for c in summary.get("cells", []) if c.get("group") == "overall"), None)
    if cell is None:
        return {}
    return {f"{m}.{a}": int(v.get("n") or 0) for m, aggs in cell["metrics"].items() for a, v in aggs.items()}


def coverage_reasons(summary: dict, keys: list[str], protocol, basis: list[str]) -> list[str]:
    """One reason per gated or bounded value (`keys`, METRIC.AGGREGATION) that counts fewer of the track's
    tasks than the protocol's `comparison.min_counted_fraction` asks (answers missing, API errors, tasks
    not scored); appends to `basis` how many tasks the verdict rests on."""
    import math

    if not keys:
        return []
    frac = comparison_params(protocol).min_counted_fraction
    total = int(summary.get("n_tasks") or 0)
    counted = counted_tasks(summary)
    need = math.ceil(frac * total - 1e-9)
    reasons = []
    for key in keys:
        n = counted.get(key, 0)
        if n < need or total == 0:
            reasons.append(
                f"{key.replace('.', ' ', 1)} counts {n} of the track's {total} tasks (the others have no counted answer: "
                f"missing, an API error or not scored); protocol {protocol.id} gates only on values that count at least "
                f"{need} of them (comparison.min_counted_fraction {frac:g}); fix: answer every task (pstbench vab run "
                "resumes its answers file) and score again"
            )
    low = min(keys, key=lambda k: counted.get(k, 0))
    basis.append(f"the gated values count {counted.get(low, 0)} of the track's {total} tasks or more")
    return reasons


def evaluate_selection_gate(
    run_dir: Path,
    protocol,
    *,
    baselines: list[Path],
    metrics: list[str] | None,
    mins: dict[str, float] | None = None,
    maxs: dict[str, float] | None = None,
    summary: dict | None = None,
    track=None,
):
    """The candidate run in `run_dir`: bounds on its overall means (`summary`, else its summary.json),
    then against each baseline run (Holm over all tests) -> gate.GateResult. With `track` (the pytest
    gate's), each baseline's task rows must hold the track's labels (`run_check.check_labels_against_track`)."""
    from pytest_pstbench.core.gate import GateResult, check_bounds

    result = GateResult()
    mins, maxs = mins or {}, maxs or {}
    if summary is None:  # read through the one validating reader of run folders
        from pytest_pstbench.core.store.reader import read_runs

        summary = read_runs([run_dir], protocol=protocol)[1][0].summary
    keys = list(dict.fromkeys([*mins, *maxs]))
    if baselines:
        cfg = comparison_params(protocol)
        from pytest_pstbench.selection.protocol import SelectionParams

        for m in metrics or SelectionParams.of(protocol).metrics:
            keys.extend(f"{m}.{o}" for o in cfg.outcomes if f"{m}.{o}" not in keys)
    result.reasons.extend(coverage_reasons(summary, keys, protocol, result.basis))
    if mins or maxs:
        result.reasons.extend(check_bounds(overall_means(summary), mins, maxs, label=lambda k: k.replace(".", " ", 1)))
    if not baselines:
        return result
    from pytest_pstbench.core.compare import gate_against_baselines as against

    if track is not None:
        from pytest_pstbench.selection.run_check import check_labels_against_track
        from pytest_pstbench.selection.runs import load_selection_run

        for b in baselines:
            if (Path(b) / "per_task.csv").is_file():  # otherwise the loader names what is missing
                check_labels_against_track(load_selection_run(b), track)

    against(result, run_dir, baselines, protocol, metrics)
    from pytest_pstbench.selection.power import detectable_line

    line = detectable_line(result.comparison, protocol)
    if line:
        result.basis.append(line)
    return result
