"""Issue #28: `pstbench vab study`, the ranking-vs-scoring protocol study (selection/study.py).

Every statistic is checked on a hand-made 8-annotator file against an independent computation:
scipy.stats.kendalltau (tau-b), scipy.stats.entropy, scipy.stats.friedmanchisquare (Kendall's W =
chi2_F / (m (n - 1)), tie-corrected), scipy.stats.wilcoxon and an exact enumeration of the signed-rank
distribution, the exact McNemar p from math.comb, and values worked out by hand in the comments.
Bad input is one line (exit 2).
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
import yaml

from pytest_pstbench.cli import main
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import load_protocol, protocols_dir
from pytest_pstbench.core.stats import bootstrap_mean_ci
from pytest_pstbench.selection.study import run_study, study_csv

ROOT = Path(__file__).resolve().parents[2]
ANN = [f"a{i}" for i in range(1, 9)]

# task -> images, then per annotator: scores (in image order) and the ranking (images best to worst)
TASKS = {
    "T1": (
        "x y z".split(),
        {
            "a1": ((9, 9, 2), "x y z"),  # tie at the top: x and y get half a best vote each
            "a2": ((8, 6, 3), "x y z"),
            "a3": ((8, 6, 3), "x y z"),
            "a4": ((8, 6, 3), "x y z"),
            "a5": ((7, 8, 3), "x y z"),  # scores y best but ranks x first
            "a6": ((7, 7, 7), "x y z"),  # every score equal: no tau-b, a third of each vote to each image
            "a7": ((9, 5, 1), "x y z"),
            "a8": ((6, 8, 2), "y x z"),
        },
    ),
    "T2": (
        "p q r s".split(),
        {
            **{a: ((9, 7, 5, 2), "p q r s") for a in ("a1", "a2", "a5", "a6", "a7", "a8")},
            "a3": ((8, 9, 5, 2), "q p r s"),
            "a4": ((9, 5, 6, 1), "p r q s"),
        },
    ),
    "T3": (
        "i1 i2 i3 i4 i5".split(),
        {
            "a1": ((8, 8, 6, 4, 3), "i1 i2 i3 i4 i5"),
            "a2": ((7, 6, 7, 3, 3), "i1 i3 i2 i4 i5"),
            "a3": ((6, 7, 5, 5, 2), "i1 i2 i4 i3 i5"),
            "a4": ((9, 7, 6, 4, 5), "i1 i2 i3 i5 i4"),
            "a5": ((5, 6, 6, 2, 3), "i1 i3 i2 i5 i4"),
            "a6": ((7, 8, 6, 5, 5), "i2 i1 i3 i4 i5"),
            "a7": ((8, 8, 4, 6, 4), "i2 i1 i4 i3 i5"),
            "a8": ((6, 7, 7, 3, 2), "i2 i3 i1 i4 i5"),
        },
    ),
    "T4": (
        "f g h".split(),
        {
            "a1": ((7, 6, 2), "f g h"),
            "a2": ((7, 3, 5), "f h g"),
            "a3": ((6, 7, 2), "g f h"),
            "a4": ((5, 8, 3), "g h f"),
            "a5": ((6, 5, 4), "h f g"),
            "a6": ((8, 6, 3), "f g h"),
            "a7": ((6, 7, 2), "g f h"),
            "a8": ((4, 5, 6), "h g f"),
        },
    ),
    "T5": (
        "u v w".split(),
        {
            **{a: ((9, 9, 1), "u v w") for a in ("a1", "a2", "a3", "a4", "a5", "a6")},  # u: 6 halves + 2 = 5 votes
            "a7": ((8, 5, 2), "u v w"),
            "a8": ((8.5, 5, 2), "u v w"),
        },
    ),
    "T6": (
        "k1 k2 k3 k4".split(),
        {
            "a1": ((7, 8, 5, 1), "k1 k2 k3 k4"),
            "a2": ((8, 4, 8, 2), "k1 k3 k2 k4"),
            "a3": ((9, 6, 6, 3), "k1 k2 k3 k4"),
            "a4": ((6, 7, 6, 2), "k1 k2 k3 k4"),
            "a5": ((7, 5, 7, 0), "k1 k3 k2 k4"),
            "a6": ((8, 8, 8, 8), "k1 k2 k3 k4"),
            "a7": ((7, 9, 3, 1), "k2 k1 k3 k4"),
            "a8": ((4, 6, 6, 4), "k2 k3 k1 k4"),
        },
    ),
    "T7": ("e1 e2 e3".split(), {a: ((10, 5, 0), "e1 e2 e3") for a in ANN}),  # unanimous; the scale's ends
}


def csv_text(tasks=TASKS) -> str:
    lines = ["task_id,annotator,image,score,rank"]
    for tid, (images, by_ann) in tasks.items():
        for a, (scores, order) in by_ann.items():
            ranking = order.split()
            for img, s in zip(images, scores):
                lines.append(f"{tid},{a},{img},{s},{ranking.index(img) + 1}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def annotations(tmp_path) -> Path:
    path = tmp_path / "annotations.csv"
    path.write_text(csv_text())
    return path


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("study") / "annotations.csv"
    path.write_text(csv_text())
    return run_study(path)


def by_task(result) -> dict:
    return {r["task_id"]: r for r in result["per_task"]}


# ---- an independent computation of the definitions (scipy, Counter, Fractions) -------------------


def ranks_of(order: str, images) -> list[int]:
    ranking = order.split()
    return [ranking.index(i) + 1 for i in images]


def score_votes(images, by_ann, lowest=False) -> Counter:
    """Best (worst) votes under scoring, ties split."""
    votes = Counter({i: Fraction(0) for i in images})
    for scores, _ in by_ann.values():
        top = (min if lowest else max)(scores)
        tied = [i for i, s in zip(images, scores) if s == top]
        for i in tied:
            votes[i] += Fraction(1, len(tied))
    return votes


def rank_votes(images, by_ann, worst=False) -> Counter:
    return Counter(order.split()[-1 if worst else 0] for _, order in by_ann.values())


def reached(votes: Counter, m: int):
    (first, n1), *rest = votes.most_common()
    return first if n1 >= m and (not rest or rest[0][1] < n1) else None


def mcnemar_by_hand(b: int, c: int) -> float:
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2**n)


def exact_signed_rank_p(d) -> float:
    """Two-sided exact p of the signed-rank statistic by enumerating all sign assignments (no ties, no zeros)."""
    d = [x for x in d if x != 0]
    ranks = scipy.stats.rankdata(np.abs(d))
    observed = sum(r for r, x in zip(ranks, d) if x > 0)
    stats = [sum(r for r, s in zip(ranks, signs) if s) for signs in itertools.product((0, 1), repeat=len(d))]
    mean = sum(ranks) / 2
    return min(1.0, sum(1 for s in stats if abs(s - mean) >= abs(observed - mean) - 1e-12) / len(stats))


def kendall_w_friedman(matrix) -> float:
    """Kendall's W with the tie correction from scipy's Friedman test: W = chi2_F / (m (n - 1))."""
    m, n = len(matrix), len(matrix[0])
    chi2 = scipy.stats.friedmanchisquare(*np.asarray(matrix, dtype=float).T).statistic
    return chi2 / (m * (n - 1))


# ---- the statistics ------------------------------------------------------------------------------


def test_fidelity_tau_b_and_self_consistency_match_independent_computation(result):
    rows = by_task(result)
    all_task_tau, all_task_cons = [], []
    per_ann = {a: ([], []) for a in ANN}
    for tid, (images, by_ann) in TASKS.items():
        taus, cons = [], []
        for a, (scores, order) in by_ann.items():
            tau = scipy.stats.kendalltau(scores, [-r for r in ranks_of(order, images)], variant="b").statistic
            top = [i for i, s in zip(images, scores) if s == max(scores)]
            c = (1 / len(top)) if order.split()[0] in top else 0.0
            cons.append(c)
            per_ann[a][1].append(c)
            if not math.isnan(tau):
                taus.append(tau)
                per_ann[a][0].append(tau)
        assert rows[tid]["kendall_tau_b"] == pytest.approx(np.mean(taus), abs=1e-12)
        assert rows[tid]["tau_undefined"] == len(by_ann) - len(taus)
        assert rows[tid]["top1_self_consistency"] == pytest.approx(np.mean(cons), abs=1e-12)
        all_task_tau.append(np.mean(taus))
        all_task_cons.append(np.mean(cons))
    # T1 by hand: a1 (9,9,2) vs ranks x<y<z: 2 concordant, 1 pair tied in scores: 2 / sqrt(2 * 3);
    # a5: 2 - 1 of 3 pairs; a6 undefined; the other five 1 -> (2/sqrt(6) + 1/3 + 5) / 7
    assert rows["T1"]["kendall_tau_b"] == pytest.approx((2 / math.sqrt(6) + 1 / 3 + 5) / 7, abs=1e-12)
    # T1 self-consistency: a1 1/2 (x tied with y), a5 0, a6 1/3 (all tied), five 1 -> (1/2 + 1/3 + 5) / 8
    assert rows["T1"]["top1_self_consistency"] == pytest.approx((0.5 + 1 / 3 + 5) / 8, abs=1e-12)
    fid = result["fidelity"]
    assert fid["tau_undefined"] == 2  # T1 a6, T6 a6
    assert fid["kendall_tau_b"]["mean"] == pytest.approx(np.mean(all_task_tau), abs=1e-12)
    assert fid["top1_self_consistency"]["mean"] == pytest.approx(np.mean(all_task_cons), abs=1e-12)
    for a, (taus, cons) in per_ann.items():
        e = fid["per_annotator"][a]
        assert e["tasks"] == 7 and e["tau_undefined"] == 7 - len(taus)
        assert e["kendall_tau_b"]["mean"] == pytest.approx(np.mean(taus), abs=1e-12)
        assert e["top1_self_consistency"]["mean"] == pytest.approx(np.mean(cons), abs=1e-12)


def test_reproducibility_and_mcnemar_match_hand_computation(result):
    rows = by_task(result)
    hits = {lab: {p: [] for p in ("ranking", "scoring")} for lab in ("best", "worst", "both")}
    for tid, (images, by_ann) in TASKS.items():
        labels = {
            "ranking": (reached(rank_votes(images, by_ann), 5), reached(rank_votes(images, by_ann, worst=True), 5)),
            "scoring": (reached(score_votes(images, by_ann), 5), reached(score_votes(images, by_ann, lowest=True), 5)),
        }
        for p, (best, worst) in labels.items():
            assert rows[tid][f"best_{p}"] == best and rows[tid][f"worst_{p}"] == worst, (tid, p)
            hits["best"][p].append(best is not None)
            hits["worst"][p].append(worst is not None)
            hits["both"][p].append(best is not None and worst is not None and best != worst)
            assert rows[tid][f"both_{p}"] == hits["both"][p][-1]
    # by hand (module comments of TASKS): best under ranking in every task but T4 (f 3, g 3, h 2 votes),
    # under scoring only in T2, T5 (u: 6 x 1/2 + 2 = 5 votes, exactly m) and T7
    assert hits["best"]["ranking"] == [True, True, True, False, True, True, True]
    assert hits["best"]["scoring"] == [False, True, False, False, True, False, True]
    assert hits["worst"]["ranking"] == [True, True, True, False, True, True, True]
    assert hits["worst"]["scoring"] == [True, True, False, True, True, True, True]
    rep = result["reproducibility"]
    expected_bc = {"best": (3, 0), "worst": (1, 1), "both": (3, 0)}
    ps = {}
    for lab in ("best", "worst", "both"):
        for p in ("ranking", "scoring"):
            assert rep[lab][p]["mean"] == pytest.approx(np.mean(hits[lab][p]), abs=1e-12)
        diff = np.array(hits[lab]["ranking"], float) - np.array(hits[lab]["scoring"], float)
        assert rep[lab]["difference"]["mean"] == pytest.approx(diff.mean(), abs=1e-12)
        b = sum(1 for r, s in zip(hits[lab]["ranking"], hits[lab]["scoring"]) if r and not s)
        c = sum(1 for r, s in zip(hits[lab]["ranking"], hits[lab]["scoring"]) if s and not r)
        assert (b, c) == expected_bc[lab] == (rep[lab]["mcnemar"]["b"], rep[lab]["mcnemar"]["c"])
        ps[lab] = mcnemar_by_hand(b, c)
        assert rep[lab]["mcnemar"]["p"] == pytest.approx(ps[lab], abs=1e-15)
    assert ps["best"] == 0.25 and ps["worst"] == 1.0  # 2 * (1/2)^3; b = c
    for lab in ps:  # Bonferroni over the three tests
        assert rep[lab]["mcnemar"]["p_bonferroni"] == pytest.approx(min(1.0, 3 * ps[lab]), abs=1e-15)
    assert rep["best"]["mcnemar"]["p_bonferroni"] == 0.75
    assert rep["best"]["ranking"]["mean"] == pytest.approx(6 / 7) and rep["best"]["scoring"]["mean"] == pytest.approx(
        3 / 7
    )


def test_distinguishability_entropy_unanimity_and_wilcoxon(result):
    rows = by_task(result)
    h = {"ranking": [], "scoring": []}
    uni = {"ranking": [], "scoring": []}
    for tid, (images, by_ann) in TASKS.items():
        for p, votes in (("ranking", rank_votes(images, by_ann)), ("scoring", score_votes(images, by_ann))):
            counts = [float(votes[i]) for i in images]
            h[p].append(scipy.stats.entropy(counts))  # natural log, normalised
            uni[p].append(max(counts) == 8)
            assert rows[tid][f"entropy_{p}"] == pytest.approx(h[p][-1], abs=1e-12), (tid, p)
            assert rows[tid][f"unanimous_{p}"] == uni[p][-1]
    # T1 by hand: ranking best votes 7, 1 of 8; scoring x 29/6, y 17/6, z 1/3
    assert rows["T1"]["entropy_ranking"] == pytest.approx(
        -(7 / 8 * math.log(7 / 8) + 1 / 8 * math.log(1 / 8)), abs=1e-12
    )
    p1 = [29 / 48, 17 / 48, 2 / 48]
    assert rows["T1"]["entropy_scoring"] == pytest.approx(-sum(p * math.log(p) for p in p1), abs=1e-12)
    assert (
        uni["ranking"] == [False, False, False, False, True, False, True]
        and uni["scoring"][-1]
        and sum(uni["scoring"]) == 1
    )
    dist = result["distinguishability"]
    for p in ("ranking", "scoring"):
        assert dist["entropy"][p]["mean"] == pytest.approx(np.mean(h[p]), abs=1e-12)
        assert dist["unanimous"][p]["mean"] == pytest.approx(np.mean(uni[p]), abs=1e-12)
    d = np.array(h["ranking"]) - np.array(h["scoring"])
    assert dist["entropy"]["difference"]["mean"] == pytest.approx(d.mean(), abs=1e-12)
    ref = scipy.stats.wilcoxon(d, zero_method="wilcox", alternative="two-sided")
    wil = dist["entropy"]["wilcoxon"]
    assert wil["n_nonzero"] == 5  # T2 (same votes) and T7 (both unanimous) are zero differences, dropped
    assert wil["p"] == pytest.approx(ref.pvalue, abs=1e-12) and wil["statistic"] == pytest.approx(ref.statistic)
    assert wil["p"] == pytest.approx(exact_signed_rank_p(d), abs=1e-12)


def test_kendall_w_matches_friedman_and_hand_values(result):
    rows = by_task(result)
    for tid, (images, by_ann) in TASKS.items():
        scores = [list(s) for s, _ in by_ann.values()]
        ranks = [ranks_of(o, images) for _, o in by_ann.values()]
        assert rows[tid]["w_scoring"] == pytest.approx(kendall_w_friedman(scores), abs=1e-12), tid
        assert rows[tid]["w_ranking"] == pytest.approx(
            kendall_w_friedman([[-r for r in rk] for rk in ranks]), abs=1e-12
        ), tid
    # T1 by hand. Score ranks (1 = highest, ties averaged): rank sums x 11.5, y 13.5, z 23 (mean 16),
    # S = 4.5^2 + 2.5^2 + 7^2 = 75.5; ties: a1 a pair (2^3 - 2 = 6), a6 all three (24): sum T = 30;
    # W = 12 * 75.5 / (8^2 * (27 - 3) - 8 * 30) = 906 / 1296. Direct ranks: sums 9, 15, 24, S = 114,
    # W = 12 * 114 / (64 * 24) = 57/64.
    assert rows["T1"]["w_scoring"] == pytest.approx(906 / 1296, abs=1e-15)
    assert rows["T1"]["w_ranking"] == pytest.approx(57 / 64, abs=1e-15)
    assert rows["T7"]["w_scoring"] == rows["T7"]["w_ranking"] == 1.0
    w = result["kendall_w"]
    assert w["scoring"]["mean"] == pytest.approx(np.mean([r["w_scoring"] for r in result["per_task"]]), abs=1e-12)
    assert w["ranking"]["mean"] == pytest.approx(np.mean([r["w_ranking"] for r in result["per_task"]]), abs=1e-12)


def test_w_is_undefined_when_every_score_ties_and_such_a_task_is_kept(tmp_path):
    tasks = {"T7": TASKS["T7"], "flat": ("a b c".split(), {a: ((5, 5, 5), "a b c") for a in ANN})}
    path = tmp_path / "a.csv"
    path.write_text(csv_text(tasks))
    res = run_study(path, max_w=0.5)
    flat = by_task(res)["flat"]
    assert flat["w_scoring"] is None and flat["kendall_tau_b"] is None and flat["tau_undefined"] == 8
    assert flat["kept"] and res["tasks"]["dropped"] == ["T7"]
    assert res["fidelity"]["kendall_tau_b"]["n"] == 0 and res["fidelity"]["kendall_tau_b"]["mean"] is None
    assert flat["entropy_scoring"] == pytest.approx(math.log(3)) and flat["best_scoring"] is None


def test_every_mean_has_the_bootstrap_interval_of_the_protocol(result, tmp_path, annotations):
    boot = load_protocol("vab").data["aggregation"]["bootstrap"]
    assert result["bootstrap"]["seed"] == boot["seed"] and result["bootstrap"]["resamples"] == boot["resamples"]
    values = [r["entropy_scoring"] for r in result["per_task"]]
    ref = bootstrap_mean_ci(values, confidence=boot["confidence"], resamples=boot["resamples"], seed=boot["seed"])
    e = result["distinguishability"]["entropy"]["scoring"]
    assert (e["mean"], e["ci_low"], e["ci_high"]) == (ref.mean, ref.ci_low, ref.ci_high)
    assert e["ci_low"] < e["mean"] < e["ci_high"]
    # another seed in a protocol variant changes the interval (the seed is read from the protocol)
    data = yaml.safe_load((protocols_dir() / "vab.yaml").read_text())
    data["id"] = "vab-seed7"
    data["aggregation"]["bootstrap"]["seed"] = 7
    variant = tmp_path / "vab-seed7.yaml"
    variant.write_text(yaml.safe_dump(data, sort_keys=False))
    other = run_study(annotations, protocol=str(variant))
    ref7 = bootstrap_mean_ci(values, confidence=boot["confidence"], resamples=boot["resamples"], seed=7)
    e7 = other["distinguishability"]["entropy"]["scoring"]
    assert (e7["ci_low"], e7["ci_high"]) == (ref7.ci_low, ref7.ci_high) != (e["ci_low"], e["ci_high"])
    assert other["protocol"]["id"] == "vab-seed7"


# ---- options -------------------------------------------------------------------------------------


def test_max_w_drops_tasks_at_or_above_it_and_the_rest_equals_a_file_without_them(tmp_path, result):
    rows = by_task(result)
    w5 = rows["T5"]["w_scoring"]
    assert sorted(r["w_scoring"] for r in result["per_task"])[-2:] == [w5, 1.0]  # T5, then T7 (W = 1)
    path = tmp_path / "a.csv"
    path.write_text(csv_text())
    dropped = run_study(path, max_w=w5)  # at the threshold: dropped
    assert dropped["tasks"] == {"read": 7, "kept": 5, "dropped": ["T5", "T7"]} and dropped["max_w"] == w5
    without = tmp_path / "b.csv"
    without.write_text(csv_text({k: v for k, v in TASKS.items() if k not in ("T5", "T7")}))
    alone = run_study(without)
    for key in ("fidelity", "reproducibility", "distinguishability", "kendall_w"):
        assert dropped[key] == alone[key], key
    assert dropped["reproducibility"] != result["reproducibility"]
    assert [r["task_id"] for r in dropped["per_task"] if not r["kept"]] == ["T5", "T7"]
    assert run_study(path, max_w=1.0)["tasks"]["dropped"] == ["T7"]  # W = 1 is at 1.0
    assert run_study(path, max_w=0.825)["tasks"]["dropped"] == ["T2", "T5", "T7"]  # the paper's threshold


def test_majority_option_and_ties_for_most_votes(tmp_path, annotations):
    six = by_task(run_study(annotations, majority=6))
    assert six["T5"]["best_scoring"] is None and by_task(run_study(annotations))["T5"]["best_scoring"] == "u"
    three = by_task(run_study(annotations, majority=3))
    assert three["T4"]["best_ranking"] is None  # f and g have 3 votes each: a tie is no label
    assert three["T4"]["worst_ranking"] == "h"  # h 4, f 2, g 2
    # one image reaches m best and m worst votes (m = 4 of 8): "both" needs two different images
    order = {
        **{a: "A B C" for a in ("a1", "a2")},
        **{a: "A C B" for a in ("a3", "a4")},
        **{a: "B C A" for a in ("a5", "a6")},
        **{a: "C B A" for a in ("a7", "a8")},
    }
    tasks = {
        "split": ("A B C".split(), {a: ((9, 6, 3) if o.startswith("A") else (1, 6, 3), o) for a, o in order.items()})
    }
    path = tmp_path / "split.csv"
    path.write_text(csv_text(tasks))
    row = run_study(path, majority=4)["per_task"][0]
    assert row["best_ranking"] == "A" and row["worst_ranking"] == "A" and row["both_ranking"] is False


def test_default_majority_is_a_strict_majority_of_the_tasks_annotators(tmp_path):
    three = {
        "T": ("x y z".split(), {"a1": ((9, 5, 1), "x y z"), "a2": ((9, 5, 1), "x y z"), "a3": ((1, 5, 9), "z y x")})
    }
    path = tmp_path / "three.csv"
    path.write_text(csv_text(three))
    res = run_study(path)
    assert res["majority"] == {"given": None, "rule": "2 of 3 (strict majority)"}
    assert res["per_task"][0]["majority"] == 2 and res["per_task"][0]["best_ranking"] == "x"
    assert run_study(path, majority=3)["per_task"][0]["best_ranking"] is None


# ---- the command and the Python API --------------------------------------------------------------


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


def test_cli_prints_the_tables_and_writes_study_json_and_csv(annotations, tmp_path, capsys, result):
    out = tmp_path / "out"
    assert main(["vab", "study", str(annotations), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith(
        f"study: {annotations}   tasks: 7 of 7   annotators: 8   majority: 5 of 8 (strict majority)   protocol: vab"
    )
    assert re.search(
        r"^best +0\.857 \[[0-9.]+, [0-9.]+\] +0\.429 \[[0-9.]+, [0-9.]+\] +0\.429 \[[-0-9.]+, [0-9.]+\] +3/0 +0\.25 +0\.75$",
        text,
        flags=re.M,
    ), text
    data = json.loads((out / "study.json").read_text())
    data["annotations"]["path"] = result["annotations"]["path"]
    assert data == json.loads(json.dumps(result))
    assert (out / "study.csv").read_text() == study_csv(result)
    header, *rows = (out / "study.csv").read_text().splitlines()
    assert header.startswith("task_id,kept,n_images,n_annotators,majority,w_scoring")
    assert len(rows) == 7 and rows[0].startswith("T1,1,3,8,5,")


def test_api_vab_study(annotations, tmp_path, result):
    import pytest_pstbench as pst

    res = pst.vab_study(annotations, out=tmp_path / "o")
    assert res["reproducibility"] == result["reproducibility"] and (tmp_path / "o" / "study.json").is_file()
    with pytest.raises(
        UserError, match=r"^vab_study\(majority=9\): task T1 has only 8 annotators; fix: give at most 8"
    ):
        pst.vab_study(annotations, majority=9)


def test_docs_worked_example_is_the_real_output(monkeypatch, capsys):
    """docs/selection.md's "Protocol study" example, as printed by the command it shows."""
    text = (ROOT / "docs" / "selection.md").read_text()
    section = text.split("## Protocol study", 1)[1].split("\n## ", 1)[0]
    command, printed = re.search(
        r"```bash\n(pstbench vab study [^\n]*)\n```\n\n```text\n(.*?)```", section, flags=re.S
    ).groups()
    monkeypatch.chdir(ROOT)
    assert main(command.split()[1:]) == 0
    assert capsys.readouterr().out == printed


