"""The selection kind's results table of a paper (`pstbench table`; its KindSpec's `paper_table`): the random
baseline row first (and the human reference row where the runs carry one), one column per metric x aggregation
and track, tests as `pstbench compare` (exact McNemar of the column's outcome), Holm over all tests of the
table. The table model and the rules it shares with the other kind are core/paper_table.py."""

from __future__ import annotations

from pathlib import Path

from pytest_pstbench.core.compare import NOTHING_SIGNIFICANT, TABLE_FIX, cannot_detect, checked_runs, partly_blind
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.paper_table import (
    Cell,
    Column,
    Table,
    cell_text,
    check_alphas,
    check_confidence,
    group_by_track,
    rank_column,
    reference_of,
    refuse_row_name,
    unique_names,
)
from pytest_pstbench.selection.compare import (
    SELECTION_RUNS,
    WORSE,
    check_metrics,
    compare_two,
    finish_comparison,
    row_json,
)
from pytest_pstbench.selection.human import coverage, human_row
from pytest_pstbench.selection.kind import KIND
from pytest_pstbench.selection.protocol import SelectionParams, comparison_params
from pytest_pstbench.selection.references import RANDOM, human_entry, overall_cell, random_baseline
from pytest_pstbench.selection.runs import load_selection_runs

SELECTION_DECIMALS = 3  # as the selection terminal tables


def _human_rows(groups: dict) -> tuple[dict, str | None]:
    """Per track, the human reference row its runs carry (summary.json `human`, the same in every run that has
    one), and the row's name: the label (`Human (leave-one-out, N experts)`, with `, T of N tasks` where it covers
    part of its track), or `Human (leave-one-out)` when tracks differ in these (the legend then says each
    track's coverage)."""
    humans = {
        track: human_row([(r.path / "summary.json", r.summary) for r in group]) for track, group in groups.items()
    }
    labels = {h["label"] for h in humans.values() if h}
    if not labels:
        return humans, None
    return humans, labels.pop() if len(labels) == 1 else "Human (leave-one-out)"


def _track_entry(track, protocol, group, human) -> dict:
    """The table's entry of one track: its protocol, dataset revision and size, and its human reference row's
    provenance where its runs carry one."""
    s = group[0].summary
    entry = {
        "track": track,
        "protocol": protocol.id,
        "dataset_revision": s.get("dataset_revision"),
        "n": s.get("n_tasks", s.get("n")),
    }
    if human:
        entry["human"] = {
            k: human.get(k)
            for k in (
                "label",
                "votes_sha256",
                "experts",
                "tasks",
                "track_tasks",
                "judgments",
                "excluded_no_consensus",
                "rule",
                "interval",
            )
        }
    return entry


def _run_cells(col, by_row, m, agg, protocol) -> None:
    """Fill `col` with each run's overall value of metric `m`, aggregation `agg`."""
    for name, run in by_row.items():
        cell = overall_cell(run.summary)
        if cell is None or m not in cell.get("metrics", {}) or agg not in cell["metrics"][m]:
            raise UserError(
                f"{run.path / 'summary.json'}: no overall {m} {agg} entry; fix: score the run again under protocol {protocol.id}"
            )
        e = cell["metrics"][m][agg]
        col.cells[name] = Cell(
            e.get("mean"),
            e.get("pm"),
            e.get("ci_low"),
            e.get("ci_high"),
            cell_text(e.get("mean"), e.get("pm"), SELECTION_DECIMALS),
        )


def _reference_cells(random_value, human_overall, human_name, m, agg) -> dict:
    """The reference rows' cells of a column: Random, and the human reference row where there is one."""
    reference_cells = {RANDOM: Cell(random_value, None, None, None, cell_text(random_value, None, SELECTION_DECIMALS))}
    if human_overall is not None:
        h = human_entry(human_overall, m, agg)
        reference_cells[human_name] = Cell(
            h.get("mean"),
            h.get("pm"),
            h.get("ci_low"),
            h.get("ci_high"),
            cell_text(h.get("mean"), h.get("pm"), SELECTION_DECIMALS),
        )
    return reference_cells


