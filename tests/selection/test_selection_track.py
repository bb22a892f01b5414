"""Selection tracks (protocol vab): permutations, metrics, random baselines, consensus, answers,
judges, export, run files and bad input. Checked against hand-derived values, brute-force
enumeration and independent calls (scipy.stats.binom, CPython's documented shuffle)."""

from __future__ import annotations

import itertools
import json
import math
import random
import re
import shutil
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import yaml

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.selection import answers as ans
from pytest_pstbench.selection import consensus as cons
from pytest_pstbench.selection import null_model
from pytest_pstbench.selection.accuracy import aggregate, correctness, random_ap1, random_pass, trial_outcomes
from pytest_pstbench.selection.demo import build_vab_demo
from pytest_pstbench.selection.judges import answers_from_scores, load_judge, pick
from pytest_pstbench.selection.kind import is_selection_track
from pytest_pstbench.selection.permutations import orders_for, trial_orders
from pytest_pstbench.selection.protocol import SelectionParams
from pytest_pstbench.selection.session import SelectionSession, score_all
from pytest_pstbench.selection.tracks import Task, load_selection_manifest, resolve_selection_track

REPO = Path(__file__).resolve().parents[2]
JUDGES = REPO / "examples" / "judges" / "no_reference.py"


@pytest.fixture(scope="module")
def params():
    return SelectionParams.of(load_protocol("vab"))


@pytest.fixture(scope="module")
def demo_manifest(tmp_path_factory) -> Path:
    """A small vab-demo (32x24 candidates) in its own folder."""
    return build_vab_demo(tmp_path_factory.mktemp("vab_small") / "vab-demo", size=(32, 24))


@pytest.fixture(scope="module")
def track(demo_manifest):
    return load_selection_manifest(demo_manifest)


def _truth_answers(track, params, export_dir: Path) -> list[dict]:
    """Answers naming the consensus labels through the export's label mapping (mixed formats)."""
    manifest = json.loads((export_dir / "export.json").read_text())
    lines = []
    for t in manifest["tasks"]:
        task = track.task(t["task_id"])
        for trial in t["trials"]:
            label_of = {v["index"]: lab for lab, v in trial["labels"].items()}
            b, w = label_of[task.best], label_of[task.worst]
            for ptype in trial["prompts"]:
                base = {"task_id": t["task_id"], "trial": trial["trial"], "prompt_type": ptype}
                if trial["trial"] == 1:  # parsed labels
                    lines.append({**base, "best": b, "worst": w})
                elif ptype == "pick_best":  # official parser: tag upper case, letter any case, first match
                    lines.append({**base, "response": f"Looking closely, {w} is soft.\nBEST: {b.lower()}\nBEST: {w}"})
                elif ptype == "pick_worst":
                    lines.append({**base, "response": f"WORST: {w}"})
                else:
                    lines.append({**base, "response": f"Reasoning...\nBEST:{b}\nWORST:   {w}."})
    return lines


def _write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# ---- protocol ------------------------------------------------------------------------------------


def test_protocol_loads_and_paired_protocol_is_unchanged(params):
    p = load_protocol("vab")
    assert p.id == "vab" and len(p.sha256) == 64
    assert params.trials == 3 and params.labels[:6] == list("ABCDEF")
    assert params.bootstrap == {"method": "percentile", "confidence": 0.95, "resamples": 10000, "seed": 0}
    assert params.prompt_types_for(2) == ["pick_best", "pick_worst"]
    assert params.prompt_types_for(5) == ["pick_best", "pick_worst", "pick_best_and_worst"]
    assert load_protocol("pstbench").id == "pstbench"


def test_protocol_thresholds_are_the_smallest_m_at_alpha(params):
    c = params.consensus
    assert c["paper_thresholds"] == [2]
    for k, m in c["thresholds"].items():
        if k in c["paper_thresholds"]:  # k = 2: the paper's m = 8 (section D.4), not the alpha rule's 9
            assert (k, m, null_model.threshold_for_alpha(k, c["n_judges"], c["alpha"])[0]) == (2, 8, 9)
            continue
        assert null_model.threshold_for_alpha(k, c["n_judges"], c["alpha"])[0] == m


def test_consensus_k2_eight_of_ten_is_accepted_at_7_over_64(tmp_path, capsys):
    assert null_model.null_pass_probability(2, 10, 8) == Fraction(7, 64)
    votes = tmp_path / "votes.csv"
    votes.write_text(
        "task_id,k,judge,best,worst\n" + "".join(f"t,2,j{i},{'a' if i < 8 else 'b'},\n" for i in range(10))
    )
    assert cli_main(["vab", "consensus", str(votes)]) == 0
    out = capsys.readouterr().out
    assert "accepted: 1" in out and "0.109375 (7/64)" in out and out.strip().endswith("t,2,10,8,a,8,,")


def test_broken_selection_protocol_is_a_user_error(tmp_path):
    data = yaml.safe_load(load_protocol("vab").path.read_text())
    del data["trials"]["permutation"]["redraw_distinct_min_k"]
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(UserError) as e:
        load_protocol(path)
    assert str(e.value) == f"{path}: invalid selection protocol: missing key 'trials.permutation.redraw_distinct_min_k'"


