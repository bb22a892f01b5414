"""What a selection run's files must agree on before any number of it is read (`compare.validate_run`, the
kind's `RunKind.validate`, so every front door: compare, the gates, table, report, the API, `runs ls`).

Nothing a run states about itself is believed: each task's trial answers are rebuilt from per_task.csv's
picks (`best_t`, `worst_t`, `bw_best_t`, `bw_worst_t`) and run.json's `answers.problems` (the status of every
trial that is not ok; k = 2 best+worst answers derived from pick_best, `answers.complete_derived`); the
correctness cells are recomputed from those answers and the row's labels (`accuracy.trial_outcomes`), and
summary.json's cells from those outcomes (`accuracy.aggregate`, the bootstrap included: the run's own seed
makes it exact). Completeness is what the files show: a task whose every trial is missing or an API error
was not answered, and a run with such a task is not complete, whatever run.json says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pytest_pstbench.core.errors import UserError

FIX = "fix: score that run again with this kit (or give another baseline)"
NO_ANSWER = "no answer: every trial of every prompt type is missing or an API error"
PICK_COLUMNS = {
    "pick_best": (("best", "best_t"),),
    "pick_worst": (("worst", "worst_t"),),
    "pick_best_and_worst": (("best", "bw_best_t"), ("worst", "bw_worst_t")),
}


@dataclass(frozen=True)
class RowTask:
    """A task as a run's per_task.csv row states it (what accuracy.trial_outcomes and aggregate read)."""

    id: str
    domain: str
    topic: str
    k: int
    best: int
    worst: int


def unanswered(answers: dict[str, list[dict]], params, k: int) -> bool:
    """True when no asked trial of the task has an answer (each is missing or an API error)."""
    from pytest_pstbench.selection.answers import ERROR, MISSING

    return all(a["status"] in (MISSING, ERROR) for p in params.prompt_types_for(k) for a in answers[p])


