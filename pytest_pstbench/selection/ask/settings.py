"""The settings of a model run, declared once for both front doors: `ModelOptions` (the options as `pstbench vab run`,
`vab export --batch-file` and the plugin's `--pstbench-model` take them, with their defaults) checked into
`RunSettings` by `run_settings`, each a one-line error when out of range; and the command line as run.json records
it, every `--header` value redacted (a header's value may be a secret; its name is kept).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.jsonfile import JSONLimitError, loads


@dataclass(frozen=True)
class RunSettings:
    model: str
    api_base: str
    temperature: float
    max_tokens: int
    concurrency: int
    timeout_s: float
    key_env: str
    headers: tuple = ()  # (name, value) pairs sent with every request (--header); values never written
    extra_body: tuple = ()  # (name, value) pairs added to every request body (--extra-body); recorded
    max_response_bytes: int = 0  # 0: MAX_RESPONSE_BYTES
    budget_tokens: int = 0  # --budget-tokens: no request starts whose bound takes the answers file over it (0: none)
    budget_cost: float = 0.0  # --budget-cost: the same in money, at `budget_price` (pricing.Price) (0: none)
    budget_price: object = None
    cache: str = "auto"  # "auto": the response cache at temperature 0; "off" (--no-cache); "reuse" (--reuse-answers)
    adaptive: bool = False  # --concurrency auto: `concurrency` is the ceiling of the adaptive limit (`pacing`)

    def provenance(self) -> dict:  # what run.json records (never the key, never a header's value)
        out = {
            "kind": "model-api",
            "model": self.model,
            "api_base": self.api_base,
            "endpoint": "chat/completions",
            "sampling": {"temperature": self.temperature, "max_tokens": self.max_tokens},
            "concurrency": "auto" if self.adaptive else self.concurrency,
            "timeout_s": self.timeout_s,
            "api_key_env": self.key_env,
        }
        if self.adaptive:
            out["max_concurrency"] = self.concurrency
        if self.headers:
            out["headers"] = sorted({name for name, _v in self.headers})  # names only: values may be secrets
        if self.extra_body:
            out["extra_body"] = dict(self.extra_body)
        return out


@dataclass(frozen=True)
class ModelOptions:
    """A model run's options as a front door gives them, not yet checked (`run_settings` checks them); the defaults
    here are `vab run`'s and `--pstbench-model`'s (argparse and the plugin read them from this class)."""

    model: str
    api_base: str
    api_key_env: str = "API_KEY"  # the environment variable holding the key (sent as a Bearer token, never written)
    temperature: float | None = None  # None: the protocol's sampling.temperature
    max_tokens: int | None = None  # None: the protocol's sampling.max_tokens
    concurrency: int | str = 10  # requests in flight (the official pipeline's), or "auto" (`pacing`)
    max_concurrency: int | str | None = None  # with "auto": the ceiling (None: pacing.DEFAULT_MAX)
    timeout: float = 600.0  # seconds one whole API call may take
    header: tuple = ()  # --header NAME=VALUE words
    extra_body: tuple = ()  # --extra-body NAME=JSON words
    budget_tokens: int | None = None
    budget_cost: float | None = None
    no_cache: bool = False
    reuse_answers: bool = False


MAX_CONCURRENCY = 1000  # requests in flight at once (--concurrency)
MAX_TIMEOUT_S = 86_400.0  # one API call (--timeout): a day
MAX_BUDGET_TOKENS = 10**13  # --budget-tokens


def run_settings(options: ModelOptions, params, option_prefix: str = "") -> RunSettings:
    """The run's settings from a front door's `options`, each checked; errors name the options as the caller's
    front door spells them (`option_prefix` "pstbench-": --pstbench-header ...)."""
    opt = f"--{option_prefix}"
    if not options.api_base.startswith(("http://", "https://")):
        raise UserError(
            f"{opt}api-base {options.api_base}: not an http(s) URL; fix: give the endpoint's base, e.g. http://127.0.0.1:8000/v1"
        )
    temperature, max_tokens = _sampling(options, params, opt)
    concurrency, adaptive = _concurrency(options, opt)
    from pytest_pstbench.core.protocol import number_problem

    if number_problem(options.timeout, "t", low=0, high=MAX_TIMEOUT_S, low_open=True):
        raise UserError(
            f"{opt}timeout {options.timeout}: must be a positive number of seconds of at most {MAX_TIMEOUT_S:g} (the "
            f"limit of one whole API call); fix: e.g. {opt}timeout 600"
        )
    headers = tuple(_header(h, f"{opt}header") for h in (options.header or []))
    extra = tuple(_body_field(f, f"{opt}extra-body") for f in (options.extra_body or []))
    clash = [name for name, _v in extra if name in _BODY_KEYS]
    if clash:
        raise UserError(
            f"{opt}extra-body {clash[0]}=...: the kit sets {clash[0]} itself (from the protocol or its own option); "
            f"fix: use {opt}model / --temperature / --max-tokens, or drop the field"
        )
    budget, budget_cost = _budgets(options, opt)
    if options.no_cache and options.reuse_answers:
        raise UserError(f"{opt}no-cache and {opt}reuse-answers ask for opposite things; fix: give one of them")
    cache = "off" if options.no_cache else "reuse" if options.reuse_answers else "auto"
    return RunSettings(
        options.model,
        options.api_base,
        float(temperature),
        int(max_tokens),
        concurrency,
        float(options.timeout),
        options.api_key_env,
        headers,
        extra,
        adaptive=adaptive,
        budget_tokens=int(budget or 0),
        cache=cache,
        budget_cost=float(budget_cost or 0.0),
    )


def _sampling(options: ModelOptions, params, opt: str) -> tuple:
    """--temperature and --max-tokens, else the protocol's sampling; the options that replace protocol values follow
    the protocol's ranges (inf or nan reached run.json as a traceback)."""
    from pytest_pstbench.core.protocol import number_problem
    from pytest_pstbench.selection.protocol import MAX_TEMPERATURE, MAX_TOKENS

    sampling = params.sampling
    temperature = options.temperature if options.temperature is not None else float(sampling.get("temperature", 1.0))
    max_tokens = options.max_tokens if options.max_tokens is not None else int(sampling.get("max_tokens", 8192))
    if options.temperature is not None and number_problem(options.temperature, "t", low=0, high=MAX_TEMPERATURE):
        raise UserError(
            f"{opt}temperature {options.temperature}: must be a finite number from 0 to {MAX_TEMPERATURE:g} (the "
            f"protocol's range for sampling.temperature); fix: e.g. {opt}temperature 0"
        )
    if options.max_tokens is not None and not 1 <= options.max_tokens <= MAX_TOKENS:
        raise UserError(
            f"{opt}max-tokens {options.max_tokens}: must be a whole number from 1 to {MAX_TOKENS}; fix: e.g. {opt}max-tokens 8192"
        )
    return temperature, max_tokens


