"""Consensus filter for building selection tracks from raw votes (protocol `consensus`).

With n judges per task and k candidates, a task is accepted when its most-voted best candidate has
at least m votes and, for k >= 3, its most-voted worst candidate has at least m votes too (both
required). A tie for the most votes, or one candidate that is both the best and the worst, rejects
the task.

The threshold m for (k, n) comes from the protocol, or from a significance level alpha through the
null model of `null_model` (`thresholds_for`). Votes are read from a CSV file (`read_votes`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.selection.null_model import MonteCarlo, null_pass_probability, threshold_for_alpha

# ---- the filter --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    accepted: bool
    best: str | None
    best_votes: int
    worst: str | None
    worst_votes: int
    reason: str


def _top(votes) -> tuple[str | None, int, bool]:
    """Most-voted label, its count, and whether another label ties with it (`votes`: the labels voted, or a
    Counter of them; labels with no vote left count as not voted)."""
    counts = (+Counter(votes)).most_common()
    if not counts:
        return None, 0, False
    label, count = counts[0]
    tied = len(counts) > 1 and counts[1][1] == count
    return label, count, tied


def decide(k: int, best_votes, worst_votes, m: int) -> Decision:
    """Apply the filter to one task's votes (labels are any hashable candidate names): the labels voted
    best and worst (worst None for k = 2), each as a list or a Counter of the votes."""
    best, nb, tied_b = _top(best_votes)
    if k == 2:
        if nb < m:
            return Decision(False, best, nb, None, 0, f"best votes {nb} < {m}")
        if tied_b:
            return Decision(False, best, nb, None, 0, "tie for best")
        return Decision(True, best, nb, None, 0, "accepted")
    worst, nw, tied_w = _top(worst_votes or [])
    reasons = []
    if nb < m:
        reasons.append(f"best votes {nb} < {m}")
    if nw < m:
        reasons.append(f"worst votes {nw} < {m}")
    if not reasons:
        if tied_b:
            reasons.append("tie for best")
        if tied_w:
            reasons.append("tie for worst")
        if best == worst:
            reasons.append("same candidate voted best and worst")
    if reasons:
        return Decision(False, best, nb, worst, nw, "; ".join(reasons))
    return Decision(True, best, nb, worst, nw, "accepted")


@dataclass
class TaskVotes:
    task_id: str
    k: int
    judges: list[str] = field(default_factory=list)
    best: list[str] = field(default_factory=list)
    worst: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.judges)


REQUIRED_COLUMNS = ("task_id", "k", "judge", "best", "worst")


def read_votes(path: Path, *, k_range: tuple[int, int], protocol_id: str, candidate=None) -> list[TaskVotes]:
    """Read a votes CSV (columns task_id, k, judge, best, worst; worst empty when k = 2). Each task's k must
    lie in `k_range`, the candidate-set sizes protocol `protocol_id` covers (candidates.min/max): the exact
    null probability's work grows with k (its sum nests one level per candidate), the filter is for tasks
    the protocol can score. `candidate(task_id, name)`, where given, says which candidate a vote's name is
    (a track's reader: an index and a file name of one candidate are one candidate); the rules "at most k
    different candidates" and "best and worst differ" count candidates so. Linear in the rows."""
    from pytest_pstbench.core.files.csvfile import read_csv

    path = Path(path)
    rows = read_csv(
        path, what="votes file", columns=REQUIRED_COLUMNS, fix=f"give a CSV with columns {', '.join(REQUIRED_COLUMNS)}"
    )
    tasks: dict[str, TaskVotes] = {}
    judges: dict[str, set[str]] = {}  # per task: its judges, and the candidates its votes name
    named: dict[str, set] = {}
    which = candidate or (lambda _tid, name: name)
    for csv_row in rows:
        line, row = csv_row.line, csv_row.cells

        def bad(rule: str) -> UserError:
            return UserError(f"{path}:{line}: {rule}")

        tid = (row["task_id"] or "").strip()
        if not tid:
            raise bad("empty task_id; fix: give every row a task_id")
        try:
            k = int((row["k"] or "").strip())
        except ValueError:
            raise bad(
                f"k {row['k']!r} is not an integer; fix: give the task's number of candidates (2 or more)"
            ) from None
        if not k_range[0] <= k <= k_range[1]:
            raise bad(
                f"task {tid} has k = {k} but protocol {protocol_id} covers k = {k_range[0]}-{k_range[1]} "
                "(candidates.min/max); fix: give the task's number of candidates, or a protocol that covers it"
            )
        judge = (row["judge"] or "").strip()
        best = (row["best"] or "").strip()
        worst = (row["worst"] or "").strip()
        if not judge:
            raise bad("empty judge; fix: name the judge who voted")
        if not best:
            raise bad(f"task {tid}: empty best vote; fix: give the candidate the judge voted best")
        if k >= 3 and not worst:
            raise bad(f"task {tid}: empty worst vote with k = {k}; fix: give the worst vote (empty only when k = 2)")
        if k >= 3 and (worst == best or which(tid, worst) == which(tid, best)):
            raise bad(f"task {tid}: judge {judge} voted {best} both best and worst; fix: best and worst must differ")
        t = tasks.get(tid)
        if t is None:
            t = tasks[tid] = TaskVotes(tid, k)
            judges[tid], named[tid] = set(), set()
        elif t.k != k:
            raise bad(f"task {tid}: k = {k} here but k = {t.k} on an earlier row; fix: one k per task")
        if judge in judges[tid]:
            raise bad(f"task {tid}: judge {judge} votes twice; fix: one row per task and judge")
        judges[tid].add(judge)
        t.judges.append(judge)
        t.best.append(best)
        t.worst.append(worst if k >= 3 else "")
        named[tid].update(which(tid, v) for v in ((best, worst) if k >= 3 else (best,)))
        if len(named[tid]) > k:
            raise bad(
                f"task {tid}: votes name {len(named[tid])} different candidates but k = {k}; fix: check k or the candidate names"
            )
    if not tasks:
        raise UserError(f"{path}: no votes; fix: give one row per task and judge")
    return rows.of(tasks.values())  # with the digest of the bytes read (csvfile.Read)


@dataclass(frozen=True)
class ThresholdRow:
    k: int
    n: int
    m: int | None
    p_null: Fraction | None  # exact; None when only a Monte Carlo estimate exists (`p_mc`)
    source: str  # "protocol" or "alpha"
    p_mc: MonteCarlo | None = None


def thresholds_for(
    tasks: list[TaskVotes], consensus: dict, *, alpha: float | None, path: Path, progress=None
) -> dict[tuple[int, int], ThresholdRow]:
    """Threshold m per (k, n) present in `tasks`: from the protocol, or derived from `alpha`."""
    rows: dict[tuple[int, int], ThresholdRow] = {}
    mc = consensus.get("monte_carlo", {}) if isinstance(consensus.get("monte_carlo"), dict) else {}
    for key in sorted({(t.k, t.n) for t in tasks}):
        k, n = key
        if alpha is not None:
            m, p = threshold_for_alpha(
                k,
                n,
                alpha,
                progress=progress,
                seed=int(mc.get("seed", 0)),
                confidence=float(mc.get("confidence", 0.95)),
            )
            if isinstance(p, MonteCarlo):
                rows[key] = ThresholdRow(k, n, m, None, "alpha", p_mc=p)
            else:
                rows[key] = ThresholdRow(k, n, m, p, "alpha")
            continue
        if n != int(consensus["n_judges"]):
            example = next(t.task_id for t in tasks if (t.k, t.n) == key)
            raise UserError(
                f"{path}: task {example} has {n} judges but the protocol's thresholds are for n_judges = "
                f"{consensus['n_judges']}; fix: pass --alpha A to derive a threshold for each k and n"
            )
        m = consensus["thresholds"].get(k)
        if m is None:
            raise UserError(
                f"{path}: the protocol has no consensus threshold for k = {k} (consensus.thresholds); fix: pass --alpha A"
            )
        rows[key] = ThresholdRow(k, n, int(m), null_pass_probability(k, n, int(m)), "protocol")
    return rows
