"""Comparing judges: exact McNemar tests between selection runs, Holm over all tests of a call.

Used by `pstbench compare` (`pytest_pstbench.cli.cmd_compare`, through this kind's `RunKind` when the run
folders are selection runs), by the pytest baseline gate of selection runs
(`--pstbench-baseline`, with the bounds `--pstbench-min/max` on the overall means) and by the
`pstbench_compare` fixture. Every parameter (test, outcomes, correction, alpha) comes from the
selection protocol's `comparison` section.

Per metric (Top-1, Bot-1, TB-1) and outcome, the two runs' 0/1 outcomes on the same units are
paired:

* `pass^3`: one unit per task (1 when every trial is correct);
* `ap@1`: one unit per (task, trial) (single-trial correctness). The trials of one task share their
  images, so these units are not independent; the test treats them as pairs anyway, which makes its
  p-values optimistic (documented in docs/selection.md, Comparing judges).

b counts units the candidate got right and the baseline wrong, c the reverse. The exact McNemar
test is the two-sided exact binomial test of b among the b + c discordant units with p = 1/2
(`scipy.stats.binomtest`), i.e. p = min(1, 2 P(X <= min(b, c))) with X ~ Bin(b + c, 1/2);
with no discordant unit p = 1.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from pytest_pstbench.core.compare import check_metric_names, check_runs_comparable, checked_runs, run_pairs
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.selection.protocol import comparison_params
from pytest_pstbench.selection.references import board_references
from pytest_pstbench.selection.runs import RUN_FILES, SelectionRunFiles, load_selection_run, load_selection_runs

BETTER, WORSE, NO_DIFF = "better", "worse", "no significant difference"


def validate_run(run: SelectionRunFiles, protocol) -> None:
    """Refuse a selection run folder the kit would not have written: per_task.csv has one row per task of
    run.json's count (a complete run; an incomplete one at most that many) and, in a complete run, no task
    with an error; summary.json agrees with run.json (name, track, protocol, dataset revision, complete, n
    scored) and its cells have the kit's shape (`_check_cells`); then every number is what the files give
    (`_check_against_files`: outcomes recomputed from picks and labels, summary cells from the outcomes, a
    run that says complete: true with an unanswered task refused)."""
    fix = "fix: score that run again with this kit (or give another baseline)"
    n_tasks = run.run.get("n_tasks")
    complete = run.run.get("complete") is True
    if (
        not isinstance(n_tasks, int)
        or isinstance(n_tasks, bool)
        or (n_tasks != len(run.task_ids) if complete else n_tasks < len(run.task_ids))
    ):
        raise UserError(
            f"{run.path / 'per_task.csv'}: has {len(run.task_ids)} task rows but run.json n_tasks is {n_tasks!r}; {fix}"
        )
    errors = [tid for tid in run.task_ids if run.rows[tid].get("error")] if complete else []
    if errors:
        raise UserError(
            f"{run.path / 'per_task.csv'}: task {errors[0]} has an error in a run that says complete: true; {fix}"
        )
    summary = run.summary if isinstance(run.summary, dict) else {}
    for key, want in (
        ("name", run.run.get("name")),
        ("track", run.run.get("track")),
        ("protocol", run.record.protocol_id),
        ("dataset_revision", run.record.dataset_revision),
        ("complete", run.run.get("complete")),
        ("n", run.run.get("n_scored")),
        ("n_tasks", n_tasks),
    ):
        if summary.get(key) != want:
            raise UserError(
                f"{run.path / 'summary.json'}: {key} is {summary.get(key)!r} but run.json says {want!r}; {fix}"
            )
    _check_cells(run.path / "summary.json", summary.get("cells"), fix)
    _check_against_files(run, protocol, complete)


def _check_against_files(run: SelectionRunFiles, protocol, complete: bool) -> None:
    """The run's numbers are what its files give (`selection.run_check`): correctness cells from the picks and
    labels, summary.json's cells from those outcomes, completeness from the answers."""
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.run_check import (
        FIX,
        check_position_bias,
        check_summary_cells,
        check_usage_and_cost,
        rebuilt,
    )

    answers: list[dict] = []
    tasks, outcomes, no_answer = rebuilt(run, SelectionParams.of(protocol), answers)
    if complete and no_answer:
        raise UserError(
            f"{run.path / 'per_task.csv'}: task {no_answer[0]} has no answer (every trial missing or an API "
            f"error in run.json answers.problems; {len(no_answer)} such tasks) in a run that says complete: true; {FIX}"
        )
    if run.run.get("n_scored") != len(tasks):
        raise UserError(
            f"{run.path / 'run.json'}: n_scored is {run.run.get('n_scored')!r} but per_task.csv has {len(tasks)} "
            f"answered tasks without an error; {FIX}"
        )
    check_summary_cells(run.path / "summary.json", run.summary["cells"], tasks, outcomes, SelectionParams.of(protocol))
    check_position_bias(run, tasks, answers, SelectionParams.of(protocol), protocol)
    check_usage_and_cost(run)  # a model run's token totals and cost (#40)


