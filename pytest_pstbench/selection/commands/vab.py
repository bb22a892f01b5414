"""`pstbench vab export|score|consensus|study` (`run`: vab_run) (export --retry: the re-ask list; score --also-protocol: two parsings): selection tracks from the command line.

Wired into `pytest_pstbench.cli.build_parser` by `add_vab_commands(subparsers)`. User errors
(`UserError`) are printed as one line by `pytest_pstbench.cli.main` (exit 2).
"""

from __future__ import annotations

import sys
from pathlib import Path

from pytest_pstbench.core.progress import stderr_line as _progress
from pytest_pstbench.options import Arg, add_args, cli_args
from pytest_pstbench.selection.commands.vab_common import SHOW_OPTION, load_selection, print_outcome, shown_sections
from pytest_pstbench.selection.commands.vab_run import PRICE_OPTIONS


def cmd_export(args) -> int:
    from pytest_pstbench.selection.ask.export import export_track

    protocol, params, track = load_selection(args.track, args.protocol)
    from pytest_pstbench.selection.commands.vab_batch import batch_settings, export_batch_file

    if args.batch_file:
        return export_batch_file(args, track, params)
    batch_settings(args, params)  # --model, --temperature, ... only with --batch-file
    if not args.out:
        from pytest_pstbench.core.errors import UserError

        raise UserError(
            "vab export: give --out FOLDER (the export folder) or --batch-file FILE (an OpenAI Batch input file)"
        )
    if args.retry:
        from pytest_pstbench.selection.answers import read_answers, retry_requests

        only = retry_requests(track, read_answers(Path(args.retry), track, params), params)
        if not only:
            print(
                f"nothing to re-ask in {args.retry}: every answer parsed, or its request reached "
                f"{params.attempts['max']} attempts (answers.attempts.max of protocol {protocol.id})"
            )
            return 0
        s = export_track(track, protocol, Path(args.out), only=only)
        print(
            f"re-ask list: {s.n_requests} requests of {s.n_tasks} tasks whose answer did not parse or was an API error "
            f"(below {params.attempts['max']} attempts) to {s.out}"
        )
        print(
            f"requests: {s.out / 'requests.jsonl'} (each with its attempt number); append the answers to {args.retry}"
        )
        return 0
    s = export_track(track, protocol, Path(args.out))
    print(f"exported {s.n_tasks} tasks ({s.n_requests} requests, {s.n_images} images) of track {track.id} to {s.out}")
    print(
        f"requests: {s.out / 'requests.jsonl'}; then: pstbench vab score --track {args.track} --answers ANSWERS.jsonl"
    )
    return 0


def _parsing_differences(track, set_a, set_b) -> int:
    """Answers (task, trial, prompt type) whose labels or status differ between two parsings."""
    keys = set(set_a.entries) | set(set_b.entries)
    return sum(
        1 for k in keys if (set_a.entries.get(k) or (None, None))[:2] != (set_b.entries.get(k) or (None, None))[:2]
    )


def _t0_table(summary: dict, summary0: dict, params) -> str:
    """Per cell (overall, domain, k): pass^3 then ap@1 of each metric as 'x.x% (t0 y.y%)'."""
    from tabulate import tabulate

    def pct(v):
        return "-" if v is None else f"{v * 100:.1f}%"

    body = []
    for c, c0 in zip(summary["cells"], summary0["cells"]):
        if c["group"] == "topic":
            continue
        row = ["overall" if c["group"] == "overall" else f"{c['group']}={c['value']}"]
        for agg in ("pass^3", "ap@1"):
            for m in params.metrics:
                row.append(f"{pct(c['metrics'][m][agg]['mean'])} ({pct(c0['metrics'][m][agg]['mean'])})")
        body.append(row)
    headers = ["cell"] + [
        f"{m}({'p^3' if agg == 'pass^3' else agg})" for agg in ("pass^3", "ap@1") for m in params.metrics
    ]
    return tabulate(body, headers=headers, tablefmt="simple", disable_numparse=True)


