"""Answers files: what a model answered, parsed and checked against a track (what it is asked is
`message`; the export folder of those requests is `export`).

An answers file is JSON Lines, one object per (task, trial, prompt type) and attempt::

    {"task_id": "vd-01", "trial": 0, "prompt_type": "pick_best", "response": "... BEST: B", "attempt": 1}
    {"task_id": "vd-01", "trial": 0, "prompt_type": "pick_worst", "error": "RateLimitError: ...", "attempt": 3}
    {"task_id": "vd-01", "trial": 1, "prompt_type": "pick_best_and_worst", "best": "A", "worst": "C"}

`response` is parsed with the protocol's patterns (vab: the official parser, the first
`BEST: X` / `WORST: Y`, tag in upper case; vab-lenient: the last match, any case, bold and brackets
tolerated); parsed labels (`best`, `worst`) are used as given. `error` marks an API error (an error
trial). Lines are written and read through `answerfile` (one encoding; a lone surrogate in a string is
read as U+FFFD). `attempt` (default 1): several lines for one request are allowed when their attempts differ,
and the highest attempt counts. How missing, error and unparseable answers enter the metrics is the
protocol's `answers.records`; all are counted in run.json. Problems with the file itself (not JSON,
unknown task, duplicate answer) are user errors.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.jsonfile import loads
from pytest_pstbench.selection.answerfile import clean_line
from pytest_pstbench.selection.ask.usage import CACHED
from pytest_pstbench.selection.ask.usage import COUNTS as USAGE_COUNTS
from pytest_pstbench.selection.ask.usage import line_problem as usage_problem
from pytest_pstbench.selection.ask.usage import totals as usage_totals
from pytest_pstbench.selection.permutations import orders_for
from pytest_pstbench.selection.protocol import PROMPT_TYPES

OK, MISSING, UNPARSEABLE, ERROR = "ok", "missing", "unparseable", "error"
REASONING = "reasoning"  # an answers line's field: the endpoint returned the reasoning apart (content kept as it is)


def content_seen(text: str, params, separated: bool = False) -> tuple[str, bool]:
    """The text the protocol's parser reads, and whether a reasoning block was removed: the official
    pipeline's `message.content` as litellm hands it over (answers.content.reasoning_split). `separated`:
    the endpoint returned the reasoning in a field of its own (the content is then read as it is)."""
    split = params.reasoning_split
    if split is None or separated or not text:
        return text, False
    rx, group, _fields = split
    m = rx.match(text)
    if m is None:
        return text, False
    return m.group(group) or "", True


def _needs(prompt_type: str) -> tuple[str, ...]:
    return {"pick_best": ("best",), "pick_worst": ("worst",), "pick_best_and_worst": ("best", "worst")}[prompt_type]


# ---- parsing ---------------------------------------------------------------------------------


def parse_response(
    text: str, prompt_type: str, k: int, params, separated: bool = False
) -> tuple[dict[str, str | None], str, str | None]:
    """Labels found in a raw response: ({'best': 'B', 'worst': None}, status, detail). The protocol's
    reasoning split applies first (see `content_seen`)."""
    text, _removed = content_seen(text or "", params, separated)
    found: dict[str, str | None] = {}
    valid = params.labels[:k]
    problems = []
    for which in _needs(prompt_type):
        matches = params.answer_regex(which).findall(text or "")
        if not matches:
            found[which] = None
            problems.append(f"no {which.upper()}: line")
            continue
        label = str(matches[-1] if params.answer_match == "last" else matches[0]).upper()
        if label not in valid:
            found[which] = None
            problems.append(f"{which.upper()}: {label} is not one of {', '.join(valid)}")
        else:
            found[which] = label
    if problems:
        return found, UNPARSEABLE, "; ".join(problems)
    return found, OK, None


@dataclass
class AnswerSet:
    """Parsed answers file: (task_id, trial, prompt_type) -> (labels, status, detail, line, attempt),
    the line with the highest attempt of each request."""

    path: Path
    sha256: str
    n_lines: int
    entries: dict[tuple[str, int, str], tuple[dict, str, str | None, int]] = field(default_factory=dict)
    reasoning_removed: int = 0  # response lines whose leading reasoning block the protocol's split removed
    reasoning_separate: int = 0  # response lines whose endpoint returned the reasoning apart (`reasoning`)
    # read_answers(keep_texts=...): (task_id, trial, prompt_type) -> (field, text cut to text_bound, its length),
    # what the counted line said: its `response`, its `error`, or its labels (`best`/`worst`)
    texts: dict[tuple[str, int, str], tuple[str, str, int]] = field(default_factory=dict)
    # every line's (prompt type, usage): its token counts, None (not known: `usage: null`), CACHED (answered from the
    # response cache, no call made) or ... (no `usage` field)
    usage_lines: list = field(default_factory=list)
    usage_requests: list = field(default_factory=list)  # (task_id, prompt type, attempt, usage) of every line
    cut: set = field(
        default_factory=set
    )  # requests whose counted line was cut short by a stopped run (`cut`): asked again
    # beside each of usage_lines: (task_id, trial, the line's `model` or None): what `pricing` prices it by
    usage_keys: list = field(default_factory=list)
    usage_batch: list = field(default_factory=list)  # beside each of usage_lines: asked through the Batch API (`batch`)

    def usage(self) -> dict | None:
        """Token totals over every line (`usage.totals`: per run, per prompt type); None when no line records usage
        (a file written by hand or by another tool)."""
        if all(u is ... for _p, u in self.usage_lines):
            return None
        return usage_totals(self.usage_lines)

    def provenance(self) -> dict:
        out = {"kind": "answers", "path": str(self.path), "sha256": self.sha256, "lines": self.n_lines}
        out["reasoning_split"] = {"removed": self.reasoning_removed, "returned_apart": self.reasoning_separate}
        usage = self.usage()
        if usage is not None:
            out["usage"] = usage
        return out


def line_text(obj: dict, needs: tuple[str, ...]) -> tuple[str, str]:
    """(field, text) of what an answers line said: its API error, its parsed labels or its raw response."""
    if "error" in obj and obj["error"] not in (None, "", False):
        return "error", str(obj["error"])
    if any(n in obj for n in ("best", "worst")):
        return "labels", ", ".join(f"{n}: {obj.get(n)!r}" for n in needs)
    response = obj.get("response")
    return "response", response if isinstance(response, str) else repr(response)


def read_answers(
    path: Path, track, params, *, keep_texts: Collection[str] | None = None, text_bound: int = 2000
) -> AnswerSet:
    """Read and check an answers JSONL file against a track (file-level problems are user errors).
    `keep_texts`: the tasks whose counted lines' texts are kept in `AnswerSet.texts`, each cut to `text_bound`
    characters (the report's Answers)."""
    path = Path(path)
    raw, text = _file_text(path)
    tasks = {t.id: t for t in track.tasks}
    out = AnswerSet(path, hashlib.sha256(raw).hexdigest(), 0)
    unknown: list[str] = []
    seen: dict = {}  # (key, attempt) -> line
    # JSON Lines: lines end at "\n" only (str.splitlines would also break at U+2028, U+0085, ... inside
    # a JSON string, which json.dumps(ensure_ascii=False) writes raw)
    for lineno, line in enumerate(text.replace("\r\n", "\n").split("\n"), 1):
        if not line.strip():
            continue
        out.n_lines += 1

        def bad(rule: str) -> UserError:
            return UserError(f"{path}:{lineno}: {rule}")

        try:
            obj = loads(line)
        except json.JSONDecodeError as exc:
            raise bad(f"not valid JSON ({exc.msg}); fix: write one JSON object per line") from None
        if not isinstance(obj, dict):
            raise bad(
                "not a JSON object; fix: write one object per line with task_id, trial, prompt_type and response (or best/worst)"
            )
        obj = clean_line(obj)  # a lone surrogate (an escaped half character) cannot reach a run file or the terminal
        missing = [key for key in ("task_id", "trial", "prompt_type") if key not in obj]
        if missing:
            raise bad(
                f"lacks {', '.join(missing)}; fix: give task_id, trial, prompt_type and response (or best/worst) on every line"
            )
        tid = str(obj["task_id"])
        if tid not in tasks:
            unknown.append(tid)
            continue
        task = tasks[tid]
        trial, ptype, attempt = _request_of(obj, task, params, bad)
        key = (tid, trial, ptype)
        if (key, attempt) in seen:
            raise bad(
                f"second answer for task {tid} trial {trial} {ptype} attempt {attempt} (first on line {seen[(key, attempt)]}); "
                "fix: keep one answer per task, trial, prompt type and attempt (number re-asks 2, 3, ...)"
            )
        seen[(key, attempt)] = lineno
        if "usage" in obj:
            problem = usage_problem(obj["usage"])
            if problem:
                raise bad(f"{problem}; fix: give the token counts the server sent ({', '.join(USAGE_COUNTS)}) or null")
        usage = obj.get("usage", CACHED if obj.get("cached") else ...)  # no usage: from the cache, or not recorded
        out.usage_lines.append((ptype, usage))
        out.usage_requests.append((tid, ptype, attempt, usage))
        out.usage_keys.append((tid, trial, obj["model"] if isinstance(obj.get("model"), str) else None))
        out.usage_batch.append(bool(obj.get("batch")))
        needs = _needs(ptype)
        labels, status, detail = _line_labels(obj, ptype, task.k, params, out, bad)
        prev = out.entries.get(key)
        if prev is None or attempt > prev[4]:  # the highest attempt counts, whatever the line order
            out.entries[key] = (labels, status, detail, lineno, attempt)
            if obj.get("cut"):
                out.cut.add(key)
            else:
                out.cut.discard(key)
            if keep_texts is not None and tid in keep_texts:
                kind, said = line_text(obj, needs)
                out.texts[key] = (kind, said[:text_bound], len(said))
    _check_whole(path, out, unknown, track)
    return out


def _check_whole(path: Path, out: AnswerSet, unknown: list[str], track) -> None:
    """The file-level refusals, after every line was read: no answer at all, or answers for tasks of another track."""
    if out.n_lines == 0:  # missing answers are scored as missing; a file with none is the wrong file, not a run
        raise UserError(
            f"{path}: holds no answer (the file is empty); fix: give the answers file the model's answers "
            "were written to (JSON Lines: one answer per task, trial and prompt type)"
        )
    if unknown:
        shown = ", ".join(sorted(set(unknown))[:10]) + (" ..." if len(set(unknown)) > 10 else "")
        raise UserError(
            f"{path}: answers for tasks not in track {track.id}: {shown}; fix: answer the tasks of this track "
            f"(pstbench vab export --track {track.id}) or pass the track the answers belong to"
        )


def _file_text(path: Path) -> tuple[bytes, str]:
    """An answers file's bytes and its text (UTF-8, a BOM allowed); missing or not UTF-8: a UserError."""
    if not path.is_file():
        raise UserError(
            f"{path}: answers file not found; fix: give a JSON Lines file with one answer per task, trial and prompt type"
        )
    raw = path.read_bytes()
    try:
        return raw, raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text; fix: write the answers file as UTF-8 JSON Lines") from None


def _request_of(obj: dict, task, params, bad) -> tuple[int, str, int]:
    """(trial, prompt type, attempt) of an answers line of `task`, each checked (`bad(rule)`: the line's UserError)."""
    trial = obj["trial"]
    if isinstance(trial, bool) or not isinstance(trial, int) or not 0 <= trial < params.trials:
        raise bad(f"trial {trial!r} is not one of 0..{params.trials - 1}; fix: use the trial numbers of the export")
    ptype = obj["prompt_type"]
    if ptype not in PROMPT_TYPES:
        raise bad(f"prompt_type {ptype!r} is not one of {', '.join(PROMPT_TYPES)}")
    if ptype not in params.prompt_types_for(task.k):
        raise bad(
            f"task {task.id} has k = {task.k}: {ptype} is not asked (for k = 2 it is derived from pick_best); fix: drop this line"
        )
    attempt = obj.get("attempt", 1)
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise bad(f"attempt {attempt!r} is not a positive integer; fix: number the attempts of a request 1, 2, ...")
    return trial, ptype, attempt


def _line_labels(obj: dict, ptype: str, k: int, params, out: AnswerSet, bad) -> tuple[dict, str, str | None]:
    """(labels, status, detail) of an answers line: its API error, its given labels or its parsed response (counting
    the reasoning blocks removed or returned apart in `out`)."""
    needs = _needs(ptype)
    if "error" in obj and obj["error"] not in (None, "", False):
        return {n: None for n in needs}, ERROR, f"API error: {obj['error']}"
    if any(n in obj for n in ("best", "worst")):
        labels, problems = {}, []
        valid = params.labels[:k]
        for n in needs:
            v = obj.get(n)
            lab = v.strip().upper() if isinstance(v, str) else None
            if lab in valid:
                labels[n] = lab
            else:
                labels[n] = None
                problems.append(f"{n} {v!r} is not one of {', '.join(valid)}")
        return (labels, UNPARSEABLE, "; ".join(problems)) if problems else (labels, OK, None)
    if "response" in obj:
        if not isinstance(obj["response"], str):
            return {n: None for n in needs}, UNPARSEABLE, "response is not a string"
        separated = REASONING in obj
        found = parse_response(obj["response"], ptype, k, params, separated)
        if separated:
            out.reasoning_separate += 1
        elif content_seen(obj["response"], params)[1]:
            out.reasoning_removed += 1
        return found
    raise bad(
        "has neither response, error nor best/worst; fix: give the raw response (or the API error, or the parsed labels)"
    )


def answer_record(best: int | None, worst: int | None, status: str, detail: str | None = None) -> dict:
    return {"best": best, "worst": worst, "status": status, "detail": detail}


def task_answers_from_file(task, answer_set: AnswerSet, params) -> dict[str, list[dict]]:
    """Answers of one task, per prompt type and trial, mapped back to dataset indices."""
    orders = orders_for(task, params)
    labels = params.labels
    result: dict[str, list[dict]] = {}
    for ptype in params.prompt_types_for(task.k):
        per_trial = []
        for t, order in enumerate(orders):
            entry = answer_set.entries.get((task.id, t, ptype))
            if entry is None:
                per_trial.append(answer_record(None, None, MISSING, "no answer"))
                continue
            found, status, detail, _line, _attempt = entry
            idx = {n: (order[labels.index(v)] if v is not None else None) for n, v in found.items()}
            per_trial.append(answer_record(idx.get("best"), idx.get("worst"), status, detail))
        result[ptype] = per_trial
    return complete_derived(task, result, params)


def complete_derived(task, answers: dict[str, list[dict]], params) -> dict[str, list[dict]]:
    """For k = 2, pick_best_and_worst is derived from the same trial's pick_best answer (worst = the
    other candidate), as the official toolkit does; a trial whose pick_best has no parsed label (or is an
    API error, or missing) has no pick_best_and_worst record (status missing)."""
    if task.k == 2 and "pick_best_and_worst" not in answers and "pick_best" in answers:
        derived = []
        for a in answers["pick_best"]:
            b = a["best"]
            if a["status"] == OK and b is not None:
                derived.append(answer_record(b, 1 - b, OK))
            else:
                derived.append(answer_record(None, None, MISSING, f"derived from pick_best, which is {a['status']}"))
        answers = {**answers, "pick_best_and_worst": derived}
    return answers


def retry_requests(track, answer_set: AnswerSet, params) -> dict[tuple[str, int, str], int]:
    """The re-ask list: {(task_id, trial, prompt_type): next attempt} for each request whose latest answer
    is one the protocol retries (answers.attempts.retry_on: unparseable, error) and whose attempts are
    below answers.attempts.max. Missing answers are not listed (they are in the full export)."""
    att = params.attempts
    retry_on = set(att["retry_on"])
    out = {}
    for task in track.tasks:
        for t in range(params.trials):
            for ptype in params.prompt_types_for(task.k):
                entry = answer_set.entries.get((task.id, t, ptype))
                if entry is None:
                    continue
                _found, status, _detail, _line, attempt = entry
                if status in retry_on and attempt < att["max"]:
                    out[(task.id, t, ptype)] = attempt + 1
    return out