def _check_cells(path: Path, cells, fix: str) -> None:
    """summary.json's cells have the shape the kit writes (what tables, reports and gates read): a list of
    objects, exactly one `overall`, each `metrics` an object of metric -> aggregation -> entry whose
    mean, CI, pm and random are finite numbers in [0, 1] (pm: [0, 1] too) or null."""
    import math

    if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
        raise UserError(f"{path}: cells is not a list of objects; {fix}")
    if sum(1 for c in cells if c.get("group") == "overall") != 1:
        raise UserError(f"{path}: cells must hold exactly one overall cell; {fix}")
    for c in cells:
        where = f"cell {c.get('group')}={c.get('value')}"
        metrics = c.get("metrics")
        if not isinstance(metrics, dict) or not all(isinstance(a, dict) for a in metrics.values()):
            raise UserError(f"{path}: {where}: metrics is not an object of metric -> aggregation -> entry; {fix}")
        for m, aggs in metrics.items():
            for agg, e in aggs.items():
                if not isinstance(e, dict):
                    raise UserError(f"{path}: {where}: {m} {agg} is {e!r}, not an entry; {fix}")
                for key in ("mean", "ci_low", "ci_high", "pm", "random"):
                    v = e.get(key)
                    if v is not None and (
                        isinstance(v, bool)
                        or not isinstance(v, (int, float))
                        or not math.isfinite(v)
                        or not 0 <= v <= 1
                    ):
                        raise UserError(
                            f"{path}: {where}: {m} {agg} {key} is {v!r}, not a number in [0, 1] or null; {fix}"
                        )


def check_comparable(runs: list[SelectionRunFiles]) -> None:
    """Refuse incomplete runs and runs that differ in protocol, track, dataset revision or tasks."""
    check_runs_comparable(runs, unit="tasks", n_key="n_tasks", ids_file="per_task.csv", ids=lambda r: r.task_ids)


# ---- the test ---------------------------------------------------------------------------------------
def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts (scipy.stats.binomtest, p = 1/2)."""
    if b < 0 or c < 0:
        raise ValueError("discordant counts must be non-negative")
    if b + c == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(min(1.0, binomtest(min(b, c), b + c, 0.5, alternative="two-sided").pvalue))


@dataclass
class McNemarComparison:
    metric: str
    outcome: str  # pass^3 (units: tasks) or ap@1 (units: task trials)
    baseline: str
    candidate: str
    n: int
    b: int  # candidate right, baseline wrong
    c: int  # candidate wrong, baseline right
    both_right: int
    both_wrong: int
    acc_baseline: float
    acc_candidate: float
    diff: float  # acc_candidate - acc_baseline = (b - c) / n
    pvalue: float
    p_holm: float = 1.0
    verdict: str = NO_DIFF
    # What the test can detect (selection/power.py `detectable`: compare and the gate): the minimum detectable
    # drop of accuracy and the settings it was simulated with; absent from the JSON where it was not computed.
    detectable: dict | None = None


@dataclass
class SelectionComparison:
    rows: list[McNemarComparison]
    alpha: float
    protocol: str
    test: str = "mcnemar_exact"

    @property
    def worse(self) -> list[McNemarComparison]:
        return [r for r in self.rows if r.verdict == WORSE]

    @property
    def better(self) -> list[McNemarComparison]:
        return [r for r in self.rows if r.verdict == BETTER]

    def to_json(self) -> dict:
        return {
            "protocol": self.protocol,
            "kind": "selection",
            "test": self.test,
            "alpha": self.alpha,
            "tests": [row_json(r) for r in self.rows],
        }


def row_json(row: McNemarComparison) -> dict:
    """A test as JSON; `detectable` only where it was computed (compare, the gate), so a table's JSON is unchanged."""
    return {k: v for k, v in asdict(row).items() if k != "detectable" or v is not None}