def _refuse_reference_against(against, human_name) -> None:
    """--against must name a run: the reference rows have no per-task outcomes."""
    if against != "best" and against == RANDOM:
        raise UserError(
            "--against Random: the random baseline is not a run and has no per-task outcomes; fix: name a judge's run"
        )
    if against != "best" and against == human_name:
        raise UserError(
            f"--against {against}: the human reference row is not a run (no per-task outcomes to "
            "test against); fix: name a judge's run"
        )


def _metric_columns(track, group, protocol, params, cfg, names, human, human_name, references, against):
    """One track's columns (metric x aggregation) and their tests against the column's reference run:
    ([Column], [(column, row name, comparison row)])."""
    by_row = {r.name: r for r in group}
    human_overall = overall_cell(human) if human else None
    columns, tests = [], []
    for m in names:
        for agg in params.aggregations:
            agg_label = params.data["aggregations"][agg].get("label", agg)
            col = Column(
                track, m, agg, f"{params.metrics[m].get('label', m)} {agg_label}", True, None, agg in cfg.outcomes
            )
            _run_cells(col, by_row, m, agg, protocol)
            random_value = random_baseline(by_row.values(), m, agg)
            col.cells = {**_reference_cells(random_value, human_overall, human_name, m, agg), **col.cells}
            rank_column(col, SELECTION_DECIMALS, exclude=references)  # reference rows: never ranked, never tested
            _refuse_reference_against(against, human_name)
            col.reference = reference_of(
                col,
                list(by_row),
                against,
                str(group[0].path.parent),
                group[0].name,
                decimals=SELECTION_DECIMALS,
                exclude=references,
            )
            if col.reference is not None and col.tested:
                ref = by_row[col.reference]
                for name, run in by_row.items():
                    if name != col.reference:
                        row = next(t for t in compare_two(ref, run, protocol, [m]) if t.outcome == agg)
                        tests.append((col, name, row))
            columns.append(col)
    return columns, tests


def _test_notes(tests, alpha, protocols) -> list[str]:
    """The table's note on columns where no test can reach significance (partly blind or unable to detect)."""
    notes = []
    blind = partly_blind([t[2] for t in tests], alpha, SELECTION_RUNS, protocols[0], TABLE_FIX) if tests else None
    blind = blind or (
        cannot_detect([t[2] for t in tests], alpha, SELECTION_RUNS, protocols[0], TABLE_FIX, NOTHING_SIGNIFICANT)
        if tests
        else None
    )
    if blind:  # no mark can appear in those columns, whatever the values
        notes.append(blind[0].upper() + blind[1:] + ".")
    return notes


def _human_notes(human_name, protocols, tracks, humans) -> list[str]:
    """The notes on the human reference row: how it is computed, and its coverage of each track it covers part of."""
    notes = []
    if human_name:
        conf = check_confidence(protocols) * 100
        notes.append(
            f"{human_name}: each expert of the track's votes file scored as a judge against the consensus of the "
            f"other experts (the protocol's consensus rule, threshold one below the full panel's; a task without "
            f"consensus among the others is left out for that expert), the mean over experts ± half the {conf:g}% "
            "bootstrap CI over experts; ap@1 = pass^3 for an expert (one vote answers every trial). A reference "
            "row: not ranked, not tested (docs/selection.md, the human reference row)."
        )
        for entry in tracks:  # a row on part of a track says how much, in every format
            part = coverage(humans[entry["track"]]) if humans.get(entry["track"]) else None
            if part:
                notes.append(
                    f"{human_name} on track {entry['track']}: {part} (the tasks with votes and a consensus "
                    "among the other experts); its values are over those tasks only."
                )
    return notes


