"""The regression gate: a finished run against baseline runs and bounds on means."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .errors import UserError


def parse_bounds(items: list[str] | None, kind: str, protocol) -> dict[str, float]:
    """`["psnr=22", ...]` -> {"psnr": 22.0}; metric names are checked against the protocol."""
    out = {}
    for item in items or []:
        name, sep, value = str(item).partition("=")
        name = name.strip()
        if not sep:
            raise UserError(f"--pstbench-{kind} {item!r}: expected METRIC=VALUE, e.g. psnr=22")
        if name not in protocol.metrics:
            raise UserError(
                f"--pstbench-{kind} {item!r}: unknown metric {name!r}; protocol {protocol.id} has "
                f"{', '.join(protocol.metric_names)}"
            )
        try:
            out[name] = float(value)
        except ValueError:
            raise UserError(f"--pstbench-{kind} {item!r}: {value!r} is not a number") from None
    return out


def parse_metrics(spec: str | None, protocol) -> list[str] | None:
    if not spec:
        return None
    names = [m.strip() for m in str(spec).split(",") if m.strip()]
    unknown = [m for m in names if m not in protocol.metrics]
    if unknown:
        raise UserError(
            f"--pstbench-gate-metrics: unknown metric(s) {', '.join(unknown)}; protocol {protocol.id} has "
            f"{', '.join(protocol.metric_names)}"
        )
    return names


@dataclass
class GateResult:
    comparison: object | None = None  # compare.Comparison
    reasons: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.reasons)


def evaluate_gate(run_dir: Path, summary: dict, protocol, *, baselines: list[Path], metrics: list[str] | None,
                  mins: dict[str, float], maxs: dict[str, float]) -> GateResult:
    """Compare the run in `run_dir` with each baseline (Holm over all tests) and check the bounds."""
    from .compare import check_comparable, compare_two, finish_comparison
    from .runs import load_run

    result = GateResult()
    for name, bound in mins.items():
        mean = summary["metrics"][name]["mean"]
        if mean is None or mean < bound:
            result.reasons.append(f"{name} mean {mean:.6g} is below the minimum {bound:g} (--pstbench-min)")
    for name, bound in maxs.items():
        mean = summary["metrics"][name]["mean"]
        if mean is None or mean > bound:
            result.reasons.append(f"{name} mean {mean:.6g} is above the maximum {bound:g} (--pstbench-max)")
    if baselines:
        candidate = load_run(run_dir)
        rows = []
        for b in baselines:
            base = load_run(Path(b))
            check_comparable([base, candidate])
            rows.extend(compare_two(base, candidate, protocol, metrics))
        comp = finish_comparison(rows, protocol)
        result.comparison = comp
        for r in comp.worse:
            result.reasons.append(
                f"{r.metric} is significantly worse than baseline run {r.baseline}: "
                f"mean diff {r.mean_diff:+.6g}, Holm-adjusted p = {r.p_holm:.4g} < alpha {comp.alpha}"
            )
    return result
