"""What the `vab` commands share: loading a selection track with its protocol, and printing a scored run."""

from __future__ import annotations

from pytest_pstbench.core.progress import stderr_line as _progress


def load_selection(track_spec: str, protocol_spec: str | None):
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection.protocol import DEFAULT_SELECTION_PROTOCOL, SelectionParams
    from pytest_pstbench.selection.tracks import resolve_selection_track

    protocol = load_protocol(protocol_spec or DEFAULT_SELECTION_PROTOCOL)
    params = SelectionParams.of(protocol)
    track = resolve_selection_track(track_spec, progress=_progress)
    return protocol, params, track


def print_outcome(outcome, track, label: str, params, *, extras: bool) -> None:
    """The tables of a scored selection run (and the official extras with --extras), the answers line
    and where the run files are."""
    from pytest_pstbench.selection.tables import answers_line, extras_table, header_line, human_tables, tables

    print(header_line(outcome.summary, track.dataset_id, label))
    print(tables(outcome.summary, params))
    human = human_tables(outcome.summary, params)
    if human:
        print()
        print(human)
    if extras:
        print()
        print(extras_table(outcome.summary, params))
    from pytest_pstbench.selection.agreement import table as experts_table
    from pytest_pstbench.selection.position_bias import table as position_table

    for block in (position_table(outcome.summary, params), experts_table(outcome.summary, params)):
        if block:
            print()
            print(block)
    note = answers_line(outcome.run)
    if note:
        print(note)
    from pytest_pstbench.selection.ask.pricing import cost_line

    line = cost_line(outcome.summary.get("cost"))
    if line:
        print(line)
    print(f"run files: {outcome.run_dir}")
