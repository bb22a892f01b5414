"""The human reference row of a selection track: each expert of a votes file scored as a judge against
the consensus of the other experts (leave-one-out), then the mean over experts.

Votes: the consensus filter's file (`task_id,k,judge,best,worst`, read by `consensus.read_votes`); a track
points to it with `votes:` in its track.yaml (vab-demo ships its simulated panel's), or `--votes FILE`.
A vote names a candidate by its 0-based index in the track's `candidates`, its `label` (a candidate
mapping's key, as the letters of the `vab` track), its file path as the manifest gives it, or its file
name; a name that fits two candidates, or none, is refused. Names are resolved to candidates before votes
are counted (forms may be mixed row by row). Votes for tasks the track does not have (tasks
the filter rejected) are ignored and counted; a task's k must be the track's.

The rule, for expert e and task t with n voters (e among them):

* the target is the consensus of the other n - 1 voters by the filter's rule (`consensus.decide`: the
  most-voted best, and for k >= 3 the most-voted worst, each with at least m' votes; a tie, or one
  candidate both best and worst, is no consensus) with m' = m - 1, where m is the filter's threshold for
  (k, n): `consensus.thresholds[k]` when n is the protocol's `n_judges`, else the smallest m whose null
  pass probability is at most `consensus.alpha` (the alpha rule of `pstbench vab consensus --alpha`).
  m - 1, because e's own vote is what is left out: a task the full panel accepted keeps its consensus
  among the others whether e voted with the majority or not (unless that makes a tie). With m itself,
  every expert who voted with a bare majority would see no consensus and be left out, and every expert
  who voted against it would be scored wrong: a large bias against the experts;
* when the others give no consensus (or there are no others), t is left out for e (counted in `excluded`);
* e's answer in every trial is e's vote (an expert votes once, on one presentation order; for k = 2 the
  worst is the other candidate), scored by the same code as a model's answers (`metrics.trial_outcomes`,
  `metrics.entry_mean`); so an expert's pass^3 equals ap@1 on each task.

Per cell (overall, domain, topic, k) an expert's value is that metric over the expert's tasks in the
cell; the human row is the mean over the experts with a value, with a percentile bootstrap over experts
(`core.stats.bootstrap_mean_ci`, the protocol's aggregation.bootstrap): the interval says how much the row
depends on which experts were asked (not on which tasks). Experts are taken sorted by name, so the row does
not depend on the order of the file's rows. The label says the row's coverage where it rests on part of the
track's tasks (`LABEL_PART`). Linear in the votes: a task's panel is counted once (`loo_target`).
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from pathlib import Path

from pytest_pstbench.core.errors import UserError

LABEL = "Human (leave-one-out, {n} experts)"
LABEL_PART = "Human (leave-one-out, {n} experts, {tasks} of {of} tasks)"  # a row on part of its track says how much


def plural(n: int, word: str) -> str:
    """ "1 task", "3 tasks": a count with its noun (`word` singular; English -s plural)."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def coverage(human: dict) -> str | None:
    """ "3 of 30 tasks" when the row rests on part of its track's tasks, else None (summary.json `human`)."""
    of = human.get("track_tasks")
    if not isinstance(of, int) or isinstance(of, bool) or human.get("tasks") == of:
        return None
    return f"{human.get('tasks')} of {plural(of, 'task')}"


RULE = (
    "each expert's vote is a judge's answer in every trial, scored against the consensus of the other experts: "
    "the protocol's consensus rule with the threshold of the full panel lowered by one; a task without consensus "
    "among the others is left out for that expert"
)
INTERVAL = "percentile bootstrap over experts (aggregation.bootstrap)"


def _candidate_names(task, track) -> dict[str, set[int]]:
    """Every name a vote may use for each candidate of `task`: index, label, path as in the manifest, file name."""
    names: dict[str, set[int]] = {}
    base = Path(track.manifest).parent if track.manifest else None
    infos = task.info.get("candidates") or [{}] * task.k
    for i, path in enumerate(task.candidates):
        forms = {str(i), Path(path).name}
        label = infos[i].get("label") if i < len(infos) and isinstance(infos[i], dict) else None
        if isinstance(label, (str, int)) and not isinstance(label, bool):
            forms.add(str(label))
        if base is not None:
            forms.add(Path(os.path.relpath(path, base)).as_posix())
        for f in forms:
            names.setdefault(f, set()).add(i)
    return names


