"""`pstbench power RUN [CANDIDATE]`: what a comparison on this track can detect, and how many pairs a given
shift needs (docs/cli.md "pstbench power"; computed by paired/power.py, as the gate and `compare` report it)."""

from __future__ import annotations


def cmd_power(args) -> int:
    import json
    import math

    from pytest_pstbench.core.compare import check_metric_names, checked_runs
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.core.gate import parse_number_items
    from pytest_pstbench.core.kinds import kind_of_runs
    from pytest_pstbench.paired.compare import PAIRED_RUNS
    from pytest_pstbench.paired.power import planning_rows

    paths = [args.run] + ([args.candidate] if args.candidate else [])
    kind = kind_of_runs(paths)
    if kind is not PAIRED_RUNS:
        return power_selection(args, kind, paths)
    if args.discordance is not None:
        raise UserError("--discordance: plans selection runs (McNemar); fix: drop it, or give a selection run")
    runs = [kind.load(p) for p in paths]
    protocol = checked_runs(kind, runs, protocol_spec=args.protocol, comparable=len(runs) > 1)
    metrics = check_metric_names(
        args.metrics,
        protocol.ranked_metrics if not args.metrics else protocol.metrics,
        lambda unknown: (
            f"--metrics: unknown metric(s) {', '.join(unknown)}; protocol {protocol.id} has {', '.join(protocol.metric_names)}; "
            "fix: name some of them"
        ),
    )

    def positive(item, name, value, number):
        if not math.isfinite(number) or number <= 0:
            raise UserError(
                f"--effect {item!r}: a shift must be a finite number > 0 in metrics.csv units; fix: give e.g. {name}=0.005"
            )

    effects = parse_number_items(
        args.effect,
        "--effect",
        metrics,
        example="METRIC=SHIFT, e.g. lpips=0.005; fix: name a metric and a shift",
        unknown=lambda name: f"{name} is not among the planned metrics ({', '.join(metrics)})",
        check=positive,
        noun="shifts",
    )
    noise = noise_of(args, kind, runs, protocol, metrics, parse_number_items)
    rows = planning_rows(runs, protocol, metrics, pairs=args.pairs, effects=effects, noise=noise)
    if args.json:
        source = noise.source(runs, protocol.comparison.power)
        out = {"protocol": protocol.id, "alpha": protocol.comparison.alpha, "noise_source": source, "metrics": rows}
        print(json.dumps(out, indent=2))
        return 0
    from pytest_pstbench.paired.power import planning_text

    print(planning_text(rows, runs, protocol, noise))
    return 0


def power_selection(args, kind, paths) -> int:
    """`pstbench power` on selection runs: the exact McNemar gate planned per cell (selection/power.py)."""
    import json
    import math

    from pytest_pstbench.core.compare import checked_runs
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.core.gate import parse_number_items
    from pytest_pstbench.selection.compare import check_metrics
    from pytest_pstbench.selection.power_plan import discordance_source, planning_rows, planning_text
    from pytest_pstbench.selection.protocol import SelectionParams, comparison_params

    given = [o for o, v in (("--noise-from", args.noise_from), ("--correlation", args.correlation)) if v is not None]
    if given or args.difference_sd:
        raise UserError(
            f"{(given or ['--difference-sd'])[0]}: plans paired runs; fix: for a selection run give a candidate run "
            "or --discordance PSI"
        )
    if args.discordance is not None and len(paths) > 1:
        raise UserError("pstbench power: CANDIDATE_DIR and --discordance each give the discordance; fix: give one")
    runs = [kind.load(p) for p in paths]
    protocol = checked_runs(kind, runs, protocol_spec=args.protocol, comparable=len(runs) > 1)
    metrics = check_metrics(args.metrics, SelectionParams.of(protocol))
    comparison_params(protocol)

    def share(item, name, value, number):
        if not math.isfinite(number) or not 0 < number <= 1:
            raise UserError(f"--effect {item!r}: a drop of accuracy is a number in (0, 1]; fix: give e.g. {name}=0.05")

    effects = parse_number_items(
        args.effect,
        "--effect",
        metrics,
        example="METRIC=DROP, e.g. top1=0.05; fix: name a metric and a drop of accuracy",
        unknown=lambda name: f"{name} is not among the planned metrics ({', '.join(metrics)})",
        check=share,
        noun="drops",
    )
    rows = planning_rows(runs, protocol, metrics, tasks=args.pairs, effects=effects, discordance=args.discordance)
    if args.json:
        source = discordance_source(runs[1] if len(runs) > 1 else None, args.discordance)
        out = {"protocol": protocol.id, "alpha": comparison_params(protocol).alpha, "discordance_source": source}
        print(json.dumps({**out, "cells": rows}, indent=2))
        return 0
    print(planning_text(rows, runs, protocol, args.discordance))
    return 0


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


