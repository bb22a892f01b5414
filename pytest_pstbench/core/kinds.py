"""The run-kind interface: what each track kind (paired, selection) provides for its run folders, so
that `pstbench compare`, the `pstbench_compare` fixture, `pstbench table` and the pytest gate are
written once against it. A third track kind adds one `RunKind` (and its name in `_KINDS`).

Standard library only; a kind's own module (numpy, scipy) is imported when the kind is first used.
"""
from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from pytest_pstbench.core.errors import UserError

# kind name -> "module:attribute" of its RunKind
_KINDS = {"paired": "pytest_pstbench.paired.compare:PAIRED_RUNS", "selection": "pytest_pstbench.selection.compare:SELECTION_RUNS"}
_FILES = {"paired": "metrics.csv", "selection": "per_task.csv"}  # the per-item file that tells a kind apart
# kind name -> "module:attribute" of its pytest run (a `pytest_pstbench.pytest_run.TrackRun`)
_PYTEST_RUNS = {"paired": "pytest_pstbench.plugin.paired:PairedRun",
                "selection": "pytest_pstbench.plugin.selection:SelectionRun"}


@dataclass(frozen=True)
class RunKind:
    name: str
    run_files: tuple[str, ...]
    load: Callable[[Path], Any]  # a run folder -> the kind's run object (UserError when it is not one)
    check_comparable: Callable[[list], None]  # UserError naming the field when runs cannot be compared
    compare_two: Callable[..., list]  # (baseline, candidate, protocol, metrics, margins) -> test rows
    finish: Callable[[list, Any], Any]  # (rows, protocol) -> a comparison (Holm over the rows): .worse, .alpha
    worse_reason: Callable[[Any, Any], str]  # (row, comparison) -> the gate's reason for a worse row
    compare_paths: Callable[..., Any]  # (paths, *, protocol_spec, against_first, metrics, margins) -> comparison
    validate: Callable[[Any, Any], None]  # (run, protocol): UserError when a complete run's files disagree or break a rule
    item_file: str  # the per-item file (metrics.csv / per_task.csv): its content tells runs apart
    smallest_pvalue: Callable[[Any, Any], float]  # (row, protocol) -> the smallest p its test can give with its n
    unit: str  # what a test's n counts ("pairs")


