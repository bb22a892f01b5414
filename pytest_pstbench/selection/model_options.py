"""The options of a model run (`pstbench vab run`, the plugin's `--pstbench-model` run) read into
`RunSettings`, each a one-line error when out of range; and the command line as run.json records it,
every `--header` value redacted (a header's value may be a secret; its name is kept).
"""

from __future__ import annotations

import os
import re

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.jsonfile import JSONLimitError, loads
from pytest_pstbench.selection.model_run import RunSettings

MAX_CONCURRENCY = 1000  # requests in flight at once (--concurrency)
MAX_TIMEOUT_S = 86_400.0  # one API call (--timeout): a day
MAX_BUDGET_TOKENS = 10**13  # --budget-tokens


def settings_from_args(args, params, option_prefix: str = "") -> RunSettings:
    """The run's settings from `args` (argparse's, or the plugin's values in a namespace); errors name the
    options as the caller's front door spells them (`option_prefix` "pstbench-": --pstbench-header ...)."""
    opt = f"--{option_prefix}"
    sampling = params.sampling
    temperature = args.temperature if args.temperature is not None else float(sampling.get("temperature", 1.0))
    max_tokens = args.max_tokens if args.max_tokens is not None else int(sampling.get("max_tokens", 8192))
    if not args.api_base.startswith(("http://", "https://")):
        raise UserError(
            f"{opt}api-base {args.api_base}: not an http(s) URL; fix: give the endpoint's base, e.g. http://127.0.0.1:8000/v1"
        )
    from pytest_pstbench.core.protocol import number_problem
    from pytest_pstbench.selection.protocol import MAX_TEMPERATURE, MAX_TOKENS

    # the options that replace protocol values follow the protocol's ranges (inf or nan reached run.json as a traceback)
    if args.temperature is not None and number_problem(args.temperature, "t", low=0, high=MAX_TEMPERATURE):
        raise UserError(
            f"{opt}temperature {args.temperature}: must be a finite number from 0 to {MAX_TEMPERATURE:g} (the "
            f"protocol's range for sampling.temperature); fix: e.g. {opt}temperature 0"
        )
    if args.max_tokens is not None and not 1 <= args.max_tokens <= MAX_TOKENS:
        raise UserError(
            f"{opt}max-tokens {args.max_tokens}: must be a whole number from 1 to {MAX_TOKENS}; fix: e.g. {opt}max-tokens 8192"
        )
    concurrency, adaptive = _concurrency(args, opt)
    if number_problem(args.timeout, "t", low=0, high=MAX_TIMEOUT_S, low_open=True):
        raise UserError(
            f"{opt}timeout {args.timeout}: must be a positive number of seconds of at most {MAX_TIMEOUT_S:g} (the "
            f"limit of one whole API call); fix: e.g. {opt}timeout 600"
        )
    headers = tuple(_header(h, f"{opt}header") for h in (getattr(args, "header", None) or []))
    extra = tuple(_body_field(f, f"{opt}extra-body") for f in (getattr(args, "extra_body", None) or []))
    clash = [name for name, _v in extra if name in _BODY_KEYS]
    if clash:
        raise UserError(
            f"{opt}extra-body {clash[0]}=...: the kit sets {clash[0]} itself (from the protocol or its own option); "
            f"fix: use {opt}model / --temperature / --max-tokens, or drop the field"
        )
    budget = getattr(args, "budget_tokens", None)
    if budget is not None and not 1 <= budget <= MAX_BUDGET_TOKENS:
        raise UserError(
            f"{opt}budget-tokens {budget}: must be a whole number of tokens from 1 to {MAX_BUDGET_TOKENS:,}; "
            f"fix: e.g. {opt}budget-tokens 2000000"
        )
    budget_cost = getattr(args, "budget_cost", None)
    if budget_cost is not None and number_problem(budget_cost, "c", low=0, high=1e12, low_open=True):
        raise UserError(
            f"{opt}budget-cost {budget_cost}: must be a positive amount of money; fix: e.g. {opt}budget-cost 25"
        )
    if getattr(args, "no_cache", False) and getattr(args, "reuse_answers", False):
        raise UserError(f"{opt}no-cache and {opt}reuse-answers ask for opposite things; fix: give one of them")
    cache = "off" if getattr(args, "no_cache", False) else "reuse" if getattr(args, "reuse_answers", False) else "auto"
    return RunSettings(
        args.model,
        args.api_base,
        float(temperature),
        int(max_tokens),
        concurrency,
        float(args.timeout),
        args.api_key_env,
        headers,
        extra,
        adaptive=adaptive,
        budget_tokens=int(budget or 0),
        cache=cache,
        budget_cost=float(budget_cost or 0.0),
    )


