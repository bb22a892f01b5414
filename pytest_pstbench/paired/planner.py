"""The scoring loop of paired runs: one or several runs (one per method) over one track, pair by pair.

`score_runs` is what `pstbench score` (one or several `--outputs` folders, and the Identity row in the same
pass), `pstbench demo` and the Python API's `score` (folders, and arrays handed in from Python) use. It is a
pipeline, not a loop:

* **decode ahead**: worker threads (`workers`, default the machine's CPU count) hash, look up the score
  cache and decode the next pairs' files (`RunSession.load`: Pillow releases the GIL while decoding)
  while the main thread computes the metrics of the current pair (`RunSession.compute`); at most
  `workers` pairs are loaded ahead, so memory stays flat in the number of pairs;
* **reference work once**: a pair's reference and style are decoded once for all runs, and the
  reference-side half of the metrics (evaluation-size images, the reference's LPIPS features) is done
  once per pair for all runs under one protocol (`PairScorer.score(..., shared=)`), as the
  sensitivity engine does.

The values are those of `RunSession.score_pair` (the pytest items' path): the same functions on the
same arrays, in any order and with any number of workers. Both go through the metric engine
(`metrics/scorer.py`) that the sensitivity engine uses too; `plan_units` is that engine's plan (which
computation each variant's metric needs, each done once per method and pair).
"""

from __future__ import annotations

import json
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.metrics.registry import computing_params
from pytest_pstbench.metrics.scorer import MSE, VALUE
from pytest_pstbench.paired.aggregation import statistic_of
from pytest_pstbench.paired.resolution import evaluation_resolution, res_key
from pytest_pstbench.paired.session import PairResult, RunOutcome, RunSession
from pytest_pstbench.paired.verify_cache import verify_line


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)


def check_workers(value, option: str = "--workers") -> int:
    """A positive whole number of worker threads (None: the default)."""
    if value is None:
        return default_workers()
    try:
        n = int(str(value))
    except ValueError:
        n = 0
    if n < 1 or str(value).strip() != str(n):
        raise UserError(f"{option} {value!r}: expected a whole number of worker threads, at least 1 (e.g. {option} 4)")
    return n


class _DatasetImages:
    """A pair's reference and style, decoded once (on first need) for every run under one protocol."""

    def __init__(self, session: RunSession, pair):
        self._session, self._pair = session, pair
        self._lock = threading.Lock()
        self._value = None
        self._error: UserError | None = None

    def __call__(self):
        with self._lock:
            if self._value is None and self._error is None:
                try:
                    self._value = self._session.load_dataset_images(self._pair)
                except UserError as exc:
                    self._error = exc
        if self._error is not None:
            raise self._error
        return self._value


_NOT_GIVEN = object()  # a pair an in-memory run's outputs leave out: recorded as not scored


def _output_of(outputs, pair):
    """A run's output for `pair`: from a function (called here, on the main thread, in track order) or a
    mapping (pair id -> path or array; `_NOT_GIVEN` for a pair it leaves out)."""
    if callable(outputs):
        return outputs(pair)
    return outputs[pair.id] if pair.id in outputs else _NOT_GIVEN


def _load_pair(pair, sessions: list[RunSession], given: list) -> list:
    """Every run's load step for one pair (None for a run not given this pair); runs under the same
    protocol file share the dataset images."""
    images: dict[str, _DatasetImages] = {}
    steps = []
    for session, output in zip(sessions, given):
        if output is _NOT_GIVEN:
            steps.append(None)
            continue
        shared = images.setdefault(session.protocol.sha256, _DatasetImages(session, pair))
        steps.append(session.load(pair, output, shared))
    return steps