def test_paired_protocol_with_selection_track_is_refused():
    with pytest.raises(
        UserError, match=r"protocol pstbench is not a selection protocol \(kind: selection\); fix: use --protocol vab"
    ):
        SelectionParams.of(load_protocol("pstbench"))


# ---- permutations --------------------------------------------------------------------------------


def _reference_shuffle(rng: random.Random, n: int) -> tuple[int, ...]:
    """CPython's documented random.shuffle: Fisher-Yates from the end, _randbelow via getrandbits."""
    x = list(range(n))
    for i in reversed(range(1, n)):
        bits = (i + 1).bit_length()
        j = rng.getrandbits(bits)
        while j >= i + 1:
            j = rng.getrandbits(bits)
        x[i], x[j] = x[j], x[i]
    return tuple(x)


def _reference_orders(seed, k: int) -> list[tuple[int, ...]]:
    rng = random.Random(seed)
    orders = [tuple(range(k))]
    while len(orders) < 3:
        draw = _reference_shuffle(rng, k)
        if k > 2 and draw in orders:
            continue
        orders.append(draw)
    return orders


@pytest.mark.parametrize("k", [2, 3, 4, 5, 6])
def test_permutations_match_reference_trial0_identity_distinct(k):
    for seed in [f"t{i}" for i in range(40)] + list(range(40)):
        orders = trial_orders(seed, k)
        assert orders == _reference_orders(seed, k)
        assert orders[0] == tuple(range(k))
        assert all(sorted(o) == list(range(k)) for o in orders)
        if k > 2:
            assert len(set(orders)) == 3
        assert trial_orders(seed, k) == orders  # deterministic


def test_permutations_pinned_values():
    # Pinned so that a change of the rule is noticed (str and int ids seed differently).
    assert trial_orders("vd-01", 4) == [(0, 1, 2, 3), (0, 3, 2, 1), (1, 3, 0, 2)]
    assert trial_orders(17, 4) == [(0, 1, 2, 3), (0, 2, 1, 3), (3, 1, 0, 2)]
    assert trial_orders("17", 4) == [(0, 1, 2, 3), (2, 3, 0, 1), (0, 3, 2, 1)]
    assert trial_orders(0, 2) == [(0, 1), (0, 1), (0, 1)]  # k = 2: draws are kept as they come


# ---- metrics -------------------------------------------------------------------------------------


def _a(best=None, worst=None, status="ok"):
    return {"best": best, "worst": worst, "status": status, "detail": None}


def _hand_tasks():
    P = Path("x")
    t1 = Task("T1", "T1", "a", "x", (P,) * 2, best=0, worst=1)
    t2 = Task("T2", "T2", "a", "y", (P,) * 3, best=2, worst=0)
    t3 = Task("T3", "T3", "b", "x", (P,) * 4, best=1, worst=3)
    answers = {
        "T1": {
            "pick_best": [_a(0), _a(0), _a(1)],
            "pick_worst": [_a(worst=1)] * 3,
            "pick_best_and_worst": [_a(0, 1), _a(0, 1), _a(1, 0)],  # derived for k = 2
        },
        "T2": {
            "pick_best": [_a(2)] * 3,
            "pick_worst": [_a(worst=0), _a(status="unparseable"), _a(worst=1)],  # unparseable: counted, wrong
            "pick_best_and_worst": [_a(2, 0), _a(2, 1), _a(0, 2)],
        },
        "T3": {
            "pick_best": [_a(0), _a(1), _a(1)],
            "pick_worst": [_a(worst=3)] * 3,
            "pick_best_and_worst": [_a(1, 3)] * 3,
        },
    }
    return [t1, t2, t3], answers


def test_metrics_hand_derived(params):
    tasks, answers = _hand_tasks()
    correct = [correctness(t, answers[t.id], params.metrics) for t in tasks]
    assert correct[1] == {"top1": [True] * 3, "bot1": [True, False, False], "tb1": [True, False, False]}
    cells = aggregate(tasks, [trial_outcomes(t, answers[t.id], params) for t in tasks], params)
    overall = cells[0]
    assert (overall["group"], overall["n"]) == ("overall", 3)
    got = {(m, a): overall["metrics"][m][a]["mean"] for m in ("top1", "bot1", "tb1") for a in ("ap@1", "pass^3")}
    # per task ap@1 / pass^3 worked out by hand from the answers above
    expected = {
        ("top1", "ap@1"): (2 / 3 + 1 + 2 / 3) / 3,
        ("top1", "pass^3"): 1 / 3,
        ("bot1", "ap@1"): (1 + 1 / 3 + 1) / 3,
        ("bot1", "pass^3"): 2 / 3,
        ("tb1", "ap@1"): (2 / 3 + 1 / 3 + 1) / 3,
        ("tb1", "pass^3"): 1 / 3,
    }
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=1e-12), key
    rnd = overall["metrics"]
    assert rnd["top1"]["ap@1"]["random"] == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)
    assert rnd["tb1"]["ap@1"]["random"] == pytest.approx((1 / 2 + 1 / 6 + 1 / 12) / 3)
    assert rnd["tb1"]["pass^3"]["random"] == pytest.approx((1 / 8 + 1 / 216 + 1 / 1728) / 3)
    by = {(c["group"], c["value"]): c for c in cells}
    assert list(by) == [
        ("overall", "all"),
        ("domain", "a"),
        ("domain", "b"),
        ("topic", "x"),
        ("topic", "y"),
        ("k", "2"),
        ("k", "3"),
        ("k", "4"),
    ]
    assert by[("domain", "a")]["metrics"]["bot1"]["ap@1"]["mean"] == pytest.approx((1 + 1 / 3) / 2)
    k3 = by[("k", "3")]["metrics"]["top1"]["ap@1"]
    assert (k3["mean"], k3["ci_low"], k3["ci_high"], k3["pm"]) == (1.0, 1.0, 1.0, 0.0)
    for c in cells:
        for m in c["metrics"].values():
            for e in m.values():
                assert e["ci_low"] <= e["mean"] <= e["ci_high"]


