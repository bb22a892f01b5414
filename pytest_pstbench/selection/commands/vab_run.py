"""`pstbench vab run`: ask a model behind an OpenAI-compatible chat-completions endpoint (the official prompts
and retries, `selection.ask`), append its answers to an answers file, then score them as `vab score` does.

Wired into `vab`'s subcommands by `add_run_parser`; uses `vab_common`'s loading and printing.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.options import Arg, add_args, cli_args
from pytest_pstbench.selection.ask.pacing import DEFAULT_MAX
from pytest_pstbench.selection.ask.settings import MAX_CONCURRENCY, ModelOptions
from pytest_pstbench.selection.commands.vab_common import SHOW_OPTION, VERBOSE_OPTION


def _model_options(args, **fixed):
    """A command's model options as the ask wing takes them (`selection.ask.settings.ModelOptions`: its fields are
    the commands' argparse destinations); `fixed`: values the command sets itself."""
    from dataclasses import fields

    from pytest_pstbench.selection.ask.settings import ModelOptions

    given = {f.name: getattr(args, f.name) for f in fields(ModelOptions) if hasattr(args, f.name)}
    given["header"] = tuple(given.get("header") or ())
    given["extra_body"] = tuple(given.get("extra_body") or ())
    return ModelOptions(**{**given, **fixed})


def cmd_run(args) -> int:
    """Ask a model (OpenAI-compatible chat completions), append its answers, then score them."""
    from pytest_pstbench.selection.answers import ERROR
    from pytest_pstbench.selection.ask.pricing import table_from_args, with_cost
    from pytest_pstbench.selection.ask.settings import redact_command
    from pytest_pstbench.selection.commands.vab_common import load_selection, print_outcome, shown_sections
    from pytest_pstbench.selection.run_judge import answers_judge, model_run_name
    from pytest_pstbench.selection.session import SelectionSession, score_all, votes_and_human

    args.command_line = redact_command(getattr(args, "command_line", None))  # --header values never reach run.json
    prices = table_from_args(args)  # a bad price file or option: refused before any request
    if args.batch and prices is not None:
        prices.price_of(args.model, batch=True)  # a batch is billed at the batch price: none given is refused now
    if args.calibrate is not None and not args.estimate:
        raise UserError("--calibrate N: only with --estimate; fix: add --estimate (or drop --calibrate)")
    if args.calibrate is not None and args.calibrate < 1:
        raise UserError(
            f"--calibrate {args.calibrate}: not a positive number of requests; fix: give N >= 2 (e.g. --calibrate 30)"
        )
    protocol, params, track = load_selection(args.track, args.protocol)
    settings = _run_settings(args, params, prices)
    name = args.name or model_run_name(args.model)
    answers_path = Path(args.answers) if args.answers else Path(args.results) / track.id / f"{name}.answers.jsonl"
    _check_batch(args, settings)
    if args.estimate:
        return _estimate(args, track, protocol, settings, answers_path, prices)
    votes, human = votes_and_human(track, params, args.votes)  # a bad votes file: refused before any request
    asked, model_api = _ask(args, track, protocol, settings, answers_path)
    counts = asked.counts
    chosen = answers_judge(
        answers_path, track, params, model=settings.model, model_api=model_api, answer_set=asked.answer_set
    )
    judge = with_cost(chosen.provenance, chosen.answer_set, prices, params, settings.model)
    session = SelectionSession(
        track,
        protocol,
        name=name,
        results_dir=args.results,
        judge=judge,
        command=args.command_line,
        votes=votes,
        human=human,
        stopped=counts.get("stopped"),
    )
    outcome = score_all(session, answer_set=chosen.answer_set)
    print_outcome(outcome, track, chosen.label, params, extras=args.extras, show=shown_sections(args))
    if "stopped" in counts:
        return 1
    errors = sum(1 for e in chosen.answer_set.entries.values() if e[1] == ERROR)
    if errors:
        first = next(e[2] for e in chosen.answer_set.entries.values() if e[1] == ERROR)
        print(
            f"pstbench: error: {errors} requests ended in API errors; run the same command again to ask them again "
            f"(the first, from {settings.api_base}: {first})",
            file=sys.stderr,
        )
        return 1
    return 0


