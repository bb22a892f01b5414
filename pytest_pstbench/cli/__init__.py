"""`pstbench` command: demo, score, compare here; the other command groups register
themselves (weights, data, vab, baseline, sensitivity, report, table, runs). Drives the same engine as the pytest
plugin; the options both take come from `pytest_pstbench/options.py`, the one option table."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from pytest_pstbench.cli.parsing import Parser, positive_int
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.progress import stderr_line as _progress
from pytest_pstbench.options import add_to_argparse, add_workers_option


def _print_table(protocol, track, rows) -> None:
    from pytest_pstbench.paired.tables import header_line, run_table

    n_items = len(track.pairs)
    print(header_line(rows[-1][1], track.dataset_id, n_items))
    print(run_table(protocol, rows, n_items=n_items))


def _report_outcome(outcome) -> int:
    print(f"run files: {outcome.run_dir}")
    for d in outcome.run.get("deviations", []):
        if d.get("kind") == "outputs_made_for_other_track":
            made, scored = d["method_yaml"], d["scored"]
            print(
                f"pstbench: warning: method.yaml says these outputs were made on track {made['track']}@{made['revision']}, "
                f"but they were scored on {scored['track']}@{scored['revision']} (recorded as a deviation in run.json)",
                file=sys.stderr,
            )
    if not outcome.complete:
        failures = outcome.run["failures"]
        print(
            f"pstbench: error: {len(failures)} of {outcome.run['n_pairs']} pairs failed; run.json says complete: false",
            file=sys.stderr,
        )
        for f in failures:
            print(f"  {f['pair']}: {f['message']}", file=sys.stderr)
        return 1
    return 0


def _failed_everywhere(identity, outcomes) -> bool:
    """Whether each failure of the Identity run (its pair and message) is a failure of every scored run too: a
    track file that cannot be read (e.g. a reference) fails each run the same way, and each run's failures
    name it already."""
    failed = {(f["pair"], f["message"]) for f in identity.run.get("failures", [])}
    return bool(failed) and all(
        failed <= {(f["pair"], f["message"]) for f in o.run.get("failures", [])} for o in outcomes
    )


def cmd_score(args) -> int:
    from pytest_pstbench.paired.identity import is_identity_spec
    from pytest_pstbench.paired.planner import check_workers, identity_row, score_runs
    from pytest_pstbench.paired.request import ScoreRequest, identity_request, open_scorings
    from pytest_pstbench.selection.kind import is_selection_track

    if is_selection_track(args.track):  # vab, vab-demo, `kind: selection` manifests
        raise UserError(
            f"--track {args.track}: a selection track (best/worst judgment), not a paired track; "
            f"fix: pstbench vab score --track {args.track} --judge MODULE:FUNCTION|--answers FILE"
        )
    if args.outputs is None:
        raise UserError(
            f"--outputs is required to score paired track {args.track}; fix: pass --outputs DIR (one <pair_id>.png per pair)"
        )
    specs = list(args.outputs)
    if len(specs) > 1 and args.name is not None:
        raise UserError(
            f"--name {args.name}: names one run, but {len(specs)} --outputs folders were given (each run is "
            "named after its folder); fix: drop --name, or score one folder per call"
        )
    workers = check_workers(args.workers)
    reqs = [
        ScoreRequest(
            track=args.track,
            outputs=spec,
            name=args.name,
            results=Path(args.results),
            protocol=args.protocol,
            allow_resize=args.allow_resize,
            device=args.device,
            method_info=tuple(args.method_info or ()),
            use_cache=not args.no_cache,
            verify_cache=args.verify_cache,
            allow_outside_links=args.allow_outside_links,
            command=args.command_line,
        )
        for spec in specs
    ]
    # The Identity row: a run like the others (same cache rules), scored in the same pass (sharing each pair's
    # reference work); cached pairs cost a hash and a small read.
    with_identity = not any(is_identity_spec(str(spec)) for spec in specs)
    if with_identity:
        reqs.append(identity_request(reqs[0]))
    scorings = open_scorings(reqs, progress=_progress)
    protocol, track = scorings[0].protocol, scorings[0].track
    if with_identity:
        _progress(f"scoring Identity on track {track.id} (the table's reference row)")
    outcomes = score_runs(
        [s.session for s in scorings], [s.outputs for s in scorings], progress=_progress, workers=workers
    )
    rows = []
    problem = None
    if with_identity:
        identity = outcomes.pop()
        label, summary, problem = identity_row(identity, track)
        rows.append((label, summary))
        if problem and _failed_everywhere(identity, outcomes):
            problem = None  # the track's own files failed for every run: those pairs are listed once, below
    names = [s.session.name for s in scorings]
    rows.extend((name, outcome.summary) for name, outcome in zip(names, outcomes))
    _print_table(protocol, track, rows)
    code = max(_report_outcome(outcome) for outcome in outcomes)
    if problem:
        print(f"pstbench: error: {problem}", file=sys.stderr)
        code = max(code, 1)
    return code


def cmd_demo(args) -> int:
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.data.weights.resolve import resolve_alexnet_features
    from pytest_pstbench.paired.baselines import (
        BaselineFailed,
        parse_methods,
        prepare_reference_baseline,
        write_reference_baseline,
    )
    from pytest_pstbench.paired.method_info import load_method_yaml
    from pytest_pstbench.paired.planner import check_workers, identity_row, score_run
    from pytest_pstbench.paired.request import ScoreRequest, open_on
    from pytest_pstbench.paired.session import RunSession, RunSettings
    from pytest_pstbench.paired.tracks import resolve_outputs, resolve_track

    protocol = load_protocol(args.protocol)
    workers = check_workers(args.workers)
    # The demo's methods are the reference baselines of `pstbench baseline` (identity is always the first row).
    methods = [m for m in parse_methods(args.methods) if m != "identity"]
    prepared = [prepare_reference_baseline(m, progress=_progress) for m in methods]
    track = resolve_track("demo", progress=_progress)
    if "lpips" in protocol.metric_names:
        resolve_alexnet_features(progress=_progress)
    results = Path(args.results)
    identity = open_on(
        ScoreRequest(
            track=track.id,
            outputs="identity",
            name=None,
            results=results,
            protocol=args.protocol,
            device=args.device,
            use_cache=not args.no_cache,
            verify_cache=args.verify_cache,
            command=args.command_line,
        ),
        protocol,
        track,
    )
    _progress(f"scoring Identity on track {track.id} (the table's reference row)")
    label, summary, problem = identity_row(
        score_run(identity.session, identity.outputs, progress=_progress, workers=workers), track
    )
    rows = [(label, summary)]
    code = 0
    if problem:
        print(f"pstbench: error: {problem}", file=sys.stderr)
        code = 1
    for p in prepared:
        out_dir = results / track.id / p.name / "outputs"
        try:
            write_reference_baseline(
                p, track, out_dir, protocol=protocol, overwrite=True, command=args.command_line, progress=_progress
            )
        except BaselineFailed as exc:
            print(f"pstbench: error: {exc}", file=sys.stderr)
            return 1
        session = RunSession(
            track,
            protocol,
            RunSettings(
                name=p.name,
                results_dir=results,
                device=args.device,
                outputs_dir=out_dir,
                method_info=load_method_yaml(out_dir),
                command=args.command_line,
                use_cache=not args.no_cache,
                verify_cache=args.verify_cache,
            ),
        )
        outcome = score_run(session, resolve_outputs(track, out_dir), progress=_progress, workers=workers)
        rows.append((p.name, outcome.summary))
        code = max(code, 0 if outcome.complete else 1)
    _print_table(protocol, track, rows)
    print(f"run files: {results / track.id}/<method>/ (metrics.csv, summary.json, run.json)")
    return code


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


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="pstbench", description="Score photorealistic style transfer outputs under a fixed protocol.")
    from pytest_pstbench import __version__

    parser.add_argument("--version", action="version", version=f"pstbench {__version__} (pytest-pstbench)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(p):
        add_to_argparse(p, "results", "device", "protocol", "no-cache", "verify-cache")

    p = sub.add_parser("demo", help="build the demo track, score Identity and reference baselines, print the table")
    common(p)
    p.add_argument(
        "--methods",
        nargs="+",
        default=["reinhard"],
        help="reference baselines to run beside Identity: reinhard, mkl, idt, histmatch or all (default: reinhard; see `pstbench baseline`)",
    )
    add_workers_option(p)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("score", help="score an outputs folder on a track")
    add_to_argparse(
        p, "track", "outputs", "name", "allow-resize", "method-info", "allow-outside-links", required=("track",)
    )
    common(p)
    add_workers_option(p)
    p.set_defaults(func=cmd_score)

    p = sub.add_parser(
        "compare",
        help="tests between runs, Holm-corrected: paired Wilcoxon (paired tracks) or exact McNemar (selection tracks)",
    )
    p.add_argument(
        "runs",
        nargs="+",
        metavar="RUN_DIR",
        help="run folders (results/<track>/<name>) or published runs "
        "(hf://datasets/OWNER/NAME@REVISION/PATH: one run, or a folder of runs); at least two",
    )
    p.add_argument(
        "--against-first",
        action="store_true",
        help="compare each run with the first only (default: every pair of runs; the later run is the candidate)",
    )
    p.add_argument(
        "--metrics",
        nargs="+",
        default=None,
        help="metrics to test (default: the protocol's ranked metrics; selection runs: top1 bot1 tb1)",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument(
        "--protocol",
        default=None,
        help="protocol id or YAML path the runs were made under (default: found by the runs' sha256)",
    )
    p.add_argument(
        "--margin",
        action="append",
        default=None,
        metavar="METRIC=DELTA",
        help="non-inferiority margin (repeatable; paired runs): a one-sided Wilcoxon test of the per-pair "
        "differences shifted by DELTA (metrics.csv units); verdicts worse beyond margin / within margin / "
        "better; 0 (default): no margin",
    )
    p.add_argument(
        "--worst",
        type=positive_int,
        default=None,
        metavar="N",
        help="paired runs: list, per tested metric and run pair, the N pairs the candidate lost most on "
        "(both values, the loss, the pair's content and style files when the track is here); JSON: `worst`",
    )
    p.add_argument(
        "--fail-on-worse",
        action="store_true",
        help="exit 1 when the gate would fail: a test is significantly worse (beyond its margin), or the "
        "comparison has too few pairs/tasks to find one after Holm's correction; each reason on stderr",
    )
    add_to_argparse(p, "strict-environment")
    p.set_defaults(func=cmd_compare)

    from pytest_pstbench.cli.weights import add_weights_commands

    add_weights_commands(sub)  # pstbench weights fetch|verify|list
    from pytest_pstbench.cli.data import add_data_commands

    add_data_commands(sub)
    from pytest_pstbench.cli.vab import add_vab_commands

    add_vab_commands(sub)  # pstbench vab ...
    from pytest_pstbench.cli.baselines import add_baseline_command
    from pytest_pstbench.cli.report import add_report_command
    from pytest_pstbench.cli.sensitivity import add_sensitivity_command

    add_baseline_command(sub)  # pstbench baseline METHOD ...
    add_sensitivity_command(sub)  # pstbench sensitivity ...
    add_report_command(sub)  # pstbench report ...
    from pytest_pstbench.cli.table import add_table_command

    add_table_command(sub)  # pstbench table ...
    from pytest_pstbench.cli.power import add_power_command

    add_power_command(sub)  # pstbench power ...
    from pytest_pstbench.cli.discover import add_discover_commands

    add_discover_commands(sub)  # pstbench ls ..., pstbench cache prune
    from pytest_pstbench.cli.runs import add_runs_commands

    add_runs_commands(sub)  # pstbench runs pull|push|ls
    from pytest_pstbench.cli.history import add_history_command

    add_history_command(sub)  # pstbench history SOURCE...
    return parser


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
