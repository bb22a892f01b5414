"""The judge of a selection run, chosen once for both front doors (`pstbench vab score|run` and the
pytest plugin's --pstbench-answers / --pstbench-model / --pstbench-judge): what scores the tasks (an
answers file's parsed answers, or a scoring function), what run.json records as the judge, the run's
default name and the label of its tables.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pytest_pstbench.selection.answers import AnswerSet, read_answers
from pytest_pstbench.selection.judges import Judge, load_judge


@dataclass(frozen=True)
class RunJudge:
    answer_set: AnswerSet | None  # the answers that score the tasks, or
    judge: Judge | None  # the scoring function that does
    provenance: dict  # run.json's `judge`
    default_name: str  # the run's name when none is given
    label: str  # how the tables' header names the judge


def model_run_name(model: str) -> str:
    """A model's default run name: the last part of its name, in file-name characters."""
    return re.sub(r"[^A-Za-z0-9._+-]", "_", model.rsplit("/", 1)[-1]) or "model"


def answers_judge(
    path: Path,
    track,
    params,
    *,
    model: str | None = None,
    model_api: dict | None = None,
    answer_set: AnswerSet | None = None,
) -> RunJudge:
    """An answers file as the judge: named after the file (its stem, its name). A model's answers
    (`model`, asked at the endpoint whose settings are `model_api`) are named after the model, and
    run.json's judge adds the endpoint's settings and the protocol's attempt limits. `answer_set`: the
    file already read (by its writer, under its lock); otherwise it is read here."""
    if answer_set is None:
        answer_set = read_answers(path, track, params)
    if model is None:
        return RunJudge(answer_set, None, answer_set.provenance(), path.stem, path.name)
    provenance = {**answer_set.provenance(), "model_api": model_api, "attempts": params.attempts}
    return RunJudge(answer_set, None, provenance, model_run_name(model), model)


def function_judge(spec: str, base: Path, params, device: str = "cpu") -> RunJudge:
    """A scoring function `module:function` or `path/to/file.py:function` (a relative path against `base`), or a
    pyiqa metric `pyiqa:NAME` or a paper reward model `vab-paper:NAME` (created on `device`), as the judge: named
    after the function (`pyiqa-NAME`, `vab-paper-NAME`), labelled with the spec."""
    judge = load_judge(spec, base=base, default_num_trials=int(params.judge["num_trials"]), device=device)
    prov = judge.provenance
    name = (
        f"pyiqa-{prov['metric']}"
        if prov.get("kind") == "pyiqa"
        else f"vab-paper-{prov['model']}"
        if prov.get("kind") == "vab-paper"
        else prov.get("function", "judge")
    )
    return RunJudge(None, judge, prov, name, spec)
