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
        raise UserError(
            f"{args.run}: a {kind.name} run; pstbench power plans paired comparisons (Wilcoxon over pairs) "
            "only; fix: give a paired run folder (results/<track>/<method>)"
        )
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
    rows = planning_rows(runs, protocol, metrics, pairs=args.pairs, effects=effects)
    if args.json:
        print(json.dumps({"protocol": protocol.id, "alpha": protocol.comparison.alpha, "metrics": rows}, indent=2))
        return 0
    from pytest_pstbench.paired.power import planning_text

    print(planning_text(rows, runs, protocol))
    return 0


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
        help="paired runs: the smallest worse shift of each metric a comparison detects with the "
        "protocol's power target (minimum detectable effect), and the pairs a given shift needs",
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
        help="the minimum detectable effect with N pairs instead of the run's n",
    )
    p.add_argument(
        "--effect",
        action="append",
        default=None,
        metavar="METRIC=SHIFT",
        help="repeatable: the fewest pairs in which a worse shift of SHIFT (metrics.csv units) is detected "
        "with the protocol's power target",
    )
    p.add_argument(
        "--protocol",
        default=None,
        help="protocol id or YAML path the run was made under (default: found by its sha256)",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(func=cmd_power)
