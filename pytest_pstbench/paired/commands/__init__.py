"""The paired kind's `pstbench` commands (its KindSpec's `commands` hook adds them to the parser): demo,
baseline, sensitivity; its `power` hook (`pstbench power` of paired runs); and its `score` hook (`pstbench score` of a paired track). Each module parses
its command line only and imports the engine when the command runs."""

from __future__ import annotations

from pytest_pstbench.options import WORKERS, Arg, add_args, cli_args

DEMO_ARGS = (
    *cli_args("results", "device", "protocol", "no-cache", "verify-cache"),
    Arg(
        "--methods",
        nargs="+",
        default=["reinhard"],
        help="reference baselines to run beside Identity: reinhard, mkl, idt, histmatch or all (default: reinhard; see `pstbench baseline`)",
    ),
    WORKERS,
)


def add_commands(sub) -> None:
    """Register the paired kind's commands on `pstbench`'s subparsers."""
    from pytest_pstbench.paired.commands.baselines import add_baseline_command
    from pytest_pstbench.paired.commands.score import cmd_demo
    from pytest_pstbench.paired.commands.sensitivity import add_sensitivity_command

    p = sub.add_parser("demo", help="build the demo track, score Identity and reference baselines, print the table")
    add_args(p, DEMO_ARGS)
    p.set_defaults(func=cmd_demo)
    add_baseline_command(sub)  # pstbench baseline METHOD ...
    add_sensitivity_command(sub)  # pstbench sensitivity ...
