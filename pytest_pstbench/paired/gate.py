"""The paired kind's gate: bounds on a run's per-metric numbers (the protocol's statistic) and the
baseline comparison (paired Wilcoxon, `paired.compare`, through `core.compare.gate_against_baselines`)."""

from __future__ import annotations

from pathlib import Path

from pytest_pstbench.core.compare import gate_against_baselines
from pytest_pstbench.core.gate import GateResult, check_bounds
from pytest_pstbench.paired.aggregation import entry_value, statistic_of


def evaluate_gate(
    run_dir: Path,
    summary: dict,
    protocol,
    *,
    baselines: list[Path],
    metrics: list[str] | None,
    mins: dict[str, float],
    maxs: dict[str, float],
    margins: dict[str, float] | None = None,
    item_files: dict | None = None,
) -> GateResult:
    """Compare the run in `run_dir` with each baseline (Holm over all tests) and check the bounds;
    `margins` (metric -> delta > 0) makes a metric fail only when significantly worse by more than delta;
    `item_files` (pair id -> (content, style)) names the files of the worst pairs a failed gate shows."""
    result = GateResult()

    def label(m: str) -> str:  # as the tables name the metric, its id beside the label
        p = protocol.metrics[m]
        return f"{p['label']}{'↑' if p['higher_is_better'] else '↓'} ({m})"

    result.reasons.extend(
        check_bounds(
            {m: entry_value(summary["metrics"][m]) for m in {**mins, **maxs}},
            mins,
            maxs,
            label=label,
            statistic=lambda m: statistic_of(protocol, m).replace("pooled_mse", "pooled-MSE PSNR"),
        )
    )
    if baselines:
        gate_against_baselines(result, run_dir, baselines, protocol, metrics, margins, item_files)
        line = detectable_line(result.comparison, protocol)
        if line:
            result.basis.append(line)
    return result


def detectable_line(comp, protocol) -> str | None:
    """What a passed gate could have found (its verdict's basis): each tested metric's minimum detectable
    effect at the run's n (paired/power.py), or that no shift is detectable at this n."""
    from pytest_pstbench.paired.power import mde_text

    rows = [r for r in (comp.rows if comp is not None else []) if r.detectable]
    if not rows:
        return None
    info = rows[0].detectable
    if all(r.detectable.get("unknown") for r in rows):  # identical runs: no tie threshold posing as an MDE
        return (
            f"the worse shifts this comparison can detect are not known from these runs: {info['unknown']} "
            "(identical outputs?); plan them with `pstbench power BASELINE --noise-from RUN_A RUN_B` or --correlation R"
        )
    parts = [
        f"{protocol.metrics[r.metric]['label']} {mde_text(r, 3)}"
        + (f" vs {r.baseline}" if len({x.baseline for x in rows}) > 1 else "")
        for r in rows
    ]
    return (
        f"worse shifts of the mean detectable with {info['power'] * 100:g}% power at n={rows[0].n} (Holm over "
        f"{info['tests']} tests): {', '.join(parts)}"
    )
