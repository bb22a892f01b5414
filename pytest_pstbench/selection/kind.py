"""The selection kind's entry in the kind registry (entry point `pytest_pstbench.kinds: selection`), and
whether a track spec is a selection track. Standard library only: the pytest plugin asks this before it
decides which run object to load, without importing numpy or yaml."""

from __future__ import annotations

from pathlib import Path

from pytest_pstbench.core.kinds import KindSpec, ReportOption, track_kind

#: Built-in selection tracks (remote `vab`, generated `vab-demo`).
BUILTIN_SELECTION_TRACKS = ("vab", "vab-demo")

KIND = KindSpec(
    name="selection",
    item_file="per_task.csv",
    unit="tasks",
    n_key="n_tasks",
    validate_protocol="pytest_pstbench.selection.protocol:validate_selection_protocol",
    runs="pytest_pstbench.selection.compare:SELECTION_RUNS",
    pytest_run="pytest_pstbench.selection.pytest_run:SelectionRun",
    resolve_track="pytest_pstbench.selection.tracks:resolve_selection_track",
    power="pytest_pstbench.selection.commands.power:plan",  # pstbench power of its runs
    reproduce="pytest_pstbench.selection.commands.reproduce:reproduce",  # pstbench reproduce of its runs
    commands="pytest_pstbench.selection.commands.vab:add_vab_commands",  # pstbench vab ...
    score="pytest_pstbench.selection.commands:cmd_score",  # pstbench score of a selection track: refused, one line
    demo_track="vab-demo",  # selection/demo.py
    dataset_layout="tasks",  # parquet rows -> tasks
    paper_table="pytest_pstbench.selection.paper_table:build_selection_table",
    metric_table="pytest_pstbench.selection.tables:metric_table",
    html_report="pytest_pstbench.selection.report:selection_report",
    # the tasks of the gallery (the lists name every task)
    report_options=(ReportOption("--max-tasks", "max_tasks", 100),),
    builtin_tracks=BUILTIN_SELECTION_TRACKS,
)


def is_selection_track(spec: str | Path) -> bool:
    """True for a built-in selection track or a manifest with a top-level `kind: selection` line (a relative
    path as given; the pytest plugin resolves an ini path first: frame.config.track_value)."""
    return track_kind(str(spec)) == KIND.name
