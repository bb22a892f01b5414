"""`pstbench power` on paired runs (the paired KindSpec's `power` hook, called by cli/power.py): what a comparison on
this track can detect, and how many pairs a given shift needs (docs/cli.md "pstbench power"; computed by
paired/power.py, as the gate and `compare` report it)."""

from __future__ import annotations


def plan(args, paths) -> int:
    """`pstbench power` on paired runs (its KindSpec's `power` hook): the minimum detectable effects and pairs needed."""
    import json
    import math

    from pytest_pstbench.core.compare import check_metric_names, checked_runs
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.core.gate import parse_number_items
    from pytest_pstbench.paired.compare import PAIRED_RUNS
    from pytest_pstbench.paired.power import planning_rows

    kind = PAIRED_RUNS
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