@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_random_baseline_by_exhaustive_enumeration(k):
    best, worst = 0, k - 1
    # a judge answering uniformly at random
    assert Fraction(sum(b == best for b in range(k)), k) == random_ap1("top1", k)
    assert Fraction(sum(w == worst for w in range(k)), k) == random_ap1("bot1", k)
    if k == 2:  # TB-1 derived from pick_best
        tb = Fraction(sum(b == best and (1 - b) == worst for b in range(k)), k)
    else:
        pairs = [(b, w) for b in range(k) for w in range(k) if b != w]
        tb = Fraction(sum(p == (best, worst) for p in pairs), len(pairs))
    assert tb == random_ap1("tb1", k)
    # a fixed-label judge (always "A" best, "B" worst) under a uniformly random presentation order
    perms = list(itertools.permutations(range(k)))
    assert Fraction(sum(o[0] == best for o in perms), len(perms)) == random_ap1("top1", k)
    if k > 2:
        assert Fraction(sum(o[0] == best and o[1] == worst for o in perms), len(perms)) == random_ap1("tb1", k)
    # pass^3: all three independent trials right
    for m in ("top1", "tb1"):
        p = random_ap1(m, k)
        outcomes = list(itertools.product([True, False], repeat=3))
        prob = sum(math.prod(p if o else 1 - p for o in trial) for trial in outcomes if all(trial))
        assert prob == random_pass(m, k)


# ---- consensus -----------------------------------------------------------------------------------


def _brute_null(k: int, n: int, m: int) -> Fraction:
    pairs = [(b, w) for b in range(k) for w in range(k) if b != w]
    hits = total = 0
    for combo in itertools.combinations_with_replacement(range(len(pairs)), n):
        weight = math.factorial(n)
        for c in set(combo):
            weight //= math.factorial(combo.count(c))
        best = [0] * k
        worst = [0] * k
        for c in combo:
            best[pairs[c][0]] += 1
            worst[pairs[c][1]] += 1
        total += weight
        if max(best) >= m and max(worst) >= m:
            hits += weight
    assert total == len(pairs) ** n
    return Fraction(hits, total)


@pytest.mark.parametrize("k,n", [(2, 7), (3, 5), (4, 5), (5, 4), (6, 3)])
def test_null_probability_vs_brute_force(k, n):
    for m in range(0, n + 2):
        assert null_model.null_pass_probability(k, n, m) == _brute_null(k, n, m), (k, n, m)