def check_metrics(metrics: list[str] | None, params) -> list[str]:
    return check_metric_names(
        metrics,
        list(params.metrics),
        lambda unknown: (
            f"metric(s) {', '.join(map(repr, unknown))} not in protocol {params.protocol.id} "
            f"(metrics: {', '.join(params.metrics)})"
        ),
    )


def _units(
    records: dict[str, dict[str, list[dict]]], metric: str, task_ids: list[str], outcome: str, trials: int
) -> list[bool | None]:
    """One entry per unit, in task (then trial) order: its correctness, or None where the run does not count it,
    by the protocol's answers.records, exactly as its summary does (`accuracy.pass_value`: a task whose trials
    are all absent has no pass^3; ap@1: a trial that is not counted is in no denominator)."""
    from pytest_pstbench.selection.accuracy import COUNTED, pass_value

    if outcome == "pass^3":
        return [None if (v := pass_value(records[t][metric], "correct", trials)) is None else bool(v) for t in task_ids]
    return [bool(r["correct"]) if r["rule"] == COUNTED else None for t in task_ids for r in records[t][metric][:trials]]


def compare_two(
    baseline: SelectionRunFiles, candidate: SelectionRunFiles, protocol, metrics: list[str] | None = None
) -> list[McNemarComparison]:
    """One test per metric and outcome (protocol order) for baseline vs candidate (`mcnemar_row`); Holm not applied
    yet. The units are those both runs count (one denominator: a trial or task a run's summary leaves out is left
    out of its pairs too)."""
    from pytest_pstbench.selection.protocol import SelectionParams

    params = SelectionParams.of(protocol)
    cfg = comparison_params(protocol)
    task_ids = list(baseline.task_ids)  # paired by task id
    records = [run_records(run, params) for run in (baseline, candidate)]
    rows = []
    for m in check_metrics(metrics, params):
        for outcome in cfg.outcomes:
            units = [_units(r, m, task_ids, outcome, params.trials) for r in records]
            rows.append(mcnemar_row(m, outcome, (baseline.name, units[0]), (candidate.name, units[1])))
    return rows


def run_records(run: SelectionRunFiles, params) -> dict[str, dict[str, list[dict]]]:
    """Task id -> the run's per-metric trial outcomes, as its files give them (validated when the run was read)."""
    from pytest_pstbench.selection.run_check import rebuilt

    tasks, outcomes, _ = rebuilt(run, params)
    return {t.id: o for t, o in zip(tasks, outcomes)}


def mcnemar_row(metric: str, outcome: str, baseline: tuple, candidate: tuple) -> McNemarComparison:
    """The exact McNemar test of one metric and outcome, `baseline` and `candidate` each (run name, its units'
    correctness in the same unit order, None where the run does not count a unit): the units both count."""
    pairs = [(u, v) for u, v in zip(baseline[1], candidate[1]) if u is not None and v is not None]
    x, y = [u for u, _ in pairs], [v for _, v in pairs]
    n = len(x)
    b = sum(1 for u, v in zip(x, y) if v and not u)
    c = sum(1 for u, v in zip(x, y) if u and not v)
    rr = sum(1 for u, v in zip(x, y) if u and v)
    acc_b, acc_c = (sum(x) / n, sum(y) / n) if n else (0.0, 0.0)
    return McNemarComparison(
        metric=metric,
        outcome=outcome,
        baseline=baseline[0],
        candidate=candidate[0],
        n=n,
        b=b,
        c=c,
        both_right=rr,
        both_wrong=n - b - c - rr,
        acc_baseline=acc_b,
        acc_candidate=acc_c,
        diff=(b - c) / n if n else 0.0,
        pvalue=mcnemar_exact(b, c),
    )


