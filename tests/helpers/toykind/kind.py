"""The toy kind's entry in the kind registry, and its own pytest option. Standard library only."""

from __future__ import annotations

from pytest_pstbench.core.kinds import KindSpec
from pytest_pstbench.options import Option

KIND = KindSpec(
    name="toy",
    item_file="per_item.csv",
    unit="items",
    n_key="n_items",
    validate_protocol="helpers.toykind.engine:validate_protocol",
    runs="helpers.toykind.engine:TOY_RUNS",
    pytest_run="helpers.toykind.pytest_run:ToyRun",
    demo_track="toy-demo",
    builtin_tracks=("toy-demo",),
    resolve_track="helpers.toykind.engine:resolve_track",
    paper_table="helpers.toykind.engine:paper_table",
    metric_table="helpers.toykind.engine:metric_table",
    html_report="helpers.toykind.engine:html_report",
    commands="helpers.toykind.engine:add_commands",
    score="helpers.toykind.engine:cmd_score",
    options="helpers.toykind.kind:OPTIONS",
)

#: The kind's own pytest options (`--pstbench-toy-answers DIR`, ini key `pstbench_toy_answers`).
OPTIONS = (Option("toy-answers", "toy tracks: folder with one <item>.txt answer per item", metavar="DIR"),)
