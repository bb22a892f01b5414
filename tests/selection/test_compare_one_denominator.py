"""Issue #44 case 6, compare's part: one denominator for a run in every command. A trial the protocol does
not count (vab: a missing answer is `absent`) is in no denominator of the run's summary, so compare's
McNemar units leave it out too; before, compare counted it as wrong (a perfect judge with one missing answer
was "worse" in compare while its summary said 1.0)."""

from __future__ import annotations

import json

from helpers.selection_runs import write_answers

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.selection.protocol import SelectionParams
from pytest_pstbench.selection.tracks import resolve_selection_track


def _score(root, name, answers):
    assert (
        cli_main(
            [
                "vab",
                "score",
                "--track",
                "vab-demo",
                "--answers",
                str(answers),
                "--name",
                name,
                "--results",
                str(root / "results"),
            ]
        )
        == 0
    )
    return root / "results" / "vab-demo" / name


def _overall(run, metric, agg):
    summary = json.loads((run / "summary.json").read_text())
    return next(c for c in summary["cells"] if c["group"] == "overall")["metrics"][metric][agg]["mean"]


def test_a_trial_the_summary_does_not_count_is_no_unit_of_compare(tmp_path, capsys):
    track = resolve_selection_track("vab-demo")
    params = SelectionParams.of(load_protocol("vab"))
    perfect = write_answers(tmp_path / "perfect.jsonl", track, params, lambda *_: True)
    lines = perfect.read_text().splitlines()
    first = track.tasks[0].id
    gap = [
        x
        for x in lines
        if not (
            json.loads(x)["task_id"] == first
            and json.loads(x)["trial"] == 1
            and json.loads(x)["prompt_type"] == "pick_best"
        )
    ]
    assert len(gap) == len(lines) - 1
    (tmp_path / "gap.jsonl").write_text("\n".join(gap) + "\n")
    base, cand = _score(tmp_path, "base", perfect), _score(tmp_path, "gap", tmp_path / "gap.jsonl")
    assert _overall(cand, "top1", "ap@1") == 1.0  # the absent trial: in no denominator
    assert _overall(cand, "top1", "pass^3") == 29 / 30  # pass^3 needs trials.count counted trials (official)
    capsys.readouterr()
    assert cli_main(["compare", str(base), str(cand), "--json"]) == 0
    tests = {(t["metric"], t["outcome"]): t for t in json.loads(capsys.readouterr().out)["tests"]}
    top1 = tests[("top1", "ap@1")]
    n_units = sum(params.trials for _ in track.tasks)
    assert top1["n"] == n_units - 1 and top1["c"] == 0 and top1["b"] == 0  # the one uncounted trial is left out
    assert top1["acc_candidate"] == _overall(cand, "top1", "ap@1") == 1.0
    # pass^3: the task keeps its two counted trials, right, but pass^3 needs trials.count counted ones (official)
    p3 = tests[("top1", "pass^3")]
    assert p3["n"] == len(track.tasks) and p3["acc_candidate"] == _overall(cand, "top1", "pass^3")
