"""`pstbench` command: score and compare here (the kind that claims the track, or the runs' kind, does the work,
through the registry); the shared command groups (weights, data, report, table, ls, runs, history) register
themselves, and each registered kind adds its own commands (its KindSpec's `commands`: the paired kind's demo,
baseline, sensitivity, power; the selection kind's vab). Drives the same engine as the pytest plugin; the options
both take come from `pytest_pstbench/options.py`, the one option table."""

from __future__ import annotations

import argparse
import shlex
import sys

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.frame.parsing import Parser, positive_int
from pytest_pstbench.options import WORKERS, Arg, add_args, cli_args


def cmd_compare(args) -> int:
    """`pstbench compare RUN1 RUN2 ...`: the runs' kind (from the registry) compares them and says what to print."""
    import json

    from pytest_pstbench.cli.runs import local_runs
    from pytest_pstbench.core.compare import fail_on_worse, protocol_for
    from pytest_pstbench.core.kinds import kind_of_runs

    args.runs = local_runs(args.runs, args.protocol)
    kind = kind_of_runs(args.runs)
    margins = None
    if args.margin:
        kind.check_margins(f"--margin {args.margin[0]}", "--margin")  # a kind without margins refuses them first
        from pytest_pstbench.core.gate import margins_to_apply

        runs = [kind.load(p) for p in args.runs]
        margins = margins_to_apply(
            args.margin, protocol_for(runs, args.protocol), option="--margin", tested=args.metrics
        )
    if args.worst is not None and kind.worst is None:
        raise UserError(
            f"--worst {args.worst}: {kind.name} runs have no per-item losses to list; fix: drop --worst "
            "(`pstbench report` shows each item of a selection run)"
        )
    comp, protocol, runs = kind.compare_paths(
        args.runs, protocol_spec=args.protocol, against_first=args.against_first, metrics=args.metrics, margins=margins
    )
    worst = kind.worst(comp, runs, protocol, args.worst, args.against_first) if args.worst is not None else None
    from pytest_pstbench.core.compare import run_pairs
    from pytest_pstbench.core.drift import FIX as DRIFT_FIX
    from pytest_pstbench.core.drift import pairs_drift

    drifted = pairs_drift(run_pairs(runs, args.against_first))  # a baseline from another environment: one line each
    if args.json:
        print(
            json.dumps(
                {
                    **comp.to_json(),
                    **({"worst": worst[1]} if worst else {}),
                    **({"environment_drift": drifted} if drifted else {}),
                },
                indent=2,
            )
        )
    else:
        print(
            kind.compare_text(comp, runs, protocol)
            + (f"\n\n{worst[0]}" if worst else "")
            + "".join(f"\n{line}" for line in drifted)
        )
    code = fail_on_worse(args, comp, kind.name, protocol)
    if drifted and args.strict_environment:
        for line in drifted:
            print(
                f"pstbench compare: FAILED: {line}; --strict-environment makes that a failure; {DRIFT_FIX}",
                file=sys.stderr,
            )
        return 1
    return code


def cmd_score(args) -> int:
    """`pstbench score --track T ...`: the kind that claims the track (through the registry) scores it."""
    from pytest_pstbench.core.kinds import spec, track_kind

    kind = spec(track_kind(args.track))
    if kind.score is None:
        raise UserError(
            f"--track {args.track}: a {kind.name} track, which `pstbench score` does not score; "
            f"fix: see `pstbench --help` for the {kind.name} kind's own commands"
        )
    return kind.load("score")(args)


SCORE_ARGS = (
    *cli_args("track", "outputs", "name", "allow-resize", "method-info", "allow-outside-links", required=("track",)),
    *cli_args("results", "device", "protocol", "no-cache", "verify-cache"),
    WORKERS,
)


def add_score_command(sub) -> None:
    p = sub.add_parser("score", help="score an outputs folder on a track")
    add_args(p, SCORE_ARGS)
    p.set_defaults(func=cmd_score)


