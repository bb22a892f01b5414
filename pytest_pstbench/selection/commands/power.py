"""`pstbench power` on selection runs (the selection KindSpec's `power` hook, called by cli/power.py): the McNemar
gate planned per cell (selection/power_plan.py)."""

from __future__ import annotations


def plan(args, paths) -> int:
    """`pstbench power` on selection runs (its KindSpec's `power` hook): the exact McNemar gate planned per cell."""
    import json
    import math

    from pytest_pstbench.core.compare import checked_runs
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.core.gate import parse_number_items
    from pytest_pstbench.selection.compare import SELECTION_RUNS, check_metrics
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
    kind = SELECTION_RUNS
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