def _shift_table(summary_a: dict, summary_b: dict, id_a: str, id_b: str, params) -> str:
    from tabulate import tabulate

    def f(v):
        return "-" if v is None else f"{v:.3f}"

    body = []
    for ca, cb in zip(summary_a["cells"], summary_b["cells"]):
        if ca["group"] not in ("overall", "domain", "k"):
            continue
        name = "overall" if ca["group"] == "overall" else f"{ca['group']}={ca['value']}"
        for agg in params.aggregations:
            row = [name, agg]
            for m in params.metrics:
                a, b = ca["metrics"][m][agg]["mean"], cb["metrics"][m][agg]["mean"]
                d = "" if a is None or b is None or a == b else f" ({b - a:+.3f})"
                row.append(f"{f(a)} / {f(b)}{d}")
            body.append(row)
    headers = ["cell", "agg"] + [f"{params.metrics[m].get('label', m)} {id_a} / {id_b}" for m in params.metrics]
    return tabulate(body, headers=headers, tablefmt="simple", disable_numparse=True)


def _score_prices(args):
    """The options of `vab score` checked before anything is read or written -> the price table (or None)."""
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.selection.ask.pricing import table_from_args

    if bool(args.answers) == bool(args.judge):
        raise UserError(
            "pstbench vab score: give exactly one of --answers FILE or --judge MODULE:FUNCTION (or pyiqa:METRIC)"
        )
    if (args.also_protocol or args.t0_answers) and not args.answers:
        raise UserError("--also-protocol / --t0-answers: need an answers file; fix: give --answers FILE (not --judge)")
    prices = table_from_args(args)  # a bad price file: refused before anything is read or written
    if prices is not None and not args.answers:
        raise UserError(
            "--prices / --price-in: a cost needs an answers file with usage; fix: give --answers FILE (not --judge)"
        )
    return prices


def _session(args, track, protocol, name: str, judge):
    from pytest_pstbench.selection.session import SelectionSession

    return SelectionSession(
        track,
        protocol,
        name=name,
        results_dir=args.results,
        judge=judge,
        command=args.command_line,
        votes=args.votes,
    )


def cmd_score(args) -> int:
    from pytest_pstbench.selection.answers import read_answers
    from pytest_pstbench.selection.ask.pricing import with_cost
    from pytest_pstbench.selection.run_judge import answers_judge, function_judge
    from pytest_pstbench.selection.session import score_all

    prices = _score_prices(args)
    protocol, params, track = load_selection(args.track, args.protocol)
    if args.batch_output:  # the engine's answers appended to --answers first (vab_batch)
        from pytest_pstbench.selection.commands.vab_batch import read_batch_output

        read_batch_output(args, track, params)
    chosen = (
        answers_judge(Path(args.answers), track, params)
        if args.answers
        else function_judge(args.judge, Path.cwd(), params, device=args.device)
    )
    answer_set, name = chosen.answer_set, args.name or chosen.default_name
    provenance = with_cost(chosen.provenance, answer_set, prices, params)
    # Every input is read before the first run is written: a damaged --t0-answers or --also-protocol file is
    # refused with every run folder as it was.
    set0 = read_answers(Path(args.t0_answers), track, params) if args.t0_answers else None
    also = None
    if args.also_protocol:
        from pytest_pstbench.core.protocol import load_protocol
        from pytest_pstbench.selection.protocol import SelectionParams

        protocol2 = load_protocol(args.also_protocol)
        also = (protocol2, read_answers(Path(args.answers), track, SelectionParams.of(protocol2)))
    session = _session(args, track, protocol, name, provenance)
    outcome = score_all(
        session, answer_set=answer_set, judge=chosen.judge, progress=_progress if args.verbose else None
    )
    print_outcome(outcome, track, chosen.label, params, extras=args.extras, show=shown_sections(args))
    if set0 is not None:
        outcome0 = score_all(_session(args, track, protocol, f"{name}@t0", set0.provenance()), answer_set=set0)
        print()
        print(f"as the official summarize.py prints it, with the temperature-0 run ({args.t0_answers}) in parentheses:")
        print(_t0_table(outcome.summary, outcome0.summary, params))
        print(f"run files: {outcome0.run_dir}")
    if also is not None:
        _score_also(args, track, protocol, also, name, provenance, outcome, answer_set, params)
    if not outcome.complete:
        return _incomplete(outcome, args.answers)
    return 0


