"""The human reference row (leave-one-out): each expert of a votes file scored against the consensus of the
other experts, the mean over experts with a bootstrap over experts.

The expected values below are worked out by hand in the comments (protocol vab: n_judges 10, thresholds
k=2: 8, k=3: 7, k=5: 5; left-out thresholds one lower: 7, 6, 4), not by the implementation.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
import yaml
from PIL import Image

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.core.stats import bootstrap_mean_ci
from pytest_pstbench.selection.human import human_reference
from pytest_pstbench.selection.protocol import SelectionParams
from pytest_pstbench.selection.tracks import load_selection_manifest

EXPERTS = [f"e{i:02d}" for i in range(1, 11)]
# task -> per expert (best, worst); candidate names as the votes file writes them
VOTES = {
    # k = 2, track label a. a: e01-e08 (8 of 10), b: e09, e10.
    # e01-e08: the others give a 7 of 9 >= 7 -> target a (worst b): right on all three metrics.
    # e09, e10: the others give a 8 of 9 -> a: wrong on all three.
    "T1": {e: ("a.png" if i < 8 else "b.png", "") for i, e in enumerate(EXPERTS)},
    # k = 3, track labels best a, worst c. Votes (best, worst):
    # e01-e06 (a, c); e07 (a, b); e08 (b, c); e09, e10 (b, a). Full panel: best a 7, worst c 7: accepted.
    # Without e01..e06: best a 6, b 3; worst c 6, a 2, b 1 -> (a, c): right, right, right.
    # Without e07: best a 6; worst c 7 -> (a, c): e07 (a, b) is right on Top-1 only.
    # Without e08: best a 7; worst c 6 -> (a, c): e08 (b, c) is right on Bot-1 only.
    # Without e09 / e10: (a, c): (b, a) is wrong on all three.
    "T2": {
        **{e: ("t2/a.png", "t2/c.png") for e in EXPERTS[:6]},
        "e07": ("t2/a.png", "t2/b.png"),
        "e08": ("t2/b.png", "t2/c.png"),
        "e09": ("t2/b.png", "t2/a.png"),
        "e10": ("t2/b.png", "t2/a.png"),
    },
    # k = 5 (candidates by index), track labels best 0, worst 4. best: 0 by e01-e05, 1 by e06-e09, 2 by e10;
    # worst: 4 by e01-e06, 3 by e07-e10. Full panel: best 0 with 5 (b 4), worst 4 with 6: accepted.
    # Without e01..e05: best 0 4, 1 4 -> a tie: no consensus, T3 is left out for e01-e05 (5 exclusions).
    # Without e06 (1, 4): best 0 5, 1 3; worst 4 5, 3 4 -> (0, 4): Bot-1 right only.
    # Without e07-e09 (1, 3): (0, 4) -> all wrong. Without e10 (2, 3): best 0 5, 1 4; worst 4 6 -> all wrong.
    "T3": {
        **{e: ("0", "4") for e in EXPERTS[:5]},
        "e06": ("1", "4"),
        **{e: ("1", "3") for e in EXPERTS[6:9]},
        "e10": ("2", "3"),
    },
    "T9": {e: ("x", "") for e in EXPERTS},  # a task the filter rejected: not in the track, ignored
}
K = {"T1": 2, "T2": 3, "T3": 5, "T9": 2}

# Per expert (Top-1, Bot-1, TB-1) over the tasks scored for them; an expert's answer is the same in every
# trial, so pass^3 = ap@1 task by task:
#   e01-e05: T1 (1,1,1), T2 (1,1,1), T3 left out -> (1, 1, 1)
#   e06: T1 (1,1,1), T2 (1,1,1), T3 (0,1,0)     -> (2/3, 1, 2/3)
#   e07: T1 (1,1,1), T2 (1,0,0), T3 (0,0,0)     -> (2/3, 1/3, 1/3)
#   e08: T1 (1,1,1), T2 (0,1,0), T3 (0,0,0)     -> (1/3, 2/3, 1/3)
#   e09, e10: all wrong                           -> (0, 0, 0)
PER_EXPERT = {
    **{e: (1, 1, 1) for e in EXPERTS[:5]},
    "e06": (Fraction(2, 3), 1, Fraction(2, 3)),
    "e07": (Fraction(2, 3), Fraction(1, 3), Fraction(1, 3)),
    "e08": (Fraction(1, 3), Fraction(2, 3), Fraction(1, 3)),
    "e09": (0, 0, 0),
    "e10": (0, 0, 0),
}
# The row: the mean over the 10 experts. Top-1 (5 + 2/3 + 2/3 + 1/3) / 10 = 2/3; Bot-1 (5 + 1 + 1/3 + 2/3) / 10
# = 7/10; TB-1 (5 + 2/3 + 1/3 + 1/3) / 10 = 19/30.
OVERALL = {"top1": Fraction(2, 3), "bot1": Fraction(7, 10), "tb1": Fraction(19, 30)}
# k = 2 (T1 alone, 10 experts): 8 of 10 right on each metric. k = 3 (T2): Top-1 e01-e07 = 0.7, Bot-1 e01-e06 and
# e08 = 0.7, TB-1 e01-e06 = 0.6. k = 5 (T3: e06-e10 only): Top-1 0, Bot-1 1/5 (e06), TB-1 0.
BY_K = {"2": (0.8, 0.8, 0.8, 10), "3": (0.7, 0.7, 0.6, 10), "5": (0.0, 0.2, 0.0, 5)}


def write_track(root: Path, votes_rows=None, with_votes_key=True) -> Path:
    def img(rel, shade):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (6, 5), (shade, 40, 90)).save(p)
        return rel

    tasks = [
        {"id": "T1", "domain": "photo", "topic": "pair", "candidates": [img("a.png", 10), img("b.png", 20)], "best": 0},
        {
            "id": "T2",
            "domain": "photo",
            "topic": "triple",
            "candidates": [img(f"t2/{c}.png", 30 + i) for i, c in enumerate("abc")],
            "best": 0,
            "worst": 2,
        },
        {
            "id": "T3",
            "domain": "art",
            "topic": "five",
            "candidates": [img(f"t3/{c}.png", 50 + i) for i, c in enumerate("abcde")],
            "best": 0,
            "worst": 4,
        },
    ]
    rows = (
        votes_rows
        if votes_rows is not None
        else [f"{tid},{K[tid]},{e},{b},{w}" for tid, per in VOTES.items() for e, (b, w) in per.items()]
    )
    (root / "votes.csv").write_text("task_id,k,judge,best,worst\n" + "\n".join(rows) + "\n")
    manifest = {"kind": "selection", "id": "humantrack", "revision": "h1", "tasks": tasks}
    if with_votes_key:
        manifest["votes"] = "votes.csv"
    (root / "track.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return root / "track.yaml"


@pytest.fixture(scope="module")
def params():
    return SelectionParams.of(load_protocol("vab"))


def _cell(human, group, value):
    return next(c for c in human["cells"] if (c["group"], c["value"]) == (group, value))


def test_leave_one_out_matches_the_hand_computed_case(tmp_path, params):
    track = load_selection_manifest(write_track(tmp_path))
    human = human_reference(track, track.votes, params)
    assert human["label"] == "Human (leave-one-out, 10 experts)"
    assert (human["experts"], human["tasks"], human["judgments"], human["excluded_no_consensus"]) == (10, 3, 25, 5)
    assert (
        human["voted_tasks_not_in_track"] == 1
        and human["tasks_without_votes"] == []
        and human["label_disagreements"] == []
    )
    assert human["thresholds"] == [
        {"k": 2, "n": 10, "m": 8, "m_others": 7},
        {"k": 3, "n": 10, "m": 7, "m_others": 6},
        {"k": 5, "n": 10, "m": 5, "m_others": 4},
    ]
    per = {p["expert"]: p for p in human["per_expert"]}
    for e, want in PER_EXPERT.items():
        assert per[e]["tasks"] == (2 if e <= "e05" else 3) and per[e]["excluded"] == (1 if e <= "e05" else 0)
        for metric, w in zip(("top1", "bot1", "tb1"), want):
            for agg in ("ap@1", "pass^3"):
                assert per[e]["metrics"][metric][agg] == pytest.approx(float(w), abs=1e-12), (e, metric, agg)
    overall = _cell(human, "overall", "all")
    assert overall["n_experts"] == 10 and overall["n_tasks"] == 3
    boot = params.bootstrap
    for i, metric in enumerate(("top1", "bot1", "tb1")):
        values = [float(PER_EXPERT[e][i]) for e in EXPERTS]
        ci = bootstrap_mean_ci(values, confidence=boot["confidence"], resamples=boot["resamples"], seed=boot["seed"])
        for agg in ("ap@1", "pass^3"):
            e = overall["metrics"][metric][agg]
            assert e["mean"] == pytest.approx(float(OVERALL[metric]), abs=1e-12) and e["n"] == 10
            assert (e["ci_low"], e["ci_high"]) == pytest.approx(
                (ci.ci_low, ci.ci_high)
            )  # the bootstrap is over experts
    for k, (top, bot, tb, n) in BY_K.items():
        c = _cell(human, "k", k)
        assert c["n_experts"] == n
        got = [c["metrics"][m]["ap@1"]["mean"] for m in ("top1", "bot1", "tb1")]
        assert got == pytest.approx([top, bot, tb], abs=1e-12), k


def test_a_votes_file_that_does_not_fit_the_track_is_refused(tmp_path, params):
    bad_name = [
        f"{t},{K[t]},{e},{'q.png' if b == 'a.png' else b},{w}" for t, per in VOTES.items() for e, (b, w) in per.items()
    ]
    track = load_selection_manifest(write_track(tmp_path / "a", bad_name))
    with pytest.raises(
        UserError,
        match=r"votes.csv: task T1: judge e01 votes 'q.png', which is none of its candidates; fix: "
        r"name a candidate by its 0-based index, its label, its file path",
    ):
        human_reference(track, track.votes, params)
    wrong_k = ["T2,4,e01,0,1", "T2,4,e02,0,1"]
    track = load_selection_manifest(write_track(tmp_path / "b", wrong_k))
    with pytest.raises(
        UserError, match=r"votes.csv: task T2 has k = 4 in the votes but 3 candidates in track humantrack"
    ):
        human_reference(track, track.votes, params)
    (tmp_path / "c").mkdir()
    manifest = write_track(tmp_path / "c")
    (tmp_path / "c" / "votes.csv").unlink()
    with pytest.raises(UserError, match=r"votes file .*votes.csv does not exist"):
        load_selection_manifest(manifest)


def test_vab_score_prints_the_human_row_and_writes_it_to_summary_json(tmp_path, capsys):
    manifest = write_track(tmp_path / "trk")
    assert (
        cli_main(
            [
                "vab",
                "score",
                "--track",
                str(manifest),
                "--judge",
                "examples/judges/no_reference.py:sharpness",
                "--results",
                str(tmp_path / "r"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "Human (leave-one-out, 10 experts)" in out
    run_dir = tmp_path / "r" / "humantrack" / "sharpness"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["human"]["label"] == "Human (leave-one-out, 10 experts)"
    assert _cell(summary["human"], "overall", "all")["metrics"]["top1"]["ap@1"]["mean"] == pytest.approx(2 / 3)
    run = json.loads((run_dir / "run.json").read_text())
    assert run["human"]["votes"] == str((tmp_path / "trk" / "votes.csv").resolve()) and run["human"]["experts"] == 10
    # --votes gives (or replaces) the votes file; without one, no human row
    plain = write_track(tmp_path / "plain", with_votes_key=False)
    assert (
        cli_main(
            [
                "vab",
                "score",
                "--track",
                str(plain),
                "--judge",
                "examples/judges/no_reference.py:sharpness",
                "--results",
                str(tmp_path / "r2"),
            ]
        )
        == 0
    )
    assert "Human" not in capsys.readouterr().out
    assert "human" not in json.loads((tmp_path / "r2" / "humantrack" / "sharpness" / "summary.json").read_text())
    assert (
        cli_main(
            [
                "vab",
                "score",
                "--track",
                str(plain),
                "--judge",
                "examples/judges/no_reference.py:sharpness",
                "--votes",
                str(tmp_path / "plain" / "votes.csv"),
                "--results",
                str(tmp_path / "r3"),
            ]
        )
        == 0
    )
    s3 = json.loads((tmp_path / "r3" / "humantrack" / "sharpness" / "summary.json").read_text())
    assert s3["human"] == summary["human"]


def test_the_table_shows_the_human_row_as_a_reference_row(tmp_path, capsys):
    """`pstbench table`: the human row after Random, from summary.json, never ranked and never tested: between an
    oracle judge (1.0) and a constant one, the constant judge is still underlined as the second best; a run
    scored with another votes file is refused."""
    manifest = write_track(tmp_path / "trk")
    judges = tmp_path / "judges.py"
    judges.write_text(
        "def oracle(image):\n    return -float(image[..., 0].mean())  # the least red is the best\n\n"
        "def constant(image):\n    return 0.0\n"
    )
    results = tmp_path / "r"
    for judge in ("oracle", "constant"):
        assert (
            cli_main(
                ["vab", "score", "--track", str(manifest), "--judge", f"{judges}:{judge}", "--results", str(results)]
            )
            == 0
        )
    runs = [str(results / "humantrack" / j) for j in ("oracle", "constant")]
    capsys.readouterr()
    assert cli_main(["table", *runs, "--format", "json"]) == 0
    table = json.loads(capsys.readouterr().out)
    label = "Human (leave-one-out, 10 experts)"
    assert table["rows"][:2] == ["Random", label] and table["reference_rows"] == ["Random", label]
    assert table["tracks"][0]["human"]["experts"] == 10
    summary = json.loads((results / "humantrack" / "oracle" / "summary.json").read_text())
    overall = _cell(summary["human"], "overall", "all")
    for col in table["columns"]:
        h, oracle, const = col["cells"][label], col["cells"]["oracle"], col["cells"]["constant"]
        assert h["value"] == overall["metrics"][col["metric"]][col["aggregation"]]["mean"]
        assert h["rank"] is None and h["worse"] is False and h["test"] is None and col["reference"] == "oracle"
        assert oracle["value"] == 1.0 and oracle["rank"] == 1
        assert const["value"] < h["value"] and const["rank"] == 2, col["label"]  # the human row takes no place
    assert table["n_tests"] == 6  # the constant judge against the oracle per column: the human row is in no test
    assert any(label in line and "not ranked, not tested" in line for line in table["legend"])
    assert cli_main(["table", *runs]) == 0
    md = capsys.readouterr().out
    assert f"| {label} | 0.667 ± " in md
    assert cli_main(["table", *runs, "--format", "latex"]) == 0
    tex = capsys.readouterr().out.splitlines()
    assert tex[tex.index(next(x for x in tex if x.startswith("Human (leave-one-out"))) + 1] == "\\midrule"
    # a run of the same track scored with another votes file: one line, exit 2
    other = tmp_path / "other.csv"
    other.write_text((tmp_path / "trk" / "votes.csv").read_text().replace("T3,5,e10,2,3", "T3,5,e10,1,3"))
    assert (
        cli_main(
            [
                "vab",
                "score",
                "--track",
                str(manifest),
                "--judge",
                f"{judges}:oracle",
                "--votes",
                str(other),
                "--name",
                "oracle2",
                "--results",
                str(results),
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert cli_main(["table", *runs, str(results / "humantrack" / "oracle2")]) == 2
    assert "its human reference row differs from the one of" in capsys.readouterr().err


def test_pytest_prints_the_human_row_and_writes_the_same_summary_as_the_cli(tmp_path, pytester):
    manifest = write_track(tmp_path / "trk", with_votes_key=False)
    votes = tmp_path / "trk" / "votes.csv"
    judge = f"{Path(__file__).resolve().parents[2] / 'examples' / 'judges' / 'no_reference.py'}:sharpness"
    assert (
        cli_main(
            [
                "vab",
                "score",
                "--track",
                str(manifest),
                "--judge",
                judge,
                "--votes",
                str(votes),
                "--results",
                str(tmp_path / "cli"),
            ]
        )
        == 0
    )
    r = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={manifest}",
        f"--pstbench-judge={judge}",
        f"--pstbench-votes={votes}",
    )
    r.assert_outcomes(passed=3)
    r.stdout.fnmatch_lines(
        [
            "*Human (leave-one-out, 10 experts), ap@1 = pass^3 (mean over experts*",
            "*human: 25 expert-task votes of 10 experts on 3 tasks*5 left out (no consensus among the others)*",
        ]
    )
    got = (pytester.path / "results" / "humantrack" / "sharpness" / "summary.json").read_bytes()
    assert got == (tmp_path / "cli" / "humantrack" / "sharpness" / "summary.json").read_bytes()
    bad = tmp_path / "bad.csv"
    bad.write_text("task_id,k,judge,best,worst\nT1,2,e01,zz.png,\n")
    r = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--pstbench-track={manifest}", f"--pstbench-judge={judge}", f"--pstbench-votes={bad}"
    )
    assert r.ret == 4
    r.stderr.fnmatch_lines(["*bad.csv: task T1: judge e01 votes 'zz.png', which is none of its candidates; fix:*"])
