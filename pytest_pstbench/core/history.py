"""A method's history, written once for every kind (`pstbench history`): the versions of its run oldest
first (`core.store.versions`), each read and revalidated by the one run reader (`core.store.reader.read_runs`);
per point each metric's value with its interval as the run's summary gives it (`RunKind.history_values`);
between consecutive points of a segment the kind's paired test (`RunKind.compare_two`, as `compare` makes it,
tie rule included), Holm over every test of the history (`RunKind.finish` over all of them at once), so a long
history does not find steps by chance.

A version whose per-item values are the point before's (the same per-item file: a rerun, a commit that changed
only run.json's timestamps) is no point of its own: it is listed under that point (`repeats`) and adds no test,
so reruns do not weaken Holm's correction. Where no test of the history can be significant (too few items for its
number of tests), or there is no test at all, one line says why and what would help (`limits`).

A point made under another protocol, track, dataset revision or set of items than the point before starts a
new segment (a break, never tested across). A version whose run cannot be read (incomplete, invalid, damaged,
missing, of another kind) is left out with its reason and never plotted. Only the previous point's run is kept
in memory while the history is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_pstbench.core.errors import UserError


@dataclass
class Point:
    source: str
    commit: str | None
    date: str | None
    message: str | None
    metrics: dict  # name -> {"mean", "low", "high"}
    segment: int = 0
    repeats: list = field(default_factory=list)  # later versions with the same per-item values (no test)

    def to_json(self) -> dict:
        return {
            "source": self.source,
            "commit": self.commit,
            "date": self.date,
            "message": self.message,
            "segment": self.segment,
            "metrics": self.metrics,
            "repeats": self.repeats,
        }


@dataclass
class History:
    kind: str | None = None
    points: list[Point] = field(default_factory=list)
    tests: list[tuple[int, object]] = field(default_factory=list)  # (index of the later point, the kind's test row)
    breaks: list[dict] = field(default_factory=list)
    left_out: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    said: list[str] = field(default_factory=list)  # notes said on stderr while reading (a rewritten branch)
    alpha: float | None = None
    steps: list[dict] = field(default_factory=list)
    limits: list[str] = field(default_factory=list)  # why no test can be significant, or there is none

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "alpha": self.alpha,
            "n_tests": len(self.tests),
            "points": [p.to_json() for p in self.points],
            "steps": self.steps,
            "breaks": self.breaks,
            "left_out": self.left_out,
            "limits": self.limits,
            "notes": self.notes + self.said,
        }


def _where(v) -> dict:
    return {"commit": v.commit} if v.commit and v.date is not None else {"source": v.source}


def _break_reason(kind, earlier, later) -> str | None:
    """Why two runs cannot be tested against each other (another protocol, track, revision or items), or None."""
    a, b = earlier.record.identity(), later.record.identity()

    def short(label, value):
        return value[:12] if label.endswith("sha256") and isinstance(value, str) else value

    changed = [
        f"{label} {short(label, a[label])!r} -> {short(label, b[label])!r}" for label in a if a[label] != b[label]
    ]
    if changed:
        return "; ".join(changed)
    try:
        kind.check_comparable([earlier, later])
    except UserError as exc:
        return str(exc)
    return None


def build_history(versions, *, metrics=None, say=None, strict: bool = False) -> History:
    """The history of `versions` (oldest first, `core.store.versions.Version`): points, breaks, left-out
    versions, and the steps (tests significant after Holm over all the history's tests). With `strict` (runs
    the user gave in order) a run that cannot be read is an error, not left out."""
    from pytest_pstbench.core.kinds import kind_of_runs
    from pytest_pstbench.core.store.reader import read_runs

    say = say or (lambda msg: None)
    h = History()
    kind = prev = protocol = prev_digest = None
    segment = 0
    for v in versions:
        if v.problem is not None:
            h.left_out.append({**_where(v), "reason": v.problem})
            continue
        try:
            this_kind = kind_of_runs([v.folder])
            if kind is not None and this_kind.name != kind.name:
                raise UserError(f"a {this_kind.name} run in a history of {kind.name} runs")
            _k, runs, run_protocol = read_runs([v.folder], kind=this_kind)
            this_kind.check_comparable(runs)  # complete
        except UserError as exc:
            if strict:
                raise
            h.left_out.append({**_where(v), "reason": str(exc).replace(str(v.folder), v.source)})
            continue
        if this_kind.history_values is None:
            raise UserError(f"SOURCE {v.source}: {this_kind.name} runs have no history; fix: give runs of another kind")
        kind, run = this_kind, runs[0]
        values = kind.history_values(run, run_protocol, metrics)
        point = Point(v.source, v.commit, v.date, v.message, values)
        digest = _item_digest(v.folder, kind)
        if prev is not None:
            reason = _break_reason(kind, prev, run)
            if reason is not None:
                segment += 1
                h.breaks.append({**_where(v), "reason": reason})
            elif digest == prev_digest:  # a rerun: the same values pair for pair, nothing to test
                h.points[-1].repeats.append({**_where(v), "date": v.date, "message": v.message})
                continue
            else:
                h.tests.extend((len(h.points), row) for row in kind.compare_two(prev, run, run_protocol, metrics))
        point.segment = segment
        h.points.append(point)
        prev, protocol, prev_digest = run, run_protocol, digest
    if kind is not None:
        h.kind = kind.name
        _steps(h, kind, protocol)
    return h


def _item_digest(folder, kind) -> str | None:
    """The digest of a run's per-item file: two runs with the same one have the same values item for item."""
    import hashlib
    from pathlib import Path

    try:
        return hashlib.sha256((Path(folder) / kind.item_file).read_bytes()).hexdigest()
    except OSError:
        return None


