"""The paired kind's entry in the kind registry (entry point `pytest_pstbench.kinds: paired`). Standard
library only: the pytest plugin reads it before anything heavy is imported."""

from __future__ import annotations

from pytest_pstbench.core.kinds import KindSpec, ReportOption

KIND = KindSpec(
    name="paired",
    item_file="metrics.csv",
    unit="pairs",
    n_key="n_pairs",
    validate_protocol="pytest_pstbench.paired.protocol:validate",
    protocol_type="pytest_pstbench.paired.protocol:PairedProtocol",  # io, resolution, aggregation, comparison
    runs="pytest_pstbench.paired.compare:PAIRED_RUNS",
    pytest_run="pytest_pstbench.paired.pytest_run:PairedRun",
    resolve_track="pytest_pstbench.paired.tracks:resolve_track",
    power="pytest_pstbench.paired.commands.power:plan",  # pstbench power of its runs
    reproduce="pytest_pstbench.paired.commands.reproduce:reproduce",  # pstbench reproduce of its runs
    commands="pytest_pstbench.paired.commands:add_commands",  # pstbench demo, baseline, sensitivity
    score="pytest_pstbench.paired.commands.score:cmd_score",  # pstbench score of a paired track
    demo_track="demo",  # paired/demo.py
    dataset_layout="pairs",  # image folders -> pairs
    paper_table="pytest_pstbench.paired.paper_table:build_paired_table",
    metric_table="pytest_pstbench.paired.tables:metric_table",
    html_report="pytest_pstbench.paired.report:paired_report",
    report_options=(
        ReportOption("--max-pairs", "max_pairs", 50),  # the pairs shown as thumbnails
        ReportOption("--worst", "worst", 5, zero="no Worst pairs section", example=5),  # paired/report/worst.py
    ),
    apply_variant="pytest_pstbench.paired.variants:protocol_with_variant",  # --protocol pstbench+clustered
    builtin_tracks=("demo",),  # paired/tracks.py BUILTIN_TRACKS (this module stays standard-library only)
    default=True,  # a track, protocol or run folder that names no kind is paired (the PST tracks)
)
