"""`pstbench power RUN [CANDIDATE]`: what a comparison can detect, and how many items a given difference needs.
The command is shared; the runs' kind plans it (its KindSpec's `power` hook: paired runs in
paired/commands/power.py, selection runs in selection/commands/power.py)."""

from __future__ import annotations

from pytest_pstbench.options import Arg, add_args


def cmd_power(args) -> int:
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.core.kinds import runs_kind, spec

    paths = [args.run] + ([args.candidate] if args.candidate else [])
    kind = spec(runs_kind(paths))
    if kind.power is None:
        raise UserError(f"pstbench power: {kind.name} runs have no power planning; fix: plan with `pstbench compare`")
    return kind.load("power")(args, paths)


def share_of_units(text: str) -> float:
    """argparse type of --discordance: a number in (0, 1]."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid discordance {text[:60]!r}: expected a number in (0, 1]") from None
    if not math.isfinite(value) or not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"invalid discordance {value}: expected a number in (0, 1]")
    return value


def correlation(text: str) -> float:
    """argparse type of --correlation: a number from -1 to 1."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid correlation {text[:60]!r}: expected a number from -1 to 1") from None
    if not math.isfinite(value) or not -1 <= value <= 1:
        raise argparse.ArgumentTypeError(f"invalid correlation {value}: expected a number from -1 to 1")
    return value


def pair_count(text: str) -> int:
    """argparse type of --pairs: a whole number >= 2 (argparse names the option in its one-line error)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid count {text[:60]!r}: expected a whole number >= 2") from None
    if not 2 <= value <= 1_000_000:
        raise argparse.ArgumentTypeError(f"invalid count {value}: expected a whole number from 2 to 1000000")
    return value


POWER_ARGS = (
    Arg("run", metavar="RUN_DIR", help="a baseline run folder (results/<track>/<method>)"),
    Arg(
        "candidate",
        nargs="?",
        default=None,
        metavar="CANDIDATE_DIR",
        help="a candidate run of the same track: its observed per-pair differences replace the baseline-only "
        "noise model (as compare and the gate compute it)",
    ),
    Arg(
        "--metrics",
        nargs="+",
        default=None,
        help="metrics to plan for (default: the protocol's ranked metrics); Holm's correction is over as many tests",
    ),
    Arg(
        "--pairs",
        type=pair_count,
        default=None,
        metavar="N",
        help="the minimum detectable effect with N pairs (selection runs: N tasks) instead of the run's n",
    ),
    Arg(
        "--effect",
        action="append",
        default=None,
        metavar="METRIC=SHIFT",
        help="repeatable: the fewest pairs in which a worse shift of SHIFT (metrics.csv units) is detected "
        "with the protocol's power target (selection runs: METRIC=DROP of accuracy, the fewest tasks)",
    ),
    Arg(
        "--noise-from",
        nargs=2,
        default=None,
        metavar=("RUN_A", "RUN_B"),
        help="plan from the per-pair differences RUN_B - RUN_A of two runs of one track (e.g. the baseline and a "
        "previous commit's run, or two baselines) instead of an assumed correlation",
    ),
    Arg(
        "--correlation",
        type=correlation,
        default=None,
        metavar="R",
        help="planning from the baseline alone: the correlation of the two runs' per-pair values (default: the "
        "protocol's comparison.power.baseline_correlation, 0.5, an assumption the first line names)",
    ),
    Arg(
        "--difference-sd",
        action="append",
        default=None,
        metavar="METRIC=SD",
        help="repeatable: planning from the baseline alone, the standard deviation of METRIC's per-pair "
        "differences (metrics.csv units; the baseline's values give the shape)",
    ),
    Arg(
        "--discordance",
        type=share_of_units,
        default=None,
        metavar="PSI",
        help="selection runs: the share of units (tasks, trials) on which the two judges disagree (default: 2p(1-p), "
        "judges erring independently, an assumption the first line names; with CANDIDATE_DIR the observed one)",
    ),
    Arg(
        "--protocol",
        default=None,
        help="protocol id or YAML path the run was made under (default: found by its sha256)",
    ),
    Arg("--json", action="store_true", help="print the results as JSON"),
)


def add_power_command(sub) -> None:
    p = sub.add_parser(
        "power",
        help="the smallest worse shift of each metric a comparison detects with the protocol's power target "
        "(minimum detectable effect), and the pairs a given shift needs; selection runs: the drop of accuracy "
        "(exact McNemar) and the tasks a given drop needs",
    )
    add_args(p, POWER_ARGS)
    p.set_defaults(func=cmd_power)
