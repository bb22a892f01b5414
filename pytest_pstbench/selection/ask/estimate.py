"""`pstbench vab run --estimate [--calibrate N]`: what a model run will ask, and the tokens and cost to expect,
before it is paid for. No run folder is written.

The requests still to ask are the run's (`requests.requests_of`) less those its answers file already answers
(as `vab run` resumes). Each request's features come from its body as `vab run` would send it
(`requests.request_body`): the characters of its text parts and its image count.

* Without calibration nothing is sent. Completion tokens are bounded by max_tokens per request (an upper bound
  only: a retried request costs more); prompt tokens are known only for the text (about 4 characters a token, a
  rule of thumb), not for the images (their tokens depend on the model and the image size).
* `--calibrate N` asks N requests (spread over the requests' sizes) exactly as `vab run` does and appends their
  answers to the answers file: they count towards the run and are not asked again. Prompt tokens are then a
  least-squares fit of the sample's prompt_tokens on (1, text characters, images), summed over the requests
  to ask, with a t prediction interval of the sum (the fit's uncertainty plus each request's residual spread);
  completion tokens are the sample's mean times the request count, with the t prediction interval of a sum of
  that many requests. The whole run's totals add the usage already recorded in the answers file.
* With a price table (`selection.ask.pricing`), the cost is those tokens at the model's prices (cached prompt tokens
  priced as uncached: an upper bound there), its interval from the ends of the token intervals.
* `vab run --batch --estimate`: the requests to ask are priced at the model's batch price (the price file's
  `batch_in` / `batch_out`), and the output says so. A calibration sample is still asked one call at a time (at the
  interactive price); the whole run's cost is then what the answers file records, each line at its own price, plus
  the requests to ask at the batch price.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

CONFIDENCE = 0.95
CHARS_PER_TOKEN = 4  # text only, without calibration: a rule of thumb, said as such


@dataclass(frozen=True)
class Interval:
    value: float
    low: float | None  # None: no interval (too few calibration answers)
    high: float | None

    def plus(self, n: float) -> Interval:
        return Interval(
            self.value + n, None if self.low is None else self.low + n, None if self.high is None else self.high + n
        )


@dataclass
class Estimate:
    total: int  # requests of the run
    answered: int  # already answered in the answers file (before calibration)
    calibrated: int  # asked now for calibration
    to_ask: int  # still to ask after calibration
    text_tokens: int = 0  # without calibration: the text part of the prompt (chars / 4)
    images: int = 0  # without calibration: the images to send
    max_tokens: int = 0
    prompt: Interval | None = None  # with calibration: the requests to ask
    completion: Interval | None = None  # with calibration; without: the upper bound (max_tokens x requests)
    recorded: dict = field(default_factory=dict)  # token totals already in the answers file
    recorded_unknown: int = 0  # lines there whose usage is not known
    used: int = 0  # calibration answers with usage
    price: object = None  # pricing.Price of the model (its batch price with `batch`), or None
    notes: list = field(default_factory=list)
    batch: bool = False  # the requests to ask go through the Batch API, at the batch price
    recorded_cost: dict | None = None  # with `batch`: `pricing.cost_record` of the answers file, each line at its price


def features(body: bytes) -> tuple[int, int]:
    """(text characters, images) of a request body."""
    from pytest_pstbench.core.files.jsonfile import loads

    content = loads(body, max_bytes=len(body) + 1)["messages"][0]["content"]
    return (
        sum(len(p.get("text", "")) for p in content if p.get("type") == "text"),
        sum(1 for p in content if p.get("type") == "image_url"),
    )


def spread(items: list, n: int) -> list:
    """`n` of `items` (sorted by size) evenly spaced from the smallest to the largest."""
    if n >= len(items):
        return list(items)
    if n == 1:
        return [items[len(items) // 2]]
    return [items[round(i * (len(items) - 1) / (n - 1))] for i in range(n)]


def _t(df: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.5 + CONFIDENCE / 2, df))


def fit_sum(x_sample, y, x_new) -> Interval:
    """The sum over `x_new` rows of a least-squares fit of y on x_sample, with its t prediction interval."""
    import numpy as np

    X, Y, Z = np.asarray(x_sample, float), np.asarray(y, float), np.asarray(x_new, float)
    if len(Z) == 0:
        return Interval(0.0, 0.0, 0.0)
    beta, *_ = np.linalg.lstsq(X, Y, rcond=None)
    value = float(Z.sum(axis=0) @ beta)
    rank = int(np.linalg.matrix_rank(X))
    df = len(Y) - rank
    if df < 1:
        return Interval(value, None, None)
    s2 = float(((Y - X @ beta) ** 2).sum()) / df
    z = Z.sum(axis=0)
    var = s2 * (float(z @ np.linalg.pinv(X.T @ X) @ z) + len(Z))
    half = _t(df) * math.sqrt(max(var, 0.0))
    return Interval(value, value - half, value + half)


def mean_sum(sample, m: int) -> Interval:
    """m times the sample mean, with the t prediction interval of a sum of m draws."""
    n = len(sample)
    if m == 0:
        return Interval(0.0, 0.0, 0.0)
    mean = sum(sample) / n
    if n < 2:
        return Interval(m * mean, None, None)
    sd = math.sqrt(sum((v - mean) ** 2 for v in sample) / (n - 1))
    half = _t(n - 1) * sd * math.sqrt(m * m / n + m)
    return Interval(m * mean, m * mean - half, m * mean + half)


def estimate_run(
    track, protocol, settings, answers_path, *, calibrate=0, price=None, progress=None, batch=False, recorded_cost=None
) -> Estimate:
    """The estimate (see the module's docstring); `recorded_cost(answer_set)`: the cost record of what the answers file
    records (`pricing.cost_record`), used with `batch`."""
    from pytest_pstbench.selection.answers import ERROR, read_answers
    from pytest_pstbench.selection.ask.model_run import run_model
    from pytest_pstbench.selection.ask.requests import ImageURLs, request_body, requests_of
    from pytest_pstbench.selection.protocol import SelectionParams

    params = SelectionParams.of(protocol)
    existing = (
        read_answers(answers_path, track, params) if answers_path.is_file() and answers_path.stat().st_size else None
    )
    done = (
        {k for k, e in existing.entries.items() if e[1] != ERROR} if existing is not None else set()
    )  # as vab run resumes
    all_requests = list(requests_of(track, params))
    urls = ImageURLs(params)
    todo = []  # ((text chars, images), key)
    for task, t, order, ptype in all_requests:
        if (task.id, t, ptype) not in done:
            todo.append((features(request_body(settings, params, task, order, ptype, urls)), (task.id, t, ptype)))
    est = Estimate(len(all_requests), len(done), 0, len(todo), max_tokens=settings.max_tokens, price=price, batch=batch)
    answer_set = existing
    if calibrate:
        sample = {key for _f, key in spread(sorted(todo), calibrate)}
        asked = run_model(track, protocol, settings, answers_path, progress=progress, only=sample)
        answer_set = asked.answer_set
        est.calibrated = asked.counts["asked"]
        now_done = {k for k, e in answer_set.entries.items() if e[1] != ERROR}
        per_key: dict = {}
        for (ptype, usage), (tid, trial, _m) in zip(answer_set.usage_lines, answer_set.usage_keys):
            key = (tid, trial, ptype)
            if key in sample:
                per_key.setdefault(key, []).append(usage)
        measured = {k: v for k, v in per_key.items() if k in now_done and all(isinstance(u, dict) for u in v)}
        est.used = len(measured)
        feats = dict((key, f) for f, key in todo)
        remaining = [f for f, key in todo if key not in now_done]
        est.to_ask = len(remaining)
        if not measured:
            est.notes.append("no calibration answer carried usage (the server sent none): nothing to fit")
        else:
            rows = [(1.0, *feats[k]) for k in measured]
            prompt = [sum(u["prompt_tokens"] for u in measured[k]) for k in measured]
            completion = [sum(u["completion_tokens"] for u in measured[k]) for k in measured]
            est.prompt = fit_sum(rows, prompt, [(1.0, *f) for f in remaining])
            est.completion = mean_sum(completion, len(remaining))
    else:
        est.text_tokens = math.ceil(sum(f[0] for f, _k in todo) / CHARS_PER_TOKEN)
        est.images = sum(f[1] for f, _k in todo)
        est.completion = Interval(float(len(todo) * settings.max_tokens), None, None)
    if answer_set is not None:
        totals = answer_set.usage()
        if totals is not None:
            est.recorded = totals["tokens"]
            est.recorded_unknown = totals["lines_without_usage"] + totals["lines_not_recorded"]
        if batch and recorded_cost is not None:
            est.recorded_cost = recorded_cost(answer_set)
    if batch and calibrate:
        est.notes.append("the calibration requests were asked one call at a time, at the interactive price")
    return est


def _num(iv: Interval | None) -> str:
    if iv is None:
        return "unknown"
    text = f"{iv.value:,.0f}"
    if iv.low is not None:
        text += f" ({CONFIDENCE * 100:g}% interval {max(iv.low, 0):,.0f} to {iv.high:,.0f})"
    return text


def _cost(prompt: Interval, completion: Interval, price) -> Interval:
    def at(p, c):
        return (p * price.in_ + c * price.out) / 1_000_000

    value = at(prompt.value, completion.value)
    if prompt.low is None or completion.low is None:
        return Interval(value, None, None)
    return Interval(value, at(max(prompt.low, 0), max(completion.low, 0)), at(prompt.high, completion.high))


def _money(iv: Interval, currency: str) -> str:
    text = f"{iv.value:.4g} {currency}"
    if iv.low is not None:
        text += f" ({CONFIDENCE * 100:g}% interval {iv.low:.4g} to {iv.high:.4g})"
    return text


def _whole_run_cost(est: Estimate, run_prompt: Interval, run_completion: Interval) -> str:
    """The whole run's cost line: its tokens at the model's price; with `batch`, what the answers file records (each
    line at its own price) plus the requests to ask at the batch price."""
    price = est.price
    if not est.batch:
        return f"whole run cost: {_money(_cost(run_prompt, run_completion, price), price.currency)}"
    to_ask = _cost(est.prompt, est.completion, price)
    rec = est.recorded_cost
    if rec is None or not rec["lines_priced"]:
        return f"whole run cost: {_money(to_ask, price.currency)} (the requests to ask at the batch price)"
    text = f"whole run cost: {_money(to_ask.plus(rec['total']), price.currency)} ({rec['total']:.4g} {price.currency} "
    text += "recorded in the answers file, each line at its own price, plus the requests to ask at the batch price)"
    if rec["lines_unknown"]:
        text += f"; unknown for {rec['lines_unknown']} recorded lines without usage"
    return text


def lines(est: Estimate) -> list[str]:
    """What `vab run --estimate` prints."""
    out = [
        f"requests: {est.total} in the run: {est.answered} already answered, {est.calibrated} asked now for calibration "
        f"(appended to the answers file; they count towards the run), {est.to_ask} to ask"
    ]
    price = est.price
    at = " (at the batch price)" if est.batch else ""
    if est.prompt is None:  # no calibration (or none with usage)
        bound = est.completion or Interval(float(est.to_ask * est.max_tokens), None, None)
        out.append(
            f"prompt tokens to ask: {est.text_tokens:,} text tokens (about {CHARS_PER_TOKEN} characters a token) plus "
            f"{est.images:,} images, whose tokens depend on the model and the image size (--calibrate N measures them)"
        )
        out.append(
            f"completion tokens to ask: at most {bound.value:,.0f} (max_tokens {est.max_tokens} x {est.to_ask} requests: "
            "an upper bound only; retried requests cost more; --calibrate N measures them)"
        )
        if price is not None:
            out.append(
                f"cost to ask{at}: at most {bound.value * price.out / 1_000_000:.4g} {price.currency} for the completions, "
                f"plus {est.text_tokens * price.in_ / 1_000_000:.4g} {price.currency} for the prompts' text, "
                "plus the images (unknown without --calibrate)"
            )
    else:
        out.append(
            f"prompt tokens to ask: {_num(est.prompt)} (a fit of {est.used} calibration requests' prompt_tokens on "
            "text length and image count)"
        )
        out.append(f"completion tokens to ask: {_num(est.completion)} (the calibration mean x {est.to_ask} requests)")
        run_prompt = est.prompt.plus(est.recorded.get("prompt_tokens", 0))
        run_completion = est.completion.plus(est.recorded.get("completion_tokens", 0))
        if price is not None:
            out.append(
                f"cost to ask{at}: {_money(_cost(est.prompt, est.completion, price), price.currency)} "
                "(cached prompt tokens priced as uncached)"
            )
        out.append(f"whole run prompt tokens: {_num(run_prompt)}")
        out.append(f"whole run completion tokens: {_num(run_completion)}")
        if price is not None:
            out.append(_whole_run_cost(est, run_prompt, run_completion))
    if est.recorded_unknown:
        out.append(f"the answers file has {est.recorded_unknown} lines whose usage is not known: not in these totals")
    if price is None:
        out.append("cost: give --price-in X --price-out Y (or --prices FILE) to price these tokens")
    out += est.notes
    return out
