"""Issue #46 part 3: position bias of selection judges (summary.json `position_bias`, `vab score`'s table).

Simulated judges on simulated tracks (seeded): a judge with a planted slot preference is detected and its
planted rates are reported; position-blind judges (whose picks depend on the images only, including one
that prefers dataset index 0, which trial 0 shows first) are called biased in at most alpha of the
repetitions; the numbers equal an independent computation (every assignment of a task's picks to its
trials enumerated by hand, then scipy.stats.chisquare). A run's position_bias is recomputed by the
validating loader: a faked value, or faked int seeds, is refused."""

from __future__ import annotations

import itertools
import json
import math
import random
from types import SimpleNamespace

import pytest
from helpers.selection_runs import score
from scipy.stats import chisquare

import pytest_pstbench.selection.position_bias as pbm
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.selection.permutations import orders_for
from pytest_pstbench.selection.position_bias import DRAWS, position_bias, table
from pytest_pstbench.selection.protocol import SelectionParams
from pytest_pstbench.selection.tracks import resolve_selection_track

PROTOCOL = load_protocol("vab")
PARAMS = SelectionParams.of(PROTOCOL)
ALPHA = PROTOCOL.data["comparison"]["alpha"]


def _track(n: int, k: int, seed: int):
    tasks = [SimpleNamespace(id=f"s{seed}-{i}", seed=f"s{seed}-{i}", k=k) for i in range(n)]
    return tasks, [orders_for(t, PARAMS) for t in tasks]


def _answers(tasks, orders, pick, rng):
    """pick(task, order, rng) -> dataset index, for pick_best in each trial (other prompt types missing)."""
    out = []
    for task, task_orders in zip(tasks, orders):
        best = [{"best": pick(task, o, rng), "worst": None, "status": "ok"} for o in task_orders]
        missing = [{"best": None, "worst": None, "status": "missing"}] * len(task_orders)
        out.append({"pick_best": best, "pick_worst": missing, "pick_best_and_worst": missing})
    return out


def slot_judge(slot: int, strength: float):
    """Picks the candidate shown at `slot` with probability `strength`, else a uniformly random candidate."""

    def pick(task, order, rng):
        return order[slot] if rng.random() < strength else rng.randrange(task.k)

    return pick


def blind_judge(task, order, rng):
    """Position-blind: prefers dataset index 0 (shown first in trial 0) half the time, else a random image."""
    return 0 if rng.random() < 0.5 else rng.randrange(task.k)


def test_planted_slot_preference_detected_with_its_rates():
    """issue #46 case 3: a judge that picks slot A in 40% of trials (else at random) is called biased at k = 4,
    and the reported rates are the planted ones: A 0.4 + 0.6/4 = 0.55, every other slot 0.15."""
    k, strength = 4, 0.4
    tasks, orders = _track(400, k, 1)
    rng = random.Random(11)
    pb = position_bias(tasks, _answers(tasks, orders, slot_judge(0, strength), rng), orders, PARAMS, ALPHA)
    e = pb["roles"]["best"]["by_k"][str(k)]
    planted = [strength + (1 - strength) / k] + [(1 - strength) / k] * (k - 1)
    n = e["n"]
    assert n == 1200 and e["biased"] is True and e["p"] <= 1 / (DRAWS + 1) and e["favoured"] == "A"
    for rate, want in zip(e["rates"], planted):
        assert abs(rate - want) < 4 * math.sqrt(want * (1 - want) / n)
    assert pb["roles"]["best"]["all_k"]["biased"] is True
    assert "worst" in pb["roles"] and pb["roles"]["worst"]["all_k"]["n"] == 0  # no worst answers: nothing tested
    # the power over repetitions of a smaller track (60 tasks, three trials each)
    hits = sum(
        position_bias(t, _answers(t, o, slot_judge(0, strength), random.Random(r)), o, PARAMS, ALPHA)["roles"]["best"][
            "by_k"
        ][str(k)]["biased"]
        for r in range(40)
        for t, o in [_track(60, k, 100 + r)]
    )
    assert hits >= 36


@pytest.mark.parametrize("k", [2, 3, 5])
def test_position_blind_judges_false_positive_rate_at_most_alpha(k):
    """issue #46 case 3: position-blind answers (a preference for dataset index 0, which trial 0 shows at A) are
    called biased in at most alpha of 200 repetitions (binomial slack: 3 standard errors)."""
    reps = 200
    fired = 0
    for r in range(reps):
        tasks, orders = _track(40, k, 1000 * k + r)
        pb = position_bias(tasks, _answers(tasks, orders, blind_judge, random.Random(r)), orders, PARAMS, ALPHA)
        fired += bool(pb["roles"]["best"]["by_k"][str(k)]["biased"])
    assert fired / reps <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / reps)