def _run_settings(args, params, prices):
    """`vab run`'s settings, checked; a money budget priced at the model's price."""
    from pytest_pstbench.selection.ask.settings import run_settings

    settings = run_settings(_model_options(args), params)
    if settings.budget_cost:
        if prices is None:
            raise UserError(
                f"--budget-cost {args.budget_cost:g}: a money budget needs the model's prices; fix: add "
                "--price-in X --price-out Y (per million tokens) or --prices FILE"
            )
        from dataclasses import replace

        prices.price_of(settings.model, batch=args.batch)  # --batch: the batch price, or one line saying it lacks
        settings = replace(settings, budget_price=prices.price_of(settings.model)[1])  # the row (batch price in it)
    return settings


def _check_batch(args, settings) -> None:
    """--batch's own options, and the one a batch cannot honour: --concurrency auto (a batch is submitted whole; its
    budget and estimate are at the batch price)."""
    from pytest_pstbench.selection.ask.batch_run import check_options

    check_options(args.poll_interval, args.batch_wait, args.batch_max_mb)
    if args.batch and settings.adaptive:
        raise UserError(
            "--batch and --concurrency auto: a batch is submitted whole (its requests are not sent one by one); "
            "fix: drop --concurrency auto, or drop --batch"
        )


def _ask(args, track, protocol, settings, answers_path: Path):
    """Ask the model (`selection.ask.model_run.ask_model`), say what was asked; what was asked and run.json's
    model_api (the settings, the batches, the budget, the cache, why it stopped, the pacing)."""
    from pytest_pstbench.core.progress import terminal_progress
    from pytest_pstbench.selection.ask.model_run import ask_model

    model_api = settings.provenance()
    if args.batch:
        from pytest_pstbench.selection.commands.vab_batch import run_batch_command

        asked = run_batch_command(args, track, protocol, settings, answers_path)
        model_api["batch"] = {"ids": asked.batches, "completion_window": "24h"}
    else:
        asked = ask_model(
            track, protocol, settings, answers_path, progress=terminal_progress if not args.quiet else None
        )
    counts = asked.counts
    print(
        f"model {settings.model} at {settings.api_base}: asked {counts['asked']} requests ({counts['skipped']} already answered), "
        f"{counts['calls']} {'batch requests' if args.batch else 'API calls'}; {counts['ok']} parsed, {counts['unparseable']} "
        f"unparseable, {counts['error']} API errors; answers: {answers_path}"
    )
    notes = {k: counts[k] for k in ("budget", "cache", "stopped") if k in counts}
    if "stopped" in counts:
        if not args.quiet and not args.batch and counts["ok"] + counts["unparseable"] + counts["error"]:
            print(file=sys.stderr)  # the bar stopped short of its total: end its line
        print(
            f"pstbench: stopped: {counts['stopped']}; answers so far are in {answers_path}; fix: run the same command "
            "with a larger --budget-tokens / --budget-cost to go on (nothing answered is asked again)",
            file=sys.stderr,
        )
    model_api.update(notes)
    if getattr(asked, "pacing", None) is not None:  # --concurrency auto: the limit over time, the 429 / 503 counts
        model_api["pacing"] = asked.pacing
        p = asked.pacing
        print(
            f"adaptive concurrency: limit {p['trace'][-1][1]} at the end (peak {p['peak_in_flight']} in flight, ceiling "
            f"{p['max_concurrency']}); {p['throttled'].get('429', 0)} answers 429, {p['throttled'].get('503', 0)} answers 503, "
            f"{p['waited_out']} waited out and sent again"
        )
    return asked, model_api


