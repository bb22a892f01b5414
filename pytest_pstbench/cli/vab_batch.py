"""The batch faces of `pstbench vab`: `vab run --batch` (its progress and what it names), `vab export --batch-file`
(the OpenAI Batch input file, for engines that run it offline: vLLM's `run-batch`) and `vab score --batch-output`
(their output read into an answers file as `vab run` would write it). The work is in `selection.ask.batch_file` and
`selection.ask.batch_run`; this module reads the options and prints.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pytest_pstbench.core.errors import UserError


def run_batch_command(args, track, protocol, settings, answers_path: Path):
    """`vab run --batch`: the batch rounds; the requests a batch did not answer and its damaged lines named on stderr."""
    from pytest_pstbench.selection.ask.batch_file import MAX_NAMED
    from pytest_pstbench.selection.ask.batch_run import BatchOptions, stderr_say
    from pytest_pstbench.selection.ask.model_run import ask_model

    run = ask_model(
        track,
        protocol,
        settings,
        answers_path,
        batch=BatchOptions(args.poll_interval, args.batch_wait, int(args.batch_max_mb * 1024 * 1024)),
        say=None if args.quiet else stderr_say,
    )
    for note in run.problems[:MAX_NAMED]:
        print(f"pstbench: warning: {note}", file=sys.stderr)
    if len(run.problems) > MAX_NAMED:
        print(f"pstbench: warning: ... and {len(run.problems) - MAX_NAMED} more", file=sys.stderr)
    if run.unanswered:
        print(
            f"pstbench: error: {len(run.unanswered)} requests were not answered by their batch (recorded as API errors; "
            "run the same command again to ask them):",
            file=sys.stderr,
        )
        for cid, status in run.unanswered[:MAX_NAMED]:
            print(f"  {cid}: batch {status}", file=sys.stderr)
        if len(run.unanswered) > MAX_NAMED:
            print(f"  ... and {len(run.unanswered) - MAX_NAMED} more", file=sys.stderr)
    return run


def batch_settings(args, params):
    """The request settings of `vab export --batch-file` (model, sampling, extra body), checked as `vab run` checks them."""
    from pytest_pstbench.selection.ask.settings import ModelOptions, run_settings

    given = [
        o
        for o, v in (
            ("--model", args.model),
            ("--temperature", args.temperature),
            ("--max-tokens", args.max_tokens),
            ("--extra-body", args.extra_body),
        )
        if v
    ]
    if not args.batch_file:
        if given:
            raise UserError(
                f"vab export {given[0]}: only with --batch-file (it sets the requests' bodies); fix: add "
                "--batch-file FILE, or drop the option"
            )
        return None
    if not args.model:
        raise UserError(
            "vab export --batch-file: needs --model (the model named in every request body); fix: add --model NAME"
        )
    options = ModelOptions(
        args.model,
        "http://127.0.0.1/v1",
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        concurrency=1,
        extra_body=tuple(args.extra_body or ()),
    )
    return run_settings(options, params)


def export_batch_file(args, track, params) -> int:
    """`vab export --batch-file FILE`: every request of the track, one a line, as `vab run --batch` uploads it."""
    from pytest_pstbench.core.files.write import refuse_overwriting_inputs, write_atomic
    from pytest_pstbench.selection.ask.batch_file import input_lines
    from pytest_pstbench.selection.ask.requests import ImageURLs, requests_of
    from pytest_pstbench.selection.tracks import check_track

    if args.out or args.retry:
        raise UserError(
            "vab export --batch-file: give it without --out and --retry (it writes one file); fix: drop them"
        )
    settings = batch_settings(args, params)
    check_track(track, params)
    out = Path(args.batch_file)
    refuse_overwriting_inputs("--batch-file", [out], files=[("track file", getattr(track, "manifest", None))])
    try:
        data, ids = input_lines(settings, params, list(requests_of(track, params)), ImageURLs(params))
    except ValueError as exc:
        raise UserError(f"--batch-file {out}: {exc}; fix: split the track, or run it with `pstbench vab run`") from None
    write_atomic(out, data, what="the batch input file", fix="free some space or give --batch-file another path")
    print(
        f"batch input file: {out} ({len(ids)} requests of {len(track.tasks)} tasks, model {settings.model}); run it, then: "
        f"pstbench vab score --track {args.track} --batch-output OUTPUT.jsonl --answers ANSWERS.jsonl"
    )
    return 0


def read_batch_output(args, track, params) -> None:
    """`vab score --batch-output FILE --answers ANSWERS`: the output's answers appended to ANSWERS (created if need be) as
    `vab run` writes them (attempts numbered on, usage recorded); requests ANSWERS already answers are kept as they are.
    A damaged output file (a line not JSON, a custom_id not asked or given twice) is refused whole: nothing is written."""
    from pytest_pstbench.selection.answerfile import answers_writer
    from pytest_pstbench.selection.answers import read_answers
    from pytest_pstbench.selection.ask.attempts import Spent, answer_line, done_keys
    from pytest_pstbench.selection.ask.batch_file import MAX_OUTPUT_BYTES, custom_id, read_output
    from pytest_pstbench.selection.ask.requests import requests_of

    if not args.answers:
        raise UserError(
            "vab score --batch-output: needs --answers FILE (the answers file its answers are appended to); "
            "fix: add --answers ANSWERS.jsonl"
        )
    src, answers = Path(args.batch_output), Path(args.answers)
    try:
        with open(src, "rb") as fh:
            raw = fh.read(MAX_OUTPUT_BYTES + 1)
    except OSError as exc:
        raise UserError(
            f"--batch-output {src}: cannot read it ({exc.strerror or exc}); fix: give the batch output file"
        ) from None
    if len(raw) > MAX_OUTPUT_BYTES:
        raise UserError(f"--batch-output {src}: over {MAX_OUTPUT_BYTES:,} bytes; fix: split it and read each part")
    reqs = {
        custom_id(task.id, t, order, ptype): (task, t, ptype) for task, t, order, ptype in requests_of(track, params)
    }
    output = read_output(raw, reqs, str(src))
    if output.problems:
        more = f" (and {len(output.problems) - 1} more)" if len(output.problems) > 1 else ""
        raise UserError(
            f"--batch-output {output.problems[0]}{more}; nothing was recorded; fix: give the engine's whole output "
            "file, or remove the damaged lines (their requests stay unanswered: vab run asks them)"
        )
    if not output.outcomes:
        raise UserError(f"--batch-output {src}: holds no answer; fix: give the output file of the batch run")
    try:
        answers.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--answers {answers}: cannot create its folder ({exc}); fix: give a writable path") from None
    try:
        with answers_writer(answers) as writer:
            existing = read_answers(answers, track, params) if answers.stat().st_size else None
            done, failed = done_keys(existing)
            kept = 0
            for cid, (task, t, ptype) in reqs.items():
                if cid not in output.outcomes:
                    continue
                if (task.id, t, ptype) in done:
                    kept += 1
                    continue
                line = {"task_id": task.id, "trial": t, "prompt_type": ptype}
                if cid in output.models:
                    line["model"] = output.models[cid]
                result, _again, _stop = answer_line(
                    line,
                    failed.get((task.id, t, ptype), 0) + 1,
                    output.outcomes[cid],
                    Spent(),
                    params,
                    task,
                    ptype,
                    True,
                )
                writer.append(result)
    except OSError as exc:  # a full disk: the writer's last flush fails as the file closes
        raise UserError(
            f"--answers {answers}: cannot write the answers file ({exc.strerror or exc}); the answers appended so "
            "far stay; fix: free some space, then run the same command again (what is answered is kept)"
        ) from None
    print(
        f"batch output {src}: {len(output.outcomes) - kept} answers appended to {answers}"
        + (f" ({kept} requests it already answered kept as they are)" if kept else "")
    )