# ---- bad input: one line each --------------------------------------------------------------------

GOOD = csv_text()
LINE_OF = {line: n for n, line in enumerate(GOOD.splitlines(), 1)}


def _edit(old: str, new: str) -> str:
    assert GOOD.count(old + "\n") == 1, old
    return GOOD.replace(old + "\n", new + "\n" if new else "")


BAD = [
    (
        "missing rank",
        _edit("T1,a2,y,6,2", "T1,a2,y,6,"),
        f"annotations.csv:{LINE_OF['T1,a2,y,6,2']}: task T1, annotator a2, image y: missing rank; fix: give every image of the task its rank (1 = best)",
    ),
    (
        "rank twice",
        _edit("T1,a2,y,6,2", "T1,a2,y,6,1"),
        f"annotations.csv:{LINE_OF['T1,a2,y,6,2']}: task T1, annotator a2, image y: rank 1 is also given to image x (line "
        f"{LINE_OF['T1,a2,x,8,1']}); fix: each annotator ranks a task's n images 1..n, each rank once",
    ),
    (
        "rank beyond n",
        _edit("T1,a2,z,3,3", "T1,a2,z,3,4"),
        f"annotations.csv:{LINE_OF['T1,a2,z,3,3']}: task T1, annotator a2, image z: rank 4 but the task has 3 images; fix: ranks 1..3 (1 = best), each once",
    ),
    (
        "rank not a number",
        _edit("T1,a2,z,3,3", "T1,a2,z,3,2.5"),
        f"annotations.csv:{LINE_OF['T1,a2,z,3,3']}: task T1, annotator a2, image z: rank '2.5' is not a whole number from 1 to the task's number of images; fix: give the rank as 1, 2, ... (1 = best)",
    ),
    (
        "rank 0",
        _edit("T1,a2,z,3,3", "T1,a2,z,3,0"),
        "rank '0' is not a whole number from 1 to the task's number of images",
    ),
    ("rank unicode digit", _edit("T1,a2,z,3,3", "T1,a2,z,3,\u00b2"), "rank '\u00b2' is not a whole number from 1"),
    (
        "score above 10",
        _edit("T1,a2,z,3,3", "T1,a2,z,11,3"),
        f"annotations.csv:{LINE_OF['T1,a2,z,3,3']}: task T1, annotator a2, image z: score '11' is not a number from 0 to 10; fix: give the score on the 0-10 scale",
    ),
    ("score below 0", _edit("T1,a2,z,3,3", "T1,a2,z,-0.5,3"), "score '-0.5' is not a number from 0 to 10"),
    ("score nan", _edit("T1,a2,z,3,3", "T1,a2,z,nan,3"), "score 'nan' is not a number from 0 to 10"),
    (
        "image missing",
        _edit("T1,a2,z,3,3", ""),
        f"annotations.csv:{LINE_OF['T1,a2,x,8,1']}: task T1: annotator a2 rates 2 of the task's 3 images (not z); fix: one row per image of the task and annotator",
    ),
    (
        "one annotator",
        "task_id,annotator,image,score,rank\nS,a1,x,5,1\nS,a1,y,4,2\n",
        "annotations.csv:2: task S has one annotator (a1); the study compares annotators; fix: give at least 2 annotators per task",
    ),
    (
        "rated twice",
        GOOD + "T7,a8,e1,10,1\n",
        f"annotations.csv:{len(GOOD.splitlines()) + 1}: task T7, annotator a8, image e1: rated twice (first on line {LINE_OF['T7,a8,e1,10,1']}); fix: one row per task, annotator and image",
    ),
    (
        "one image",
        "task_id,annotator,image,score,rank\nS,a1,x,5,1\nS,a2,x,4,1\n",
        "annotations.csv:2: task S has 1 image(s) but protocol vab covers tasks of 2-6 images (candidates.min/max); fix: check the task's rows",
    ),
    (
        "column missing",
        "task_id,annotator,image,score\nS,a1,x,5\n",
        "annotations.csv:1: the header lacks column(s) rank; fix: give a header row with task_id,annotator,image,score,rank",
    ),
    (
        "cells",
        GOOD.replace("T1,a1,x,9,1\n", "T1,a1,x,9,1,extra\n"),
        f"annotations.csv:{LINE_OF['T1,a1,x,9,1']}: 6 cells but the header has 5 columns; fix: one cell per column (quote a cell that holds a comma)",
    ),
    (
        "empty",
        "",
        "annotations.csv: the annotations file is empty; fix: give a header row with task_id,annotator,image,score,rank, then one row per entry",
    ),
    (
        "no rows",
        "task_id,annotator,image,score,rank\n",
        "annotations.csv: no annotations; fix: give one row per task, annotator and image",
    ),
]