def _judge_notes(groups, protocols, human_name) -> list[str]:
    """Per judge, its agreement with the experts and its position-bias test; the human row's position bias."""
    from pytest_pstbench.selection.agreement import line as experts_line
    from pytest_pstbench.selection.position_bias import line as bias_line

    notes = []
    for track, group in groups.items():  # per judge: its position-bias test (summary.json position_bias)
        for r in group:
            among = experts_line(r.summary, SelectionParams.of(protocols[0]))
            if among:
                notes.append(
                    f"{r.name} among the experts on track {track} (ap@1 against the consensus beside each "
                    f"expert's leave-one-out ap@1; free-marginal kappa): {among}."
                )
            said = bias_line(r.summary)
            if said:
                notes.append(
                    f"Position bias of {r.name} on track {track} (chi-square against a position-blind judge "
                    f"under the track's permutations; vab score shows the table): {said}."
                )
    if human_name:
        from pytest_pstbench.selection.position_bias import HUMAN_WHY

        notes.append(f"Position bias of {human_name}: {HUMAN_WHY}.")
    return notes


def build_selection_table(
    paths: list[Path],
    *,
    metrics: list[str] | None,
    against: str,
    protocol_spec: str | None,
    checked: tuple[list, object] | None = None,
) -> Table:
    """The table of the runs in `paths`; `checked`: (the runs, their protocol) as the one validating reader gave them
    (core.store.reader.read_runs with comparable=True, one track), so that a caller that read them is not made to read
    and validate every file again (the selection report)."""
    runs = load_selection_runs(paths) if checked is None else list(checked[0])
    groups = group_by_track(runs, lambda r: r.record.track)
    humans, human_name = _human_rows(groups)
    references = [RANDOM] + ([human_name] if human_name else [])
    rows: list[str] = list(references)
    columns: list[Column] = []
    tracks: list[dict] = []
    tests = []
    protocols = []
    for track, group in groups.items():
        unique_names(group, track)
        refuse_row_name(group, RANDOM, "the random baseline row's")
        if human_name:
            refuse_row_name(group, human_name, "the human reference row's")
        human = humans[track]
        if checked is None:
            protocol = checked_runs(
                SELECTION_RUNS, group, protocol_spec=protocol_spec, comparable=True
            )  # the one validating reader
        else:
            protocol = checked[1]  # read and checked by the caller, with every run of the one track
        params = SelectionParams.of(protocol)
        cfg = comparison_params(protocol)
        protocols.append(protocol)
        names = check_metrics(metrics, params)
        for r in group:
            if r.name not in rows:
                rows.append(r.name)
        tracks.append(_track_entry(track, protocol, group, human))
        track_columns, track_tests = _metric_columns(
            track, group, protocol, params, cfg, names, human, human_name, references, against
        )
        columns += track_columns
        tests += track_tests
        from pytest_pstbench.selection.ask.pricing import table_columns

        columns += table_columns(track, group, params)  # the runs' cost, where they carry one (#40)
    alpha = check_alphas(protocols, lambda p: comparison_params(p).alpha)
    finish_comparison([t[2] for t in tests], protocols[0])
    for col, name, row in tests:
        col.cells[name].worse = row.verdict == WORSE
        col.cells[name].test = row_json(row)
    notes = _test_notes(tests, alpha, protocols)
    notes += _human_notes(human_name, protocols, tracks, humans)
    notes += _judge_notes(groups, protocols, human_name)
    confidence = check_confidence(protocols)
    return Table(
        KIND.name,
        rows,
        RANDOM,
        tracks,
        columns,
        alpha,
        against,
        len(tests),
        "exact McNemar",
        confidence,
        notes,
        references,
        values_note=(
            f"Mean ± half the {confidence * 100:g}% bootstrap CI over the tasks (overall cell); Random: "
            "the analytic random baseline."
        ),
        reference_note="Random is a reference row: not ranked, not tested.",
        test_note=(
            "exact McNemar test of the column's outcome (pass^3: per task; ap@1: per task and trial), as "
            "pstbench compare"
        ),
    )
