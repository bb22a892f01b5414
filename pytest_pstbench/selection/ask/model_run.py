"""`pstbench vab run`: ask a model behind an OpenAI-compatible chat-completions endpoint, as the
official VAB toolkit does, and append its answers to an answers file.

Per request (task, trial, prompt type; k = 2 tasks are not asked pick_best_and_worst): one user
message in the official layout (`message.message_content`: the header text, then per image a text
part "\\nImage X:" and the image as a `data:image/jpeg;base64` URL of the protocol's re-encoding),
sent with the protocol's sampling (temperature 1.0, max_tokens 8192). Retries follow the official
pipeline as it runs (protocol `answers.attempts`): up to `max` attempts (an unparseable answer or an API
error; `delays_s[i]` after failed attempt i + 1), and inside each attempt up to `http.retries` more HTTP
calls on `http.retry_statuses`, timeouts and dropped connections (litellm's openai client); statuses in
`not_retried_statuses` end the request at once and `stop_run_statuses` stop the run (one-line error).
The last response is kept (an unparseable one as it is; a request whose last attempt failed at the API
is written as an `error` line with the start of the error body). Requests run on `concurrency` threads;
each HTTP call is `chat_api.call`. `--concurrency auto` (settings.adaptive) lets `pacing.AdaptiveLimiter` set
how many calls are in flight, up to `concurrency`, and wait out 429 / 503 answers (see `pacing`).
Each finished request is appended to the answers file as one line (task_id, trial, prompt_type, attempt,
response or error, model; `reasoning` when the endpoint returned the reasoning apart), every
line-breaking character and lone surrogate escaped (`answerfile`); a later run with the same file asks only
what is not there yet or ended in an API error (resume), numbering a re-asked request's attempts on from
its last line. One run writes a file at a time (its lock: a second run waits, then asks only what is left). Ctrl-C, SIGTERM and
SIGHUP stop a run alike: nothing new starts, and every answer of the calls in flight is written. The API
key is read from an environment variable and sent as a Bearer token only to --api-base's origin; it is
never written to any file, nor are the values of `--header` (`settings` checks the options into
`RunSettings` and redacts recorded command lines).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.selection.answerfile import answers_folder, answers_writer
from pytest_pstbench.selection.answers import OK, REASONING, AnswerSet, parse_response, read_answers
from pytest_pstbench.selection.ask import chat_api
from pytest_pstbench.selection.ask.attempts import Spent, answer_line, done_keys, other_model
from pytest_pstbench.selection.ask.budget import budget_from_answers
from pytest_pstbench.selection.ask.chat_api import MAX_RESPONSE_BYTES, ApiError, call
from pytest_pstbench.selection.ask.pacing import limiter_for
from pytest_pstbench.selection.ask.requests import ImageURLs, request_body, requests_of
from pytest_pstbench.selection.ask.settings import RunSettings
from pytest_pstbench.selection.protocol import SelectionParams


def _cache_for(settings: RunSettings, url: str):
    """The response cache this run uses: at temperature 0 unless --no-cache, at any temperature with --reuse-answers."""
    if settings.cache == "off" or (settings.cache == "auto" and settings.temperature != 0):
        return None
    from pytest_pstbench.selection.ask.response_cache import ResponseCache

    return ResponseCache(url, headers=settings.headers)


def _run_notes(budget, cache, halted: list[str]) -> dict:
    """What run.json's model_api adds for this run: the budget, the cache, why the run stopped early."""
    out = {}
    if budget is not None:
        out["budget"] = budget.provenance()
    if cache is not None:
        out["cache"] = cache.provenance()
    if halted:
        out["stopped"] = halted[0]
    return out


