"""`pstbench history SOURCE...`: a method's runs over time, from a run folder's git history, a published run
path's Hub commits, or runs given in order (core/store/versions.py), with each point's interval and the
significant steps between consecutive points (core/history.py); `--plot DIR` draws it (report/history.py)."""

from __future__ import annotations

import json
import sys

from pytest_pstbench.options import Arg, add_args


def cmd_history(args) -> int:
    from pytest_pstbench.core.history import history_text, read_history
    from pytest_pstbench.core.progress import stderr_line

    history = read_history(args.sources, metrics=args.metric, say=stderr_line)
    if args.plot:
        from pytest_pstbench.report.history import write_history_plots

        written = write_history_plots(history, args.plot)
        print(f"history plots written: {len(written)} in {args.plot}", file=sys.stderr)
    if args.json:
        sys.stdout.write(json.dumps(history.to_json(), indent=2, allow_nan=False) + "\n")
    else:
        sys.stdout.write(history_text(history))
    return 0


HISTORY_ARGS = (
    Arg(
        "sources",
        nargs="+",
        metavar="SOURCE",
        help="a run folder inside a git repository (its commits), a published run path "
        "(hf://datasets/OWNER/NAME[@REV]/PATH: the commits of REV, default main), or several run folders / URIs in order",
    ),
    Arg(
        "--json",
        action="store_true",
        help="print one JSON object (points, steps, breaks, left_out) instead of the text",
    ),
    Arg("--plot", default=None, metavar="DIR", help="write one PNG per metric into DIR (replaced whole)"),
    Arg(
        "--metric",
        nargs="+",
        default=None,
        metavar="M",
        help="metrics to follow (default: the protocol's ranked metrics; selection runs: top1 bot1 tb1)",
    ),
)


def add_history_command(sub) -> None:
    p = sub.add_parser(
        "history",
        help="a method's runs over time (git commits of a run folder, Hub commits of a published "
        "run, or runs in order): each point's interval and the significant steps between consecutive points",
    )
    add_args(p, HISTORY_ARGS)
    p.set_defaults(func=cmd_history)