COMPARE_ARGS = (
    Arg(
        "runs",
        nargs="+",
        metavar="RUN_DIR",
        help="run folders (results/<track>/<name>) or published runs "
        "(hf://datasets/OWNER/NAME@REVISION/PATH: one run, or a folder of runs); at least two",
    ),
    Arg(
        "--against-first",
        action="store_true",
        help="compare each run with the first only (default: every pair of runs; the later run is the candidate)",
    ),
    Arg(
        "--metrics",
        nargs="+",
        default=None,
        help="metrics to test (default: the protocol's ranked metrics; selection runs: top1 bot1 tb1)",
    ),
    Arg("--json", action="store_true", help="print the results as JSON"),
    Arg(
        "--protocol",
        default=None,
        help="protocol id or YAML path the runs were made under (default: found by the runs' sha256)",
    ),
    Arg(
        "--margin",
        action="append",
        default=None,
        metavar="METRIC=DELTA",
        help="non-inferiority margin (repeatable; paired runs): a one-sided Wilcoxon test of the per-pair "
        "differences shifted by DELTA (metrics.csv units); verdicts worse beyond margin / within margin / "
        "better; 0 (default): no margin",
    ),
    Arg(
        "--worst",
        type=positive_int,
        default=None,
        metavar="N",
        help="paired runs: list, per tested metric and run pair, the N pairs the candidate lost most on "
        "(both values, the loss, the pair's content and style files when the track is here); JSON: `worst`",
    ),
    Arg(
        "--fail-on-worse",
        action="store_true",
        help="exit 1 when the gate would fail: a test is significantly worse (beyond its margin), or the "
        "comparison has too few pairs/tasks to find one after Holm's correction; each reason on stderr",
    ),
    *cli_args("strict-environment"),
)


def add_compare_command(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="tests between runs, Holm-corrected: paired Wilcoxon (paired tracks) or exact McNemar (selection tracks)",
    )
    add_args(p, COMPARE_ARGS)
    p.set_defaults(func=cmd_compare)


def build_parser() -> argparse.ArgumentParser:
    """`pstbench`: the shared commands, then each registered kind's own (its KindSpec's `commands` hook)."""
    from pytest_pstbench.core.environment import VERSION
    from pytest_pstbench.core.kinds import registered

    parser = Parser(prog="pstbench", description="Score photorealistic style transfer outputs under a fixed protocol.")
    add_args(parser, (Arg("--version", action="version", version=f"pstbench {VERSION} (pytest-pstbench)"),))
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_score_command(sub)
    add_compare_command(sub)
    for kind in registered().values():
        if kind.commands is not None:
            kind.load("commands")(sub)  # e.g. pstbench demo, baseline, sensitivity, power; pstbench vab ...
    add_shared_commands(sub)
    return parser


def add_shared_commands(sub) -> None:
    """The command groups every kind's runs and tracks share, besides score and compare."""
    from pytest_pstbench.cli.data import add_data_commands
    from pytest_pstbench.cli.discover import add_discover_commands
    from pytest_pstbench.cli.history import add_history_command
    from pytest_pstbench.cli.power import add_power_command
    from pytest_pstbench.cli.report import add_report_command
    from pytest_pstbench.cli.reproduce import add_reproduce_command
    from pytest_pstbench.cli.runs import add_runs_commands
    from pytest_pstbench.cli.table import add_table_command
    from pytest_pstbench.cli.weights import add_weights_commands

    add_weights_commands(sub)  # pstbench weights fetch|verify|list
    add_data_commands(sub)  # pstbench data ...
    add_report_command(sub)  # pstbench report ...
    add_table_command(sub)  # pstbench table ...
    add_reproduce_command(sub)  # pstbench reproduce RUN --outputs ...
    from pytest_pstbench.board.build import add_board_command

    add_board_command(sub)  # pstbench board ...
    add_power_command(sub)  # pstbench power ... (the runs' kind plans it)
    add_discover_commands(sub)  # pstbench ls ..., pstbench cache prune
    add_runs_commands(sub)  # pstbench runs pull|push|ls
    add_history_command(sub)  # pstbench history SOURCE...


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from pytest_pstbench.core.paths import refuse_non_utf8

    try:
        refuse_non_utf8(argv)  # before any work: run files, pages and tables record the command and its paths as UTF-8
    except UserError as exc:
        print(f"pstbench: error: {exc}", file=sys.stderr)
        return 2
    parser = build_parser()
    Parser.argv = argv
    from pytest_pstbench.core.text import TerminalStream

    # Every line a command prints (a usage error too) passes through core.text.for_terminal: a name, field or
    # message from a file or a server cannot send control sequences to the terminal (progress bars write to the
    # stream under it).
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = TerminalStream(out), TerminalStream(err)
    try:
        args = parser.parse_args(argv)
        args.command_line = "pstbench " + shlex.join(argv)
        return args.func(args)
    except UserError as exc:
        print(f"pstbench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pstbench: interrupted", file=sys.stderr)
        return 130
    finally:
        sys.stdout, sys.stderr = out, err


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