def _score_also(args, track, protocol, also, name, provenance, outcome, answer_set, params) -> None:
    """--also-protocol: the same answers scored under a second protocol, as run NAME@PROTOCOL, side by side."""
    from pytest_pstbench.selection.session import score_all
    from pytest_pstbench.selection.tables import answers_line

    protocol2, set2 = also
    outcome2 = score_all(_session(args, track, protocol2, f"{name}@{protocol2.id}", provenance), answer_set=set2)
    print()
    print(
        f"the same answers parsed under protocol {protocol2.id}: "
        f"{_parsing_differences(track, answer_set, set2)} of {answer_set.n_lines} answer lines read differently"
    )
    print(_shift_table(outcome.summary, outcome2.summary, protocol.id, protocol2.id, params))
    note = answers_line(outcome2.run)
    if note:
        print(f"{protocol2.id}: {note}")
    print(f"run files: {outcome2.run_dir}")


def _incomplete(outcome, answers) -> int:
    """Exit 1 with what made a scored run incomplete: one line for the tasks the answers file does not answer
    (issue #44: such a run is never complete), then the tasks that failed, one line each."""
    from pytest_pstbench.selection.run_check import NO_ANSWER

    run = outcome.run
    unanswered = [f["task"] for f in run["failures"] if f["message"] == NO_ANSWER]
    failures = [f for f in run["failures"] if f["message"] != NO_ANSWER]
    if unanswered:
        shown = ", ".join(unanswered[:5]) + (", ..." if len(unanswered) > 5 else "")
        print(
            f"pstbench: error: {answers}: answers none of the trials of {len(unanswered)} of the track's {run['n_tasks']} "
            f"tasks ({shown}); run.json says complete: false (incomplete: {run['n_scored']} of {run['n_tasks']} tasks); "
            "fix: answer every task (pstbench vab run resumes its answers file) and score again",
            file=sys.stderr,
        )
    if failures:
        print(
            f"pstbench: error: {len(failures)} of {run['n_tasks']} tasks failed; run.json says complete: false",
            file=sys.stderr,
        )
        for f in failures:
            print(f"  {f['task']}: {f['message']}", file=sys.stderr)
    return 1