@pytest.mark.parametrize("text,message", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_annotations_are_one_line(tmp_path, monkeypatch, capsys, text, message):
    monkeypatch.chdir(tmp_path)
    Path("annotations.csv").write_text(text)
    assert main(["vab", "study", "annotations.csv"]) == 2
    line = _one_line(capsys)
    assert line.startswith("pstbench: error: ") and message in line, line


def test_bad_files_and_options_are_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("annotations.csv").write_text(GOOD)
    Path("latin1.csv").write_bytes(GOOD.encode() + "T9,a1,caf\xe9,5,1\n".encode("latin-1"))
    cases = [
        (
            ["missing.csv"],
            "missing.csv: annotations file not found; fix: give a CSV with columns task_id,annotator,image,score,rank",
        ),
        (
            ["latin1.csv"],
            f"latin1.csv:{len(GOOD.splitlines()) + 1}: not UTF-8 text; fix: save the annotations file as a UTF-8 CSV",
        ),
        (
            ["annotations.csv", "--majority", "9"],
            "--majority 9: task T1 has only 8 annotators; fix: give at most 8 (or leave it out: a strict majority of each task's annotators)",
        ),
        (["annotations.csv", "--majority", "0"], "--majority 0: must be a whole number of annotators, at least 1"),
        (["annotations.csv", "--max-w", "1.5"], "--max-w 1.5: must be a number in (0, 1]"),
        (["annotations.csv", "--max-w", "nan"], "--max-w nan: must be a number in (0, 1]"),
        (
            ["annotations.csv", "--max-w", "0.1"],
            "--max-w 0.1: drops every task (the lowest Kendall's W of the score rankings is 0.",
        ),
    ]
    for argv, message in cases:
        assert main(["vab", "study", *argv]) == 2, argv
        line = _one_line(capsys)
        assert message in line, (argv, line)
    Path("out").write_text("a file where the folder belongs")
    assert main(["vab", "study", "annotations.csv", "--out", "out"]) == 2
    assert "cannot write the study's files" in _one_line(capsys)


def test_the_bounded_csv_reader(tmp_path):
    from pytest_pstbench.core.files.csvfile import read_csv

    kw = {"what": "annotations file", "columns": ("a", "b"), "fix": "give a CSV"}
    path = tmp_path / "x.csv"
    path.write_text('a,b,c\n\n1,"2,3",4\r\n 5 ,6,7\n')
    rows = read_csv(path, **kw)
    assert [(r.line, r.cells) for r in rows] == [
        (3, {"a": "1", "b": "2,3", "c": "4"}),
        (4, {"a": " 5 ", "b": "6", "c": "7"}),
    ]
    with pytest.raises(
        UserError, match=r"x.csv: the annotations file is larger than the limit of 10 bytes; fix: split it"
    ):
        read_csv(path, max_bytes=10, **kw)
    path.write_text("a,b,a\n1,2,3\n")
    with pytest.raises(UserError, match=r"x.csv:1: the header names column a twice; fix: give a header row with a,b$"):
        read_csv(path, **kw)
    with pytest.raises(UserError, match=r": is a folder, not the annotations file; fix: give a CSV$"):
        read_csv(tmp_path, **kw)
    path.write_bytes(b"\xef\xbb\xbfa,b\n1,2\n")  # a BOM is dropped
    assert read_csv(path, **kw)[0].cells == {"a": "1", "b": "2"}
