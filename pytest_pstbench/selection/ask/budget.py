"""A run-wide budget for `pstbench vab run` (`--budget-tokens`, `--budget-cost` with a price): no request starts
whose bound would take the run over it.

What counts: every token the answers file records (earlier calls included: the budget caps the run, and a later
call with a larger budget goes on from what is there), plus the bounds of the calls in flight. A line whose usage
is not known (the server sent none) counts at its bound, never at zero.

A budget is a ceiling whatever the server sends. A call's bound is its prompt tokens plus its completion bound: the
run's max_tokens, or the largest completion the server has billed for any call so far when that is more (a
reasoning model whose reasoning is not capped answers past max_tokens: the bound learns from the answers seen).
Until the first call of a run has been answered (or the answers file shows what earlier calls took), one call is in
flight at a time, so that what the server really bills is known before several calls are sent on a guess. The
prompt tokens are:
- the prompt tokens the server counted for the same task and prompt type (three trials show the same images and
  the same text length: the count is exact),
- else 1.5 times the largest prompt the server counted for a request of the same prompt type and as many images
  (a margin for other images of the same size class),
- else the request body's length in bytes (before the server has counted anything: an upper bound for any
  tokenizer of the text and of the base64 images it carries).
A call can cost more than its bound only where the server exceeds everything seen so far (an image over 1.5 times
the tokens of every image of its class, a completion longer than every earlier one); the overshoot is then that
call's excess, recorded as the run's spend like any other, and the bounds of later calls learn from it.
A money budget prices the prompt bound at the full prompt price (no cached discount: the bound), the completion
bound at the output price, and what was spent as `pricing.call_cost` prices it; each line of the answers file at its
own price (a line asked through the Batch API at the row's batch price), and a batch run's bounds (`batch`) at the
batch price. A batch is submitted whole: its requests are reserved one by one before it is submitted (no probe: what
the server bills is learnt only when the batch is answered), the first that does not fit ends the choice.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

MARGIN = 1.5  # prompt bound of an unseen request: this times the largest prompt of its class


@dataclass
class Reservation:
    tokens: int
    key: tuple
    shape: tuple
    cost: float = 0.0
    probe: bool = False  # the one call in flight before anything is known of what the server bills


class TokenBudget:
    def __init__(
        self,
        limit: int | None,
        max_tokens: int,
        spent: int = 0,
        seen: dict | None = None,
        *,
        cost_limit: float | None = None,
        price=None,
        spent_cost: float = 0.0,
        completion_seen: int = 0,
        batch: bool = False,
    ):
        self.limit = int(limit) if limit else None
        self.cost_limit, self.price = (cost_limit or None), price  # price: the model's row (`pricing.Price`)
        self.batch = batch  # this run asks through the Batch API: its calls cost the batch price, and nothing probes
        self.run_price = price.batch if batch and price is not None else price
        self.spent_cost = float(spent_cost)
        self.cost_in_flight = 0.0
        self.max_tokens = int(max_tokens)
        self.spent = int(spent)  # tokens recorded (answers file before the run, then every settled call)
        self.in_flight = 0  # bounds of the calls not yet settled
        self.calls_in_flight = 0
        self.unknown_calls = 0  # calls settled at their bound (no usage from the server)
        self.exact: dict = {}  # (task_id, prompt_type) -> prompt tokens the server counted
        self.largest: dict = {}  # (prompt_type, n_images) -> the largest prompt counted
        self.refused: dict | None = None  # the first call that did not fit, and what the budget held then
        self.completion_seen = int(completion_seen)  # the largest completion billed for one call
        self.known = bool(seen) or self.completion_seen > 0 or batch  # a call has been answered: no more probing
        self.probing = False  # a probe is in flight (the others wait for it)
        self._lock = threading.Condition()
        for (task_id, ptype, n_images), prompt in (seen or {}).items():
            self._learn((task_id, ptype), (ptype, n_images), prompt)

    def completion_bound(self) -> int:
        """The most a call may answer: max_tokens, or the longest completion billed so far when the server went past it."""
        return max(self.max_tokens, self.completion_seen)

    def _learn(self, key, shape, prompt: int) -> None:
        self.exact[key] = prompt
        self.largest[shape] = max(prompt, self.largest.get(shape, 0))

    def bound(self, key: tuple, shape: tuple, body_bytes: int) -> int:
        if key in self.exact:
            prompt = self.exact[key]
        elif shape in self.largest:
            prompt = int(self.largest[shape] * MARGIN) + 1
        else:
            prompt = body_bytes
        return prompt + self.completion_bound()

    def reserve(self, key: tuple, shape: tuple, body_bytes: int, force: bool = False) -> Reservation | None:
        """A reservation for one call, or None when its bound would take the run over the budget. Before anything is
        known of what the server bills, it waits until no other call is in flight (the probe). `force`: a call already
        made (a batch submitted by an earlier run, resumed), held whatever the budget."""
        with self._lock:
            while not self.known and self.probing:
                self._lock.wait(0.5)
            tokens = self.bound(key, shape, body_bytes)
            cost = self._bound_cost(tokens)
            over_tokens = self.limit is not None and self.spent + self.in_flight + tokens > self.limit
            over_cost = self.cost_limit is not None and self.spent_cost + self.cost_in_flight + cost > self.cost_limit
            if (over_tokens or over_cost) and not force:
                if self.refused is None:
                    self.refused = {
                        "bound": tokens,
                        "key": key,
                        "cost": cost,
                        "which": "tokens" if over_tokens else "cost",
                        "spent": self.spent,
                        "spent_cost": self.spent_cost,
                        "in_flight": self.in_flight,
                        "cost_in_flight": self.cost_in_flight,
                        "calls": self.calls_in_flight,
                    }
                return None
            self.in_flight += tokens
            self.cost_in_flight += cost
            self.calls_in_flight += 1
            probe = not self.known
            self.probing = self.probing or probe
            return Reservation(tokens, key, shape, cost, probe)

    def _bound_cost(self, tokens: int) -> float:
        """The price of a bound of `tokens`: its completion bound at the output price, the rest (the prompt) at the input price."""
        if self.run_price is None:
            return 0.0
        from pytest_pstbench.selection.ask.pricing import PER

        completion = min(tokens, self.completion_bound())
        return ((tokens - completion) * self.run_price.in_ + completion * self.run_price.out) / PER

    def _ended(self, res: Reservation) -> None:
        self.in_flight -= res.tokens
        self.cost_in_flight -= res.cost
        self.calls_in_flight -= 1
        if res.probe:
            self.probing = False
        self._lock.notify_all()

    def release(self, res: Reservation) -> None:
        """The call was not answered (an API error: nothing billed)."""
        with self._lock:
            self._ended(res)

    def settle(self, res: Reservation, usage: dict | None) -> None:
        """The call was answered: its usage replaces its bound (a call without usage counts at its bound)."""
        with self._lock:
            self._ended(res)
            self.known = True
            if usage is None:
                self.spent += res.tokens
                self.spent_cost += res.cost
                self.unknown_calls += 1
            else:
                self.spent += usage["prompt_tokens"] + usage["completion_tokens"]
                self.spent_cost += self._cost(usage)
                self._learn(res.key, res.shape, usage["prompt_tokens"])
                self.completion_seen = max(self.completion_seen, usage["completion_tokens"])

    def _cost(self, usage: dict, price=None) -> float:
        """What `usage` cost at `price` (default: this run's calls' price)."""
        price = price or self.run_price
        if price is None:
            return 0.0
        from pytest_pstbench.selection.ask.pricing import call_cost

        return call_cost(usage, price)

    def reason(self) -> str:
        """Why the run stopped, in numbers that add up: what was spent, what the calls in flight may still cost (their
        bounds) and the next request's bound, against the budget (as they stood when the request was refused)."""
        r = self.refused or {"bound": 0, "key": ("?", "?"), "cost": 0.0, "which": "tokens", "spent": self.spent}
        r = {"spent_cost": self.spent_cost, "in_flight": 0, "cost_in_flight": 0.0, "calls": 0, **r}
        key, calls = r["key"], r["calls"]
        held = f"{calls} call{'s' if calls != 1 else ''} in flight"
        if r["which"] == "cost":
            cur = self.price.currency
            return (
                f"cost budget of {self.cost_limit:g} {cur} reached: {r['spent_cost']:.4f} {cur} spent, "
                f"{held} may cost up to {r['cost_in_flight']:.4f} {cur}, and the next request (task {key[0]}, "
                f"{key[1]}) may cost up to {r['cost']:.4f} {cur}" + (" (at the batch price)" if self.batch else "")
            )
        return (
            f"token budget of {self.limit:,} reached: {r['spent']:,} tokens spent, {held} may take up to "
            f"{r['in_flight']:,}, and the next request (task {key[0]}, {key[1]}) may take up to {r['bound']:,}"
        )

    def provenance(self) -> dict:
        out = {"tokens": self.limit, "spent_tokens": self.spent, "stopped": self.refused is not None}
        if self.cost_limit is not None:
            out.update(cost=self.cost_limit, currency=self.price.currency, spent_cost=self.spent_cost)
            if self.batch:
                out["price"] = "batch"
        if self.unknown_calls:
            out["calls_counted_at_bound"] = self.unknown_calls
        return out