def get(name: str) -> RunKind:
    module, _, attr = _KINDS[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def track_kind(spec: str, *bases: Path) -> str:
    """The kind of a track spec: 'selection' for a built-in selection track or a manifest with
    `kind: selection` (relative paths also tried against `bases`), else 'paired'."""
    from pytest_pstbench.selection.kind import is_selection_track

    return "selection" if is_selection_track(spec, *bases) else "paired"


def pytest_run_class(kind: str):
    """The `TrackRun` subclass that runs a track of this kind under pytest."""
    module, _, attr = _PYTEST_RUNS[kind].partition(":")
    return getattr(importlib.import_module(module), attr)


def run_kind(path: str | Path) -> str | None:
    """'selection' or 'paired', from run.json / summary.json `kind`, else from the per-item file
    (per_task.csv / metrics.csv); None when the folder holds none of these (its loader then says what
    is missing)."""
    p = Path(path)
    for name in ("run.json", "summary.json"):
        try:
            data = json.loads((p / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            return "selection" if data.get("kind") == "selection" else "paired"
    for kind in ("selection", "paired"):
        if (p / _FILES[kind]).is_file():
            return kind
    return None


def runs_kind(paths) -> str:
    """The kind shared by all run folders ('paired' when none can be told); a mix of kinds is a user error."""
    kinds = [(run_kind(p), Path(p)) for p in paths]
    selection = [p for k, p in kinds if k == "selection"]
    paired = [p for k, p in kinds if k == "paired"]
    if selection and paired:
        raise UserError(
            f"{paired[0]} is a paired run (metrics.csv) but {selection[0]} is a selection run (per_task.csv); "
            "paired and selection runs cannot be compared; fix: compare runs of the same track"
        )
    return "selection" if selection else "paired"


def kind_of_runs(paths) -> RunKind:
    return get(runs_kind(paths))


def gate_against_baselines(result, run_dir: Path, baselines, protocol, metrics, margins: dict | None = None) -> None:
    """The candidate run in `run_dir` against each baseline run of the same kind, Holm over all tests;
    each test whose verdict is worse adds the kind's reason to `result` (a gate.GateResult)."""
    kind = kind_of_runs([*baselines, run_dir])  # a baseline of another kind is refused here
    candidate = kind.load(Path(run_dir))
    rows = []
    for b in unique_baselines(baselines, kind, result.notes):
        base = kind.load(Path(b))
        kind.check_comparable([base, candidate])
        kind.validate(base, protocol)
        rows.extend(kind.compare_two(base, candidate, protocol, metrics, margins))
    kind.validate(candidate, protocol)
    comp = kind.finish(rows, protocol)
    result.comparison = comp
    result.reasons.extend(comparison_failures(comp, kind, protocol))


def comparison_failures(comp, kind: RunKind, protocol) -> list[str]:
    """Why a comparison fails a gate (`pstbench compare --fail-on-worse` too): a reason per test worse than
    its baseline; with none worse, the reason it could not have found one (`cannot_detect`), if so."""
    reasons = [kind.worse_reason(r, comp) for r in comp.worse]
    if comp.rows and not reasons:
        blind = cannot_detect(comp.rows, comp.alpha, kind, protocol)
        if blind:
            reasons.append(blind)
    return reasons


def cannot_detect(rows, alpha: float, kind: RunKind, protocol) -> str | None:
    """Why a comparison could not have found any test worse, whatever the runs' values: with too few pairs
    (or tasks), Holm's smallest adjusted p-value, m times the smallest p any test can give, is not below
    alpha. A gate that cannot fail proves nothing, so it fails and says so; None when it can detect."""
    smallest = min(kind.smallest_pvalue(r, protocol) for r in rows)
    m = len(rows)
    if m * smallest < alpha:
        return None
    n = min(r.n for r in rows)
    return (f"the baseline comparison cannot detect a worse run: with {n} {kind.unit} per test the smallest p-value a "
            f"test can give is {smallest:.4g}, and Holm's correction over its {m} tests makes that {min(1.0, m * smallest):.4g}, "
            f"not below alpha {alpha}; fix: gate on a track with more items, on fewer metrics (--pstbench-gate-metrics), "
            "or with bounds (--pstbench-min/--pstbench-max) instead of a baseline")


def unique_baselines(baselines, kind: RunKind, notes: list[str]) -> list[Path]:
    """The baselines, each run once: a folder given again (by another path or a symlink) or a copy with
    the same per-item file (the same values pair for pair: the same tests) is dropped, with a note. A
    duplicate would enter Holm's correction twice and weaken the gate."""
    import hashlib

    seen: dict[str, Path] = {}
    out = []
    for b in baselines:
        b = Path(b)
        try:
            digest = hashlib.sha256((b / kind.item_file).read_bytes()).hexdigest()
        except OSError:  # kind.load names what is missing
            out.append(b)
            continue
        if digest in seen:
            notes.append(f"baseline {b} is the same run as {seen[digest]} (same {kind.item_file}): counted once")
            continue
        seen[digest] = b
        out.append(b)
    return out


def fail_on_worse(args, comp, kind_name: str, protocol) -> int:
    """`pstbench compare --fail-on-worse`: 1 (each reason on stderr) when the gate would fail on this
    comparison (a test worse, or a comparison that could not detect one), else 0."""
    import sys

    if not getattr(args, "fail_on_worse", False):
        return 0
    reasons = comparison_failures(comp, get(kind_name), protocol)
    for reason in reasons:
        print(f"pstbench compare: FAILED: {reason}", file=sys.stderr)
    return 1 if reasons else 0
