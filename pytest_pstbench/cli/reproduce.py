"""`pstbench reproduce RUN --outputs DIR [--report FILE]`: a run scored again under its recorded protocol file,
dataset revision and thread count, and whether its files come out the same. The command is shared; the run's kind
scores it again (its KindSpec's `reproduce` hook: paired/commands/reproduce.py, selection/commands/reproduce.py);
core/reproduce.py compares, prints and writes the report. Exit 0 reproduced, 1 not reproduced, 2 bad input."""

from __future__ import annotations

from pytest_pstbench.options import Arg, add_args

REPRODUCE_ARGS = (
    Arg(
        "run",
        metavar="RUN",
        help="a run folder (results/<track>/<name>) or a published run (hf://datasets/OWNER/NAME@REVISION/PATH)",
    ),
    Arg(
        "--outputs",
        required=True,
        metavar="DIR",
        help="what scores the run again: a paired run's method outputs folder; a selection run's answers file or "
        "judge (MODULE:FUNCTION, path/to/file.py:FUNCTION, pyiqa:METRIC), as `pstbench vab score` takes them",
    ),
    Arg(
        "--report",
        default=None,
        metavar="FILE",
        help="write a reproduce report (JSON: the run's identity and file digests, the verdict, the differences, "
        "the environment then and now) here; `pstbench board --reproduced DIR` reads a folder of them",
    ),
    Arg(
        "--track",
        default=None,
        help="the run's track where run.json's is not found here (a local manifest moved, a fetched copy); it must "
        "be the run's track at its dataset revision",
    ),
    Arg(
        "--protocol",
        default=None,
        help="the protocol file the run was made under, where the installed one has another sha256 "
        "(default: run.json's protocol id, then its path)",
    ),
    Arg(
        "--device",
        default=None,
        help="score on this device instead of the one run.json records (a difference is then expected)",
    ),
)


def cmd_reproduce(args) -> int:
    import sys
    import tempfile
    from pathlib import Path

    from pytest_pstbench.core.compare import checked_runs
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.core.files.write import dumps_json, refuse_overwriting_inputs, write_atomic
    from pytest_pstbench.core.kinds import default_kind, run_kind, spec
    from pytest_pstbench.core.progress import stderr_line
    from pytest_pstbench.core.reproduce import ReproduceRequest, error_line, recorded_protocol, report, verdict_lines
    from pytest_pstbench.core.store.backends import is_published, resolve_runs

    if not is_published(args.run) and not Path(args.run).is_dir():
        raise UserError(f"RUN {args.run}: not a run folder nor a published run; fix: give results/<track>/<name>")
    (source,) = resolve_runs([args.run], option="RUN", protocol_spec=args.protocol, one=True, progress=stderr_line)
    if args.report:
        refuse_overwriting_inputs(
            "--report", [args.report], folders=[("run", source.path), ("outputs", Path(args.outputs))]
        )
    kind = spec(run_kind(source.path) or default_kind())
    if kind.reproduce is None:
        raise UserError(
            f"RUN {args.run}: a {kind.name} run, and the {kind.name} kind cannot reproduce its runs (it declares no "
            "reproduce); fix: score the outputs again with `pstbench score` and compare the run files"
        )
    run = kind.load("runs").load(source.path)
    checked_runs(kind.load("runs"), [run], protocol=recorded_protocol(run, args.protocol))
    with tempfile.TemporaryDirectory(prefix="pstbench-reproduce-") as work:
        result = kind.load("reproduce")(
            ReproduceRequest(
                run=run,
                outputs=args.outputs,
                work=Path(work),
                track_spec=args.track,
                protocol_spec=args.protocol,
                device=args.device,
                progress=stderr_line,
            )
        )
    for line in verdict_lines(source, run, result, kind.unit):
        print(line)
    failed = error_line(source, run, result, kind.unit, args.outputs)
    if failed:
        print(failed, file=sys.stderr)
    if args.report:
        write_atomic(Path(args.report), dumps_json(report(source, run, result, kind.item_file)), what="the report")
        print(f"report: {args.report}")
    return 0 if result.reproduced else 1


def add_reproduce_command(sub) -> None:
    p = sub.add_parser(
        "reproduce",
        help="score a run again under its recorded protocol file, dataset revision and thread count, and say "
        "whether its files come out byte-identical (paired) or every task's outcome the same (selection)",
    )
    add_args(p, REPRODUCE_ARGS)
    p.set_defaults(func=cmd_reproduce)
