"""Rank groups the tests support: a method's rank is 1 + the number of methods significantly better than it on the
board's primary metric, by its kind's own paired test between two runs (the registry's `RunKind.pairwise_tests`:
`compare_two`'s test, without the interval and detectable effect a ranking does not use; else `compare_two`), Holm
over all the board's pairwise tests of the track (`RunKind.history_finish`, else `finish`). Methods the tests cannot
separate share a rank; reference rows (the kit's Identity run; a kind's `board_references`, e.g. a selection track's
random baseline and human row) are shown, never ranked nor tested."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_pstbench.core.errors import UserError, suggest

IDENTITY = "identity"  # the kit's Identity run: named identity (or identity@<protocol id>), method identity


def is_reference(run) -> bool:
    """A reference row: the kit's Identity run (run.json method.method `identity`, its name `identity`, or
    `identity@<protocol id>` for the protocol it records: paired.identity.identity_name's rule)."""
    method = run.run.get("method")
    protocol = run.run.get("protocol")
    pid = protocol.get("id") if isinstance(protocol, dict) else None
    names = (IDENTITY, f"{IDENTITY}@{pid}")
    return run.record.name in names and isinstance(method, dict) and method.get("method") == IDENTITY


@dataclass
class Ranking:
    primary: str  # the metric the ranks rest on (a key of the kind's history values)
    higher_is_better: bool
    ranks: dict[str, int]  # method name -> 1 + the number of methods significantly better
    better: dict[str, list[str]]  # method name -> the methods significantly better than it
    order: list[str]  # methods by rank, then by the primary metric's mean (best first), then name
    n_tests: int
    alpha: float | None  # None: fewer than two methods, no test
    separable: int = 0  # adjacent pairs of `order` whose test is significant
    tests: list[dict] = field(default_factory=list)  # (a, b, p, p_holm, verdict) of each pair


def primary_metric(keys: list[str], chosen: str | None, track: str) -> str:
    """The board's primary metric: `--metric` when given (one of the track's ranked metrics), else the first."""
    if chosen is None:
        return keys[0]
    if chosen not in keys:
        raise UserError(
            f"--metric {chosen}: not a ranked metric of track {track} (its metrics: {', '.join(keys)})"
            f"{suggest(chosen, keys)}; fix: name one of them"
        )
    return chosen


def higher_is_better(protocol, metric: str) -> bool:
    """The metric's direction as its protocol entry says (`higher_is_better`; accuracies name none: higher)."""
    entry = protocol.data.get("metrics", {}).get(metric.partition(".")[0])
    return bool(entry.get("higher_is_better", True)) if isinstance(entry, dict) else True


def pair_tests(methods: list, protocol, kind, primary: str) -> list:
    """The test of every pair of `methods` on `primary` (the later run the candidate), Holm not applied: the kind's
    `pairwise_tests` (only what a ranking uses), else its `compare_two` per pair (the rows on `primary`)."""
    if kind.pairwise_tests is not None:
        return kind.pairwise_tests(methods, protocol, primary)
    rows = []
    for i, a in enumerate(methods):
        for b in methods[i + 1 :]:
            found = kind.compare_two(a, b, protocol, [primary.partition(".")[0]], None)
            rows.extend(r for r in found if kind.history_step(r)[0] == primary)
    return rows


def rank(methods: list, protocol, kind, primary: str, means: dict[str, float | None]) -> Ranking:
    """The ranks of `methods` (runs of one track) on `primary`, from every pair's test, Holm over all of them."""
    rows = pair_tests(methods, protocol, kind, primary)
    finish = kind.history_finish or kind.finish
    comparison = finish(rows, protocol) if rows else None
    better: dict[str, list[str]] = {m.record.name: [] for m in methods}
    winners = {id(r) for r in comparison.better} if comparison else set()
    losers = {id(r) for r in comparison.worse} if comparison else set()
    significant = set()
    tests = []
    for r in rows:
        if id(r) in winners:  # the candidate is better than the baseline
            better[r.baseline].append(r.candidate)
        elif id(r) in losers:
            better[r.candidate].append(r.baseline)
        if id(r) in winners or id(r) in losers:
            significant.add(frozenset((r.baseline, r.candidate)))
        tests.append({"a": r.baseline, "b": r.candidate, "p": r.pvalue, "p_holm": r.p_holm, "verdict": r.verdict})
    ranks = {name: 1 + len(b) for name, b in better.items()}
    hib = higher_is_better(protocol, primary)

    def key(name):
        mean = means.get(name)
        return (ranks[name], mean is None, -(mean or 0.0) if hib else (mean or 0.0), name)

    order = sorted(ranks, key=key)
    separable = sum(1 for x, y in zip(order, order[1:]) if frozenset((x, y)) in significant)
    alpha = comparison.alpha if comparison else None
    return Ranking(primary, hib, ranks, better, order, len(rows), alpha, separable, tests)