def cmd_consensus(args) -> int:
    from tabulate import tabulate

    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.core.files.write import refuse_overwriting_inputs, write_atomic
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection.consensus import decide, read_votes, thresholds_for
    from pytest_pstbench.selection.protocol import DEFAULT_SELECTION_PROTOCOL, SelectionParams

    protocol = load_protocol(args.protocol or DEFAULT_SELECTION_PROTOCOL)
    params = SelectionParams.of(protocol)
    if args.alpha is not None and not 0 < args.alpha < 1:
        raise UserError(f"--alpha {args.alpha}: must be between 0 and 1 (e.g. 0.05)")
    if args.verify_mc is not None and args.verify_mc < 1:
        raise UserError(f"--verify-mc {args.verify_mc}: give a positive number of Monte Carlo draws (e.g. 100000)")
    votes_path = Path(args.votes)
    if args.out:  # before any work: the accepted tasks never replace the votes or the protocol
        refuse_overwriting_inputs(
            "--out", [args.out], files=[("the votes file", votes_path), ("protocol file", protocol.path)]
        )
    tasks = read_votes(votes_path, k_range=(params.k_min, params.k_max), protocol_id=protocol.id)
    rows = thresholds_for(
        tasks,
        params.consensus,
        alpha=args.alpha,
        path=votes_path,
        progress=lambda msg: print(msg, file=sys.stderr, flush=True),
    )
    decisions = []
    for t in tasks:
        th = rows[(t.k, t.n)]
        if th.m is None:
            decisions.append((t, None))
            continue
        decisions.append((t, decide(t.k, t.best, t.worst if t.k >= 3 else None, th.m)))
    source = (
        f"--alpha {args.alpha}"
        if args.alpha is not None
        else f"protocol {protocol.id} (n_judges = {params.consensus['n_judges']})"
    )
    n_acc = sum(1 for _t, d in decisions if d is not None and d.accepted)
    print(f"consensus: {votes_path}   tasks: {len(tasks)}   accepted: {n_acc}   thresholds: {source}")
    headers, body = _threshold_table(args, rows, decisions, params)
    print(tabulate(body, headers=headers, tablefmt="simple", disable_numparse=True))
    accepted = _accepted_csv(decisions, rows)
    if args.out:
        write_atomic(
            Path(args.out), accepted, what="the accepted tasks", fix="free some space or give --out another file"
        )
        print(f"accepted tasks: {args.out}")
    else:
        print()
        print(accepted, end="")
    if args.verbose:
        for t, d in decisions:
            if d is not None and not d.accepted:
                print(f"rejected {t.task_id}: {d.reason}", file=sys.stderr)
    return 0


def _threshold_table(args, rows, decisions, params) -> tuple[list[str], list[list[str]]]:
    """`vab consensus`'s table: per (k, n) the threshold m, the tasks and those accepted, the null pass
    probability (exact, or a Monte Carlo estimate beyond the exact computation's size) and with --verify-mc a
    Monte Carlo check of it."""
    from pytest_pstbench.selection.null_model import monte_carlo_pass_probability

    headers = ["k", "n", "m", "tasks", "accepted", "null pass probability"]
    if args.verify_mc:
        headers += [f"Monte Carlo ({args.verify_mc} draws, 95% Wald)", "exact inside"]
    body = []
    mc_conf = float(params.consensus.get("monte_carlo", {}).get("confidence", 0.95))
    mc_seed = int(params.consensus.get("monte_carlo", {}).get("seed", 0))
    for (k, n), th in rows.items():
        group = [d for t, d in decisions if (t.k, t.n) == (k, n)]
        if th.m is None:
            line = [k, n, "-", len(group), 0, f"none: even m = n gives more than {args.alpha}"]
        elif th.p_null is None:  # beyond the exact computation's size: a Monte Carlo estimate
            mc = th.p_mc
            shown = (
                f"{mc.estimate:.6g} (Monte Carlo, {mc.draws} draws; {mc_conf:g} Clopper-Pearson "
                f"[{mc.ci_low:.6g}, {mc.ci_high:.6g}]; m has upper end <= {args.alpha})"
            )
            line = [k, n, th.m, len(group), sum(1 for d in group if d.accepted), shown]
        else:
            p = th.p_null
            exact = f"{float(p)!r}" + (f" ({p.numerator}/{p.denominator})" if len(str(p)) <= 24 else "")
            line = [k, n, th.m, len(group), sum(1 for d in group if d.accepted), exact]
        if args.verify_mc:
            if th.m is None or th.p_null is None:
                line += ["-", "-"]
            else:
                mc = monte_carlo_pass_probability(k, n, th.m, args.verify_mc, seed=mc_seed, confidence=mc_conf)
                line += [
                    f"{mc.estimate:.6f} [{mc.ci_low:.6f}, {mc.ci_high:.6f}]",
                    "yes" if mc.contains(float(th.p_null)) else "NO",
                ]
        body.append([str(x) for x in line])
    return headers, body