def read_track_votes(path: Path, track, params) -> tuple[dict[str, dict[str, tuple[int, int]]], list[str], str]:
    """{task id: {expert: (best, worst)}} in track order (dataset indices; for k = 2 the worst is the other
    candidate), the ids of voted tasks the track does not have, and the sha256 of the bytes read. A vote's
    name is resolved to its candidate before votes are counted (an index on one row and the file name on
    another are one candidate)."""
    from pytest_pstbench.selection.consensus import read_votes

    path = Path(path)
    by_id = {t.id: t for t in track.tasks}
    known: dict[str, dict[str, set[int]]] = {}

    def names(task) -> dict[str, set[int]]:
        if task.id not in known:
            known[task.id] = _candidate_names(task, track)
        return known[task.id]

    def candidate(tid: str, name: str):
        task = by_id.get(tid)
        hits = names(task).get(name, ()) if task is not None else ()
        return next(iter(hits)) if len(hits) == 1 else name  # an unknown name: refused below, naming it

    voted = read_votes(path, k_range=(params.k_min, params.k_max), protocol_id=params.protocol.id, candidate=candidate)
    found: dict[str, dict[str, tuple[int, int]]] = {}
    ignored = []
    for tv in voted:
        task = by_id.get(tv.task_id)
        if task is None:
            ignored.append(tv.task_id)
            continue
        if tv.k != task.k:
            raise UserError(
                f"{path}: task {task.id} has k = {tv.k} in the votes but {task.k} candidates in track {track.id}; "
                "fix: give the votes of this track's tasks (--votes, or votes: in its track.yaml)"
            )

        def index(name: str, judge: str) -> int:
            hits = names(task).get(name, set())
            if len(hits) != 1:
                what = (
                    "fits candidates " + " and ".join(map(str, sorted(hits))) if hits else "is none of its candidates"
                )
                raise UserError(
                    f"{path}: task {task.id}: judge {judge} votes {name!r}, which {what}; fix: name a candidate by its 0-based "
                    f"index, its label, its file path as in the track's manifest or its file name (e.g. 0 or "
                    f"{Path(task.candidates[0]).name})"
                )
            return next(iter(hits))

        votes = {}
        for judge, b, w in zip(tv.judges, tv.best, tv.worst):
            bi = index(b, judge)
            wi = index(w, judge) if task.k >= 3 else 1 - bi
            if wi == bi:
                raise UserError(
                    f"{path}: task {task.id}: judge {judge} votes candidate {bi} both best and worst; fix: best and worst must differ"
                )
            votes[judge] = (bi, wi)
        found[task.id] = votes
    return {t.id: found[t.id] for t in track.tasks if t.id in found}, ignored, voted.sha256


class _Thresholds:
    """m(k, n) of the consensus filter: the protocol's table at its n_judges, else the alpha rule at consensus.alpha."""

    def __init__(self, consensus: dict):
        self.consensus = consensus
        self.used: dict[tuple[int, int], int | None] = {}

    def __call__(self, k: int, n: int) -> int | None:
        key = (k, n)
        if key not in self.used:
            table = {int(a): int(b) for a, b in (self.consensus.get("thresholds") or {}).items()}
            if n == int(self.consensus["n_judges"]) and k in table:
                self.used[key] = table[k]
            else:
                from pytest_pstbench.selection.null_model import threshold_for_alpha

                mc = self.consensus.get("monte_carlo") if isinstance(self.consensus.get("monte_carlo"), dict) else {}
                m, _p = threshold_for_alpha(
                    k,
                    n,
                    float(self.consensus["alpha"]),
                    seed=int(mc.get("seed", 0)),
                    confidence=float(mc.get("confidence", 0.95)),
                )
                self.used[key] = m
        return self.used[key]


