"""One request's attempts, decided one way for every path that asks a model (`vab run`'s calls, `vab run --batch`'s
rounds): what an attempt's outcome writes to the answers file, and whether the official pipeline asks again.

`answer_line` follows the protocol's `answers.attempts` as the official eval.py runs: an API error is asked again
unless its status is not retried, and a status in `stop_run_statuses` (or a redirect) stops the run; an answered
call is parsed, and asked again while unparseable; the last attempt's line stays. `Spent` is what a request's
answered calls cost (`usage.add` over its attempts): the line's `usage`, or `usage: null` and `usage_note` when a
call's usage was not sent or damaged (never zero); an API error that is never billed (`chat_api.unbilled_reason`:
a 429, a 5xx without a body, a refused connection) on a request with no answered call costs zero tokens, its
`usage_note` saying why; answers taken from the response cache cost nothing now
(`cached`: how many; no `usage` when all were). A batch run keeps it between rounds (`state`).
"""

from __future__ import annotations

from pytest_pstbench.selection.answers import ERROR, OK, REASONING, AnswerSet, parse_response
from pytest_pstbench.selection.ask.chat_api import ApiError
from pytest_pstbench.selection.ask.usage import NO_USAGE, add


class Spent:
    def __init__(self, usage=None, calls: int = 0, unknown=()):
        self.usage: dict | None = usage
        self.calls = calls
        self.cached = 0
        self.unknown: list[str] = list(unknown)

    def answered(self, reply, cached: bool = False) -> None:
        if cached:
            self.cached += 1
            return
        self.calls += 1
        if reply.usage is None:
            self.unknown.append(reply.usage_problem or NO_USAGE)
        else:
            self.usage = add(self.usage, reply.usage)

    def fields(self) -> dict:
        out = {"cached": self.cached} if self.cached else {}
        if not self.calls:
            return out
        if self.unknown:
            note = self.unknown[0] + (
                f" (for {len(self.unknown)} of {self.calls} answered calls)" if self.calls > 1 else ""
            )
            return {**out, "usage": None, "usage_note": note}
        return {**out, "usage": self.usage}

    def state(self) -> dict:
        return {"usage": self.usage, "calls": self.calls, "unknown": self.unknown}


def answer_line(
    line: dict, attempt: int, outcome, spent: Spent, params, task, ptype: str, last: bool, cached: bool = False
) -> tuple[dict, bool, bool]:
    """(answers line, ask again?, stop the run?) of one attempt's outcome, by the protocol's `answers.attempts` (`last`:
    the run's last attempt of this request, `answers.attempts.max` of them)."""
    att = params.attempts
    if isinstance(outcome, ApiError):
        result = {**line, "attempt": attempt, "error": str(outcome), **spent.fields()}
        if "usage" not in result and outcome.unbilled and not cached:  # nothing answered, and this was never billed
            result.update(usage={"prompt_tokens": 0, "completion_tokens": 0}, usage_note=outcome.unbilled)
        stop = outcome.status in att["stop_run_statuses"] or outcome.kind == "redirect"
        retry = not stop and "error" in att["retry_on"] and outcome.status not in att["not_retried_statuses"]
        return result, retry and not last, stop
    spent.answered(outcome, cached)
    message = outcome.message
    text = message["content"]
    result = {**line, "attempt": attempt, "response": text, **spent.fields()}
    separate_fields = (params.reasoning_split or (None, None, ()))[2]
    separated = [f for f in separate_fields if f in message]
    if separated:
        result[REASONING] = message[separated[0]]
    status = parse_response(text, ptype, task.k, params, bool(separated))[1]
    return result, status != OK and "unparseable" in att["retry_on"] and not last, False


def done_keys(answer_set: AnswerSet | None) -> tuple[set, dict]:
    """What an answers file already answers, one rule for every way of asking (`model_run`, `batch_run`, `vab score
    --batch-output`). Requests already answered (latest attempt not an API error: not asked again), and the latest attempt
    number of those that ended in an API error or were cut short by a stopped run (asked again, numbering on)."""
    if answer_set is None:
        return set(), {}
    again = {key for key, entry in answer_set.entries.items() if entry[1] == ERROR or key in answer_set.cut}
    done = set(answer_set.entries) - again
    failed = {key: answer_set.entries[key][4] for key in again}
    return done, failed


def same_model(asked: str, named: str) -> bool:
    """Whether a reply naming model `named` answers a request for `asked`: the same name, or a dated snapshot of it
    (a server answering `gpt-4o` as `gpt-4o-2024-08-06`)."""
    if named == asked:
        return True
    rest = named[len(asked) + 1 :] if named.startswith(asked + "-") else ""
    return rest[:1].isdigit()


def other_model(answer_set, model: str) -> str | None:
    """The first model an answers file's lines name that is not `model` (nor a dated snapshot of it, either way)."""
    for _tid, _trial, named in answer_set.usage_keys if answer_set is not None else ():
        if named is not None and not (same_model(model, named) or same_model(named, model)):
            return named
    return None