def pairwise_tests(runs: list[SelectionRunFiles], protocol, key: str) -> list[McNemarComparison]:
    """Every pair of `runs` (the later run is the candidate, as `compare_selection_runs`) tested on `key`
    (METRIC.OUTCOME) as `compare_two` tests it (`mcnemar_row`), each run's outcomes rebuilt from its files once
    (not once per pair): the board's ranks."""
    from pytest_pstbench.selection.protocol import SelectionParams

    params = SelectionParams.of(protocol)
    metric, _, outcome = key.partition(".")
    check_metrics([metric], params)
    if outcome not in comparison_params(protocol).outcomes:
        raise UserError(f"{key}: {outcome!r} is not an outcome protocol {protocol.id} compares")
    units = []
    for run in runs:
        records = run_records(run, params)
        # paired by task id, in each baseline's order (check_comparable: the same tasks)
        units.append({tid: _units(records, metric, [tid], outcome, params.trials) for tid in run.task_ids})
    rows = []
    for i, base in enumerate(runs):
        order = list(base.task_ids)
        x = [u for tid in order for u in units[i][tid]]
        for j in range(i + 1, len(runs)):
            y = [u for tid in order for u in units[j][tid]]
            rows.append(mcnemar_row(metric, outcome, (base.name, x), (runs[j].name, y)))
    return rows


def finish_comparison(rows: list[McNemarComparison], protocol) -> SelectionComparison:
    from pytest_pstbench.core.stats import holm

    cfg = comparison_params(protocol)
    for r, p in zip(rows, holm([r.pvalue for r in rows])):
        r.p_holm = p
        r.verdict = (BETTER if r.b > r.c else WORSE) if p < cfg.alpha and r.b != r.c else NO_DIFF
    return SelectionComparison(rows, cfg.alpha, protocol.id, cfg.test)


def finish_with_power(rows: list[McNemarComparison], protocol) -> SelectionComparison:
    """`finish_comparison`, then each row's minimum detectable drop (selection/power.py): what compare and the gate
    report (`pstbench table` finishes without it)."""
    from pytest_pstbench.selection.power import detectable

    comp = finish_comparison(rows, protocol)
    detectable(comp, protocol)
    return comp


def compare_selection_runs(
    runs: list[SelectionRunFiles], *, protocol=None, against_first: bool = False, metrics: list[str] | None = None
) -> SelectionComparison:
    """All pairs of runs (the later run is the candidate), or each run against the first; Holm over all tests."""
    from pytest_pstbench.selection.protocol import SelectionParams

    if len(runs) < 2:
        raise UserError("compare needs at least two run folders")
    protocol = checked_runs(SELECTION_RUNS, runs, protocol=protocol, comparable=True)
    SelectionParams.of(protocol)
    rows: list[McNemarComparison] = []
    for base, cand in run_pairs(runs, against_first):
        rows.extend(compare_two(base, cand, protocol, metrics))
    return finish_with_power(rows, protocol)


def compare_selection_paths(
    paths, *, protocol_spec: str | None = None, against_first: bool = False, metrics: list[str] | None = None
) -> tuple[SelectionComparison, object, list[SelectionRunFiles]]:
    runs = load_selection_runs(paths)
    if len(runs) < 2:
        raise UserError("compare needs at least two run folders")
    protocol = checked_runs(SELECTION_RUNS, runs, protocol_spec=protocol_spec, comparable=True)
    return compare_selection_runs(runs, protocol=protocol, against_first=against_first, metrics=metrics), protocol, runs


# ---- bounds on the overall cell ---------------------------------------------------------------------
def bound_keys(protocol) -> list[str]:
    """The keys `--pstbench-min/max` accept on a selection run: METRIC.AGGREGATION, the path of a mean
    in summary.json's overall cell (`cells[0].metrics.tb1["pass^3"].mean` is `tb1.pass^3`)."""
    from pytest_pstbench.selection.protocol import SelectionParams

    params = SelectionParams.of(protocol)
    return [f"{m}.{a}" for m in params.metrics for a in params.aggregations]


def parse_selection_bounds(items: list[str] | None, kind: str, protocol) -> dict[str, float]:
    """`["tb1.pass^3=0.3", ...]` -> {"tb1.pass^3": 0.3}; keys from the protocol, values in [0, 1]."""
    from pytest_pstbench.core.gate import parse_bound_items

    keys = bound_keys(protocol)
    return parse_bound_items(
        items,
        kind,
        keys,
        example="METRIC.AGGREGATION=VALUE, e.g. tb1.pass^3=0.3",
        lo=0.0,
        hi=1.0,
        unknown=lambda key: f"unknown key {key!r}; protocol {protocol.id} has {', '.join(keys)}",
    )


def overall_means(summary: dict) -> dict[str, float | None]:
    """summary.json's overall cell as {"METRIC.AGGREGATION": mean}."""
    cell = next((c for c in summary.get("cells", []) if c.get("group") == "overall"), None)
    if cell is None:
        return {}
    return {f"{m}.{a}": v.get("mean") for m, aggs in cell["metrics"].items() for a, v in aggs.items()}