def loo_target(
    k: int, best_counts: Counter, worst_counts: Counter | None, vote: tuple[int, int], m: int | None
) -> tuple[int, int] | None:
    """The consensus (best, worst) of the other voters at threshold max(1, m - 1), or None when there is none:
    `best_counts` / `worst_counts` count the whole panel's votes (worst None for k = 2), `vote` is the left-out
    voter's. O(k) per voter: the panel is counted once per task, not once per voter."""
    from pytest_pstbench.selection.consensus import decide

    if m is None or sum(best_counts.values()) <= 1:
        return None
    best = best_counts.copy()
    best[vote[0]] -= 1
    worst = None
    if k >= 3:
        worst = worst_counts.copy()
        worst[vote[1]] -= 1
    d = decide(k, best, worst, max(1, m - 1))
    if not d.accepted:
        return None
    return d.best, (d.worst if k >= 3 else 1 - d.best)


def vote_answers(task, best: int, worst: int, params) -> dict[str, list[dict]]:
    """An expert's vote as a judge's answers: the same labels in every trial, every prompt type asked."""
    from pytest_pstbench.selection.answers import OK, answer_record, complete_derived

    one = {"pick_best": (best, None), "pick_worst": (None, worst), "pick_best_and_worst": (best, worst)}
    answers = {p: [answer_record(*one[p], OK) for _ in range(params.trials)] for p in params.prompt_types_for(task.k)}
    return complete_derived(task, answers, params)


def _score_experts(track, votes, threshold, experts, params) -> tuple[dict, dict, list]:
    """Each expert's leave-one-out scored tasks (expert -> [(task view, outcomes)]), their tasks left out for
    no consensus of the others (expert -> count), and the tasks whose full consensus differs from the track's
    labels."""
    from pytest_pstbench.selection.accuracy import trial_outcomes
    from pytest_pstbench.selection.consensus import decide

    scored: dict[str, list] = {e: [] for e in experts}  # expert -> [(task view, outcomes)]
    excluded = {e: 0 for e in experts}
    disagree = []
    by_id = {t.id: t for t in track.tasks}
    for tid, per_task in votes.items():
        task = by_id[tid]
        n = len(per_task)
        m = threshold(task.k, n)
        best_counts = Counter(b for b, _w in per_task.values())
        worst_counts = Counter(w for _b, w in per_task.values()) if task.k >= 3 else None
        full = decide(task.k, best_counts, worst_counts, m) if m is not None else None
        if full is None or not full.accepted or full.best != task.best or (task.k >= 3 and full.worst != task.worst):
            disagree.append(tid)
        for e, (b, w) in sorted(per_task.items()):
            target = loo_target(task.k, best_counts, worst_counts, (b, w), m)
            if target is None:
                excluded[e] += 1
                continue
            view = dataclasses.replace(task, best=target[0], worst=target[1])
            scored[e].append((view, trial_outcomes(view, vote_answers(task, b, w, params), params)))
    return scored, excluded, disagree


def _human_cells(covered, experts, scored, per_expert, params) -> list[dict]:
    """summary.json `human.cells`: per cell, the bootstrap mean over experts of their values."""
    from pytest_pstbench.core.stats import bootstrap_mean_ci
    from pytest_pstbench.selection.accuracy import cells_of

    boot = params.bootstrap
    judged = Counter(v.id for e in experts for v, _o in scored[e])  # judgments per task, counted once
    cells = []
    for group, value, idx in cells_of(covered) if covered else []:
        cell = {
            "group": group,
            "value": value,
            "n_tasks": len(idx),
            "n_judgments": sum(judged[covered[i].id] for i in idx),
            "metrics": {},
        }
        n_experts = 0
        for metric in params.metrics:
            cell["metrics"][metric] = {}
            for agg in params.aggregations:
                values = [
                    per_expert[e][(group, value)][metric][agg] for e in experts if (group, value) in per_expert[e]
                ]
                values = [v for v in values if v is not None]
                n_experts = max(n_experts, len(values))
                if values:
                    ci = bootstrap_mean_ci(
                        values, confidence=boot["confidence"], resamples=boot["resamples"], seed=boot["seed"]
                    )
                    entry = {"mean": ci.mean, "ci_low": ci.ci_low, "ci_high": ci.ci_high, "pm": ci.pm, "n": len(values)}
                else:
                    entry = {"mean": None, "ci_low": None, "ci_high": None, "pm": None, "n": 0}
                cell["metrics"][metric][agg] = entry
        cell["n_experts"] = n_experts
        cells.append(cell)
    return cells