@contextmanager
def signals_interrupt():
    """SIGTERM and SIGHUP (a CI runner cancelling a job, a closed terminal) stop a run as Ctrl-C does: nothing new
    starts and every answer of the calls in flight is written. In the main thread only (where Python runs handlers);
    the earlier handlers are put back after the run."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(_signum, _frame):
        raise KeyboardInterrupt

    before = {}
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None:
            try:
                before[sig] = signal.signal(sig, interrupt)
            except (ValueError, OSError):  # pragma: no cover - not settable here
                pass
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


@dataclass(frozen=True)
class ModelRun:
    counts: dict  # asked, skipped, ok, unparseable, error, calls
    answer_set: AnswerSet  # the answers file as it stands after the run, read under its lock
    pacing: dict | None = None  # --concurrency auto: the limit over time and the 429 / 503 counts (`pacing.record`)


def ask_model(track, protocol, settings: RunSettings, answers_path: Path, *, progress=None, batch=None, say=None):
    """The one way to ask a model (`vab run`, `vab run --batch`, the plugin's --pstbench-model): every request the
    answers file does not answer yet, asked through chat completions on `settings.concurrency` threads (`run_model`:
    `progress(done, n)`) or, with `batch` (`batch_run.BatchOptions`), through the endpoint's Batch API
    (`batch_run.run_batch`: `say`, its progress lines). Returns what was asked (`counts`, `answer_set`, and `pacing`
    or the batches)."""
    if batch is not None:
        from pytest_pstbench.selection.ask.batch_run import run_batch

        return run_batch(track, protocol, settings, answers_path, batch, say=say)
    return run_model(track, protocol, settings, answers_path, progress=progress)


def run_model(track, protocol, settings: RunSettings, answers_path: Path, progress=None, only=None) -> ModelRun:
    """Ask every request not yet answered in `answers_path`; append each answer. One writer at a time
    (`answerfile.answers_writer`: a second run on the same file waits for the first, then asks only what
    is still unanswered). Returns the counts and the answers as they stand, read under the lock. `only`: the
    (task_id, trial, prompt_type) keys that may be asked (`vab run --estimate --calibrate`'s sample)."""
    answers_path = Path(answers_path)
    answers_folder(answers_path)
    limiter = limiter_for(settings, SelectionParams.of(protocol).http_retries)  # None: fixed --concurrency
    with answers_writer(answers_path) as writer, signals_interrupt():
        counts = _ask_missing(track, protocol, settings, answers_path, writer, progress, only, limiter)
        if "stopped" in counts and not answers_path.stat().st_size:
            raise UserError(
                f"{answers_path}: nothing was asked: {counts['stopped']}; fix: give a larger --budget-tokens / "
                "--budget-cost (at least one request's bound)"
            )
        return ModelRun(
            counts,
            read_answers(answers_path, track, SelectionParams.of(protocol)),
            limiter.record() if limiter else None,
        )


def _ask_missing(
    track, protocol, settings: RunSettings, answers_path: Path, writer, progress, only=None, limiter=None
) -> dict:
    """Under the answers file's lock: ask what it does not answer yet, append each answer; the counts.
    `limiter`: --concurrency auto's (`pacing`); it makes each HTTP call, and waits out rate-limit answers."""
    params = SelectionParams.of(protocol)
    existing = read_answers(answers_path, track, params) if answers_path.stat().st_size else None
    other = other_model(existing, settings.model)
    if other is not None:  # another model's answers (a batch output of another model) are not this model's run
        raise UserError(
            f"{answers_path}: holds answers of model {other[:80]!r}, not {settings.model!r}; fix: give this model "
            "its own --answers file, or run with --model set to the model that answered"
        )
    done, failed = done_keys(existing)
    todo = [r for r in requests_of(track, params) if (r[0].id, r[1], r[3]) not in done]
    if only is not None:
        todo = [r for r in todo if (r[0].id, r[1], r[3]) in only]
    counts = {"asked": len(todo), "skipped": len(done), "ok": 0, "unparseable": 0, "error": 0, "calls": 0}
    asker = _Asker(track, params, settings, existing, failed, counts, limiter)
    _ask_all(asker, todo, writer, progress)
    counts.update(_run_notes(asker.budget, asker.cache, asker.halted))
    if limiter is not None:
        counts["calls"] += limiter.absorbed  # the calls waited out and sent again
    if asker.stopped:
        raise UserError(
            f"{asker.url}: {asker.stopped[0]}; the run was stopped (answers so far are in {answers_path}); "
            f"fix: check --api-base, --model and the key in ${settings.key_env}, then run the same command again"
        )
    return counts


class _Asker:
    """One run's requests asked on threads: each request's attempts (the cache, the budget, the HTTP calls, the
    official retry rules) and each answer counted as it is recorded. `stop` is set by a status that stops the run,
    the budget or Ctrl-C: no new attempt starts."""

    def __init__(self, track, params, settings: RunSettings, existing, failed: dict, counts: dict, limiter) -> None:
        self.track, self.params, self.settings, self.failed, self.counts = track, params, settings, failed, counts
        self.limiter = limiter
        key = os.environ.get(settings.key_env) or None
        self.url = settings.api_base.rstrip("/") + "/chat/completions"
        self.headers = {"Content-Type": "application/json"}
        if key:
            self.headers["Authorization"] = f"Bearer {key}"
        self.headers.update(dict(settings.headers))
        self.max_bytes = settings.max_response_bytes or MAX_RESPONSE_BYTES
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.stopped: list[str] = []
        self.halted: list[
            str
        ] = []  # why the run stopped before asking everything (the budget, an interrupt): not an error
        self.urls = ImageURLs(params)
        self.budget = (
            budget_from_answers(
                settings.budget_tokens,
                settings.max_tokens,
                existing,
                track,
                cost_limit=settings.budget_cost,
                price=settings.budget_price,
            )
            if settings.budget_tokens or settings.budget_cost
            else None
        )
        self.cache = _cache_for(settings, self.url)

    def count(self) -> None:
        with self.lock:
            self.counts["calls"] += 1

    def ask(self, task, t, order, ptype) -> dict | None:
        """One request's attempts; its answers line (None: nothing was asked)."""
        if self.stop.is_set():
            return None
        att, params = self.params.attempts, self.params
        body = request_body(self.settings, params, task, order, ptype, self.urls)
        line = {"task_id": task.id, "trial": t, "prompt_type": ptype, "model": self.settings.model}
        first = self.failed.get(
            (task.id, t, ptype), 0
        )  # a resumed request numbers its attempts on (the highest counts)
        spent = Spent()
        result = None
        for i in range(1, att["max"] + 1):
            if (
                self.stop.is_set()
            ):  # cut short: what an earlier attempt got is kept (paid for), and asked again on resume
                return {**result, "cut": "stopped"} if result is not None else None
            attempt = first + i
            outcome, hit = self.attempt(body, attempt, (task.id, ptype), (ptype, task.k))
            if outcome is None:  # the budget cannot cover the call
                return {**result, "cut": "budget"} if result is not None else None
            result, retry, stop_run = answer_line(
                line, attempt, outcome, spent, params, task, ptype, i == att["max"], cached=hit
            )
            if stop_run:  # a status that stops the run (401/403/404) or a redirect away
                self.stop.set()
                with self.lock:
                    self.stopped.append(str(outcome))
                return result
            if not retry:
                return result
            delays = att["delays_s"]
            if i - 1 < len(delays):
                chat_api.pause(float(delays[i - 1]))
        return result  # pragma: no cover

    def attempt(self, body: bytes, attempt: int, same_prompt, same_size):
        """One attempt: the cached answer, else one call (reserved against the budget, cached when answered); the
        outcome (a Reply or an ApiError; None when the budget stops the run) and whether it came from the cache."""
        cache, budget = self.cache, self.budget
        hit = cache.get(cache_key := cache.key(body, attempt)) if cache is not None else None
        reservation = None
        if hit is None and budget is not None:
            reservation = budget.reserve(same_prompt, same_size, len(body))
            if reservation is None:
                self.stop.set()
                with self.lock:
                    self.halted.append(budget.reason())
                return None, False
        try:
            outcome = hit or call(
                self.url,
                body,
                self.headers,
                self.settings.timeout_s,
                self.params.http_retries,
                self.max_bytes,
                self.count,
                send=self.limiter.send if self.limiter else None,
            )
        except ApiError as exc:
            outcome = exc
            if reservation is not None:
                budget.release(reservation)
        except BaseException:  # not an answer (a bug, an interrupt): nothing billed, and no call waits on this one
            if reservation is not None:
                budget.release(reservation)
            raise
        else:
            if reservation is not None:
                budget.settle(reservation, outcome.usage)
            if cache is not None and hit is None:
                cache.put(cache_key, outcome)
        return outcome, hit is not None

    def record(self, writer, result) -> None:
        """Append a request's line and count it (under `lock`)."""
        if result is None:
            return
        writer.append(result)
        if "error" in result:
            self.counts["error"] += 1
        else:
            task = self.track.task(result["task_id"])
            st = parse_response(result["response"], result["prompt_type"], task.k, self.params, REASONING in result)[1]
            self.counts["ok" if st == OK else "unparseable"] += 1


def _ask_all(asker: _Asker, todo: list, writer, progress) -> None:
    """Every request of `todo` on `settings.concurrency` threads, each line appended as it finishes (`progress(lines
    written, requests to ask)`: a stopped run's bar ends at what was asked). Ctrl-C: nothing new starts; the calls
    in flight end and every answer that arrived is kept."""
    n = len(todo)
    finished = 0
    say = progress or (lambda _d, _n: None)
    with ThreadPoolExecutor(max_workers=max(1, asker.settings.concurrency)) as pool:
        futures = [pool.submit(asker.ask, *r) for r in todo]
        pending = set(futures)
        try:
            for fut in as_completed(futures):
                pending.discard(fut)
                if fut.cancelled():  # not started before the run was stopped: nothing was asked
                    continue
                result = fut.result()
                if result is not None:  # None: started after the run stopped, nothing asked (not on the bar)
                    with asker.lock:
                        asker.record(writer, result)
                        finished += 1
                    say(finished, n)
                if asker.stop.is_set():
                    for f in futures:
                        f.cancel()
        except KeyboardInterrupt:
            asker.stop.set()
            for f in futures:
                f.cancel()
            for fut in pending:
                if not fut.cancelled():
                    try:
                        result = fut.result()
                    except BaseException:  # noqa: BLE001 - a call that failed while stopping: nothing to keep
                        continue
                    with asker.lock:
                        asker.record(writer, result)
            raise
