"""Issue #44 cases 1, 2, 3 and 6 for selection runs: a gate or a table that believes a run's own claims.

A selection run is read through one validating loader (`selection.compare.validate_run`, behind
`core.store.reader.read_runs` / `core.compare.checked_runs`): its per_task.csv correctness cells are
recomputed from its picks, its labels and run.json's answers.problems; its summary.json cells from those
outcomes (`selection.accuracy.aggregate`); its completeness from the files. Expected values come from the
answer patterns the runs were scored from, never from the code under test."""

from __future__ import annotations

import csv
import io
import json
import shutil
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from helpers.selection_runs import GOOD, pattern, score, write_answers

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.selection.gate import evaluate_selection_gate
from pytest_pstbench.selection.protocol import SelectionParams
from pytest_pstbench.selection.tracks import resolve_selection_track

PERFECT = {"top1": 1.0, "bot1": 1.0, "tb1": 1.0}
WORSE_BOT1 = {"top1": 1.0, "bot1": 0.2, "tb1": 1.0}  # Bot-1 only (TB-1 of k = 2 tasks derives from pick_best)


def _cli(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli_main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("trust")
    demo = resolve_selection_track("vab-demo")
    protocol = load_protocol("vab")
    params = SelectionParams.of(protocol)
    runs = {
        "base": score(root, "base", demo, params, pattern(0, PERFECT)),
        "worse": score(root, "worse", demo, params, pattern(5, WORSE_BOT1)),
        "good": score(root, "good", demo, params, pattern(1, GOOD)),
    }
    return {"root": root, "demo": demo, "protocol": protocol, "params": params, "runs": runs}


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def _edit_rows(run_dir: Path, edit) -> None:
    with (run_dir / "per_task.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        edit(row)
    with (run_dir / "per_task.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def _edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _overall(summary: dict) -> dict:
    return next(c for c in summary["cells"] if c["group"] == "overall")


def _partial_answers(path: Path, world, keep: int) -> tuple[Path, list[str]]:
    """An answers file answering only the first `keep` tasks of vab-demo (every trial, every prompt type)."""
    full = write_answers(path, world["demo"], world["params"], pattern(1, GOOD))
    kept = [t.id for t in world["demo"].tasks[:keep]]
    lines = [line for line in full.read_text().splitlines() if json.loads(line)["task_id"] in kept]
    full.write_text("".join(line + "\n" for line in lines))
    return full, kept


# ---- case 1: an edited summary.json is refused, naming the file and the field --------------------------------
def test_case1_edited_summary_is_refused_by_table_and_compare(world, tmp_path):
    """issue #44 case 1: a summary.json edited to 0.950 is not printed by `pstbench table`."""
    edited = _copy(world["runs"]["good"], tmp_path / "good")
    summary = json.loads((edited / "summary.json").read_text())
    true_mean = _overall(summary)["metrics"]["top1"]["ap@1"]["mean"]
    assert true_mean != 0.95
    _edit_json(edited / "summary.json", lambda s: _overall(s)["metrics"]["top1"]["ap@1"].update(mean=0.95))
    for command in ("table", "compare"):
        code, out, err = _cli(command, world["runs"]["worse"], edited)
        assert code == 2, (command, out)
        assert "0.950" not in out
        assert err.count("\n") == 1 and "Traceback" not in err
        assert f"{edited / 'summary.json'}: cell overall=all: top1 ap@1 mean is 0.95 but per_task.csv gives " in err, (
            err
        )


def test_case1_edited_ci_and_n_are_refused(world, tmp_path):
    """issue #44 case 1: every number of summary.json's cells is checked, not only the means."""
    for field, value in (("ci_high", 0.999), ("n", 3)):
        edited = _copy(world["runs"]["good"], tmp_path / field)
        _edit_json(edited / "summary.json", lambda s: _overall(s)["metrics"]["bot1"]["pass^3"].update({field: value}))
        code, _, err = _cli("table", world["runs"]["worse"], edited)
        assert code == 2 and f"summary.json: cell overall=all: bot1 pass^3 {field} is {value}" in err, err


# ---- case 2: outcomes recomputed from picks and labels ---------------------------------------------------------
def test_case2_gate_refuses_a_baseline_whose_outcomes_contradict_its_picks(world, tmp_path):
    """issue #44 case 2: per_task.csv's correctness cells are recomputed from the picks and the labels."""
    runs, protocol = world["runs"], world["protocol"]
    untouched = evaluate_selection_gate(runs["worse"], protocol, baselines=[runs["base"]], metrics=None)
    assert any(r.startswith("bot1 pass^3 is significantly worse") for r in untouched.reasons), untouched.reasons
    edited = _copy(runs["base"], tmp_path / "base")
    _edit_rows(edited, lambda row: row.update({f"bot1_t{t}": "0" for t in range(3)}))
    with pytest.raises(UserError) as exc:
        evaluate_selection_gate(runs["worse"], protocol, baselines=[edited], metrics=None)
    first = world["demo"].tasks[0].id
    assert str(exc.value).startswith(
        f"{edited / 'per_task.csv'}: task {first}: bot1_t0 is 0 but its picks and labels give 1"
    ), exc.value


def test_case2_gate_refuses_a_baseline_whose_labels_are_not_the_tracks(world, tmp_path):
    """issue #44 case 2: where the track is at hand (the gate), a run's labels must be the track's."""
    runs, protocol, demo = world["runs"], world["protocol"], world["demo"]
    edited = _copy(runs["base"], tmp_path / "base")
    task = next(t for t in demo.tasks if t.k >= 3)
    wrong = next(i for i in range(task.k) if i not in (task.best, task.worst))
    _edit_rows(edited, lambda row: row.update(worst=str(wrong)) if row["task_id"] == task.id else None)
    with pytest.raises(UserError) as exc:
        evaluate_selection_gate(runs["worse"], protocol, baselines=[edited], metrics=None, track=demo)
    assert f"{edited / 'per_task.csv'}: task {task.id}: worst is {wrong} but track vab-demo says {task.worst}" in str(
        exc.value
    )


# ---- case 3: completeness is what the files show ---------------------------------------------------------------
def test_case3_gate_refuses_a_baseline_that_answers_one_task_but_says_complete(world, tmp_path):
    """issue #44 case 3: a baseline missing all answers but one task's, whose run.json says complete."""
    runs, protocol, demo, _params = world["runs"], world["protocol"], world["demo"], world["params"]
    answers, kept = _partial_answers(tmp_path / "one.jsonl", world, 1)
    code, _, _ = _cli(
        "vab", "score", "--track", "vab-demo", "--answers", answers, "--name", "one", "--results", tmp_path / "results"
    )
    one = tmp_path / "results" / "vab-demo" / "one"
    for name in ("run.json", "summary.json"):  # what the run claims
        _edit_json(one / name, lambda d: d.update(complete=True))
    with pytest.raises(UserError) as exc:
        evaluate_selection_gate(runs["worse"], protocol, baselines=[one], metrics=None)
    msg = str(exc.value)
    assert msg.startswith(f"{one / 'per_task.csv'}: task {demo.tasks[1].id}") and "complete: true" in msg, msg


# ---- case 6: one denominator; a run with unanswered tasks is incomplete -----------------------------------------
def test_case6_answers_for_2_of_30_tasks_make_an_incomplete_run(world, tmp_path):
    """issue #44 case 6: `vab score` on an answers file that answers 2 of vab-demo's 30 tasks."""
    answers, kept = _partial_answers(tmp_path / "two.jsonl", world, 2)
    code, out, err = _cli(
        "vab", "score", "--track", "vab-demo", "--answers", answers, "--name", "two", "--results", tmp_path / "results"
    )
    two = tmp_path / "results" / "vab-demo" / "two"
    run = json.loads((two / "run.json").read_text())
    summary = json.loads((two / "summary.json").read_text())
    unanswered = [t.id for t in world["demo"].tasks if t.id not in kept]
    assert code == 1
    assert run["complete"] is False and summary["complete"] is False
    assert run["n_scored"] == 2 and summary["n"] == 2 and run["n_tasks"] == 30
    assert {"kind": "tasks_not_answered", "tasks": unanswered} in run["deviations"]
    assert "incomplete: 2 of 30 tasks" in out
    assert err.startswith(f"pstbench: error: {answers}: answers none of the trials of 28 of the track's 30 tasks (")
    assert err.count("\n") == 1
    # every command sees the same: no command ranks, compares or gates it
    for command in ("table", "compare"):
        code, out, err = _cli(command, world["runs"]["good"], two)
        assert code == 2 and "complete: false (2 of 30 tasks scored)" in err, (command, err)
    result = evaluate_selection_gate(
        world["runs"]["worse"], world["protocol"], baselines=[], metrics=None, mins={"top1.ap@1": 0.5}
    )
    assert not result.reasons  # the full candidate itself is fine
    with pytest.raises(UserError, match="complete: false"):
        evaluate_selection_gate(world["runs"]["worse"], world["protocol"], baselines=[two], metrics=None)


def test_case6_complete_run_numbers_agree_between_score_table_and_compare(world):
    """issue #44 case 6: one denominator: a complete run's overall numbers in `pstbench table` are its summary's,
    and `pstbench compare` gives the same accuracies (every trial of this run is counted)."""
    runs = world["runs"]
    code, out, _ = _cli("compare", runs["good"], runs["worse"], "--json")
    assert code == 0
    tests = json.loads(out)["tests"]
    good = _overall(json.loads((runs["good"] / "summary.json").read_text()))["metrics"]
    for t in tests:
        assert t["acc_baseline"] == pytest.approx(good[t["metric"]][t["outcome"]]["mean"], abs=1e-12), t


def test_case6_a_complete_run_whose_value_counts_fewer_tasks_still_fails_the_coverage_check(world, tmp_path):
    """issue #44 case 6: a task answered for Top-1 but not for Bot-1 is answered (the run is complete), and a
    bound on Bot-1, which counts 29 of the 30 tasks, fails (comparison.min_counted_fraction 1)."""
    path = write_answers(tmp_path / "nobot.jsonl", world["demo"], world["params"], pattern(0, PERFECT))
    first = world["demo"].tasks[0].id
    lines = [
        x
        for x in path.read_text().splitlines()
        if not (json.loads(x)["task_id"] == first and json.loads(x)["prompt_type"] == "pick_worst")
    ]
    path.write_text("".join(x + "\n" for x in lines))
    code, _, _ = _cli(
        "vab", "score", "--track", "vab-demo", "--answers", path, "--name", "nobot", "--results", tmp_path / "r"
    )
    run_dir = tmp_path / "r" / "vab-demo" / "nobot"
    assert code == 0 and json.loads((run_dir / "run.json").read_text())["complete"] is True
    result = evaluate_selection_gate(run_dir, world["protocol"], baselines=[], metrics=None, mins={"bot1.ap@1": 0.5})
    assert [r.split(" (")[0] for r in result.reasons] == ["bot1 ap@1 counts 29 of the track's 30 tasks"]
