"""One selection run: per-task results (also from xdist workers), aggregation, run files.

Run files under `results/<track>/<name>/`, the folder replaced as a whole under a lock (`selection.runs.write_run`):

* `per_task.csv`: one row per task in track order: task_id, domain, topic, k, the consensus best and
  worst (dataset indices), then per trial t the answers as dataset indices (`best_t` from
  pick_best, `worst_t` from pick_worst, `bw_best_t` / `bw_worst_t` from pick_best_and_worst; empty
  when missing or unparseable) and per metric the correctness (`top1_t` ... 1 or 0), then the
  judge's scores (scoring-function judges) and the error of a task that could not be scored (a task
  whose every trial is missing or an API error was not answered: its error says so, it is not scored and
  the run is not complete). A correctness cell is "-" when the trial is not counted (the protocol's
  answers.records).
* `summary.json`: every cell (overall, domain, topic, k) with n and, per metric and aggregation,
  mean, CI, pm, the random baseline, tasks/trials counted and per-trial accuracies, and tb1_parts
  (best-only / worst-only accuracy inside best+worst answers); with a votes file (the track's `votes:`,
  or --votes), `human`: the leave-one-out human reference row (`selection.human`). Depends only on the
  inputs and the protocol. A model run whose answers record token usage adds `usage` (run.json judge.usage)
  and, when priced (`selection.ask.pricing`), `cost` (run.json judge.cost's totals).
* `run.json`: protocol id + sha256, track, dataset revision, judge provenance, answer counts
  (expected, missing, unparseable, error, the parser, and each problem), failures, completeness, environment, command.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from pytest_pstbench.core.environment import environment, git_provenance
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.store.folder import RUN_FORMAT, ItemResult
from pytest_pstbench.selection.answers import ERROR, MISSING, OK, UNPARSEABLE
from pytest_pstbench.selection.protocol import SelectionParams
from pytest_pstbench.selection.run_check import NO_ANSWER


@dataclass
class TaskResult(ItemResult):
    ID_FIELD: ClassVar[str] = "task_id"
    VALUE_FIELD: ClassVar[str] = "answers"

    task_id: str
    answers: dict | None = None  # prompt type -> per trial {best, worst, status, detail}
    scores: list | None = None  # scoring-function judges: mean score per candidate (dataset order)
    error: str | None = None


@dataclass
class SelectionOutcome:
    run_dir: Path
    summary: dict
    run: dict
    per_task: str = field(repr=False, default="")

    @property
    def complete(self) -> bool:
        return bool(self.run["complete"])


PACKAGES = ("numpy", "pillow", "scikit-image")  # what a selection run computes with


class SelectionSession:
    """The state of one run of a judge over a selection track. The CLI and the plugin drive it."""

    def __init__(
        self,
        track,
        protocol,
        *,
        name: str,
        results_dir: Path | str = "results",
        judge: dict | None = None,
        command: str | None = None,
        votes: Path | str | None = None,
        human: dict | None = None,
        stopped: str | None = None,
    ):
        from pytest_pstbench.core.store import names as _runs

        _runs.check_run_name(name)
        from pytest_pstbench.selection.tracks import check_track

        self.params = SelectionParams.of(protocol)
        check_track(track, self.params)
        self.track = track
        self.protocol = protocol
        self.name = name
        self.results_dir = Path(results_dir)
        _runs.check_results_writable(self.run_dir, self.results_dir)
        self.judge = dict(judge or {})
        self.command = command if command is not None else " ".join(sys.argv)
        self.baselines: list[dict] = []  # a gated session's baselines (pinned records), set by the pytest frame
        self.results: dict[str, TaskResult] = {}
        self.stopped = (
            stopped  # why the model run stopped before asking everything (its budget): the run is not complete
        )
        self.unanswered: list[str] = []  # tasks whose every trial is missing or an API error (set by finish)
        # results computed in other processes (pytest-xdist workers): [(their environment, worker id, task id)]
        self.computed_in: list[tuple[dict, str | None, str]] | None = None
        # the human reference row: from the votes file given, else the track's (`votes:`); computed (and a bad
        # votes file refused) before anything is scored; `human`: that row already computed (`votes_and_human`)
        self.votes, self.human = (
            (Path(votes), human) if human is not None else votes_and_human(track, self.params, votes)
        )

    @property
    def run_dir(self) -> Path:
        return self.results_dir / self.track.id / self.name

    # ---- scoring ---------------------------------------------------------------------------------
    def score_task_from_answers(self, task, answer_set) -> TaskResult:
        from pytest_pstbench.selection.answers import task_answers_from_file

        return TaskResult(task.id, answers=task_answers_from_file(task, answer_set, self.params))

    def score_task_with_judge(self, task, judge) -> TaskResult:
        from pytest_pstbench.selection.judges import JudgeFailure, answers_from_scores, score_candidates

        try:
            scores = score_candidates(task, judge)
        except JudgeFailure as exc:
            return TaskResult(task.id, error=str(exc))
        return TaskResult(task.id, answers=answers_from_scores(task, scores, self.params), scores=scores)

    def add(self, result: TaskResult) -> None:
        self.results[result.task_id] = result

    # ---- aggregation -----------------------------------------------------------------------------
    def finish(self, write: bool = True) -> SelectionOutcome:
        from pytest_pstbench.selection.accuracy import aggregate, trial_outcomes

        order = [t for t in self.track.tasks if t.id in self.results]
        if not order:
            raise UserError(
                f"track {self.track.id}: no task was scored, so no run files were written; fix: check the judge or answers"
            )
        from pytest_pstbench.selection.run_check import unanswered

        # a task whose every trial is missing or an API error was not answered: not scored, and the run not complete
        self.unanswered = [
            t.id for t in order if self.results[t.id].ok and unanswered(self.results[t.id].answers, self.params, t.k)
        ]
        scored = [t for t in order if self.results[t.id].ok and t.id not in self.unanswered]
        correct = {t.id: trial_outcomes(t, self.results[t.id].answers, self.params) for t in scored}
        cells = aggregate(scored, [correct[t.id] for t in scored], self.params) if scored else []
        complete = len(scored) == len(self.track.tasks) and not self.stopped
        summary = {
            "track": self.track.id,
            "kind": "selection",
            "protocol": self.protocol.id,
            "dataset_revision": self.track.revision,
            "name": self.name,
            "n": len(scored),
            "n_tasks": len(self.track.tasks),
            "complete": complete,
            "trials": self.params.trials,
            "cells": cells,
        }
        if self.human is not None:
            summary["human"] = self.human
        from pytest_pstbench.selection.permutations import orders_for
        from pytest_pstbench.selection.position_bias import summary_of

        summary["position_bias"] = summary_of(
            scored,
            [self.results[t.id].answers for t in scored],
            [orders_for(t, self.params) for t in scored],
            self.params,
            self.protocol,
            self.human is not None,
        )
        if "usage" in self.judge:  # a model run's token totals (run.json judge.usage) and cost (judge.cost)
            summary["usage"] = self.judge["usage"]
        if "cost" in self.judge:
            from pytest_pstbench.selection.ask.pricing import summary_cost

            summary["cost"] = summary_cost(self.judge["cost"])
        per_task = self._per_task_csv(order, correct)
        run = self._run_record(order, scored, complete)
        outcome = SelectionOutcome(self.run_dir, summary, run, per_task)
        if write:
            from pytest_pstbench.selection.runs import write_run

            write_run(self.run_dir, per_task, summary, run)  # the folder replaced whole, under the run's lock
        return outcome

    def _per_task_csv(self, order, correct) -> str:
        trials = range(self.params.trials)
        metrics = list(self.params.metrics)
        header = ["task_id", "domain", "topic", "k", "best", "worst"]
        for t in trials:
            header += [f"best_t{t}", f"worst_t{t}", f"bw_best_t{t}", f"bw_worst_t{t}"] + [f"{m}_t{t}" for m in metrics]
        header += ["scores", "error"]
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(header)

        def cell(v):
            return "" if v is None else str(v)

        for task in order:
            r = self.results[task.id]
            row = [task.id, task.domain, task.topic, task.k, task.best, task.worst]
            answered = r.ok and task.id in correct
            for t in trials:
                if answered:
                    a = r.answers
                    pb = a.get("pick_best", [{}] * len(trials))[t]
                    pw = a.get("pick_worst", [{}] * len(trials))[t]
                    bw = a.get("pick_best_and_worst", [{}] * len(trials))[t]
                    row += [cell(pb.get("best")), cell(pw.get("worst")), cell(bw.get("best")), cell(bw.get("worst"))]
                    recs = [correct[task.id][m][t] for m in metrics]  # "-": the trial is not counted (answers.records)
                    row += [int(r["correct"]) if r["rule"] == "counted" else "-" for r in recs]
                else:
                    row += [""] * (4 + len(metrics))
            row.append(";".join(repr(float(s)) for s in r.scores) if r.scores is not None else "")
            row.append(r.error or ("" if answered else NO_ANSWER))
            w.writerow(row)
        return buf.getvalue()

    def environment(self) -> dict:
        """The environment this process computes the run's values in (run.json's `environment`)."""
        if not hasattr(self, "_environment"):  # ~10 ms (package metadata): once per process
            self._environment = environment(PACKAGES)
        return self._environment

    def _answer_tally(self, order) -> tuple[dict, list]:
        """The counts of the answered tasks' trials by status (run.json `answers`) and the trials not OK."""
        expected = missing = unparseable = errors = 0
        problems = []
        for task in [t for t in order if self.results[t.id].ok]:  # the unanswered tasks' trials are counted too
            answers = self.results[task.id].answers
            for ptype in self.params.prompt_types_for(task.k):  # derived answers are not counted
                for t, a in enumerate(answers[ptype]):
                    expected += 1
                    if a["status"] == MISSING:
                        missing += 1
                    elif a["status"] == UNPARSEABLE:
                        unparseable += 1
                    elif a["status"] == ERROR:
                        errors += 1
                    if a["status"] != OK:
                        problems.append(
                            {
                                "task": task.id,
                                "trial": t,
                                "prompt_type": ptype,
                                "status": a["status"],
                                "detail": a["detail"],
                            }
                        )
        counts = {"expected": expected, "missing": missing, "unparseable": unparseable, "error": errors}
        return counts, problems

    def _deviations(self, counts) -> list:
        """run.json `deviations` before the environment's: tasks not scored or answered, answers not OK, a stop,
        a revision override."""
        not_scored = [t.id for t in self.track.tasks if t.id not in self.results]
        deviations = []
        if not_scored:
            deviations.append({"kind": "tasks_not_scored", "tasks": not_scored})
        if self.unanswered:
            deviations.append({"kind": "tasks_not_answered", "tasks": list(self.unanswered)})
        if counts["missing"] or counts["unparseable"] or counts["error"]:
            rules = {
                st: {p: self.params.record_rule(st, p) for p in ("pick_best", "pick_worst", "pick_best_and_worst")}
                for st in (MISSING, ERROR, UNPARSEABLE)
            }
            deviations.append(
                {
                    "kind": "answers_not_ok",
                    "missing": counts["missing"],
                    "unparseable": counts["unparseable"],
                    "error": counts["error"],
                    "records": rules,
                }
            )
        if self.stopped:
            deviations.append({"kind": "run_stopped", "reason": self.stopped})
        if self.track.info.get("revision_override"):  # fetched with --revision X --allow-other-revision
            deviations.append({"kind": "revision_override", **self.track.info["revision_override"]})
        return deviations

    def _run_record(self, order, scored, complete) -> dict:
        from pytest_pstbench.core.environment import run_environment

        counts, problems = self._answer_tally(order)
        deviations = self._deviations(counts)
        env, differs = run_environment(self.environment(), self.computed_in, [t.id for t in order], "task")
        if differs:
            deviations.append(differs)
        record = {
            "format": RUN_FORMAT,
            "protocol": {"id": self.protocol.id, "sha256": self.protocol.sha256, "path": str(self.protocol.path)},
            "kind": "selection",
            "track": self.track.id,
            "dataset": {"id": self.track.dataset_id, "revision": self.track.revision, "source": self.track.source},
            "name": self.name,
            "complete": complete,
            "n_tasks": len(self.track.tasks),
            "n_scored": len(scored),
            "trials": self.params.trials,
            "judge": self.judge,
            "answers": {
                **counts,
                "parser": {
                    "patterns": self.params.data["answers"]["patterns"],
                    "match": self.params.answer_match,
                    "flags": list(self.params.data["answers"].get("flags") or []),
                },
                "problems": problems,
            },
            "failures": [
                {"task": t.id, "message": self.results[t.id].error or NO_ANSWER}
                for t in order
                if not self.results[t.id].ok or t.id in self.unanswered
            ],
            "deviations": deviations,
            "environment": env,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": self.command,
            **({"baselines": self.baselines} if self.baselines else {}),  # what a gated run was compared against
            "git": git_provenance(),  # the working folder's repository (outputs: null, a judge has none)
        }
        int_seeds = [t.id for t in self.track.tasks if isinstance(t.seed, int)]
        if int_seeds:  # tasks whose permutation seed is an int (their display orders; summary.json position_bias)
            record["int_seeds"] = "all" if len(int_seeds) == len(self.track.tasks) else int_seeds
        if self.votes is not None:  # the human reference row's votes (summary.json `human`)
            record["human"] = {
                "votes": str(self.votes),
                "sha256": self.human["votes_sha256"],
                "experts": self.human["experts"],
            }
        return record


def votes_and_human(track, params, votes: Path | str | None = None) -> tuple[Path | None, dict | None]:
    """The votes file of a run (`votes`, else the track's `votes:`) and its human reference row (summary.json
    `human`), or (None, None). A front door that asks a model first calls it before asking, so that a bad votes
    file is refused before any request."""
    path = Path(votes) if votes is not None else getattr(track, "votes", None)
    if path is None:
        return None, None
    from pytest_pstbench.selection.human import human_reference

    return path, human_reference(track, path, params)


def score_all(session: SelectionSession, *, answer_set=None, judge=None, progress=None) -> SelectionOutcome:
    """Score every task of the track (from an answers file or with a judge), aggregate and write."""
    n = len(session.track.tasks)
    for i, task in enumerate(session.track.tasks, 1):
        if answer_set is not None:
            result = session.score_task_from_answers(task, answer_set)
        else:
            result = session.score_task_with_judge(task, judge)
        session.add(result)
        if progress:
            progress(f"[{i}/{n}] {task.id} {'ok' if result.ok else 'FAILED'}")
    return session.finish()
