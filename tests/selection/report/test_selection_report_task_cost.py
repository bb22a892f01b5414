"""Issue #53 item 9: the selection report shows each task's cost (run.json judge.cost per_task) in the task's answers
block: the sum of its trials, each trial's cost, and "unknown" where a trial's line had no usage."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.selection.protocol import SelectionParams
from pytest_pstbench.selection.report.answers import render_answers


def _html(per_task: dict, tid: str) -> str:
    params = SelectionParams.of(load_protocol("vab"))
    run = {"judge": {"cost": {"currency": "USD", "per_task": per_task}}}
    answers = SimpleNamespace(path=Path("a.answers.jsonl"), statuses={}, details={}, texts={})
    judge = SimpleNamespace(answers=answers, label="m1", run=SimpleNamespace(run=run))
    out: list[str] = []
    render_answers(SimpleNamespace(params=params), judge, 0, tid, 3, out.append)
    return "\n".join(out)


def test_each_tasks_cost_is_shown_with_its_trials():
    html = _html({"t1": [0.0004, 0.0005, 0.0003], "t2": [0.0004, None, 0.0003]}, "t1")
    assert "cost of this task: 0.0012 USD (trials 0.0004, 0.0005, 0.0003)" in html  # 0.0004 + 0.0005 + 0.0003
    html = _html({"t1": [0.0004, 0.0005, 0.0003], "t2": [0.0004, None, 0.0003]}, "t2")
    assert "cost of this task: unknown (trials 0.0004, unknown, 0.0003)" in html
    assert "cost of this task" not in _html({}, "t1")