def _estimate(args, track, protocol, settings, answers_path, prices) -> int:
    """`vab run --estimate [--calibrate N]`: print the requests, tokens and cost to expect; no run folder."""
    from pytest_pstbench.core.progress import terminal_progress
    from pytest_pstbench.selection.ask.estimate import estimate_run, lines
    from pytest_pstbench.selection.ask.pricing import cost_record

    price = prices.price_of(settings.model, batch=args.batch)[1] if prices is not None else None
    est = estimate_run(
        track,
        protocol,
        settings,
        answers_path,
        calibrate=args.calibrate or 0,
        price=price,
        progress=terminal_progress if not args.quiet and args.calibrate else None,
        batch=args.batch,
        recorded_cost=(lambda answer_set: cost_record(answer_set, prices, settings.model)) if prices else None,
    )
    sent = "no request sent" if not args.calibrate else f"answers: {answers_path}"
    through = "; to ask through the Batch API, at the batch price" if args.batch else ""
    print(f"estimate for model {settings.model} at {settings.api_base} ({sent}; no run folder written{through})")
    for line in lines(est):
        print(line)
    return 0


# The price table of a model run's cost (`selection.ask.pricing`): `vab run` and `vab score`.
PRICE_OPTIONS = (
    Arg(
        "--price-in",
        type=float,
        default=None,
        metavar="X",
        help="price of a million prompt tokens (with --price-out; any model)",
    ),
    Arg(
        "--price-out",
        type=float,
        default=None,
        metavar="Y",
        help="price of a million completion tokens, reasoning included",
    ),
    Arg(
        "--price-cached-in",
        type=float,
        default=None,
        metavar="Z",
        help="price of a million cached prompt tokens (default: --price-in)",
    ),
    Arg("--currency", default=None, help="the currency of --price-in/--price-out (default: USD)"),
    Arg(
        "--prices",
        default=None,
        metavar="FILE",
        help="YAML price file, one row per model: MODEL: {in: X, out: Y, cached_in: Z, currency: USD}; the batch "
        "price (--batch) in the same row: batch_in, batch_out (batch_cached_in)",
    ),
)


# --batch and how it polls and splits.
BATCH_OPTIONS = (
    Arg(
        "--batch",
        action="store_true",
        help="ask through the endpoint's Batch API (/files, /batches: OpenAI's, at its batch "
        "price): submit, poll, record; a stopped run resumes the same batch (state in ANSWERS.batch.json); "
        "--estimate and --budget-cost price it at the batch price (--prices FILE: batch_in, batch_out)",
    ),
    Arg("--poll-interval", type=float, default=30.0, help="--batch: seconds between polls of the batch (default: 30)"),
    Arg(
        "--batch-max-mb",
        type=float,
        default=200.0,
        metavar="MB",
        help="--batch: the largest input file one batch takes, in MiB (default: 200, OpenAI's limit; also at most "
        "50,000 requests); a run over it is submitted as several batches, one after another",
    ),
    Arg(
        "--batch-wait",
        type=float,
        default=90_000.0,
        help="--batch: seconds to poll before stopping; run the same "
        "command again to go on polling the same batch (default: 90000, the 24 h window and an hour)",
    ),
)


# The run's budget and the response cache.
BUDGET_OPTIONS = (
    Arg(
        "--budget-tokens",
        type=int,
        default=None,
        metavar="N",
        help="stop before a request whose bound (its prompt as the server counts it, plus --max-tokens) would take "
        "the answers file's tokens over N; a later run with a larger N goes on (docs/selection.md, Cost and rate limits)",
    ),
    Arg(
        "--budget-cost",
        type=float,
        default=None,
        metavar="MONEY",
        help="the same as --budget-tokens in money, at the prices given (--price-in/--price-out or --prices; with "
        "--batch the price file's batch price, and the budget chooses the requests a batch takes before it is "
        "submitted); a request's bound is priced at the full prompt price",
    ),
    Arg("--no-cache", action="store_true", help="neither read nor fill the response cache ($PSTBENCH_CACHE/responses)"),
    Arg(
        "--reuse-answers",
        action="store_true",
        help="use the response cache at any temperature (by default only at temperature 0: a cached answer at "
        "temperature 1 is a replayed sample, not a new one)",
    ),
)


