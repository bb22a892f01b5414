"""`pstbench table`: the results table of a paper from run folders (report/paper_table.py builds and renders it)."""

from __future__ import annotations

from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.options import Arg, add_args
from pytest_pstbench.report.paper_table import FORMATS, build_table, render


def cmd_table(args) -> int:
    import sys

    from pytest_pstbench.core.store.backends import run_paths

    runs = run_paths(
        args.runs,
        option="RUN_DIR",
        protocol_spec=args.protocol,
        progress=lambda msg: print(msg, file=sys.stderr, flush=True),
    )
    if args.out:  # before any work: the table never replaces a file of a run it reads, nor the protocol
        from pytest_pstbench.core.files.write import refuse_overwriting_inputs
        from pytest_pstbench.core.protocol import protocol_path

        refuse_overwriting_inputs(
            "--out",
            [args.out],
            files=[("protocol file", protocol_path(args.protocol) if args.protocol else None)],
            folders=[("run folder", r) for r in runs],
        )
    table = build_table(runs, metrics=args.metrics, against=args.against, protocol_spec=args.protocol)
    text = render(table, args.format)
    if args.out:
        from pytest_pstbench.core.files.write import write_atomic

        out = Path(args.out)
        if not out.parent.is_dir():
            raise UserError(f"--out {out}: folder {out.parent} does not exist; fix: create it or write elsewhere")
        write_atomic(out, text, what="the table", fix="free some space or give --out another file")
        print(f"table written: {out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


TABLE_ARGS = (
    Arg(
        "runs",
        nargs="+",
        metavar="RUN_DIR",
        help="run folders (results/<track>/<name>), paired or selection, of one or more tracks, or published runs "
        "(hf://datasets/OWNER/NAME@REVISION/PATH: one run, or a folder of runs, e.g. every method of a track)",
    ),
    Arg(
        "--format",
        choices=FORMATS,
        default="markdown",
        help="markdown (GitHub pipe table; default), latex (booktabs), csv (one line per cell) or json",
    ),
    Arg(
        "--metrics",
        nargs="+",
        default=None,
        help="metrics (columns; default: the protocol's ranked metrics; selection runs: top1 bot1 tb1)",
    ),
    Arg(
        "--against",
        default="best",
        metavar="best|first|NAME",
        help="the run each column's cells are tested against: best (default: the column's best run), first "
        "(the first run folder given for the track) or a run name",
    ),
    Arg(
        "--protocol",
        default=None,
        help="protocol id or YAML path the runs were made under (default: found by the runs' sha256)",
    ),
    Arg("--out", default=None, help="write the table to this file (atomically) instead of stdout"),
)


def add_table_command(sub) -> None:
    p = sub.add_parser(
        "table",
        help="the results table of a paper: every run (Identity / random baseline first), each metric "
        "with its CI, best bold, second underlined, a dagger where significantly worse than the best",
    )
    add_args(p, TABLE_ARGS)
    p.set_defaults(func=cmd_table)