def _worse_reason(r, comp, protocol=None) -> str:
    return (
        f"{r.metric} {r.outcome} is significantly worse than baseline run {r.baseline}: accuracy "
        f"{r.acc_candidate:.4g} vs {r.acc_baseline:.4g} (b={r.b}, c={r.c}, n={r.n}), "
        f"Holm-adjusted p = {r.p_holm:.4g} < alpha {comp.alpha}"
    )


def refuse_margins(what: str, fix: str = "the margin") -> None:
    """Margins are a paired-run test (a shifted Wilcoxon); every front door refuses them on selection runs
    with this message (`what`: the option as given, `fix`: what to drop)."""
    raise UserError(
        f"{what}: margins are implemented for paired runs (Wilcoxon), not for selection runs (McNemar); fix: drop {fix}"
    )


def _no_margins(margins, option: str = "--margin") -> None:
    if margins:
        name = next(iter(margins))
        refuse_margins(f"{option} {name}={margins[name]:g}")


def _compare_two(baseline, candidate, protocol, metrics=None, margins=None):
    _no_margins(margins, "--pstbench-gate-margin")
    return compare_two(baseline, candidate, protocol, metrics)


def _compare_paths(paths, *, protocol_spec=None, against_first=False, metrics=None, margins=None):
    """`pstbench compare` and `api.compare` on selection run folders -> (comparison, protocol, runs)."""
    _no_margins(margins)
    return compare_selection_paths(paths, protocol_spec=protocol_spec, against_first=against_first, metrics=metrics)


def _compare_text(comp, runs: list[SelectionRunFiles], protocol) -> str:
    """What `pstbench compare` prints for selection runs: a header, the McNemar table and its footer."""
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.tables import comparison_footer, comparison_header, comparison_table

    return "\n".join(
        (
            comparison_header(runs[0], comp),
            comparison_table(comp, SelectionParams.of(protocol)),
            comparison_footer(comp),
        )
    )


def _history_values(run: SelectionRunFiles, protocol, metrics=None) -> dict:
    """`pstbench history`'s point: each metric's accuracy per compared outcome (METRIC.OUTCOME) and its interval,
    from summary.json's overall cell (checked against per_task.csv by `validate_run`)."""
    from pytest_pstbench.selection.protocol import SelectionParams

    params = SelectionParams.of(protocol)
    cell = next(c for c in run.summary["cells"] if c.get("group") == "overall")["metrics"]
    out = {}
    for m in check_metrics(metrics, params):
        for outcome in comparison_params(protocol).outcomes:
            e = cell.get(m, {}).get(outcome) or {}
            out[f"{m}.{outcome}"] = {
                "mean": e.get("mean"),
                "low": e.get("ci_low"),
                "high": e.get("ci_high"),
                "higher_is_better": True,  # an accuracy
            }
    return out


def _test_label(row, protocol) -> str:
    from pytest_pstbench.selection.protocol import SelectionParams

    return f"{SelectionParams.of(protocol).metrics[row.metric].get('label', row.metric)} {row.outcome}"


def _gate_worst(row, base, cand, protocol, n: int, files=None):
    """A failed gate's lost tasks for one failing metric (`selection.worst.gate_worst`)."""
    from pytest_pstbench.selection.worst import gate_worst

    return gate_worst(row, base, cand, protocol, n, files)


def _make_kind():
    from pytest_pstbench.core.kinds import RunKind

    return RunKind(
        name="selection",
        run_files=RUN_FILES,
        load=load_selection_run,
        check_comparable=check_comparable,
        validate=validate_run,
        item_file="per_task.csv",
        unit="units (tasks, or task trials for ap@1)",
        smallest_pvalue=lambda r, protocol: mcnemar_exact(0, r.n),
        compare_two=_compare_two,
        finish=finish_with_power,
        test_label=_test_label,
        worse_reason=_worse_reason,
        compare_paths=_compare_paths,
        compare_text=_compare_text,
        check_margins=refuse_margins,
        gate_worst=_gate_worst,
        history_values=_history_values,
        history_step=lambda row: (f"{row.metric}.{row.outcome}", row.diff),
        history_finish=finish_comparison,  # a history and a board show no detectable effect
        pairwise_tests=pairwise_tests,
        board_references=board_references,
    )


SELECTION_RUNS = _make_kind()
