"""`pstbench score` of a paired track (the kind's `score` hook: `pstbench score` asks the registry which kind a
track is) and `pstbench demo`: score outputs folders, the Identity row beside them, and print the table."""

from __future__ import annotations

import sys
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.progress import stderr_line as _progress


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