def _accepted_csv(decisions, rows) -> str:
    """The accepted tasks as CSV (task_id, k, n, m, best, best_votes, worst, worst_votes)."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["task_id", "k", "n", "m", "best", "best_votes", "worst", "worst_votes"])
    for t, d in decisions:
        if d is not None and d.accepted:
            w.writerow(
                [
                    t.task_id,
                    t.k,
                    t.n,
                    rows[(t.k, t.n)].m,
                    d.best,
                    d.best_votes,
                    d.worst or "",
                    d.worst_votes if t.k >= 3 else "",
                ]
            )
    return buf.getvalue()


def cmd_study(args) -> int:
    """The ranking-vs-scoring protocol study of an annotations CSV (selection/study.py)."""
    from pytest_pstbench.selection.study import STUDY_FILES, run_study, write_study
    from pytest_pstbench.selection.study_table import study_tables

    if args.out:  # before any work: study.json and study.csv never replace the annotations or the protocol
        from pytest_pstbench.core.files.write import refuse_overwriting_inputs
        from pytest_pstbench.core.protocol import protocol_path

        written = [Path(args.out) / name for name in STUDY_FILES]
        refuse_overwriting_inputs(
            "--out",
            written,
            files=[
                ("the annotations file", args.annotations),
                ("protocol file", protocol_path(args.protocol) if args.protocol else None),
            ],
        )
    result = run_study(Path(args.annotations), protocol=args.protocol, majority=args.majority, max_w=args.max_w)
    print(study_tables(result))
    if args.out:
        write_study(result, Path(args.out))
        print(f"study files: {Path(args.out) / 'study.json'}, {Path(args.out) / 'study.csv'}")
    return 0


def add_vab_commands(subparsers) -> None:
    """Add `vab export|score|run|consensus|study` to the `pstbench` parser's subcommands."""
    from pytest_pstbench.selection.commands.vab_run import add_run_parser

    p = subparsers.add_parser(
        "vab", help="selection tracks (best/worst judgment, protocol vab): export, score, run, consensus, study"
    )
    sub = p.add_subparsers(dest="vab_command", required=True, metavar="ACTION")
    _add_export_parser(sub)
    _add_score_parser(sub)
    add_run_parser(sub)
    _add_consensus_parser(sub)
    _add_study_parser(sub)


EXPORT_ARGS = (
    Arg("--track", required=True, help="vab-demo, or the path to a local selection track.yaml"),
    Arg("--out", default=None, help="new (or empty) folder to write the export into"),
    Arg("--protocol", default=None, help="selection protocol id or YAML path (default: vab)"),
    Arg(
        "--retry",
        default=None,
        metavar="ANSWERS",
        help="write only the re-ask list: requests whose latest answer in ANSWERS did not parse or was an API error, below the protocol's attempt limit",
    ),
    Arg(
        "--batch-file",
        default=None,
        metavar="FILE",
        help="instead of a folder: write every request as an OpenAI "
        "Batch input file (JSON Lines, the bodies `vab run` sends; vLLM's run-batch reads it); needs --model",
    ),
    Arg("--model", default=None, help="--batch-file: model name in every request body"),
    Arg("--temperature", type=float, default=None, help="--batch-file: sampling temperature (default: the protocol's)"),
    Arg("--max-tokens", type=int, default=None, help="--batch-file: max_tokens (default: the protocol's)"),
    *cli_args("extra-body"),
)


def _add_export_parser(sub) -> None:
    e = sub.add_parser(
        "export", help="write each task's images per trial, prompts and requests.jsonl for a model to answer"
    )
    add_args(e, EXPORT_ARGS)
    e.set_defaults(func=cmd_export)