def noise_of(args, kind, runs, protocol, metrics, parse_number_items):
    """The noise model the options name (paired/power.Noise): a candidate, --noise-from, --correlation and
    --difference-sd; a candidate or --noise-from excludes the rest (one source of noise)."""
    import math

    from pytest_pstbench.core.compare import checked_runs
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.paired.power import Noise, shared_ids

    given = [o for o, v in (("--correlation", args.correlation), ("--difference-sd", args.difference_sd)) if v]
    if (len(runs) > 1 or args.noise_from) and (given or (len(runs) > 1 and args.noise_from)):
        what = ["CANDIDATE_DIR"] * (len(runs) > 1) + ["--noise-from"] * bool(args.noise_from) + given
        raise UserError(
            f"pstbench power: {' and '.join(what)} each name the noise model; fix: give one of them "
            "(a candidate's or two runs' observed differences, or the baseline with --correlation/--difference-sd)"
        )
    if len(runs) > 1:
        return Noise(candidate=runs[1])
    if args.noise_from:
        pair = [kind.load(p) for p in args.noise_from]
        checked_runs(kind, pair, protocol=protocol, comparable=True)
        if len(shared_ids(*pair)) < 2:
            raise UserError(
                f"--noise-from {args.noise_from[0]} {args.noise_from[1]}: fewer than 2 shared pairs; fix: name two runs of one track"
            )
        return Noise(noise_runs=tuple(pair))

    def non_negative(item, name, value, number):
        if not math.isfinite(number) or number < 0:
            raise UserError(
                f"--difference-sd {item!r}: a spread must be a finite number >= 0; fix: give e.g. {name}=0.3"
            )

    sds = parse_number_items(
        args.difference_sd,
        "--difference-sd",
        metrics,
        example="METRIC=SD, e.g. psnr=0.3; fix: name a metric and the sd of its per-pair differences",
        unknown=lambda name: f"{name} is not among the planned metrics ({', '.join(metrics)})",
        check=non_negative,
        noun="spreads",
    )
    return Noise(correlation=args.correlation, difference_sd=sds or None)


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


def add_power_command(sub) -> None:
    p = sub.add_parser(
        "power",
        help="the smallest worse shift of each metric a comparison detects with the protocol's power target "
        "(minimum detectable effect), and the pairs a given shift needs; selection runs: the drop of accuracy "
        "(exact McNemar) and the tasks a given drop needs",
    )
    p.add_argument("run", metavar="RUN_DIR", help="a baseline run folder (results/<track>/<method>)")
    p.add_argument(
        "candidate",
        nargs="?",
        default=None,
        metavar="CANDIDATE_DIR",
        help="a candidate run of the same track: its observed per-pair differences replace the baseline-only "
        "noise model (as compare and the gate compute it)",
    )
    p.add_argument(
        "--metrics",
        nargs="+",
        default=None,
        help="metrics to plan for (default: the protocol's ranked metrics); Holm's correction is over as many tests",
    )
    p.add_argument(
        "--pairs",
        type=pair_count,
        default=None,
        metavar="N",
        help="the minimum detectable effect with N pairs (selection runs: N tasks) instead of the run's n",
    )
    p.add_argument(
        "--effect",
        action="append",
        default=None,
        metavar="METRIC=SHIFT",
        help="repeatable: the fewest pairs in which a worse shift of SHIFT (metrics.csv units) is detected "
        "with the protocol's power target (selection runs: METRIC=DROP of accuracy, the fewest tasks)",
    )
    p.add_argument(
        "--noise-from",
        nargs=2,
        default=None,
        metavar=("RUN_A", "RUN_B"),
        help="plan from the per-pair differences RUN_B - RUN_A of two runs of one track (e.g. the baseline and a "
        "previous commit's run, or two baselines) instead of an assumed correlation",
    )
    p.add_argument(
        "--correlation",
        type=correlation,
        default=None,
        metavar="R",
        help="planning from the baseline alone: the correlation of the two runs' per-pair values (default: the "
        "protocol's comparison.power.baseline_correlation, 0.5, an assumption the first line names)",
    )
    p.add_argument(
        "--difference-sd",
        action="append",
        default=None,
        metavar="METRIC=SD",
        help="repeatable: planning from the baseline alone, the standard deviation of METRIC's per-pair "
        "differences (metrics.csv units; the baseline's values give the shape)",
    )
    p.add_argument(
        "--discordance",
        type=share_of_units,
        default=None,
        metavar="PSI",
        help="selection runs: the share of units (tasks, trials) on which the two judges disagree (default: 2p(1-p), "
        "judges erring independently, an assumption the first line names; with CANDIDATE_DIR the observed one)",
    )
    p.add_argument(
        "--protocol",
        default=None,
        help="protocol id or YAML path the run was made under (default: found by its sha256)",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(func=cmd_power)