def _independent(tasks, orders, answers, k):
    """Observed and expected counts by enumerating every assignment of a task's picks to its trials."""
    obs, exp = [0] * k, [0.0] * k
    tasks_all = same_image = same_slot = 0
    for _task, o, a in zip(tasks, orders, answers):
        trials = [t for t, x in enumerate(a["pick_best"]) if x["status"] == "ok"]
        picks = [a["pick_best"][t]["best"] for t in trials]
        for t, x in zip(trials, picks):
            obs[o[t].index(x)] += 1
        perms = list(itertools.permutations(picks))
        for perm in perms:
            for t, x in zip(trials, perm):
                exp[o[t].index(x)] += 1 / len(perms)
        if len(trials) == 3:
            tasks_all += 1
            same_image += len(set(picks)) == 1
            same_slot += len(set(picks)) > 1 and len({o[t].index(x) for t, x in zip(trials, picks)}) == 1
    return obs, exp, tasks_all, same_image, same_slot


def test_numbers_equal_an_independent_computation():
    """issue #46 case 3: counts, expected counts, chi-square, Cohen's w and the consistency shares equal a
    plain enumeration and scipy.stats.chisquare (some trials unanswered, so tasks have 1, 2 or 3 picks)."""
    k = 5
    tasks, orders = _track(50, k, 7)
    rng = random.Random(5)
    answers = _answers(tasks, orders, slot_judge(2, 0.3), rng)
    for a in answers[::4]:
        a["pick_best"][rng.randrange(3)] = {"best": None, "worst": None, "status": "unparseable"}
    e = position_bias(tasks, answers, orders, PARAMS, ALPHA)["roles"]["best"]["by_k"][str(k)]
    obs, exp, tasks_all, same_image, same_slot = _independent(tasks, orders, answers, k)
    ref = chisquare(obs, exp)
    assert e["counts"] == obs and e["n"] == sum(obs)
    assert e["expected_rates"] == pytest.approx([x / sum(obs) for x in exp], rel=1e-12)
    assert e["chi2"] == pytest.approx(ref.statistic, rel=1e-12)
    assert e["df"] == k - 1 and e["effect_w"] == pytest.approx(math.sqrt(ref.statistic / sum(obs)), rel=1e-12)
    assert e["tasks_all_trials"] == tasks_all and e["same_image"] == pytest.approx(same_image / tasks_all)
    assert e["same_slot"] == pytest.approx(same_slot / tasks_all)
    excess = [o / sum(obs) - x / sum(exp) for o, x in zip(obs, exp)]
    assert e["tvd"] == pytest.approx(0.5 * sum(map(abs, excess)), rel=1e-12)
    assert e["favoured"] == PARAMS.labels[excess.index(max(excess))]


def _brute_force_p(tasks, orders, answers) -> tuple[dict[int, float], float]:
    """Per k and over all k: the share of all assignments of every task's picks to its answered trials (each
    task's permutations, all combinations) whose chi-square (scipy.stats.chisquare per k, summed over k) is at
    least the observed one."""
    groups = {}
    for task, a in zip(tasks, answers):
        trials = [t for t, x in enumerate(a["pick_best"]) if x["status"] == "ok"]
        picks = [a["pick_best"][t]["best"] for t in trials]
        groups.setdefault(task.k, []).append([(trials, perm) for perm in itertools.permutations(picks)])

    stats = {}
    for k, per_task in groups.items():
        ks_tasks = [(o, a) for task, o, a in zip(tasks, orders, answers) if task.k == k]
        values = []
        for combo in itertools.product(*per_task):
            obs = [0] * k
            for (o, _a), (trials, perm) in zip(ks_tasks, combo):
                for t, x in zip(trials, perm):
                    obs[o[t].index(x)] += 1
            values.append(obs)
        exp = [sum(v[p] for v in values) / len(values) for p in range(k)]
        cells = [p for p in range(k) if exp[p] > 1e-12]
        stat = [chisquare([v[p] for p in cells], [exp[p] for p in cells]).statistic for v in values]
        stats[k] = (stat[0], stat)  # each task's identity permutation comes first: the picks as answered
    per_k = {k: sum(s >= obs - 1e-9 for s in stat) / len(stat) for k, (obs, stat) in stats.items()}
    total_obs = sum(obs for obs, _ in stats.values())
    sums = [sum(c) for c in itertools.product(*(stat for _, stat in stats.values()))]
    return per_k, sum(s >= total_obs - 1e-9 for s in sums) / len(sums)