def _int(value: str, lo: int, hi: int, where: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = None
    if n is None or str(n) != value or not lo <= n < hi:
        raise UserError(f"{where} is {value!r}, not a whole number in {lo}..{hi - 1}; {FIX}")
    return n


def trial_statuses(run, params) -> dict[tuple[str, int, str], str]:
    """run.json answers.problems as (task, trial, prompt type) -> status, each entry checked."""
    from pytest_pstbench.selection.answers import ERROR, MISSING, UNPARSEABLE

    where = run.path / "run.json"
    answers = run.run.get("answers")
    problems = answers.get("problems") if isinstance(answers, dict) else None
    if not isinstance(problems, list):
        raise UserError(f"{where}: answers.problems is not a list of the trials that are not ok; {FIX}")
    out: dict[tuple[str, int, str], str] = {}
    for i, p in enumerate(problems):
        ok = (
            isinstance(p, dict)
            and isinstance(p.get("task"), str)
            and isinstance(p.get("trial"), int)
            and not isinstance(p.get("trial"), bool)
            and 0 <= p["trial"] < params.trials
            and p.get("prompt_type") in PICK_COLUMNS
            and p.get("status") in (MISSING, UNPARSEABLE, ERROR)
        )
        key = (p["task"], p["trial"], p["prompt_type"]) if ok else None
        if not ok or key in out:
            raise UserError(
                f"{where}: answers.problems[{i}] is {p!r}, not one trial (task, trial, prompt_type) with status "
                f"missing, unparseable or error, listed once; {FIX}"
            )
        out[key] = p["status"]
    counts = {s: sum(1 for v in out.values() if v == s) for s in (MISSING, UNPARSEABLE, ERROR)}
    for status, n in counts.items():
        if answers.get(status) != n:
            raise UserError(
                f"{where}: answers.{status} is {answers.get(status)!r} but answers.problems lists {n}; {FIX}"
            )
    return out


def rebuilt(run, params, answers_out: list | None = None) -> tuple[list[RowTask], list[dict], list[str]]:
    """(the scored tasks, their trial outcomes, the unanswered tasks) of a run, from its files; a per_task.csv
    cell that disagrees with them is refused with the file, the task and the column. `answers_out`, when given,
    receives each scored task's rebuilt answers (in the order of the tasks returned)."""
    from pytest_pstbench.selection.accuracy import trial_outcomes
    from pytest_pstbench.selection.answers import OK, answer_record, complete_derived

    f = run.path / "per_task.csv"
    statuses = trial_statuses(run, params)
    tasks, outcomes, no_answer = [], [], []
    for tid in run.task_ids:
        row = run.rows[tid]
        if row.get("error"):
            continue
        k = _int(row.get("k", ""), params.k_min, params.k_max + 1, f"{f}: task {tid}: k")
        task = RowTask(
            tid,
            row.get("domain", ""),
            row.get("topic", ""),
            k,
            _int(row.get("best", ""), 0, k, f"{f}: task {tid}: best"),
            _int(row.get("worst", ""), 0, k, f"{f}: task {tid}: worst"),
        )
        answers: dict[str, list[dict]] = {}
        for ptype in params.prompt_types_for(k):
            trials = []
            for t in range(params.trials):
                picks = {}
                for which, col in PICK_COLUMNS[ptype]:
                    cell = row.get(f"{col}{t}")
                    if cell is None:
                        raise UserError(f"{f}: no column {col}{t}; fix: score the run again under this protocol")
                    picks[which] = None if cell == "" else _int(cell, 0, k, f"{f}: task {tid}: {col}{t}")
                status = statuses.get((tid, t, ptype), OK)
                if status == OK and any(v is None for v in picks.values()):
                    raise UserError(
                        f"{f}: task {tid}: trial {t} {ptype} has no pick but run.json answers.problems "
                        f"does not list it as missing, unparseable or an error; {FIX}"
                    )
                trials.append(answer_record(picks.get("best"), picks.get("worst"), status))
            answers[ptype] = trials
        answers = complete_derived(task, answers, params)
        if k == 2:  # the derived best+worst answers the row shows
            for t, a in enumerate(answers["pick_best_and_worst"]):
                for which, col in PICK_COLUMNS["pick_best_and_worst"]:
                    shown = row.get(f"{col}{t}")
                    if shown != ("" if a[which] is None else str(a[which])):
                        raise UserError(
                            f"{f}: task {tid}: {col}{t} is {shown!r} but it is derived from pick_best "
                            f"({'' if a[which] is None else a[which]!r}); {FIX}"
                        )
        if unanswered(answers, params, k):
            no_answer.append(tid)
            continue
        out = trial_outcomes(task, answers, params)
        for m in params.metrics:
            for t, rec in enumerate(out[m]):
                col = f"{m}_t{t}"
                if col not in row:
                    raise UserError(f"{f}: no column {col}; fix: score the run again under this protocol")
                if row[col] not in ("0", "1", "-"):
                    raise UserError(
                        f"{f}: task {tid}: {col} is {row[col]!r}, expected 0, 1 or - (task not scored?); "
                        "fix: score the run again"
                    )
                want = str(int(rec["correct"])) if rec["rule"] == "counted" else "-"
                if row[col] != want:
                    raise UserError(
                        f"{f}: task {tid}: {col} is {row[col]} but its picks and labels give {want} "
                        f"(run.json answers.problems for the trials that are not ok); {FIX}"
                    )
        tasks.append(task)
        outcomes.append(out)
        if answers_out is not None:
            answers_out.append(answers)
    return tasks, outcomes, no_answer


def _same(stated, expected) -> bool:
    if isinstance(expected, float):
        return (
            isinstance(stated, (int, float))
            and not isinstance(stated, bool)
            and math.isfinite(stated)
            and math.isclose(stated, expected, rel_tol=1e-9, abs_tol=1e-12)
        )
    if isinstance(expected, list):
        return isinstance(stated, list) and len(stated) == len(expected) and all(map(_same, stated, expected))
    return type(stated) is type(expected) and stated == expected


CI_KEYS = ("ci_low", "ci_high", "pm")
#: the cells whose bootstrap CIs are recomputed (the overall cell: what tables and gates read); elsewhere every
#: other number is recomputed and the CI only checked to be an interval with pm half its width (recomputing
#: every cell's bootstrap took ~8 s on a 400-task track, the overall cell's ~1.9 s; vab-demo: 1.3 s against 0.14 s)
CI_GROUPS = ("overall",)


def _check_entry(path, where: str, stated, expected, ci: bool) -> None:
    if not isinstance(stated, dict):
        raise UserError(f"{path}: {where} is {stated!r}, not the entry per_task.csv gives; {FIX}")
    if not ci:
        low, high, pm = (stated.get(k) for k in CI_KEYS)
        if (None in (low, high, pm)) != (expected.get("mean") is None) or (
            None not in (low, high, pm)
            and not (low <= high and math.isclose(pm, (high - low) / 2, rel_tol=1e-9, abs_tol=1e-12))
        ):
            raise UserError(
                f"{path}: {where} CI [{low!r}, {high!r}] ± {pm!r} is not an interval with pm half its width "
                f"(null only where per_task.csv counts nothing); {FIX}"
            )
        stated = {k: v for k, v in stated.items() if k not in CI_KEYS}
        expected = {k: v for k, v in expected.items() if k not in CI_KEYS}
    for key in sorted(set(stated) | set(expected), key=lambda k: (k != "mean", k)):
        if not _same(stated.get(key, KeyError), expected.get(key, KeyError)):
            raise UserError(
                f"{path}: {where} {key} is {stated.get(key)!r} but per_task.csv gives {expected.get(key)!r}; {FIX}"
            )


def check_summary_cells(path, cells, tasks: list[RowTask], outcomes: list[dict], params) -> None:
    """summary.json's cells are the ones `accuracy.aggregate` gives from the rebuilt outcomes (relative 1e-9)."""
    from pytest_pstbench.selection.accuracy import aggregate

    expected = aggregate(tasks, outcomes, params, ci_groups=CI_GROUPS) if tasks else []
    stated = {(c.get("group"), c.get("value")): c for c in cells}
    for cell in expected:
        where, ci = f"cell {cell['group']}={cell['value']}", cell["group"] in CI_GROUPS
        mine = stated.pop((cell["group"], cell["value"]), None)
        if mine is None:
            raise UserError(f"{path}: no {where}, which per_task.csv gives; {FIX}")
        if not _same(mine.get("n"), cell["n"]):
            raise UserError(f"{path}: {where}: n is {mine.get('n')!r} but per_task.csv gives {cell['n']}; {FIX}")
        for m, aggs in cell["metrics"].items():
            for agg, e in aggs.items():
                _check_entry(path, f"{where}: {m} {agg}", ((mine.get("metrics") or {}).get(m) or {}).get(agg), e, ci)
        for part, aggs in (cell.get("tb1_parts") or {}).items():
            for agg, e in aggs.items():
                _check_entry(
                    path,
                    f"{where}: tb1_parts {part} {agg}",
                    ((mine.get("tb1_parts") or {}).get(part) or {}).get(agg),
                    e,
                    ci,
                )
    if stated:
        group, value = next(iter(stated))
        raise UserError(f"{path}: cell {group}={value} has no task in per_task.csv; {FIX}")


def check_labels_against_track(run, track) -> None:
    """Each task row's domain, topic, k and labels are the track's (where the track is at hand: the gate)."""
    f = run.path / "per_task.csv"
    tasks = {t.id: t for t in track.tasks}
    for tid in run.task_ids:
        task, row = tasks.get(tid), run.rows[tid]
        if task is None:
            raise UserError(f"{f}: task {tid} is not a task of track {track.id}; {FIX}")
        for col, want in (
            ("domain", task.domain),
            ("topic", task.topic),
            ("k", task.k),
            ("best", task.best),
            ("worst", task.worst),
        ):
            if row.get(col) != str(want):
                raise UserError(f"{f}: task {tid}: {col} is {row.get(col)} but track {track.id} says {want}; {FIX}")


def seeds(run) -> dict[str, object]:
    """Task id -> permutation seed of a run's rows: the id itself, or its int where run.json `int_seeds` says so
    ("all", or the list of those task ids; absent: every seed is the id as a string)."""
    where = run.path / "run.json"
    listed = run.run.get("int_seeds", [])
    if listed == "all":
        listed = list(run.task_ids)
    if not isinstance(listed, list) or not all(isinstance(t, str) and t in run.rows for t in listed):
        raise UserError(
            f'{where}: int_seeds is {run.run.get("int_seeds")!r}, not "all" or a list of the run\'s task ids; {FIX}'
        )
    out: dict[str, object] = {tid: tid for tid in run.task_ids}
    for tid in listed:
        try:
            n = int(tid)
        except ValueError:
            n = None
        if n is None or str(n) != tid:
            raise UserError(f"{where}: int_seeds names task {tid!r}, whose id is not an integer; {FIX}")
        out[tid] = n
    return out


def check_position_bias(run, tasks: list[RowTask], answers: list[dict], params, protocol) -> None:
    """summary.json `position_bias` is what the rebuilt answers and the display orders give (a run written before
    it existed has none: nothing to check)."""
    from types import SimpleNamespace

    from pytest_pstbench.selection.permutations import orders_for
    from pytest_pstbench.selection.position_bias import summary_of

    path = run.path / "summary.json"
    stated = run.summary.get("position_bias", KeyError)
    by_id = seeds(run)  # checked even then
    if stated is KeyError:
        return
    orders = [orders_for(SimpleNamespace(seed=by_id[t.id], k=t.k), params) for t in tasks]
    expected = summary_of(tasks, answers, orders, params, protocol, run.summary.get("human") is not None)
    if not _same_tree(stated, expected):
        raise UserError(f"{path}: position_bias is not what per_task.csv's picks and the display orders give; {FIX}")


def _same_tree(stated, expected) -> bool:
    if isinstance(expected, dict):
        return (
            isinstance(stated, dict)
            and set(stated) == set(expected)
            and all(_same_tree(stated[k], v) for k, v in expected.items())
        )
    if isinstance(expected, list):
        return isinstance(stated, list) and len(stated) == len(expected) and all(map(_same_tree, stated, expected))
    return _same(stated, expected)


def check_usage_and_cost(run) -> None:
    """summary.json's `usage` is run.json judge.usage, and its `cost` run.json judge.cost's totals; judge.cost is
    checked against judge.usage: its lines add up, its per-task costs sum to its total, and under one price row its
    total and per-prompt-type costs are the usage x the prices (`pricing.call_cost`). A run without them has none."""
    from pytest_pstbench.selection.ask.pricing import SUMMARY_KEYS, Price, call_cost

    path, where = run.path / "summary.json", run.path / "run.json"
    judge = run.run.get("judge") if isinstance(run.run.get("judge"), dict) else {}
    stated_usage, usage = run.summary.get("usage", KeyError), judge.get("usage", KeyError)
    if stated_usage is not KeyError and not _same_tree(stated_usage, usage):
        raise UserError(f"{path}: usage is not run.json's judge.usage; {FIX}")
    stated, cost = run.summary.get("cost", KeyError), judge.get("cost", KeyError)
    if stated is KeyError and cost is KeyError:
        return
    if (
        not isinstance(cost, dict)
        or stated is KeyError
        or not _same_tree(stated, {k: cost.get(k) for k in SUMMARY_KEYS})
    ):
        raise UserError(
            f"{path}: cost is not run.json's judge.cost totals (currency, total, lines_priced, lines_unknown, "
            f"by_prompt_type), or only one of them has a cost; {FIX}"
        )

    def bad(rule: str) -> UserError:
        return UserError(f"{where}: judge.cost {rule}; {FIX}")

    def amount(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0

    priced, unknown, total = cost.get("lines_priced"), cost.get("lines_unknown"), cost.get("total")
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (priced, unknown)):
        raise bad(f"lines_priced {priced!r} / lines_unknown {unknown!r} are not counts")
    counts = usage if isinstance(usage, dict) else {}
    lines = [counts.get(k, 0) for k in ("lines_with_usage", "lines_without_usage", "lines_not_recorded")]
    if usage is KeyError and not priced:  # no line records usage (a file written by hand): nothing priced
        pass
    elif priced != lines[0] or unknown != lines[1] + lines[2]:
        raise bad(
            f"prices {priced} lines and leaves {unknown} unknown, but judge.usage has {lines[0]} lines with usage "
            f"and {lines[1] + lines[2]} without"
        )
    if (total is None) != (priced == 0) or (total is not None and not amount(total)):
        raise bad(f"total is {total!r}: a sum of money where some line has usage, null where none has")
    by_type, per_task, prices = cost.get("by_prompt_type"), cost.get("per_task"), cost.get("prices")
    if (
        not isinstance(by_type, dict)
        or not all(amount(v) for v in by_type.values())
        or not math.isclose(sum(by_type.values()), total or 0.0, rel_tol=1e-9, abs_tol=1e-12)
    ):
        raise bad("by_prompt_type does not add up to its total")
    if not isinstance(per_task, dict) or not all(
        t in run.rows and isinstance(v, list) and all(c is None or amount(c) for c in v) for t, v in per_task.items()
    ):
        raise bad("per_task is not the run's tasks -> a cost (or null) per trial")
    known = [c for v in per_task.values() for c in v if c is not None]
    if not unknown and not math.isclose(sum(known), total or 0.0, rel_tol=1e-9, abs_tol=1e-12):
        raise bad(f"per_task adds up to {sum(known)!r}, not its total {total!r}")
    if not isinstance(prices, dict) or not all(
        isinstance(p, dict) and all(amount(p.get(k)) for k in ("in", "out", "cached_in")) for p in prices.values()
    ):
        raise bad("prices is not model -> in, out, cached_in (money per million tokens)")
    if len(prices) == 1 and priced:  # one price row: every priced line is the usage x that price
        row = next(iter(prices.values()))
        price = Price(row["in"], row["out"], row["cached_in"], str(row.get("currency")))
        try:
            want = {
                "total": call_cost(counts["tokens"], price),
                **{k: call_cost(v, price) for k, v in counts["by_prompt_type"].items()},
            }
        except (KeyError, TypeError, AttributeError):
            raise bad("prices lines but judge.usage holds no token counts to price") from None
        got = {"total": total, **by_type}
        if set(got) != set(want) or not all(_same(got[k], float(want[k])) for k in want):
            raise bad("is not judge.usage's tokens x its prices")