SCORE_ARGS = (
    Arg("--track", required=True, help="vab-demo, or the path to a local selection track.yaml"),
    Arg("--answers", default=None, help="JSON Lines answers file (raw responses or parsed labels)"),
    Arg(
        "--batch-output",
        default=None,
        metavar="FILE",
        help="an OpenAI Batch output file (of `vab export --batch-file`'s "
        "requests): its answers appended to --answers as `vab run` writes them, then scored",
    ),
    Arg(
        "--judge",
        default=None,
        help="scoring function module:function or path/to/file.py:function, or pyiqa:METRIC "
        "(a no-reference pyiqa metric; needs the [iqa] extra: docs/selection.md), or vab-paper:qalign (Q-Align as the paper "
        "scores it)",
    ),
    *cli_args("device", "votes"),
    Arg("--name", default=None, help="run name (default: the answers file's stem, or the function's name)"),
    Arg(
        "--results", default="results", help="results root; run files go to RESULTS/<track>/<name>/ (default: results)"
    ),
    Arg("--protocol", default=None, help="selection protocol id or YAML path (default: vab)"),
    Arg(
        "--also-protocol",
        default=None,
        metavar="PROTOCOL",
        help="also score the same answers file under a second protocol (e.g. vab-lenient) and print both side by side; its run goes to NAME@PROTOCOL",
    ),
    Arg(
        "--t0-answers",
        default=None,
        metavar="FILE",
        help="answers of the same model at temperature 0 (the official summary's '(t=0)' column): scored as run NAME@t0 and shown in parentheses",
    ),
    Arg(
        "--extras",
        action="store_true",
        help="also print TB-1's best-only / worst-only accuracy and each metric's trial-0 accuracy",
    ),
    Arg(
        "-v",
        "--verbose",
        action="store_true",
        help="print every section in full (--show all) and one progress line per task",
    ),
    SHOW_OPTION,
    *PRICE_OPTIONS,
)


def _add_score_parser(sub) -> None:
    s = sub.add_parser("score", help="score a judge on a selection track: an answers file or a scoring function")
    add_args(s, SCORE_ARGS)
    s.set_defaults(func=cmd_score)


CONSENSUS_ARGS = (
    Arg("votes", metavar="VOTES.csv", help="CSV with columns task_id, k, judge, best, worst (worst empty when k = 2)"),
    Arg(
        "--alpha",
        type=float,
        default=None,
        help="derive each threshold as the smallest m with null pass probability <= ALPHA (default: the protocol's thresholds)",
    ),
    Arg(
        "--verify-mc",
        type=int,
        default=None,
        metavar="N",
        help="check each probability by Monte Carlo with N draws (95%% Wald interval)",
    ),
    Arg("--out", default=None, help="write the accepted tasks (CSV) here instead of printing them"),
    Arg("--protocol", default=None, help="selection protocol id or YAML path (default: vab)"),
    Arg("-v", "--verbose", action="store_true", help="list rejected tasks with the reason on stderr"),
)


def _add_consensus_parser(sub) -> None:
    c = sub.add_parser(
        "consensus", help="filter tasks by judges' agreement; print the exact null pass probability per k"
    )
    add_args(c, CONSENSUS_ARGS)
    c.set_defaults(func=cmd_consensus)


STUDY_ARGS = (
    Arg(
        "annotations",
        metavar="ANNOTATIONS.csv",
        help="CSV with columns task_id, annotator, image, score (0-10), rank (1 = best); one row per task, annotator and image",
    ),
    Arg(
        "--majority",
        type=int,
        default=None,
        metavar="M",
        help="a label is reached when at least M annotators vote it (default: a strict majority of each task's annotators, floor(n/2)+1: 5 of 8)",
    ),
    Arg(
        "--max-w",
        type=float,
        default=None,
        metavar="W",
        help="drop tasks whose Kendall's W of the score rankings is at or above W (the paper: 0.825)",
    ),
    Arg("--out", default=None, metavar="DIR", help="write study.json and study.csv into DIR"),
    Arg(
        "--protocol",
        default=None,
        help="selection protocol id or YAML path: its bootstrap and task sizes (default: vab)",
    ),
)


def _add_study_parser(sub) -> None:
    st = sub.add_parser(
        "study",
        help="ranking vs scoring protocol study of an annotations CSV (fidelity, reproducibility, distinguishability, Kendall's W)",
    )
    add_args(st, STUDY_ARGS)
    st.set_defaults(func=cmd_study)