def _concurrency(args, opt: str) -> tuple[int, bool]:
    """--concurrency N (fixed: the official pipeline as it runs) or `auto` (adaptive, `selection.pacing`, up to
    --max-concurrency): the pool's size and whether it adapts."""
    from pytest_pstbench.selection.pacing import DEFAULT_MAX

    value = args.concurrency
    ceiling = getattr(args, "max_concurrency", None)
    if str(value).strip().lower() == "auto":
        if ceiling is None:
            return DEFAULT_MAX, True
        try:
            top = int(str(ceiling))
        except ValueError:
            top = 0
        if not 1 <= top <= MAX_CONCURRENCY:
            raise UserError(
                f"{opt}max-concurrency {ceiling}: must be a whole number from 1 to {MAX_CONCURRENCY}; "
                f"fix: e.g. {opt}max-concurrency {DEFAULT_MAX}"
            )
        return top, True
    try:
        n = int(str(value))
    except ValueError:
        raise UserError(
            f"{opt}concurrency {value}: give a whole number of requests in flight or `auto`; "
            f"fix: e.g. {opt}concurrency 10 or {opt}concurrency auto"
        ) from None
    if not 1 <= n <= MAX_CONCURRENCY:
        raise UserError(f"{opt}concurrency {value}: must be from 1 to {MAX_CONCURRENCY}; fix: e.g. {opt}concurrency 10")
    if ceiling is not None:
        raise UserError(
            f"{opt}max-concurrency {ceiling}: only with {opt}concurrency auto (a fixed {opt}concurrency "
            f"{value} is its own limit); fix: drop {opt}max-concurrency or use {opt}concurrency auto"
        )
    return n, False


_BODY_KEYS = ("model", "messages", "temperature", "max_tokens")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP token


def _header(spec: str, opt: str = "--header") -> tuple[str, str]:
    """--header NAME=VALUE (VALUE `env:VAR`: the value of environment variable VAR); `opt`: the option's spelling."""
    name, sep, value = str(spec).partition("=")
    name = name.strip()
    if not sep or not _HEADER_NAME.match(name):
        raise UserError(
            f"{opt} {name or spec!r}: give NAME=VALUE with an HTTP header name (e.g. {opt} api-key=env:AZURE_KEY)"
        )
    if name.lower() in ("content-length", "host", "transfer-encoding", "connection"):
        raise UserError(f"{opt} {name}: this header is set by the client; fix: drop it")
    if value.startswith("env:"):
        var = value[4:]
        if var not in os.environ:
            raise UserError(f"{opt} {name}=env:{var}: environment variable {var} is not set; fix: export it first")
        value = os.environ[var]
    if any(c in value for c in "\r\n\0"):
        raise UserError(f"{opt} {name}: the value holds a line break or NUL; fix: give a one-line value")
    return name, value


def _body_field(spec: str, opt: str = "--extra-body") -> tuple[str, object]:
    """--extra-body NAME=JSON (a value that is not JSON is taken as a string); `opt`: the option's spelling."""
    name, sep, value = str(spec).partition("=")
    name = name.strip()
    if not sep or not name:
        raise UserError(f"{opt} {spec!r}: give NAME=VALUE, VALUE as JSON (e.g. {opt} 'reasoning_effort=\"high\"')")
    try:
        parsed = loads(value)
    except JSONLimitError as exc:
        raise UserError(f"{opt} {name}: the JSON value is {exc}; fix: give a smaller value") from None
    except ValueError:
        parsed = value
    return name, parsed


def redact_command(command: str | None) -> str | None:
    """The command line as run.json records it: every --header value replaced by <redacted> (a line that
    does not split as shell words is split at whitespace, so that nothing is left unredacted)."""
    import shlex

    from pytest_pstbench.core.text import redact_words

    if not command:
        return command
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    return shlex.join(redact_words(words))