def human_reference(track, votes_path: Path, params) -> dict:
    """summary.json's `human` section: the leave-one-out row per cell, each expert's overall values, and what
    was left out (see the module doc)."""
    from pytest_pstbench.selection.accuracy import cell_means

    votes_path = Path(votes_path)
    votes, ignored, digest = read_track_votes(votes_path, track, params)
    threshold = _Thresholds(params.consensus)
    # experts in one canonical order (by name), whatever the order of the file's rows: the bootstrap over
    # experts resamples this list, so the row does not depend on how the file was sorted
    experts = sorted({e for per_task in votes.values() for e in per_task})
    scored, excluded, disagree = _score_experts(track, votes, threshold, experts, params)
    scored_ids = {view.id for e in experts for view, _o in scored[e]}
    covered = [t for t in track.tasks if t.id in scored_ids]
    per_expert = {
        e: cell_means([v for v, _o in scored[e]], [o for _v, o in scored[e]], params) if scored[e] else {}
        for e in experts
    }
    cells = _human_cells(covered, experts, scored, per_expert, params)
    n_scored = sum(1 for e in experts if scored[e])
    part = len(covered) != len(track.tasks)
    return {
        "label": (LABEL_PART if part else LABEL).format(n=n_scored, tasks=len(covered), of=len(track.tasks)),
        "rule": RULE,
        "interval": INTERVAL,
        "votes_sha256": digest,  # of the bytes read (a pipe is read once)
        "experts": n_scored,
        "tasks": len(covered),
        "track_tasks": len(track.tasks),
        "judgments": sum(len(scored[e]) for e in experts),
        "excluded_no_consensus": sum(excluded.values()),
        "tasks_without_votes": [t.id for t in track.tasks if t.id not in votes],
        "voted_tasks_not_in_track": len(ignored),
        "label_disagreements": disagree,
        "thresholds": [
            {"k": k, "n": n, "m": m, "m_others": None if m is None else max(1, m - 1)}
            for (k, n), m in sorted(threshold.used.items())
        ],
        "cells": cells,
        "per_expert": [
            {
                "expert": e,
                "tasks": len(scored[e]),
                "excluded": excluded[e],
                "metrics": per_expert[e].get(("overall", "all"), {}),
            }
            for e in experts
        ],
    }


def human_row(summaries: list[tuple[Path, dict]]) -> dict | None:
    """The one `human` section of a track's runs (None when no run has one); runs that carry different
    ones are refused, and a section must have the shape `human_reference` writes."""
    import math

    found = [(p, s["human"]) for p, s in summaries if isinstance(s, dict) and s.get("human") is not None]
    if not found:
        return None
    path, human = found[0]
    for other, h in found[1:]:
        if h != human:
            raise UserError(
                f"{other}: its human reference row differs from the one of {path} (another votes file or rule, "
                f"votes sha256 {h.get('votes_sha256') if isinstance(h, dict) else None}); fix: score the runs "
                "of a track with the same votes file"
            )
    fix = "fix: score that run again with this kit"
    cells = human.get("cells") if isinstance(human, dict) else None
    if not isinstance(cells, list) or not isinstance(human.get("label"), str):
        raise UserError(f"{path}: human is not the kit's human reference section; {fix}")
    for c in cells:
        metrics = c.get("metrics") if isinstance(c, dict) else None
        if not isinstance(metrics, dict):
            raise UserError(f"{path}: human cells hold no metrics; {fix}")
        for entries in metrics.values():
            for e in (entries or {}).values():
                for key in ("mean", "ci_low", "ci_high", "pm"):
                    v = e.get(key) if isinstance(e, dict) else "?"
                    if v is not None and (
                        isinstance(v, bool)
                        or not isinstance(v, (int, float))
                        or not math.isfinite(v)
                        or not 0 <= v <= 1
                    ):
                        raise UserError(
                            f"{path}: human {c.get('group')}={c.get('value')} {key} is {v!r}, not a number in "
                            f"[0, 1] or null; {fix}"
                        )
    return human
