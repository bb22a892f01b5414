"""Adaptive concurrency of a model run (`pstbench vab run --concurrency auto [--max-concurrency M]`).

The fixed `--concurrency N` (the default, 10) is the official pipeline as it runs: N requests in flight, every
429 / 503 handled by the protocol's `answers.attempts` rules inside `chat_api.call`. In the adaptive mode an
`AdaptiveLimiter` sits between `chat_api.call` and `chat_api.post` (`call(..., send=limiter.send)`):

- **How many HTTP calls are in flight** is the limit (from START, never above the ceiling M, never below 1).
  Slow start: + 1 per answered call (doubling per round) until the first rate-limit answer. Then CUBIC's
  window in seconds since the last cut, W(t) = C (t - K)^3 + W_max with K = (W_max (1 - BETA) / C)^(1/3):
  back to the level that was throttled (W_max) within K seconds, a plateau there, then a slow probe above it.
  The limit never grows more than one call above what is in flight (a run that is not using its limit
  does not inflate it).
- **A rate-limit answer** (429 or 503: the server did not serve the request) cuts the limit once per round
  (answers to calls sent before the last cut, or within one smoothed answer time after it, do not cut again)
  to what the answered rate of the last second needs (answered calls per second x the smoothed answer time),
  at least BETA and at most SOFT_CUT x the limit; W_max becomes the level it was at (lower, if it had not
  regained the previous W_max: CUBIC's fast convergence). Calls start SRTT / limit apart (paced), so that
  a token bucket sees a smooth stream rather than bursts. A Retry-After hint
  delays only the call it came with (capped at the protocol's `http.retry_after_max_s`): the limit itself
  is cut by BETA and no more, and grows back with time, so a long hint cannot hold it low for the rest of
  the run (inspect_ai's adaptive limit had that bug). Only when the limit is already 1 does a hint stop
  every new call until it has passed (a provider that throttles everything gets one probe per hint, not a storm).
- **The throttled call is waited out and sent again** (the hint, else 0.5 s x 2^i up to 8 s), outside the
  limit, up to MAX_ABSORBED times per HTTP call; only then is the rate-limit answer handed to `chat_api.call`,
  where the official rules take it as they always do (an HTTP retry, then a failed attempt). A throttled call
  was not answered by the model, so waiting it out changes no answer and no attempt number: the answers file
  is the one a fixed run without 429s writes. Other errors (timeouts, 500, dropped connections) pass through
  unchanged to the official rules and neither grow nor cut the limit.

`record()` is what run.json's `judge.model_api.pacing` keeps: the limit over time as [seconds since start,
limit] at each change (thinned to at most MAX_TRACE points), the 429 / 503 counts, the calls waited out and
sent again, and the most calls in flight.
"""

from __future__ import annotations

import math
import threading
import time

THROTTLE_STATUSES = (429, 503)
START = 4  # the limit's first value (or the ceiling, when lower)
DEFAULT_MAX = 64  # the ceiling when --max-concurrency is not given
BETA = 0.7  # a cut keeps at least this share of the limit
SOFT_CUT = 0.9  # ... and at most this share, when the answered rate says the limit was about right
CUBIC_C = 1.5  # CUBIC's growth constant (calls per s^3): back to W_max within about a second after a cut
MAX_ABSORBED = 20  # rate-limit answers waited out per HTTP call before the official rules see one
MAX_TRACE = 1000  # points of the limit's trace kept in run.json (thinned beyond)