@pytest.mark.parametrize("exact", [True, False])
def test_p_values_equal_a_brute_force_enumeration(exact, monkeypatch):
    """issue #53 item 10: the p-value is the exact conditional (permutation) test's: on a tiny track (k = 3 and
    4, a few tasks, some trials unanswered) it equals the share of all assignments of each task's picks to its
    answered trials whose chi-square reaches the observed one, per k and over all k; where there are too many
    outcomes to enumerate (forced here), the seeded draws give it within their sampling error."""
    if not exact:
        monkeypatch.setattr(pbm, "EXACT_WORK", 0)
    tasks, orders, answers = [], [], []
    for k, n, seed in ((3, 4, 21), (4, 3, 22)):
        t, o = _track(n, k, seed)
        tasks += t
        orders += o
        answers += _answers(t, o, slot_judge(0, 0.5), random.Random(seed))
    answers[1]["pick_best"][2] = {"best": None, "worst": None, "status": "unparseable"}
    answers[5]["pick_best"][0] = {"best": None, "worst": None, "status": "missing"}
    want_k, want_all = _brute_force_p(tasks, orders, answers)
    best = position_bias(tasks, answers, orders, PARAMS, ALPHA)["roles"]["best"]
    got = {int(k): e["p"] for k, e in best["by_k"].items()}
    if exact:
        assert got == pytest.approx(want_k, rel=1e-9) and best["all_k"]["p"] == pytest.approx(want_all, rel=1e-9)
    else:
        for k, want in [*want_k.items(), ("all", want_all)]:
            p = best["all_k"]["p"] if k == "all" else got[k]
            assert abs(p - want) <= 4 * math.sqrt(want * (1 - want) / DRAWS) + 1 / DRAWS
    assert 0 < min(want_k.values()) < 1  # the case is not degenerate


def _slot_answers(path, track, params):
    """pick_best always names the image shown at A, pick_worst the image shown last; best+worst: the consensus."""
    lines = []
    for task in track.tasks:
        for t, order in enumerate(orders_for(task, params)):
            for ptype in params.prompt_types_for(task.k):
                base = {"task_id": task.id, "trial": t, "prompt_type": ptype}
                if ptype == "pick_best":
                    lines.append({**base, "best": "A"})
                elif ptype == "pick_worst":
                    lines.append({**base, "worst": params.labels[task.k - 1]})
                else:
                    lines.append(
                        {
                            **base,
                            "best": params.labels[order.index(task.best)],
                            "worst": params.labels[order.index(task.worst)],
                        }
                    )
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_run_reports_and_the_loader_recomputes_position_bias(tmp_path, monkeypatch, capsys):
    """issue #46 case 3: `vab score` of a judge that always answers A (best) / the last slot (worst) writes
    position_bias (best favours A, worst the last slot, both biased; best+worst follows the images), prints the
    table, and the validating loader refuses a faked rate and faked int seeds."""
    import helpers.selection_runs as sr

    from pytest_pstbench.core.store.reader import read_runs

    demo = resolve_selection_track("vab-demo")
    monkeypatch.setattr(sr, "write_answers", lambda path, track, params, _c: _slot_answers(path, track, params))
    run_dir = score(tmp_path, "slot", demo, PARAMS, None, "-v")
    out = capsys.readouterr().out
    assert "position bias (picked rate per displayed position" in out and "human row: not measured" in out
    summary = json.loads((run_dir / "summary.json").read_text())
    roles = summary["position_bias"]["roles"]
    assert roles["best"]["all_k"]["biased"] and roles["worst"]["all_k"]["biased"]
    for _k, e in roles["best"]["by_k"].items():
        assert e["rates"][0] == 1.0 and e["same_slot"] + e["same_image"] == pytest.approx(1.0)
    assert all(e["favoured"] == PARAMS.labels[int(k) - 1] for k, e in roles["worst"]["by_k"].items())
    assert roles["bw_best"]["all_k"]["biased"] is False
    assert table(summary, PARAMS).count("\n") > 10
    read_runs([run_dir])  # the loader recomputes it: the run as written passes
    from pytest_pstbench.selection.paper_table import build_selection_table

    notes = build_selection_table([run_dir], metrics=None, against="best", protocol_spec=None).notes
    assert any(
        n.startswith("Position bias of slot on track vab-demo") and "best p=" in n and "(biased)" in n for n in notes
    )
    assert any("Position bias of Human" in n and "not measured" in n for n in notes)

    summary["position_bias"]["roles"]["best"]["by_k"]["3"]["rates"][0] = 0.5
    (run_dir / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(UserError, match="position_bias is not what per_task.csv"):
        read_runs([run_dir])
    run = json.loads((run_dir / "run.json").read_text())
    run["int_seeds"] = [next(iter(demo.tasks)).id]
    (run_dir / "run.json").write_text(json.dumps(run))
    with pytest.raises(UserError, match="int_seeds"):
        read_runs([run_dir])
