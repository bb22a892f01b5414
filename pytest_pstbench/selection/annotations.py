"""The input of the protocol study (`study`, `pstbench vab study`): an annotations CSV,
`task_id,annotator,image,score,rank`, one row per task, annotator and image (other columns are ignored):
every annotator of a task scores each of its n images on 0-10 (any real number in the range) and ranks
them 1..n (1 = best; a permutation). `read_annotations` checks every rule of that format, each problem a
one-line error naming the file, the line, the rule and the fix, and returns the tasks.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from pytest_pstbench.core.errors import UserError

COLUMNS = ("task_id", "annotator", "image", "score", "rank")
SCORE_RANGE = (0.0, 10.0)  # the CSV format's scale (not a protocol parameter: the annotation form's)


@dataclass
class StudyTask:
    task_id: str
    line: int  # the task's first row
    images: list[str] = field(default_factory=list)
    annotators: list[str] = field(default_factory=list)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)  # annotator -> image -> score
    ranks: dict[str, dict[str, int]] = field(default_factory=dict)  # annotator -> image -> rank
    lines: dict[str, dict[str, int]] = field(default_factory=dict)  # annotator -> image -> line


def read_annotations(path: Path | str, *, k_range: tuple[int, int], protocol_id: str) -> list[StudyTask]:
    """The tasks of an annotations CSV, checked (each problem one UserError naming file, line, rule, fix)."""
    from pytest_pstbench.core.files.csvfile import read_csv

    path = Path(path)
    rows = read_csv(
        path,
        what="annotations file",
        columns=COLUMNS,
        fix=f"give a CSV with columns {','.join(COLUMNS)}, one row per task, annotator and image",
    )
    tasks: dict[str, StudyTask] = {}
    for row in rows:
        _add_row(tasks, path, row.line, {k: (row.cells[k] or "").strip() for k in COLUMNS})
    if not tasks:
        raise UserError(f"{path}: no annotations; fix: give one row per task, annotator and image")
    for t in tasks.values():
        _check_task(t, path, k_range=k_range, protocol_id=protocol_id)
    return rows.of(tasks.values())  # with the digest of the bytes read (csvfile.Read)


def _add_row(tasks: dict[str, StudyTask], path: Path, line: int, c: dict[str, str]) -> None:
    """Check one row's cells `c` (stripped, by column) and record its score and rank in its task of `tasks`."""

    def bad(rule: str) -> UserError:
        return UserError(f"{path}:{line}: {rule}")

    for key in ("task_id", "annotator", "image"):
        if not c[key]:
            raise bad(f"empty {key}; fix: give every row a task_id, annotator and image")
    tid, who, img = c["task_id"], c["annotator"], c["image"]
    where = f"task {tid}, annotator {who}, image {img}"
    score, rank = _score_and_rank(c, bad, where)
    t = tasks.get(tid)
    if t is None:
        t = tasks[tid] = StudyTask(tid, line)
    if who not in t.scores:
        t.annotators.append(who)
        t.scores[who], t.ranks[who], t.lines[who] = {}, {}, {}
    if img in t.scores[who]:
        raise bad(
            f"{where}: rated twice (first on line {t.lines[who][img]}); fix: one row per task, annotator and image"
        )
    other = next((i for i, r in t.ranks[who].items() if r == rank), None)
    if other is not None:
        raise bad(
            f"{where}: rank {rank} is also given to image {other} (line {t.lines[who][other]}); "
            "fix: each annotator ranks a task's n images 1..n, each rank once"
        )
    if img not in t.images:
        t.images.append(img)
    t.scores[who][img], t.ranks[who][img], t.lines[who][img] = score, rank, line


def _score_and_rank(c: dict[str, str], bad, where: str) -> tuple[float, int]:
    """The row's score (0-10) and rank (a whole number >= 1), checked; `bad(rule)` makes the row's error."""
    if not c["score"]:
        raise bad(f"{where}: missing score; fix: give the annotator's score from 0 to 10")
    try:
        score = float(c["score"])
    except ValueError:
        score = math.nan
    if not SCORE_RANGE[0] <= score <= SCORE_RANGE[1]:  # NaN fails too
        raise bad(f"{where}: score {c['score']!r} is not a number from 0 to 10; fix: give the score on the 0-10 scale")
    if not c["rank"]:
        raise bad(f"{where}: missing rank; fix: give every image of the task its rank (1 = best)")
    if not re.fullmatch(r"[0-9]{1,6}", c["rank"]) or int(c["rank"]) < 1:
        raise bad(
            f"{where}: rank {c['rank']!r} is not a whole number from 1 to the task's number of images; "
            "fix: give the rank as 1, 2, ... (1 = best)"
        )
    return score, int(c["rank"])


def _check_task(t: StudyTask, path: Path, *, k_range: tuple[int, int], protocol_id: str) -> None:
    """A whole task's rules: its number of images in the protocol's range, every annotator rating every image
    with ranks 1..n, and at least 2 annotators."""
    n = len(t.images)
    if not k_range[0] <= n <= k_range[1]:
        raise UserError(
            f"{path}:{t.line}: task {t.task_id} has {n} image(s) but protocol {protocol_id} covers "
            f"tasks of {k_range[0]}-{k_range[1]} images (candidates.min/max); fix: check the task's rows"
        )
    for who in t.annotators:
        first = min(t.lines[who].values())
        lacking = [i for i in t.images if i not in t.scores[who]]
        if lacking:
            raise UserError(
                f"{path}:{first}: task {t.task_id}: annotator {who} rates {n - len(lacking)} of the task's "
                f"{n} images (not {', '.join(lacking)}); fix: one row per image of the task and annotator"
            )
        over = next((i for i in t.images if t.ranks[who][i] > n), None)
        if over is not None:
            raise UserError(
                f"{path}:{t.lines[who][over]}: task {t.task_id}, annotator {who}, image {over}: rank "
                f"{t.ranks[who][over]} but the task has {n} images; fix: ranks 1..{n} (1 = best), each once"
            )
    if len(t.annotators) < 2:
        raise UserError(
            f"{path}:{t.line}: task {t.task_id} has one annotator ({t.annotators[0]}); the study compares "
            "annotators; fix: give at least 2 annotators per task"
        )