def _budgets(options: ModelOptions, opt: str) -> tuple:
    """--budget-tokens and --budget-cost, checked (None: not given)."""
    from pytest_pstbench.core.protocol import number_problem

    budget = options.budget_tokens
    if budget is not None and not 1 <= budget <= MAX_BUDGET_TOKENS:
        raise UserError(
            f"{opt}budget-tokens {budget}: must be a whole number of tokens from 1 to {MAX_BUDGET_TOKENS:,}; "
            f"fix: e.g. {opt}budget-tokens 2000000"
        )
    budget_cost = options.budget_cost
    if budget_cost is not None and number_problem(budget_cost, "c", low=0, high=1e12, low_open=True):
        raise UserError(
            f"{opt}budget-cost {budget_cost}: must be a positive amount of money; fix: e.g. {opt}budget-cost 25"
        )
    return budget, budget_cost


def _concurrency(options: ModelOptions, opt: str) -> tuple[int, bool]:
    """--concurrency N (fixed: the official pipeline as it runs) or `auto` (adaptive, `selection.ask.pacing`, up to
    --max-concurrency): the pool's size and whether it adapts."""
    from pytest_pstbench.selection.ask.pacing import DEFAULT_MAX

    value = options.concurrency
    ceiling = options.max_concurrency
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


def _redacted(value: str) -> str:
    return value.partition("=")[0] + "=<redacted>"


def redact_words(words, option: str = "--header", ini_key: str | None = None) -> list[str]:
    """Command-line words as run.json records them: the value of every `option` (NAME=VALUE) becomes
    NAME=<redacted>, whether given as `option VALUE`, `option=VALUE` or an abbreviation argparse accepts
    (`--head`); with `ini_key` also pytest's `-o KEY=NAME=VALUE` / `--override-ini=KEY=...` forms."""
    out: list[str] = []
    hide = hide_ini = False
    for w in map(str, words):
        name, eq, rest = w.partition("=")
        if hide:
            out.append(_redacted(w))
        elif hide_ini:
            out.append(f"{ini_key}={_redacted(rest)}" if name == ini_key and eq else w)
        elif name.startswith("--") and len(name) >= 4 and option.startswith(name):
            out.append(f"{name}={_redacted(rest)}" if eq else w)
        elif ini_key and name in ("-o", "--override-ini") and eq:  # --override-ini=KEY=NAME=VALUE
            key, eq2, value = rest.partition("=")
            out.append(f"{name}={ini_key}={_redacted(value)}" if key == ini_key and eq2 else w)
        elif ini_key and w.startswith(f"-o{ini_key}="):
            out.append(f"-o{ini_key}={_redacted(w[len(ini_key) + 3 :])}")
        else:
            out.append(w)
        hide = (
            not hide
            and not hide_ini
            and name.startswith("--")
            and len(name) >= 4
            and option.startswith(name)
            and not eq
        )
        hide_ini = bool(ini_key) and w in ("-o", "--override-ini")
    return out


def redact_command(command: str | None) -> str | None:
    """The command line as run.json records it: every --header value replaced by <redacted> (a line that
    does not split as shell words is split at whitespace, so that nothing is left unredacted)."""
    import shlex

    if not command:
        return command
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    return shlex.join(redact_words(words))
