"""`pstbench report`: the command's options; the work is done by pytest_pstbench.report."""

from __future__ import annotations

from pytest_pstbench.core.kinds import report_option
from pytest_pstbench.core.progress import stderr_line as _progress
from pytest_pstbench.options import Arg, add_args
from pytest_pstbench.report.build import DEFAULT_THUMB_SIZE

REPORT_ARGS = (
    Arg(
        "runs",
        nargs="+",
        metavar="RUN_DIR",
        help="run folders (results/<track>/<name>) or published runs "
        "(hf://datasets/OWNER/NAME@REVISION/PATH: one run, or a folder of runs); one or more",
    ),
    Arg(
        "--out",
        required=True,
        metavar="DIR",
        help="folder to write index.html, figures/ and thumbs/ into (replaced if it holds an earlier report)",
    ),
    Arg(
        "--sensitivity",
        default=None,
        metavar="SENS_DIR",
        help="folder written by `pstbench sensitivity` (its analysis.json): adds the rank changes per evaluation variant",
    ),
    Arg(
        "--thumb-size",
        type=int,
        default=DEFAULT_THUMB_SIZE,
        metavar="PX",
        help=f"longest side of the pair thumbnails in pixels (default: {DEFAULT_THUMB_SIZE})",
    ),
    Arg(
        "--max-pairs",
        type=int,
        default=None,
        metavar="N",
        help=f"paired runs: show thumbnails for the first N pairs in track order; 0 shows all (default: {report_option('--max-pairs').default})",
    ),
    Arg(
        "--max-tasks",
        type=int,
        default=None,
        metavar="N",
        help=f"selection runs: show the first N tasks of the track in the gallery (the page names the ones left out); 0 shows all (default: {report_option('--max-tasks').default})",
    ),
    Arg(
        "--worst",
        type=int,
        default=None,
        metavar="N",
        help="paired runs, two or more: per ranked metric, "
        f"the N pairs each run lost most on against the first run (a Worst pairs section); 0: none (default: {report_option('--worst').default})",
    ),
    Arg(
        "--track",
        default=None,
        metavar="T",
        help="track to take the images from (paired: content/style/reference; selection: the candidates) (default: the runs' track id; a local track needs the path of its track.yaml)",
    ),
    Arg(
        "--protocol",
        default=None,
        metavar="P",
        help="protocol id or YAML path the runs were made under, for metric labels (default: found by the runs' sha256)",
    ),
)


def add_report_command(subparsers) -> None:
    """Register `pstbench report`."""
    p = subparsers.add_parser(
        "report",
        help="write a static HTML report (figures, thumbnails, provenance) of paired or selection runs",
        description="Write a self-contained HTML page with figures of paired runs or of selection runs "
        "(results/<track>/<name>), all of one kind, made under the same protocol, track and dataset revision.",
    )
    add_args(p, REPORT_ARGS)
    _add_history_options(p)
    p.set_defaults(func=cmd_report)


HISTORY_OPTIONS = (
    Arg(
        "--history",
        nargs="+",
        default=None,
        metavar="SOURCE",
        help="add a History section: the plots and "
        "significant steps of `pstbench history SOURCE...` (a run folder in a git repository, a published run "
        "path hf://datasets/OWNER/NAME[@REV]/PATH, or several runs in order)",
    ),
    Arg(
        "--metric",
        nargs="+",
        default=None,
        metavar="M",
        help="with --history: the metrics its section follows, as `pstbench history --metric` (default: the "
        "protocol's ranked metrics; selection runs: top1 bot1 tb1)",
    ),
)


def _add_history_options(p) -> None:
    """`--history SOURCE...` and the metrics its section follows (`--metric`, as `pstbench history`'s)."""
    add_args(p, HISTORY_OPTIONS)


def cmd_report(args) -> int:
    from pytest_pstbench.core.store.backends import resolve_runs
    from pytest_pstbench.report.build import build_report

    out = build_report(
        resolve_runs(
            args.runs, option="RUN_DIR", protocol_spec=args.protocol, progress=_progress
        ),  # published runs marked
        args.out,
        sensitivity=args.sensitivity,
        thumb_size=args.thumb_size,
        max_pairs=args.max_pairs,
        max_tasks=args.max_tasks,
        worst=args.worst,
        track_spec=args.track,
        protocol_spec=args.protocol,
        progress=_progress,
        history=args.history,
        history_metrics=args.metric,
    )
    print(f"report: {out / 'index.html'}")
    return 0
