"""The Answers of a selection report (issue #42): for each judge whose run was scored from an answers file
(run.json `judge.kind` "answers": a model's answers, given or asked by `vab run`), the text of each trial's
answer in the shown tasks, on demand (`<details>`), escaped and cut to ANSWER_BOUND characters; the trials
run.json `answers.problems` lists as unparseable, an API error or missing are marked.

The file is read by the one reader of answers files (selection/answers.read_answers, against the track the
runs were scored on), only when it is the file the run was scored from (its sha256 is run.json's) and no
larger than ANSWERS_MAX_BYTES; otherwise the page says why in a note. A published run (a Hub URI) holds no
answers file and its record names a file of the machine that scored it: the page says so once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.text import html_escape as esc

ANSWER_BOUND = 2000  # characters of one answer's text on the page
ANSWERS_MAX_BYTES = 256 * 1024 * 1024  # an answers file larger than this is not read for the page
MARKS = {"unparseable": "unparseable", "error": "API error", "missing": "no answer"}
FIELDS = {"response": "response", "error": "API error", "labels": "parsed labels as given"}

EXTRA_CSS = """
.answers { margin:4px 0 10px; font-size:12px; }
.answers details { margin:2px 0; } .answers summary { cursor:pointer; }
.answers pre { white-space:pre-wrap; overflow-wrap:anywhere; max-height:24em; overflow:auto; background:#f6f7f9;
  padding:6px; border-radius:4px; margin:4px 0; }
"""


@dataclass
class JudgeAnswers:
    path: Path  # the answers file read
    texts: dict  # (task, trial, prompt type) -> (field, text cut to ANSWER_BOUND, its length)
    details: dict  # (task, trial, prompt type) -> the reader's detail of an answer that is not ok
    statuses: dict  # run.json answers.problems: (task, trial, prompt type) -> status (absent: ok)


def answers_file(recorded: str, run_path: Path) -> Path | None:
    """The answers file run.json records: as written (relative to the current folder), else relative to the run
    folder's parents (a run scored in the folder above its results); None when there is none."""
    path = Path(recorded)
    if path.is_file():
        return path
    if not path.is_absolute():
        for parent in Path(run_path).resolve().parents:
            if (parent / path).is_file():
                return parent / path
    return None


def attach_answers(page) -> None:
    """Read each model judge's answers file (local runs) for the page's shown tasks; a note where it cannot be."""
    from pytest_pstbench.selection.answers import read_answers
    from pytest_pstbench.selection.run_check import trial_statuses

    published = []
    for judge, is_published in zip(page.judges, page.published):
        record = judge.run.run.get("judge")
        if not isinstance(record, dict) or record.get("kind") != "answers":
            continue  # a scoring function: no answer texts
        if is_published:
            published.append(judge.label)
            continue
        recorded = record.get("path")
        where = f"answers of {judge.label}"
        path = answers_file(recorded, judge.run.path) if isinstance(recorded, str) and recorded else None
        if path is None:
            page.notes.append(
                f"{where} not shown: the answers file run.json records ({recorded!r}) is not found here; "
                "fix: run the report where the run was scored"
            )
            continue
        if page.track is None:
            page.notes.append(
                f"{where} not shown: the track the run was scored on could not be opened; fix: pass --track"
            )
            continue
        try:
            size = path.stat().st_size
            if size > ANSWERS_MAX_BYTES:
                raise UserError(f"{path}: {size} bytes, over the page's {ANSWERS_MAX_BYTES} bytes")
            answer_set = read_answers(
                path, page.track, page.params, keep_texts=set(page.shown), text_bound=ANSWER_BOUND
            )
        except (OSError, UserError) as exc:
            page.notes.append(f"{where} not shown: {exc}")
            continue
        if answer_set.sha256 != record.get("sha256"):
            page.notes.append(
                f"{where} not shown: {path} has changed since the run was scored (its sha256 is not "
                "run.json's judge.sha256); fix: score the run again from this file"
            )
            continue
        details = {key: entry[2] for key, entry in answer_set.entries.items() if entry[2]}
        judge.answers = JudgeAnswers(path, answer_set.texts, details, trial_statuses(judge.run, page.params))
    if published:
        page.notes.append(
            f"answers of {', '.join(published)} not shown: a published run (hf://) holds no answers "
            "file; fix: report the run's local folder where it was scored"
        )


def task_cost(run: dict, tid: str) -> str | None:
    """The task's cost as run.json judge.cost records it (per trial; None without a cost): "cost of this task:
    0.0012 USD (trials 0.0004, 0.0004, 0.0004)", or "unknown" where a trial's line had no usage."""
    from pytest_pstbench.selection.ask.pricing import money

    judge = run.get("judge") if isinstance(run, dict) else None
    cost = judge.get("cost") if isinstance(judge, dict) else None
    trials = (cost.get("per_task") or {}).get(tid) if isinstance(cost, dict) else None
    if not isinstance(trials, list) or not trials:
        return None
    cur = cost.get("currency", "")
    total = None if any(c is None for c in trials) else sum(trials)
    shown = ", ".join("unknown" if c is None else f"{c:.4g}" for c in trials)
    return f"cost of this task: {money(total, cur)} (trials {shown})"


def render_answers(page, judge, ji: int, tid: str, k: int, w) -> None:
    """The task's answers of one judge: a `<details>` per trial and prompt type asked."""
    got = judge.answers
    if got is None:
        return
    w(
        f'<div class="answers" data-judge="{ji + 1}" data-task="{esc(tid)}"><span class="hint">answers of '
        f"{esc(judge.label)} ({esc(got.path.name)}; each cut to its first {ANSWER_BOUND:,} characters)</span>"
    )
    said_cost = task_cost(judge.run.run, tid)
    if said_cost:
        w(f'<p class="hint cost" data-judge="{ji + 1}" data-task="{esc(tid)}">{esc(said_cost)}</p>')
    for t in range(page.params.trials):
        for ptype in page.params.prompt_types_for(k):
            key = (tid, t, ptype)
            status = got.statuses.get(key, "ok")
            mark = ""
            if status != "ok":
                detail = got.details.get(key)
                mark = f' · <span class="wrong">{esc(MARKS.get(status, status))}</span>' + (
                    f": {esc(detail[:300])}" if detail else ""
                )
            said = got.texts.get(key)
            w(
                f'<details class="answer {esc(status)}" data-trial="{t}" data-prompt="{esc(ptype)}" data-status="{esc(status)}">'
                f"<summary>trial {t} · {esc(ptype)}{mark}</summary>"
            )
            if said is None:
                w('<p class="hint">no line in the answers file</p>')
            else:
                kind, text, length = said
                w(
                    f'<p class="hint">{esc(FIELDS.get(kind, kind))}, {length:,} characters'
                    + (f" (cut: the first {len(text):,} shown)" if length > len(text) else "")
                    + "</p>"
                )
                w(f"<pre>{esc(text)}</pre>")
            w("</details>")
    w("</div>")