class AdaptiveLimiter:
    """The limit on HTTP calls in flight, grown while calls are answered and cut on rate-limit answers.
    `clock` / `sleep`: the time source and the wait (tests and the benchmark may replace them)."""

    def __init__(
        self,
        ceiling: int = DEFAULT_MAX,
        *,
        start: int = START,
        retry_after_max_s: float = 60.0,
        clock=time.monotonic,
        sleep=time.sleep,
    ):
        self.ceiling = max(1, int(ceiling))
        self.start = min(int(start), self.ceiling)
        self.retry_after_max_s = float(retry_after_max_s)
        self.clock, self.sleep = clock, sleep
        self.limit = float(self.start)
        self.slow_start = True
        self.w_max = 0.0
        self.k = 0.0  # CUBIC's K: seconds from the last cut back to W_max
        self.cut_at = float("-inf")  # when the limit was last cut
        self.hold_until = float("-inf")  # no new call before this (a hint received at limit 1)
        self.in_flight = 0
        self.peak = 0
        self.srtt = 0.0  # smoothed seconds of an answered call (0: none yet)
        self.next_send = float("-inf")  # pacing: calls start SRTT / limit apart
        self.answers: list[float] = []  # when recent calls were answered (the delivery rate)
        self.throttled = {s: 0 for s in THROTTLE_STATUSES}
        self.absorbed = 0
        self.t0 = clock()
        self.trace: list[list] = [[0.0, self.allowed()]]
        self._thin = 0.0  # trace points closer than this (seconds) to the previous one replace it
        self.cond = threading.Condition()

    def allowed(self) -> int:
        return max(1, math.ceil(self.limit))

    # -- the limit's rules (called under self.cond) --
    def _set(self, value: float, now: float) -> None:
        value = min(float(self.ceiling), max(1.0, value))
        changed = int(value + 0.5) != int(self.limit + 0.5)
        self.limit = value
        if changed:
            t = round(now - self.t0, 3)
            if len(self.trace) > 1 and t - self.trace[-2][0] < self._thin:
                self.trace[-1] = [t, int(value + 0.5)]
            else:
                self.trace.append([t, int(value + 0.5)])
            if len(self.trace) > MAX_TRACE:  # keep it compact: every other point, and coarser from now on
                self.trace = self.trace[::2] + ([self.trace[-1]] if len(self.trace) % 2 == 0 else [])
                self._thin = max(0.01, self._thin * 2)
            self.cond.notify_all()

    def _grown(self, now: float) -> float:
        if self.slow_start:
            target = self.limit + 1.0
        else:
            target = max(self.limit, CUBIC_C * (now - self.cut_at - self.k) ** 3 + self.w_max)
        return max(self.limit, min(target, self.in_flight + 1.0))  # not grown above what is used, plus one

    def _answered(self, sent_at: float, now: float) -> None:
        took = max(0.0, now - sent_at)
        self.srtt = took if not self.srtt else self.srtt + (took - self.srtt) / 8.0
        self.answers.append(now)
        if len(self.answers) > 4 * self.ceiling + 64:
            del self.answers[: len(self.answers) // 2]
        self._set(self._grown(now), now)

    def _delivered(self, now: float) -> float:
        """Calls answered per second over the last second (or the last 4 rounds when they are longer; or since the start)."""
        span = min(max(1.0, 4.0 * self.srtt), now - self.t0) or 1.0
        recent = sum(1 for t in self.answers if t > now - span)
        return recent / span

    def _throttled(self, status: int, sent_at: float, retry_after: float | None, now: float) -> None:
        self.throttled[status] = self.throttled.get(status, 0) + 1
        if self.limit <= 1.0 and retry_after:
            self.hold_until = max(self.hold_until, now + min(retry_after, self.retry_after_max_s))
        if sent_at < self.cut_at + self.srtt:  # sent before the last cut or in the round after it: cut already
            return
        self.w_max = self.limit if self.limit >= self.w_max or self.slow_start else self.limit * (1.0 + BETA) / 2.0
        self.slow_start = False
        self.cut_at = now
        # no lower than what the server answered over the last rounds needs (delivered rate x SRTT), nor than BETA x
        self._set(max(self.limit * BETA, min(self._delivered(now) * self.srtt, self.limit * SOFT_CUT)), now)
        self.k = ((self.w_max - self.limit) / CUBIC_C) ** (1.0 / 3.0) if self.w_max > self.limit else 0.0

    # -- the gate (threads) --
    def acquire(self) -> float:
        """Wait until a call may start; its start time."""
        with self.cond:
            while True:
                now = self.clock()
                if now < max(self.hold_until, self.next_send):
                    self.cond.wait(max(self.hold_until, self.next_send) - now)
                elif self.in_flight >= self.allowed():
                    self.cond.wait(0.5)
                else:
                    break
            if self.srtt and not self.slow_start:  # paced: a smooth stream, not bursts that empty a token bucket
                self.next_send = max(now, self.next_send) + self.srtt / max(self.limit, 1.0)
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            return now

    def release(
        self, sent_at: float, status: int | None = None, retry_after: float | None = None, answered=False
    ) -> None:
        """A call that started at `sent_at` has ended: answered, throttled (`status` 429 / 503), or neither."""
        with self.cond:
            now = self.clock()
            if answered:
                self._answered(sent_at, now)
            elif status in THROTTLE_STATUSES:
                self._throttled(status, sent_at, retry_after, now)
            self.in_flight -= 1
            self.cond.notify_all()

    def send(self, post, url, body, headers, timeout, max_bytes):
        """`post(url, body, headers, timeout, max_bytes)` under the limit; a rate-limit answer is waited out and
        sent again up to MAX_ABSORBED times, then raised as it came (to the official rules)."""
        from pytest_pstbench.selection.ask.chat_api import ApiError

        for i in range(MAX_ABSORBED + 1):
            sent_at = self.acquire()
            try:
                reply = post(url, body, headers, timeout, max_bytes)
            except ApiError as exc:
                throttle = exc.kind == "http" and exc.status in THROTTLE_STATUSES
                self.release(sent_at, exc.status if throttle else None, exc.retry_after)
                if not throttle or i == MAX_ABSORBED:
                    raise
                with self.cond:
                    self.absorbed += 1
                hint = exc.retry_after
                self.sleep(min(hint, self.retry_after_max_s) if hint is not None and hint > 0 else min(0.5 * 2**i, 8.0))
                continue
            except BaseException:
                self.release(sent_at)
                raise
            self.release(sent_at, answered=True)
            return reply
        raise AssertionError("unreachable")  # pragma: no cover

    def record(self) -> dict:
        """What run.json records of this run's pacing."""
        with self.cond:
            trace = [list(p) for p in self.trace]
            end = round(self.clock() - self.t0, 3)
            return {
                "mode": "adaptive",
                "start": self.start,
                "max_concurrency": self.ceiling,
                "trace": trace,
                "seconds": end,
                "throttled": {str(s): n for s, n in sorted(self.throttled.items())},
                "waited_out": self.absorbed,
                "peak_in_flight": self.peak,
            }


def limiter_for(settings, http_rules: dict) -> AdaptiveLimiter | None:
    """The run's limiter: None for a fixed --concurrency (the official pipeline as it runs)."""
    if not getattr(settings, "adaptive", False):
        return None
    return AdaptiveLimiter(settings.concurrency, retry_after_max_s=float(http_rules.get("retry_after_max_s", 60.0)))