def score_runs(
    sessions: list[RunSession], outputs: list, progress=None, workers: int | None = None
) -> list[RunOutcome]:
    """Score every pair of the track for each run, then aggregate and write each run. All sessions score
    the same track. `outputs[i]` are run i's outputs: a mapping pair id -> output path (an outputs folder's,
    `tracks.resolve_outputs`) or in-memory uint8 HxWx3 array (the Python API; a pair left out is recorded as
    not scored), or a function called with each `Pair` that returns one (called on this thread, in track
    order, a few pairs ahead of the one being computed)."""
    if not sessions:
        return []
    track = sessions[0].track
    if any(s.track is not track and s.track.id != track.id for s in sessions):
        raise ValueError("score_runs: every session must score the same track")
    workers = check_workers(workers)
    for session, outs in zip(sessions, outputs):
        if not callable(outs):
            session.outputs = outs
    pairs = list(track.pairs)
    n = len(pairs)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pstbench-load") as pool:
        ahead = {}
        for i, pair in enumerate(pairs):
            for j in range(i, min(n, i + workers + 1)):  # keep `workers` pairs loading ahead of this one
                if j not in ahead:
                    given = [_output_of(outs, pairs[j]) for outs in outputs]
                    ahead[j] = pool.submit(_load_pair, pairs[j], sessions, given)
            steps = ahead.pop(i).result()
            shared: dict[tuple, dict] = {}  # per protocol and device: the reference-side work of this pair
            statuses = []
            for session, step in zip(sessions, steps):
                if step is None:
                    statuses.append("not given")
                    continue
                if not isinstance(step, PairResult):
                    step = session.compute(step, shared.setdefault((session.protocol.sha256, session.device), {}))
                session.add(step)
                statuses.append("ok" if step.ok else "FAILED")
            if progress:
                if len(sessions) == 1:
                    progress(f"[{i + 1}/{n}] {pair.id} {statuses[0]}")
                else:
                    progress(
                        f"[{i + 1}/{n}] {pair.id} " + ", ".join(f"{s.name} {st}" for s, st in zip(sessions, statuses))
                    )
    outcomes = []
    for session in sessions:
        outcomes.append(session.finish())
        if progress and session.verify_cache:
            progress(verify_line(session.results) + (f" ({session.name})" if len(sessions) > 1 else ""))
    return outcomes


def score_run(session: RunSession, outputs, progress=None, workers: int | None = None) -> RunOutcome:
    """Score every pair of the track from `outputs` (pair id -> path or array, or a function of the
    `Pair`: see `score_runs`), then aggregate and write."""
    return score_runs([session], [outputs], progress=progress, workers=workers)[0]


# ---- the plan of a sensitivity analysis ------------------------------------------------------------
@dataclass(frozen=True)
class Unit:
    """What one (variant, metric) needs per pair: a metric computation at an evaluation resolution."""

    metric: str
    params_key: str  # canonical JSON of the metric's computing parameters
    quantity: str  # VALUE (the metric) or MSE (per-pair MSE for pooled PSNR)
    resolution: str  # res_key of the evaluation resolution


def plan_units(variants) -> dict[tuple[str, str], Unit]:
    """What each (variant, metric) of a sensitivity analysis computes: cells with equal units share one
    computation per (method, pair). A `score` run is the protocol's own row of this plan."""
    plan = {}
    for v in variants:
        res = res_key(evaluation_resolution(v.protocol))
        for m, params in v.protocol.metrics.items():
            quantity = MSE if statistic_of(v.protocol, m) == "pooled_mse" else VALUE
            key = json.dumps(computing_params(params), sort_keys=True)
            plan[(v.id, m)] = Unit(m, key, quantity, res)
        # metrics are the base's (variants may not add or remove them)
    return plan


# ---- the Identity row ----------------------------------------------------------------------------
# Scored like every other run (`request.identity_request`, through the score cache), in the same pass as the
# methods; the row is labelled here.
def identity_row(outcome: RunOutcome, track):
    """(label, summary, problem) for the table's Identity row, from the Identity run's outcome. An Identity
    run that is not complete is marked by the table as every row is (`Identity (incomplete: N of M pairs)`,
    paired.tables.row_name) and `problem` says why (the command then exits 1)."""
    summary = outcome.summary
    if summary.get("complete"):
        return "Identity", summary, None
    n, total = summary.get("n", 0), len(track.pairs)
    failures = outcome.run.get("failures") or []
    first = (
        f" ({failures[0]['pair']}: {failures[0]['message']}"
        + (f"; and {len(failures) - 1} more)" if len(failures) > 1 else ")")
        if failures
        else ""
    )
    problem = (
        f"the Identity row is incomplete: {n} of {total} pairs scored{first}; "
        "fix: repair the track's content images (Identity scores them unchanged)"
    )
    return "Identity", summary, problem