def _line_price(price, batch_line: bool, answer_set):
    """The price of an answers line already recorded: the row's, or its batch price for a line asked in a batch."""
    if not batch_line or price is None:
        return price
    if price.batch is None:
        from pytest_pstbench.core.errors import UserError

        raise UserError(
            f"{answer_set.path}: holds answers asked through the Batch API, billed at the batch price, and the prices "
            "given have none for this model; fix: give --prices FILE with `batch_in: X, batch_out: Y` in the model's row"
        )
    return price.batch


def budget_from_answers(
    limit: int | None,
    max_tokens: int,
    answer_set,
    track,
    *,
    cost_limit: float | None = None,
    price=None,
    batch: bool = False,
) -> TokenBudget:
    """A budget that starts from what the answers file already records: its tokens and their cost (each line at its
    own price; a line without known usage counts at a call's bound: the largest prompt recorded plus the completion
    bound, never zero), the prompts the server counted and the longest completion it billed. `batch`: the run asks
    through the Batch API (`TokenBudget.batch`)."""
    spent, unknown, seen, spent_cost, longest = 0, 0, {}, 0.0, 0
    probe = TokenBudget(None, max_tokens, price=price, batch=batch)
    tasks = {t.id: t for t in track.tasks}
    requests = answer_set.usage_requests if answer_set is not None else ()
    flags = list(getattr(answer_set, "usage_batch", ()))
    for i, (task_id, ptype, attempt, usage) in enumerate(requests):
        if usage is None:
            unknown += 1
        elif isinstance(usage, dict):
            spent += usage["prompt_tokens"] + usage["completion_tokens"]
            spent_cost += probe._cost(usage, _line_price(price, i < len(flags) and flags[i], answer_set))
            longest = max(longest, usage["completion_tokens"])
            if attempt == 1 and task_id in tasks and usage["prompt_tokens"]:  # one answered call (not an unbilled
                # error's zero): its prompt count is the request's
                seen[(task_id, ptype, tasks[task_id].k)] = usage["prompt_tokens"]
    largest = max(seen.values(), default=0)
    probe.completion_seen = longest
    line_bound = largest + probe.completion_bound()  # a line without usage: one call's bound
    return TokenBudget(
        limit,
        max_tokens,
        spent + unknown * line_bound,
        seen,
        cost_limit=cost_limit,
        price=price,
        spent_cost=spent_cost + unknown * probe._bound_cost(line_bound),
        completion_seen=longest,
        batch=batch,
    )
