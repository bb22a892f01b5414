"""`pstbench reproduce` of a selection run (the kind's `reproduce` hook): the judge scored again as `pstbench vab
score` scores it (an answers file, or a judge `MODULE:FUNCTION` / `pyiqa:METRIC`: selection.run_judge, then
selection.session.score_all) under the run's recorded protocol file and track at its dataset revision, into a
scratch folder; every task's outcome (its per_task.csv row) must then be the run's."""

from __future__ import annotations

from pathlib import Path


def reproduce(request):
    """The selection run `request.run` scored again from `request.outputs` -> core.reproduce.Reproduction."""
    from pytest_pstbench.core.reproduce import (
        Reproduction,
        check_track,
        csv_differences,
        failure_lines,
        recorded_protocol,
        track_spec,
    )
    from pytest_pstbench.core.store.reader import run_field
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.run_judge import answers_judge, function_judge
    from pytest_pstbench.selection.session import SelectionSession, score_all
    from pytest_pstbench.selection.tracks import resolve_selection_track

    run = request.run
    protocol = recorded_protocol(run, request.protocol_spec)
    params = SelectionParams.of(protocol)
    track = resolve_selection_track(track_spec(run, request.track_spec), progress=request.progress)
    check_track(run, track)
    given = str(request.outputs)
    chosen = (
        answers_judge(Path(given), track, params)
        if Path(given).is_file() or ":" not in given
        else function_judge(given, Path.cwd(), params, device=request.device or "cpu")
    )
    session = SelectionSession(
        track,
        protocol,
        name=str(run.record.name),
        results_dir=Path(request.work),
        judge=chosen.provenance,
        command="pstbench reproduce",
    )
    outcome = score_all(session, answer_set=chosen.answer_set, judge=chosen.judge)
    old = (Path(run.path) / "per_task.csv").read_bytes().decode("utf-8", "replace")
    new = (Path(outcome.run_dir) / "per_task.csv").read_bytes().decode("utf-8", "replace")
    then = run_field(run, "environment") if isinstance(run_field(run, "environment"), dict) else {}
    return Reproduction(
        kind="selection",
        compared=("per_task.csv",),
        differences=[]
        if old == new
        else csv_differences(Path(run.path) / "per_task.csv", Path(outcome.run_dir) / "per_task.csv", "task_id")
        or [{"item": "per_task.csv", "fields": ["bytes"]}],
        then=then,
        now=outcome.run.get("environment") or {},
        failures=failure_lines(outcome.run, "task"),
    )