def read_history(sources, *, metrics=None, say=None, newest: int | None = None) -> History:
    """The history of SOURCE... as `pstbench history` reads it (and `pstbench report --history`): several sources
    are a series in order (each must be readable), one Hub URI its revision's commits, one folder its git commits
    (with `newest`, only the newest that many versions: a board's sparkline). No readable version at all is one
    line."""
    import tempfile
    from pathlib import Path

    from pytest_pstbench.core.store.backends import versions as run_versions

    say = say or (lambda msg: None)
    notes: list[str] = []
    said: list[str] = []
    sources = [str(s) for s in sources]
    with tempfile.TemporaryDirectory(prefix="pstbench-history-") as work:
        versions = run_versions(sources, Path(work), notes, say, said, newest)
        history = build_history(versions, metrics=metrics, say=say, strict=len(sources) > 1)
    history.notes.extend(notes)
    history.said.extend(said)
    if not history.points:
        last = history.left_out[-1] if history.left_out else None
        raise UserError(
            f"SOURCE {sources[0]}: no version of the run could be read"
            + (f" ({len(history.left_out)} left out; the last: {last['reason']})" if last else "")
            + "; fix: check the source (a complete run in at least one version)"
        )
    return history


def _steps(h: History, kind, protocol) -> None:
    """Holm over every test of the history (the newest point's protocol gives alpha); the significant ones
    are the steps, each with the later point's commit and the metric's own direction."""
    comp = (kind.history_finish or kind.finish)([row for _i, row in h.tests], protocol)
    h.alpha = comp.alpha
    h.limits.extend(_limits(h, kind, protocol))
    worse, better = {id(r) for r in comp.worse}, {id(r) for r in comp.better}
    for i, row in h.tests:
        if id(row) not in worse | better:
            continue
        name, diff = kind.history_step(row)
        p = h.points[i]
        h.steps.append(
            {
                "commit": p.commit,
                "source": p.source,
                "date": p.date,
                "message": p.message,
                "earlier": h.points[i - 1].commit or h.points[i - 1].source,
                "metric": name,
                "direction": "worse" if id(row) in worse else "better",
                "mean_diff": diff,
                "p": row.pvalue,
                "p_holm": row.p_holm,
            }
        )


# What a history where nothing can be significant advises (`--metric` is history's and `report --history`'s option).
HISTORY_FIX = "fix: follow fewer metrics (--metric M ...), score a track with more items, or give a shorter series"


def _limits(h: History, kind, protocol) -> list[str]:
    """The line saying why no step can be found: no test at all (one point, reruns only, a point per segment), or
    tests that cannot be significant after Holm at their n whatever the values (`core.compare.cannot_detect`, as
    compare says it; `partly_blind` where only some cannot)."""
    from pytest_pstbench.core.compare import NOTHING_SIGNIFICANT, cannot_detect, partly_blind

    if not h.tests:
        repeats = sum(len(p.repeats) for p in h.points)
        if repeats:
            why = (
                f"every later version has the same per-item values as the one before it ({repeats} rerun(s), each "
                "listed under its point)"
            )
        elif len(h.points) > 1:
            why = "each segment holds one point (nothing is tested across a break)"
        else:
            why = "one point"
        return [f"no test: {why}; a step needs two points of one segment with different per-item values"]
    rows = [row for _i, row in h.tests]
    line = cannot_detect(rows, h.alpha, kind, protocol, HISTORY_FIX, NOTHING_SIGNIFICANT)
    return [line] if line else [x for x in [partly_blind(rows, h.alpha, kind, protocol, HISTORY_FIX)] if x]


def history_text(h: History) -> str:
    """What `pstbench history` prints: the points, the breaks, the left-out versions and the steps."""
    from pytest_pstbench.core.text import one_line

    def label(d) -> str:
        return d["commit"][:7] if d.get("commit") else one_line(str(d.get("source")))

    lines = [
        f"history: {len(h.points)} points, {len(h.breaks) + 1 if h.points else 0} segment(s), {len(h.tests)} tests "
        f"(Holm over all; alpha {h.alpha})"
        if h.points
        else "history: no readable run"
    ]
    names = list(h.points[0].metrics) if h.points else []
    for p in h.points:
        where = label({"commit": p.commit, "source": p.source})
        vals = "  ".join(
            f"{m} {_num(p.metrics[m]['mean'])} [{_num(p.metrics[m]['low'])}, {_num(p.metrics[m]['high'])}]"
            for m in names
            if m in p.metrics
        )
        again = (
            f" (the same values at {len(p.repeats)} later version(s): {', '.join(label(r) for r in p.repeats[:5])}"
            f"{', ...' if len(p.repeats) > 5 else ''})"
            if p.repeats
            else ""
        )
        lines.append(f"  {where} {one_line((p.date or '')[:10])} {vals}{again}")
    for b in h.breaks:
        lines.append(f"break at {label(b)}: {one_line(b['reason'])} (a new segment; not tested across)")
    for x in h.left_out:
        lines.append(f"left out {label(x)}: {one_line(x['reason'])}")
    if h.steps:
        lines.append("significant steps:")
    for s in h.steps:
        where = label(s)
        msg = one_line((s["message"] or "")[:60])
        lines.append(
            f"  {one_line(s['metric'])} {s['direction']} by {abs(s['mean_diff']):.4g} at {where} "
            f'{one_line((s["date"] or "")[:10])} "{msg}" (p_holm = {s["p_holm"]:.3g})'
        )
    if h.points and not h.steps:
        lines.append("no significant step")
    lines.extend(one_line(x) for x in h.limits)
    lines.extend(one_line(n) for n in h.notes)
    return "\n".join(lines) + "\n"


def _num(x) -> str:
    return "-" if x is None else f"{x:.4g}"
