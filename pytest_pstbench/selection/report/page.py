"""The page model of a selection report: the runs read through the one validating reader, the summary
table `pstbench table` prints (selection/paper_table.py), the track's tasks with their candidates, and per
judge the picks of each trial (per_task.csv, which the reader has checked against the labels), the tasks it
got wrong in some order and the tasks whose pick moved between orders."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.store.reader import check_same_setting, run_field
from pytest_pstbench.selection.run_check import PICK_COLUMNS

#: The pick columns of per_task.csv, as the page shows them: (heading, the columns of one trial's answer).
PICK_VIEWS = (("best", ("best_t",)), ("worst", ("worst_t",)), ("best+worst", ("bw_best_t", "bw_worst_t")))


@dataclass
class Thumb:
    src: str | None  # relative to the page's folder
    missing: str | None = None
    size: tuple[int, int] | None = None


@dataclass
class TaskInfo:
    id: str
    domain: str
    topic: str
    k: int
    best: int
    worst: int
    candidates: list[Path] = field(default_factory=list)  # the track's files, in track order (none: no track)
    orders: list[tuple[int, ...]] | None = None  # per trial: position -> candidate (permutations.orders_for)
    thumbs: list[Thumb] = field(default_factory=list)


@dataclass
class Judge:
    label: str
    run: object  # SelectionRunFiles
    wrong: list[str]  # task ids wrong in some counted trial of some metric
    moved: list[str]  # task ids whose pick differs between trials
    answers: object = None  # report/answers.JudgeAnswers: a model judge's answer texts, where its file is read here

    def picks(self, tid: str, trial: int) -> dict[str, list[int | None] | None]:
        """Heading -> the picked candidates of the trial's answer (None: no answer in that prompt type)."""
        row = self.run.rows.get(tid) or {}
        out = {}
        for heading, cols in PICK_VIEWS:
            cells = [row.get(f"{c}{trial}") for c in cols]
            out[heading] = None if any(c in (None, "") for c in cells) else [int(c) for c in cells]
        return out

    def moved_picks(self, tid: str, trials: int) -> set[str]:
        """The headings whose answer names other candidates in different trials (unanswered trials aside)."""
        seen: dict[str, set] = {}
        for t in range(trials):
            for heading, picks in self.picks(tid, t).items():
                if picks is not None:
                    seen.setdefault(heading, set()).add(tuple(picks))
        return {h for h, values in seen.items() if len(values) > 1}


@dataclass
class SelectionPage:
    runs: list
    judges: list[Judge]
    table: object  # core.paper_table.Table of `pstbench table`
    params: object  # SelectionParams
    protocol_id: str
    protocol_sha256: str
    track_id: str
    dataset_id: str
    revision: str
    task_ids: list[str]
    tasks: dict[str, TaskInfo]
    shown: list[str]
    left_out: list[str]
    published: list[bool]
    notes: list[str] = field(default_factory=list)
    figures: list[tuple[str, str]] = field(default_factory=list)  # (caption, relative path)
    bias_figures: dict[int, str] = field(default_factory=dict)  # judge index -> its position-bias figure
    colors: dict[str, str] = field(default_factory=dict)
    shown_index: dict[str, int] = field(default_factory=dict)  # task id -> its anchor number in the gallery
    track: object = None  # the track the runs were scored on, where it could be opened
    sections: list = field(default_factory=list)  # core.kinds.PageSection the report frame adds (`--history`)


def metric_cells(run, tid: str, metric: str, trials: int) -> list[str]:
    """The row's `<metric>_t<t>` cells: "1" right, "0" wrong, "-" not counted ("" in a task with an error)."""
    row = run.rows.get(tid) or {}
    return [row.get(f"{metric}_t{t}", "") for t in range(trials)]


def wrong_tasks(run, params) -> list[str]:
    return [tid for tid in run.task_ids if any("0" in metric_cells(run, tid, m, params.trials) for m in params.metrics)]


def moved_tasks(run, params) -> list[str]:
    cols = [c for pairs in PICK_COLUMNS.values() for _, c in pairs]
    out = []
    for tid in run.task_ids:
        row = run.rows[tid]
        if any(len({row.get(f"{c}{t}") for t in range(params.trials)} - {"", None}) > 1 for c in cols):
            out.append(tid)
    return out


