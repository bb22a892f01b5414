"""The paired kind's results table of a paper (`pstbench table`; its KindSpec's `paper_table`): the Identity row
first, one column per ranked metric and track, tests as `pstbench compare` (paired Wilcoxon with the protocol's
tie thresholds), Holm over all tests of the table. The table model and the rules it shares with the other kind
are core/paper_table.py."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from pytest_pstbench.core.compare import NOTHING_SIGNIFICANT, TABLE_FIX, cannot_detect, checked_runs
from pytest_pstbench.core.errors import UserError, suggest
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
from pytest_pstbench.paired.aggregation import entry_value, heading_suffix
from pytest_pstbench.paired.compare import PAIRED_RUNS, WORSE, compare_two, finish_comparison
from pytest_pstbench.paired.identity import IDENTITY_NAME, identity_name, is_identity_run, run_protocol_id
from pytest_pstbench.paired.kind import KIND
from pytest_pstbench.paired.runs import load_run


def build_paired_table(
    paths: list[Path], *, metrics: list[str] | None, against: str, protocol_spec: str | None
) -> Table:
    runs = [load_run(p) for p in paths]
    groups = group_by_track(runs, lambda r: r.record.track)
    rows: list[str] = ["Identity"]
    columns: list[Column] = []
    tracks: list[dict] = []
    tests = []  # (column, row name, MetricComparison)
    protocols = []
    runs_by_track = {}  # track -> its Identity run (its run.json's clusters, for the legend)
    for track, group in groups.items():
        first, identity, others = _track_runs(track, group)
        group = [identity, *others]
        protocol = checked_runs(
            PAIRED_RUNS, group, protocol_spec=protocol_spec, comparable=True
        )  # the one validating reader
        protocols.append(protocol)
        names = list(metrics or protocol.ranked_metrics)
        unknown = [m for m in names if m not in protocol.metrics]
        if unknown:
            raise UserError(
                f"--metrics: {', '.join(unknown)} not in protocol {protocol.id} ({protocol.path}); fix: use some of "
                f"{', '.join(protocol.metric_names)}{suggest(unknown[0], protocol.metric_names)}"
            )
        by_row = {"Identity": identity, **{r.name: r for r in others}}
        for r in others:
            if r.name not in rows:
                rows.append(r.name)
        runs_by_track[track] = identity
        s = identity.summary
        tracks.append(
            {"track": track, "protocol": protocol.id, "dataset_revision": s.get("dataset_revision"), "n": s.get("n")}
        )
        for m in names:
            columns.append(_metric_column(track, m, protocol, by_row, (group, first, against), tests))
    alpha = check_alphas(protocols, lambda p: p.comparison.alpha)
    finish_comparison([t[2] for t in tests], protocols[0])  # sets each row's Holm-adjusted verdict
    for col, name, row in tests:
        col.cells[name].worse = row.verdict == WORSE
        col.cells[name].test = asdict(row)
    confidence = check_confidence(protocols)
    notes = _paired_notes(columns, protocols, metrics)
    blind = (
        cannot_detect([t[2] for t in tests], alpha, PAIRED_RUNS, protocols[0], TABLE_FIX, NOTHING_SIGNIFICANT)
        if tests
        else None
    )
    if blind:  # no dagger can appear, whatever the values
        notes.append(blind[0].upper() + blind[1:] + ".")
    values_note, test_note, test_name = _legend(protocols, tracks, runs_by_track, confidence)
    return Table(
        KIND.name,
        rows,
        "Identity",
        tracks,
        columns,
        alpha,
        against,
        len(tests),
        test_name,
        confidence,
        notes,
        values_note=values_note,
        reference_note="Identity (the content image, unchanged) is a reference row and is not ranked.",
        test_note=test_note,
    )


def _track_runs(track: str, group: list):
    """(the first run folder given, the track's Identity run, its other runs), checked: one Identity run (given,
    or beside the first run folder), distinct names."""
    first = "Identity" if is_identity_run(group[0]) else group[0].name  # the track's first run folder given
    identity = [r for r in group if is_identity_run(r)]
    if not identity:
        sibling = _identity_sibling(group[0])
        if (sibling / "run.json").is_file():
            identity = [load_run(sibling)]
            group = identity + group
        else:
            pid = run_protocol_id(group[0])
            under = f" --protocol {pid}" if identity_name(pid) != IDENTITY_NAME else ""
            raise UserError(
                f"{group[0].path}: no Identity run of track {track} among the run folders nor at {sibling}; the table "
                f"always has the Identity row; fix: pass its run folder, or score it: pstbench score --track {track} "
                f"--outputs identity{under}"
            )
    if len(identity) > 1:
        raise UserError(
            f"{identity[1].path}: a second Identity run of track {track} (also {identity[0].path}); fix: give one"
        )
    others = [r for r in group if r is not identity[0]]
    unique_names(others, track)
    refuse_row_name(others, "Identity")
    return first, identity[0], others


def _identity_sibling(run) -> Path:
    """The Identity run beside `run`'s folder under the protocol `run` records: `identity_name(protocol id)`
    (`identity` under the default protocol), else `identity` (a folder scored before each protocol kept its own;
    the protocol check then says whether it is this protocol's)."""
    own, plain = (run.path.parent / name for name in (identity_name(run_protocol_id(run)), IDENTITY_NAME))
    return plain if not (own / "run.json").is_file() and (plain / "run.json").is_file() else own


def _metric_column(track: str, m: str, protocol, by_row: dict, where: tuple, tests: list) -> Column:
    """The column of metric `m` on `track`: each row's cell, its ranks, and (for a ranked metric) its tests against
    the reference row, appended to `tests` as (column, row name, MetricComparison)."""
    group, first, against = where
    params = protocol.metrics[m]
    dec = int(params.get("decimals", 4))
    col = Column(
        track,
        m,
        None,
        f"{params['label']}{'↑' if params['higher_is_better'] else '↓'}{heading_suffix(protocol, m)}",
        bool(params["higher_is_better"]),
        None,
        bool(params.get("ranked")),
    )
    for name, run in by_row.items():
        entry = run.summary.get("metrics", {}).get(m)
        if entry is None:
            raise UserError(
                f"{run.path / 'summary.json'}: no entry for metric {m}; fix: score the run again under protocol {protocol.id}"
            )
        v = entry_value(entry)
        col.cells[name] = Cell(
            v, entry.get("pm"), entry.get("ci_low"), entry.get("ci_high"), cell_text(v, entry.get("pm"), dec)
        )
    rank_column(col, dec, exclude="Identity", ranked=col.tested)
    col.reference = (
        reference_of(
            col,
            list(by_row),
            _row_name(against),
            str(group[0].path.parent),
            first,
            decimals=dec,
            exclude="Identity",
        )
        if col.tested
        else None
    )
    if col.reference is not None:
        ref = by_row[col.reference]
        for name, run in by_row.items():
            if name != col.reference:
                tests.append((col, name, compare_two(ref, run, protocol, [m])[0]))
    return col


def _legend(protocols: list, tracks: list[dict], runs_by_track: dict, confidence: float) -> tuple[str, str, str]:
    """(values note, test note, test name) of the table."""
    clustered = cluster_notes(protocols, tracks, runs_by_track, confidence)
    if clustered:
        values_note, test_note, test_name = clustered
    else:
        values_note = (
            f"Mean ± half the {confidence * 100:g}% bootstrap CI over the pairs (a statistic other than the mean "
            "is named in the column); the protocol's decimals."
        )
        test_note = "paired Wilcoxon signed-rank test of the per-pair scores with the protocol's tie thresholds, as pstbench compare"
        test_name = "paired Wilcoxon signed-rank"
    return values_note, test_note, test_name


def cluster_notes(protocols: list, tracks: list[dict], runs_by_track: dict, confidence: float):
    """(values note, test note, test name) of a table whose protocols resample clusters (the `clustered` variant):
    the interval is a cluster bootstrap over each track's clusters; None for a table of pair bootstraps."""
    if not any(p.aggregation.bootstrap.clustered for p in protocols):
        return None
    recs = [(t["track"], runs_by_track[t["track"]].run.get("clusters") or {}) for t in tracks]
    counts = "; ".join(
        f"{rec.get('n')} clusters ({rec.get('source')})" + (f" on {track}" if len(recs) > 1 else "")
        for track, rec in recs
    )
    values = (
        f"Mean ± half the {confidence * 100:g}% cluster bootstrap CI over {counts}: whole clusters of pairs that share "
        "a content or style image resampled; the protocol's decimals."
    )
    refused = sorted({str(rec["no_interval"]) for _, rec in recs if rec.get("no_interval")})
    if refused:  # too few clusters for the protocol's bootstrap.min_clusters: the mean alone
        values += f" A mean alone: {'; '.join(refused)}."
    sign_flip = any(p.comparison.test == "cluster_sign_flip" for p in protocols)
    test = (
        (
            "sign-flip permutation test of the cluster means of the per-pair differences with the protocol's tie "
            "thresholds, as pstbench compare"
        )
        if sign_flip
        else None
    )
    return (
        values,
        test or "paired Wilcoxon signed-rank test of the per-pair scores, as pstbench compare",
        "cluster sign-flip permutation" if sign_flip else "paired Wilcoxon signed-rank",
    )


def _paired_notes(columns: list[Column], protocols: list, metrics) -> list[str]:
    """Legend lines: why a reported-not-ranked metric is not a column (or is shown unmarked), and why a table
    has no marks at all."""
    notes = []
    labels = {}
    for protocol in protocols:
        for m, params in protocol.metrics.items():
            if not params.get("ranked"):
                labels.setdefault(m, str(params.get("label", m)))
    shown = {c.metric for c in columns}
    left_out = [m for m in labels if m not in shown]
    if left_out and metrics is None:
        names = ", ".join(f"{labels[m]} ({m})" for m in left_out)
        notes.append(
            f"{names}: reported in each run's summary.json but not ranked by the protocol, so not a column here "
            f"(--metrics ... {' '.join(left_out)} shows it, without marks or tests)."
        )
    unmarked = [m for m in labels if m in shown]
    if unmarked:
        notes.append(
            f"{', '.join(labels[m] for m in unmarked)}: reported, not ranked by the protocol: no marks, no tests."
        )
    ranked_columns = [c for c in columns if c.tested]
    if ranked_columns and not any(cell.rank for c in ranked_columns for cell in c.cells.values()):
        notes.append(
            "No bold or underline: nothing to compare (one run per track besides Identity, or equal values as printed)."
        )
    return notes


def _row_name(against: str) -> str:
    return "Identity" if against == "identity" else against