def test_null_probability_k2_vs_binomial_and_known_value():
    from scipy.stats import binom

    assert null_model.null_pass_probability(2, 10, 8) == Fraction(7, 64)
    assert float(null_model.null_pass_probability(2, 10, 8)) == 0.109375
    for n in (5, 10, 20):
        for m in range(n // 2 + 1, n + 1):
            expected = binom.sf(m - 1, n, 0.5) + binom.cdf(n - m, n, 0.5)
            assert float(null_model.null_pass_probability(2, n, m)) == pytest.approx(expected, rel=1e-12)


def test_null_probability_is_fast_for_k6_n20():
    null_model._count_none_pass.cache_clear()
    start = time.perf_counter()
    for k in range(2, 7):
        null_model.null_pass_probability(k, 20, 6)
    assert time.perf_counter() - start < 1.0


def test_monte_carlo_agrees():
    exact = float(null_model.null_pass_probability(3, 10, 6))
    mc = null_model.monte_carlo_pass_probability(3, 10, 6, 40000, seed=0)
    assert mc.ci_low < exact < mc.ci_high


def test_decide_rules():
    assert cons.decide(2, list("aaaaaaaaab"), None, 9).accepted
    assert not cons.decide(2, list("aaaaaaaabb"), None, 9).accepted
    d = cons.decide(3, list("aaaaaaabbc"), list("ccccccccab"), 7)
    assert (d.accepted, d.best, d.best_votes, d.worst, d.worst_votes) == (True, "a", 7, "c", 8)
    assert cons.decide(3, list("aaaaaaabbc"), list("ccccccbbab"), 7).reason == "worst votes 6 < 7"
    assert cons.decide(6, list("aaaaabbbbb"), list("ccccccdddd"), 5).reason == "tie for best"
    assert (
        cons.decide(6, list("aaaaabbbbc"), list("aaaaaccccc"), 5).reason
        == "tie for worst; same candidate voted best and worst"
    )


def test_consensus_cli(tmp_path, capsys):
    rows = ["task_id,k,judge,best,worst"]
    rows += [f"a,2,j{i},x," for i in range(9)] + ["a,2,j9,y,"]
    rows += [f"b,3,j{i},p,q" for i in range(7)] + [f"b,3,j{i},q,p" for i in range(7, 10)]
    rows += [f"c,3,j{i},p,q" for i in range(6)] + [f"c,3,j{i},r,p" for i in range(6, 10)]
    votes = tmp_path / "votes.csv"
    votes.write_text("\n".join(rows) + "\n")
    assert cli_main(["vab", "consensus", str(votes)]) == 0
    out = capsys.readouterr().out
    assert "tasks: 3   accepted: 2   thresholds: protocol vab (n_judges = 10)" in out
    assert "0.109375 (7/64)" in out
    assert out.strip().endswith("task_id,k,n,m,best,best_votes,worst,worst_votes\na,2,10,8,x,9,,\nb,3,10,7,p,7,q,7")
    assert (
        cli_main(
            [
                "vab",
                "consensus",
                str(votes),
                "--alpha",
                "0.2",
                "--verify-mc",
                "20000",
                "--out",
                str(tmp_path / "acc.csv"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "thresholds: --alpha 0.2" in out and "exact inside" in out
    assert (tmp_path / "acc.csv").read_text().splitlines()[0] == "task_id,k,n,m,best,best_votes,worst,worst_votes"


@pytest.mark.parametrize(
    "rows,message",
    [
        (
            ["task_id,k,judge,best"],
            ":1: the header lacks column(s) worst; fix: give a header row with task_id,k,judge,best,worst",
        ),
        (
            ["task_id,k,judge,best,worst", "t,3,j1,a,"],
            ":2: task t: empty worst vote with k = 3; fix: give the worst vote (empty only when k = 2)",
        ),
        (
            ["task_id,k,judge,best,worst", "t,2,j1,a,", "t,2,j1,b,"],
            ":3: task t: judge j1 votes twice; fix: one row per task and judge",
        ),
        (
            ["task_id,k,judge,best,worst", "t,x,j1,a,"],
            ":2: k 'x' is not an integer; fix: give the task's number of candidates (2 or more)",
        ),
        (
            ["task_id,k,judge,best,worst", "t,3,j1,a,a"],
            ":2: task t: judge j1 voted a both best and worst; fix: best and worst must differ",
        ),
    ],
)
def test_consensus_bad_votes(tmp_path, capsys, rows, message):
    votes = tmp_path / "votes.csv"
    votes.write_text("\n".join(rows) + "\n")
    assert cli_main(["vab", "consensus", str(votes)]) == 2
    err = capsys.readouterr().err
    assert err == f"pstbench: error: {votes}{message if message.startswith(':') else ': ' + message}\n"


def test_consensus_wrong_panel_size_needs_alpha(tmp_path, capsys):
    votes = tmp_path / "votes.csv"
    votes.write_text("task_id,k,judge,best,worst\n" + "".join(f"t,2,j{i},a,\n" for i in range(5)))
    assert cli_main(["vab", "consensus", str(votes)]) == 2
    assert capsys.readouterr().err == (
        f"pstbench: error: {votes}: task t has 5 judges but the protocol's thresholds are for n_judges = 10; "
        "fix: pass --alpha A to derive a threshold for each k and n\n"
    )
    assert cli_main(["vab", "consensus", str(votes), "--alpha", "0.1"]) == 0


# ---- answers -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,ptype,k,expected,status",
    [  # the official parser (vab): first match, tag upper case only, "BEST:" then spaces then one letter
        ("BEST: B", "pick_best", 3, {"best": "B"}, "ok"),
        ("I think the second.\nBEST: c\n", "pick_best", 3, {"best": "C"}, "ok"),
        ("BEST: A at first, but on reflection\nBEST: B", "pick_best", 3, {"best": "A"}, "ok"),  # first match
        ("best: c", "pick_best", 3, {"best": None}, "unparseable"),
        ("**BEST:** (D)\n**WORST:** A", "pick_best_and_worst", 4, {"best": None, "worst": None}, "unparseable"),
        ("**BEST:** D\nWORST: a", "pick_best_and_worst", 4, {"best": None, "worst": "A"}, "unparseable"),
        ("WORST: Image C", "pick_worst", 3, {"worst": None}, "unparseable"),
        ("BEST: E\nBEST: A", "pick_best", 3, {"best": None}, "unparseable"),  # first match outside A-C
        ("BEST: because\nBEST: A", "pick_best", 3, {"best": "A"}, "ok"),  # "BEST: because" is no match
        ("BEST: A", "pick_best_and_worst", 3, {"best": "A", "worst": None}, "unparseable"),
    ],
)
def test_parse_response(params, text, ptype, k, expected, status):
    found, st, detail = ans.parse_response(text, ptype, k, params)
    assert found == expected and st == status
    assert (detail is None) == (status == "ok")


@pytest.mark.parametrize(
    "text,ptype,k,expected,status",
    [  # the lenient parser (protocol vab-lenient): last match, any case, bold, brackets, "Image"
        ("BEST: B", "pick_best", 3, {"best": "B"}, "ok"),
        ("I think the second.\nbest: c\n", "pick_best", 3, {"best": "C"}, "ok"),
        ("Best: A at first, but on reflection\nBEST: B", "pick_best", 3, {"best": "B"}, "ok"),  # last match
        ("**BEST:** (D)\n**WORST:** A", "pick_best_and_worst", 4, {"best": "D", "worst": "A"}, "ok"),
        ("WORST: Image C", "pick_worst", 3, {"worst": "C"}, "ok"),
        ("The best one is B.", "pick_best", 3, {"best": None}, "unparseable"),
        ("BEST: E", "pick_best", 3, {"best": None}, "unparseable"),  # label outside A-C
        ("BEST: because it is sharp", "pick_best", 3, {"best": None}, "unparseable"),
        ("BEST: A", "pick_best_and_worst", 3, {"best": "A", "worst": None}, "unparseable"),
    ],
)
def test_parse_response_lenient_variant(text, ptype, k, expected, status):
    lenient = SelectionParams.of(load_protocol("vab-lenient"))
    found, st, detail = ans.parse_response(text, ptype, k, lenient)
    assert found == expected and st == status
    assert (detail is None) == (status == "ok")


def test_answers_missing_and_unparseable_are_counted(track, params, tmp_path):
    task = track.tasks[2]  # k = 4
    orders = orders_for(task, params)
    best_label = params.labels[orders[0].index(task.best)]
    path = _write_jsonl(
        tmp_path / "a.jsonl",
        [
            {"task_id": task.id, "trial": 0, "prompt_type": "pick_best", "response": f"ok\nBEST: {best_label.lower()}"},
            {"task_id": task.id, "trial": 1, "prompt_type": "pick_best", "response": "I cannot decide"},
            {"task_id": task.id, "trial": 2, "prompt_type": "pick_best", "best": "Z"},
        ],
    )
    answer_set = ans.read_answers(path, track, params)
    session = SelectionSession(track, load_protocol("vab"), name="partial", results_dir=tmp_path / "results")
    outcome = score_all(session, answer_set=answer_set)
    run = outcome.run
    n_expected = sum(len(params.prompt_types_for(t.k)) * 3 for t in track.tasks)
    assert run["answers"]["expected"] == n_expected
    assert (run["answers"]["missing"], run["answers"]["unparseable"]) == (n_expected - 3, 2)
    # issue #44 case 6: the other tasks have no answer at all, so they are not scored and the run is not complete
    assert run["complete"] is False and run["n_scored"] == 1
    assert {"kind": "tasks_not_answered", "tasks": [t.id for t in track.tasks if t.id != task.id]} in run["deviations"]
    row = (outcome.run_dir / "per_task.csv").read_text().splitlines()[3].split(",")
    assert row[:6] == [task.id, task.domain, task.topic, "4", str(task.best), str(task.worst)]
    assert row[6] == str(task.best) and row[10] == "1"  # trial 0: answered, Top-1 right
    assert row[13] == "" and row[17] == "0"  # trial 1: unparseable -> empty answer, wrong


@pytest.mark.parametrize(
    "lines,message",
    [
        (
            ['{"task_id": "vd-01", "trial": 0, "prompt_type": "pick_best", "best": "A"}', "not json"],
            ":2: not valid JSON (Expecting value); fix: write one JSON object per line",
        ),
        (
            ['{"task_id": "vd-01", "trial": 0, "prompt_type": "pick_best", "best": "A"}'] * 2,
            ":2: second answer for task vd-01 trial 0 pick_best attempt 1 (first on line 1); fix: keep one answer per task, trial, prompt type and attempt (number re-asks 2, 3, ...)",
        ),
        (
            ['{"task_id": "vd-01", "trial": 0, "prompt_type": "pick_best", "best": "A", "attempt": 0}'],
            ":1: attempt 0 is not a positive integer; fix: number the attempts of a request 1, 2, ...",
        ),
        (
            ['{"task_id": "vd-01", "trial": 3, "prompt_type": "pick_best", "best": "A"}'],
            ":1: trial 3 is not one of 0..2; fix: use the trial numbers of the export",
        ),
        (
            ['{"task_id": "vd-01", "trial": 0, "prompt_type": "pick_best_and_worst", "best": "A", "worst": "B"}'],
            ":1: task vd-01 has k = 2: pick_best_and_worst is not asked (for k = 2 it is derived from pick_best); fix: drop this line",
        ),
        (
            ['{"task_id": "vd-01", "prompt_type": "pick_best", "best": "A"}'],
            ":1: lacks trial; fix: give task_id, trial, prompt_type and response (or best/worst) on every line",
        ),
        (
            ['{"task_id": "vd-01", "trial": 0, "prompt_type": "pick_best"}'],
            ":1: has neither response, error nor best/worst; fix: give the raw response (or the API error, or the parsed labels)",
        ),
        (
            ['{"task_id": "nope", "trial": 0, "prompt_type": "pick_best", "best": "A"}'],
            ": answers for tasks not in track vab-demo: nope; fix: answer the tasks of this track (pstbench vab export --track vab-demo) or pass the track the answers belong to",
        ),
    ],
)
def test_bad_answers_file_messages(track, params, tmp_path, lines, message):
    path = tmp_path / "answers.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError) as e:
        ans.read_answers(path, track, params)
    assert str(e.value) == f"{path}{message}"


# ---- judges --------------------------------------------------------------------------------------


def test_pick_breaks_ties_by_presentation_position():
    scores = [1.0, 3.0, 3.0, 0.5, 0.5]
    assert pick(scores, (0, 1, 2, 3, 4)) == (1, 3)
    assert pick(scores, (4, 3, 2, 1, 0)) == (2, 4)
    assert pick([2.0, 2.0, 2.0], (2, 0, 1)) == (2, 2)  # all tied: the first presented is best and worst


def test_tied_judge_is_penalised_by_the_permutations(params):
    task = Task("tie", "tie", "d", "t", (Path("x"),) * 3, best=0, worst=2)
    answers = answers_from_scores(task, [1.0, 1.0, 1.0], params)
    orders = orders_for(task, params)
    assert [a["best"] for a in answers["pick_best"]] == [o[0] for o in orders]
    assert [a["worst"] for a in answers["pick_worst"]] == [o[0] for o in orders]
    assert not any(correctness(task, answers, ["tb1"])["tb1"])


def test_judge_num_trials_averages_calls(track, params, tmp_path):
    calls = []

    def judge(image):
        assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
        calls.append(1)
        return float(len(calls) % 2)  # alternates 1, 0: mean 0.5 with 2 calls

    judge.num_trials = 2
    session = SelectionSession(track, load_protocol("vab"), name="avg", results_dir=tmp_path)
    from pytest_pstbench.selection.judges import judge_from_callable

    result = session.score_task_with_judge(track.tasks[0], judge_from_callable(judge, spec="avg"))
    assert result.scores == [0.5] * track.tasks[0].k and len(calls) == 2 * track.tasks[0].k


@pytest.mark.parametrize(
    "spec,message",
    [
        (
            "nocolon",
            "--judge nocolon: expected module:function, path/to/file.py:function or pyiqa:METRIC (e.g. "
            "examples/judges/no_reference.py:sharpness, pyiqa:piqe)",
        ),
        (
            "missing/judge.py:f",
            "--judge missing/judge.py:f: file {cwd}/missing/judge.py not found; fix: give the path of a Python file (relative to the current folder)",
        ),
        (
            "no_such_module_xyz:f",
            "--judge no_such_module_xyz:f: cannot import module no_such_module_xyz (ModuleNotFoundError: No module named 'no_such_module_xyz'); fix: install it or give a file path",
        ),
        (
            f"{JUDGES}:nope",
            f"--judge {JUDGES}:nope: {JUDGES} has no attribute nope; fix: name a function defined there",
        ),
    ],
)
def test_load_judge_errors(tmp_path, spec, message):
    with pytest.raises(UserError) as e:
        load_judge(spec, base=tmp_path)
    assert str(e.value) == message.format(cwd=tmp_path)


def test_judge_failure_fails_the_task_only(track, tmp_path, capsys):
    bad = tmp_path / "bad_judge.py"
    bad.write_text(
        "import numpy as np\n"
        "def score(img):\n"
        "    if img[0, 0, 0] == FIRST:\n"
        "        raise ValueError('boom\\nsecond line')\n"
        "    return float(img.mean())\n"
    )
    first = np.asarray(__import__("PIL.Image", fromlist=["Image"]).open(track.tasks[0].candidates[0]).convert("RGB"))[
        0, 0, 0
    ]
    bad.write_text(bad.read_text().replace("FIRST", str(int(first))))
    code = cli_main(
        ["vab", "score", "--track", str(track.manifest), "--judge", f"{bad}:score", "--results", str(tmp_path / "r")]
    )
    assert code == 1
    run = json.loads((tmp_path / "r" / "vab-demo" / "score" / "run.json").read_text())
    assert run["complete"] is False
    failed = [f["task"] for f in run["failures"]]
    assert track.tasks[0].id in failed
    msg = run["failures"][0]["message"]
    assert msg.startswith(f"judge {bad}:score raised ValueError: boom second line (task ") and "\n" not in msg
    assert "run.json says complete: false" in capsys.readouterr().err


# ---- export, scoring, run files ------------------------------------------------------------------


def test_export_round_trip_scores_100_percent(track, params, tmp_path, capsys):
    out = tmp_path / "export"
    assert cli_main(["vab", "export", "--track", str(track.manifest), "--out", str(out)]) == 0
    manifest = json.loads((out / "export.json").read_text())
    assert [t["task_id"] for t in manifest["tasks"]] == track.task_ids
    # images in presentation order are the candidate files re-encoded as the official toolkit does:
    # convert("RGB"), JPEG quality 85, same size
    import io

    from PIL import Image

    task = track.tasks[4]
    trial = manifest["tasks"][4]["trials"][2]
    assert tuple(trial["order"]) == orders_for(task, params)[2]
    for pos, rel in enumerate(trial["images"]):
        buf = io.BytesIO()
        with Image.open(task.candidates[trial["order"][pos]]) as im:
            im.convert("RGB").save(buf, format="JPEG", quality=85)
            size = im.size
        assert (out / rel).read_bytes() == buf.getvalue()
        assert Path(rel).name == params.labels[pos] + ".jpg"
        with Image.open(out / rel) as got:
            assert (got.format, got.size) == ("JPEG", size)
    assert manifest["image"] == {"mode": "RGB", "format": "JPEG", "quality": 85, "exif_orientation": "when_tagged"}
    labels = params.labels[: task.k]
    prompt = (out / trial["prompts"]["pick_best_and_worst"]).read_text()
    assert (
        prompt
        == (  # the official template, verbatim
            f"You will be shown {task.k} images labeled {', '.join(labels)}. Evaluate the overall aesthetic quality of each image, "
            "considering composition, color, technique, and artistic expression.\n\n"
            "Which image has the best overall aesthetic quality, and which has the worst?\n"
            + "\n".join(f"{la}. Image {la}" for la in labels)
            + "\n\nYou may reason step by step. Then, on the very last lines of your response, write your final answers in exactly this format:\n"
            "BEST: X\nWORST: Y\nwhere X and Y are the letter labels."
        )
    )
    requests = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    req = next(
        r for r in requests if (r["task_id"], r["trial"], r["prompt_type"]) == (task.id, 2, "pick_best_and_worst")
    )
    expected = [{"type": "text", "text": prompt}]
    for la, rel in zip(labels, trial["images"]):
        expected += [{"type": "text", "text": f"\nImage {la}:"}, {"type": "image", "path": rel}]
    assert req["content"] == expected
    n_requests = len((out / "requests.jsonl").read_text().splitlines())
    assert n_requests == sum(3 * len(params.prompt_types_for(t.k)) for t in track.tasks)

    answers = _write_jsonl(tmp_path / "truth.jsonl", _truth_answers(track, params, out))
    assert (
        cli_main(
            [
                "vab",
                "score",
                "--track",
                str(track.manifest),
                "--answers",
                str(answers),
                "--results",
                str(tmp_path / "r"),
            ]
        )
        == 0
    )
    summary = json.loads((tmp_path / "r" / "vab-demo" / "truth" / "summary.json").read_text())
    for cell in summary["cells"]:
        for m in cell["metrics"].values():
            for agg in m.values():
                assert agg["mean"] == 1.0
    run = json.loads((tmp_path / "r" / "vab-demo" / "truth" / "run.json").read_text())
    assert run["answers"]["missing"] == run["answers"]["unparseable"] == 0
    assert run["judge"]["kind"] == "answers" and run["protocol"]["id"] == "vab" and run["complete"] is True
    capsys.readouterr()
    # exporting into a folder that is not empty is refused, nothing is changed
    assert cli_main(["vab", "export", "--track", str(track.manifest), "--out", str(out)]) == 2
    assert (
        capsys.readouterr().err
        == f"pstbench: error: {out}: export folder exists and is not empty; fix: give a new folder (or remove this one)\n"
    )


def test_scoring_is_deterministic_and_writes_run_files(track, tmp_path, capsys):
    args = ["vab", "score", "--track", str(track.manifest), "--judge", f"{JUDGES}:sharpness", "--results"]
    assert cli_main([*args, str(tmp_path / "a")]) == 0
    assert cli_main([*args, str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert (
        "track: vab-demo   protocol: vab   dataset: vab-demo@" in out
        and "ap@1 (mean ± half the 95% bootstrap CI; [random baseline])" in out
    )
    a, b = tmp_path / "a" / "vab-demo" / "sharpness", tmp_path / "b" / "vab-demo" / "sharpness"
    for name in ("per_task.csv", "summary.json"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    run = json.loads((a / "run.json").read_text())
    assert run["protocol"]["sha256"] == load_protocol("vab").sha256
    assert run["dataset"]["revision"] == track.revision and run["track"] == "vab-demo"
    assert run["judge"]["function"] == "sharpness" and run["judge"]["num_trials"] == 1
    assert len(run["judge"]["file_sha256"]) == 64
    assert run["complete"] is True and run["n_scored"] == len(track.tasks)


def test_score_needs_exactly_one_judge(track, capsys):
    assert cli_main(["vab", "score", "--track", str(track.manifest)]) == 2
    assert (
        capsys.readouterr().err
        == "pstbench: error: pstbench vab score: give exactly one of --answers FILE or --judge MODULE:FUNCTION (or pyiqa:METRIC)\n"
    )


def test_remote_vab_without_data_names_the_fetch_command(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv(
        "PSTBENCH_DATA", str(tmp_path / "data")
    )  # fetched and scored in tests/data/test_remote_vab_track.py
    assert cli_main(["vab", "export", "--track", "vab", "--out", "unused"]) == 2
    assert "fix: run `pstbench data fetch vab`" in capsys.readouterr().err


# ---- tracks --------------------------------------------------------------------------------------


def test_demo_is_deterministic_and_labels_pass_the_filter(demo_manifest, tmp_path, params):
    again = build_vab_demo(tmp_path / "vab-demo", size=(32, 24))
    a, b = load_selection_manifest(demo_manifest), load_selection_manifest(again)
    assert a.revision == b.revision
    assert [t.candidates[0].read_bytes() for t in a.tasks[:5]] == [t.candidates[0].read_bytes() for t in b.tasks[:5]]
    data = yaml.safe_load(demo_manifest.read_text())
    assert data["kind"] == "selection" and len(data["tasks"]) == 30
    assert sorted({t.k for t in a.tasks}) == [2, 3, 4, 5, 6]
    assert {t.domain for t in a.tasks} == {"photography", "science", "graphics"}
    for entry in data["tasks"]:
        k = len(entry["candidates"])
        m = params.consensus["thresholds"][k]
        assert entry["panel"]["best_votes"] >= m and (k == 2 or entry["panel"]["worst_votes"] >= m)
    from PIL import Image

    with Image.open(a.tasks[0].candidates[0]) as im:
        assert im.size == (32, 24) and im.mode == "RGB"
    # reused, not rebuilt
    mtime = demo_manifest.stat().st_mtime_ns
    assert build_vab_demo(demo_manifest.parent, size=(32, 24)) == demo_manifest
    assert demo_manifest.stat().st_mtime_ns == mtime


def test_local_manifest_and_errors(tmp_path, demo_manifest):
    src = demo_manifest.parent
    shutil.copytree(src / "vd-02", tmp_path / "imgs")
    good = {
        "kind": "selection",
        "id": "mine",
        "tasks": [{"id": 7, "candidates": ["imgs/c0.png", "imgs/c1.png", "imgs/c2.png"], "best": 1, "worst": 0}],
    }
    path = tmp_path / "track.yaml"
    path.write_text(yaml.safe_dump(good))
    t = resolve_selection_track(str(tmp_path))
    assert t.id == "mine" and t.tasks[0].seed == 7 and t.tasks[0].id == "7" and t.tasks[0].domain == "unspecified"
    assert orders_for(t.tasks[0], SelectionParams.of(load_protocol("vab"))) == trial_orders(
        7, 3
    )  # an int id seeds as an int
    assert is_selection_track(str(path)) and is_selection_track("vab-demo") and not is_selection_track("demo")

    def refused(mutate, message):
        data = json.loads(json.dumps(good))
        mutate(data)
        path.write_text(yaml.safe_dump(data))
        with pytest.raises(UserError) as e:
            load_selection_manifest(path)
        # issue #45 item 4: the file and line, the rule, an example of a good manifest
        assert re.fullmatch(
            rf"{re.escape(str(path))}:\d+: invalid selection track manifest: {re.escape(message)}"
            r"; expected e\.g\. `\{kind: selection, id: my-track, tasks: \[.*\]\}`",
            str(e.value),
        ), str(e.value)

    refused(lambda d: d["tasks"][0].pop("worst"), "task 7: `worst` is required when a task has 3 candidates")
    refused(
        lambda d: d["tasks"][0].update(best=3),
        "task 7: `best` must be a candidate index 0..2 (0-based, in the order listed), got 3",
    )
    refused(lambda d: d["tasks"][0].update(worst=1), "task 7: best and worst are both candidate 1; they must differ")
    refused(lambda d: d.pop("kind"), "`kind: selection` is missing (a manifest with `pairs` is a paired track)")
    refused(lambda d: d["tasks"].append(d["tasks"][0]), "task id '7' appears twice; task ids must be unique")
    refused(
        lambda d: d["tasks"][0]["candidates"].__setitem__(0, "imgs/none.png"),
        f"task 7: candidate file {tmp_path / 'imgs' / 'none.png'} does not exist; fix the path (relative to the manifest)",
    )


def test_a_bad_comparison_section_is_refused_when_the_protocol_loads(tmp_path):
    import yaml

    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.core.protocol import load_protocol

    data = yaml.safe_load(load_protocol("vab").path.read_text())
    data["comparison"]["alpha"] = 5
    bad = tmp_path / "vab-bad.yaml"
    bad.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(
        UserError, match=r"vab-bad.yaml: invalid selection protocol: comparison.alpha must be a number between 0 and 1"
    ):
        load_protocol(bad)
    del data["comparison"]  # optional: a protocol without it still loads (compare then says it is needed)
    bad.write_text(yaml.safe_dump(data, sort_keys=False))
    assert load_protocol(bad).id == "vab"