# The key, the answers file, the calls in flight, the timeout, the headers and body fields, the sampling (the
# defaults are the ask wing's, `selection.ask.settings.ModelOptions`).
REQUEST_OPTIONS = (
    Arg(
        "--api-key-env",
        default=ModelOptions.api_key_env,
        help=f"environment variable holding the API key (default: {ModelOptions.api_key_env}; sent as a Bearer token, never written)",
    ),
    Arg(
        "--answers",
        default=None,
        help="answers file to append to and resume from (default: RESULTS/<track>/<name>.answers.jsonl)",
    ),
    Arg(
        "--concurrency",
        default=ModelOptions.concurrency,
        metavar="N|auto",
        help=f"requests in flight at once (default: {ModelOptions.concurrency}, the official pipeline's rules as they are); `auto`: "
        "adapt to the endpoint's rate limit (grow while answered, cut on 429/503; rate-limit answers are "
        "waited out and sent again) up to --max-concurrency; the limit over time is recorded in run.json",
    ),
    Arg(
        "--max-concurrency",
        default=ModelOptions.max_concurrency,
        metavar="M",
        help=f"with --concurrency auto: the ceiling of the adaptive limit (default: {DEFAULT_MAX}; at most {MAX_CONCURRENCY})",
    ),
    Arg(
        "--timeout",
        type=float,
        default=ModelOptions.timeout,
        help="seconds one whole API call may take (connect, send, answer; a call cut at the limit is retried as a "
        f"timeout) (default: {ModelOptions.timeout:g})",
    ),
    *cli_args("header", "extra-body", "votes"),
    Arg("--temperature", type=float, default=None, help="sampling temperature (default: the protocol's, 1.0)"),
    Arg("--max-tokens", type=int, default=None, help="max_tokens (default: the protocol's, 8192)"),
)


RUN_ARGS = (
    Arg("--track", required=True, help="vab-demo, or the path to a local selection track.yaml"),
    Arg("--model", required=True, help="model name sent to the endpoint"),
    Arg("--api-base", required=True, help="endpoint base URL; requests go to API_BASE/chat/completions"),
    *REQUEST_OPTIONS,
    Arg("--name", default=None, help="run name (default: the model name's last part)"),
    Arg("--results", default="results", help="results root (default: results)"),
    Arg("--protocol", default=None, help="selection protocol id or YAML path (default: vab)"),
    Arg("--extras", action="store_true", help="also print TB-1 best-only / worst-only and trial-0 accuracy"),
    SHOW_OPTION,
    VERBOSE_OPTION,
    *BATCH_OPTIONS,
    *BUDGET_OPTIONS,
    *PRICE_OPTIONS,
    Arg(
        "--estimate",
        action="store_true",
        help="print the request count, expected tokens and cost (with an interval) and stop: "
        "no request sent (or the --calibrate sample), no run folder written",
    ),
    Arg(
        "--calibrate",
        type=int,
        default=None,
        metavar="N",
        help="with --estimate: ask N requests (appended to the answers "
        "file; they count towards the run) and estimate from their usage",
    ),
    Arg("-q", "--quiet", action="store_true", help="no progress bar (no batch progress lines)"),
)


def add_run_parser(sub) -> None:
    """Add `vab run` to `vab`'s subcommands (its defaults are the ask wing's, `selection.ask.settings.ModelOptions`)."""
    r = sub.add_parser(
        "run",
        help="ask a model behind an OpenAI-compatible chat-completions endpoint (official prompts, retries), then score it",
    )
    add_args(r, RUN_ARGS)
    r.set_defaults(func=cmd_run)