def read_page(request) -> SelectionPage:
    from pytest_pstbench.core.store.reader import read_runs
    from pytest_pstbench.selection.compare import SELECTION_RUNS
    from pytest_pstbench.selection.paper_table import build_selection_table
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.report.answers import attach_answers

    if "--max-pairs" in request.given:
        raise UserError(
            f"--max-pairs {request.kind_options['max_pairs']}: bounds the pairs of a page of paired runs, and these are "
            "selection runs; fix: use --max-tasks N"
        )
    if "--worst" in request.given:
        raise UserError(
            f"--worst {request.kind_options['worst']}: lists the pairs paired runs lost most on, and these are selection runs; "
            "fix: leave --worst out (the page lists each judge's wrong tasks)"
        )
    if request.sensitivity is not None:
        raise UserError(
            f"--sensitivity {request.sensitivity}: a sensitivity analysis is of paired runs, and these are "
            "selection runs; fix: leave --sensitivity out"
        )
    paths = [s.path for s in request.sources]
    _kind, runs, protocol = read_runs(
        paths, protocol_spec=request.protocol_spec, kind=SELECTION_RUNS, comparable=True, check=check_same_setting
    )  # the one validating reader; the runs are read once
    table = build_selection_table(
        paths, metrics=None, against="best", protocol_spec=request.protocol_spec, checked=(runs, protocol)
    )
    params = SelectionParams.of(protocol)
    names = [r.name for r in runs]
    labels = [n if names.count(n) == 1 else f"{n} ({r.path})" for n, r in zip(names, runs)]
    judges = [Judge(label, r, wrong_tasks(r, params), moved_tasks(r, params)) for label, r in zip(labels, runs)]
    first = runs[0]
    task_ids: list[str] = []
    for r in runs:
        have = set(task_ids)
        task_ids += [t for t in r.task_ids if t not in have]
    tasks = {}
    for tid in task_ids:
        row = next(r.rows[tid] for r in runs if tid in r.rows)
        tasks[tid] = TaskInfo(
            tid, row.get("domain", ""), row.get("topic", ""), int(row["k"]), int(row["best"]), int(row["worst"])
        )
    page = SelectionPage(
        runs,
        judges,
        table,
        params,
        str(run_field(first, "protocol", "id")),
        str(run_field(first, "protocol", "sha256")),
        str(run_field(first, "track")),
        str(run_field(first, "dataset", "id")),
        str(run_field(first, "dataset", "revision")),
        task_ids,
        tasks,
        [],
        [],
        [s.uri is not None for s in request.sources],
    )
    attach_track(page, request.track_spec, request.progress, run_field(first, "dataset", "manifest"))  # track order
    max_tasks = request.kind_options["max_tasks"]
    page.shown = page.task_ids if max_tasks == 0 else page.task_ids[:max_tasks]
    page.left_out = page.task_ids[len(page.shown) :]
    attach_answers(page)  # the shown tasks' answer texts of each model judge
    return page


def attach_track(page: SelectionPage, track_spec: str | None, progress, manifest) -> None:
    """The candidates and trial orders of every task from the track the runs were scored on (`--track`, else
    the manifest run.json records for a local run, else the track id); a track that cannot be opened or is
    another revision leaves the images out with a note (an error when --track names it)."""
    from pytest_pstbench.selection.permutations import orders_for
    from pytest_pstbench.selection.tracks import resolve_selection_track

    local = not any(page.published)  # a published run's record names a file of the machine that scored it
    spec = track_spec or (
        manifest if local and isinstance(manifest, str) and Path(manifest).is_file() else page.track_id
    )
    try:
        track = resolve_selection_track(spec, progress=progress)
    except UserError as exc:
        if track_spec:
            raise
        page.notes.append(
            f"candidate images: track {page.track_id} could not be opened ({exc}); fix: pass --track "
            "with the track (for a local track, the path of its track.yaml)"
        )
        return
    for label, have, want in (
        ("id", track.id, page.track_id),
        ("dataset id", track.dataset_id, page.dataset_id),
        ("dataset revision", track.revision, page.revision),
    ):
        if have != want:
            msg = f"--track {spec}: its {label} is {have!r} but the runs were scored on {want!r}"
            if track_spec:
                raise UserError(f"{msg}; fix: pass the track the runs were scored on")
            page.notes.append(f"candidate images not shown: {msg}; fix: pass --track with that track")
            return
    order = {tid: i for i, tid in enumerate(track.task_ids)}
    page.task_ids.sort(key=lambda t: order.get(t, len(order)))
    by_id = {t.id: t for t in track.tasks}
    for tid, info in page.tasks.items():
        task = by_id.get(tid)
        if task is None:
            page.notes.append(f"task {tid}: not in track {track.id}; its candidates are not shown")
            continue
        info.candidates = list(task.candidates)
        info.orders = orders_for(task, page.params)
    page.track = track


def write_thumbnails(page: SelectionPage, stage: Path, size: int, progress) -> None:
    """A thumbnail of every candidate of the shown tasks (thumbs/<task position>-<candidate>.jpg), or a
    placeholder with the reason where the file cannot be read as an image."""
    from PIL import Image as PILImage
    from PIL import UnidentifiedImageError

    from pytest_pstbench.core.files.images import write_thumbnail

    for i, tid in enumerate(page.shown):
        info = page.tasks[tid]
        for j, src in enumerate(info.candidates):
            rel = f"thumbs/{i + 1:05d}-{j + 1}.jpg"
            try:
                if not os.path.isfile(src):
                    raise OSError(f"{src}: no such file")
                info.thumbs.append(Thumb(rel, size=write_thumbnail(src, stage / rel, size)))
            except (OSError, ValueError, UnidentifiedImageError, PILImage.DecompressionBombError) as exc:
                (stage / rel).unlink(missing_ok=True)
                info.thumbs.append(
                    Thumb(None, missing=f"{src}: cannot be read as an image ({type(exc).__name__}: {exc})")
                )
        if progress is not None and (i + 1) % 100 == 0:
            progress(f"report: thumbnails of {i + 1} of {len(page.shown)} tasks")
