"""`pstbench report RUN_DIR [RUN_DIR ...] --out DIR`: a static HTML page of runs of one kind.

`build_report` is the frame: it checks the options, the --out folder and the runs (each given once, all of
one kind whose KindSpec has an `html_report` hook), then hands a `core.kinds.ReportRequest` to that hook:
`paired_report` below for paired runs, `selection.report.selection_report` for selection runs.

The paired page (DIR/index.html) shows a summary table (mean ± pm per method and metric), one figure per
metric (per-pair scores, the mean and its bootstrap CI per method), thumbnails of every shown pair
(content, style, reference and each method's output with its scores), the runs' provenance, and,
with `--sensitivity SENS_DIR`, the rank changes of `pstbench sensitivity`. With `--history SOURCE...` every
page (of either kind) gains a History section: the plots and the step list of `pstbench history SOURCE...`
(report/history.py: a `core.kinds.PageSection` the kind writes with its page). DIR is self-contained:
figures are written to DIR/figures/, thumbnails to DIR/thumbs/, every link is relative, the CSS is
inline, nothing is loaded from elsewhere. The output is deterministic (no timestamps; files named
by position), and the folder is replaced as a whole (built beside it, then renamed into place).

Only the standard library is imported at module level; matplotlib (extra `[report]`) and Pillow
load when the command runs.
"""

from __future__ import annotations

import os
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.write import refuse_overwriting_inputs, staging_dir, swap_dir_into_place, write_new
from pytest_pstbench.core.install import extra_install
from pytest_pstbench.core.store.reader import check_same_setting
from pytest_pstbench.report.figures import assign_colors, metric_figures, sensitivity_figures
from pytest_pstbench.report.html import page_css, render
from pytest_pstbench.report.model import (
    DEFAULT_MAX_PAIRS,
    DEFAULT_MAX_TASKS,
    DEFAULT_THUMB_SIZE,
    GENERATOR,
    build_page,
    check_paired,
    check_reportable,
    load_analysis,
)
from pytest_pstbench.report.thumbnails import thumbnails, track_for
from pytest_pstbench.report.worst import DEFAULT_WORST, worst_sections


def build_report(
    run_dirs,
    out,
    *,
    sensitivity=None,
    thumb_size: int = DEFAULT_THUMB_SIZE,
    max_pairs: int | None = None,
    max_tasks: int | None = None,
    worst: int | None = None,
    track_spec: str | None = None,
    protocol_spec: str | None = None,
    progress=None,
    history=None,
) -> Path:
    """Write the report folder `out` and return its path: the frame's checks, then the page of the runs'
    kind (its KindSpec's `html_report` hook, given a `core.kinds.ReportRequest`)."""
    if not 16 <= thumb_size <= 2048:
        raise UserError(
            f"--thumb-size {thumb_size}: must be between 16 and 2048 pixels; fix: pass e.g. --thumb-size {DEFAULT_THUMB_SIZE}"
        )
    for option, value in (("--max-pairs", max_pairs), ("--max-tasks", max_tasks)):
        if value is not None and value < 0:
            raise UserError(f"{option} {value}: must be 0 (all) or a positive number; fix: pass e.g. {option} 50")
    if worst is not None and worst < 0:
        raise UserError(
            f"--worst {worst}: must be 0 (no Worst pairs section) or a positive number; fix: pass e.g. --worst {DEFAULT_WORST}"
        )
    _require_matplotlib()
    from pytest_pstbench.core.kinds import ReportRequest, spec
    from pytest_pstbench.core.store.backends import RunSource, is_published

    sources = [d if isinstance(d, RunSource) else RunSource(Path(d)) for d in run_dirs]
    out = Path(out)
    _check_out_dir(out)
    from pytest_pstbench.core.protocol import protocol_path

    refuse_overwriting_inputs(  # before any work: the folder replaced whole never holds or lies in what is read
        "--out",
        [out],
        files=[
            ("the sensitivity analysis", sensitivity),
            ("the track manifest", track_spec if track_spec and os.path.exists(track_spec) else None),
            ("protocol file", protocol_path(protocol_spec) if protocol_spec else None),
        ],
        folders=[("run folder", s.path) for s in sources]
        + [("history source", Path(h)) for h in history or () if not is_published(str(h))],
    )
    seen: dict[Path, str] = {}
    for s in sources:
        key = Path(os.path.realpath(s.path))  # not Path.resolve(): a link to itself raises RuntimeError there
        if key in seen:
            raise UserError(f"{s}: run folder given twice (also as {seen[key]}); fix: give each run once")
        seen[key] = str(s)
        check_reportable(s.path)
    kind = one_kind(sources)
    sections = ()
    if history:
        from pytest_pstbench.core.history import read_history
        from pytest_pstbench.report.history import history_section

        sections = (history_section(read_history(history, say=progress), [str(h) for h in history]),)
    given = frozenset(
        o for o, v in (("--max-pairs", max_pairs), ("--max-tasks", max_tasks), ("--worst", worst)) if v is not None
    )
    request = ReportRequest(
        sources,
        out,
        GENERATOR,
        page_css(),
        thumb_size,
        max_pairs=DEFAULT_MAX_PAIRS if max_pairs is None else max_pairs,
        max_tasks=DEFAULT_MAX_TASKS if max_tasks is None else max_tasks,
        given=given,
        worst=DEFAULT_WORST if worst is None else worst,
        sensitivity=sensitivity,
        track_spec=track_spec,
        protocol_spec=protocol_spec,
        progress=progress,
        sections=sections,
    )
    return spec(kind).load("html_report")(request)


def paired_report(request) -> Path:
    """The page of paired runs (the paired kind's `html_report` hook)."""
    from pytest_pstbench.core.store.reader import read_runs
    from pytest_pstbench.paired.compare import PAIRED_RUNS

    if "--max-tasks" in request.given:
        raise UserError(
            f"--max-tasks {request.max_tasks}: bounds the tasks of a page of selection runs, and these are "
            "paired runs; fix: use --max-pairs N"
        )
    sources, out, sensitivity, protocol_spec = request.sources, request.out, request.sensitivity, request.protocol_spec
    progress, thumb_size = request.progress, request.thumb_size
    max_pairs, worst = request.max_pairs, request.worst

    def one_setting(runs) -> None:
        for run in runs:
            check_paired(run)
        check_same_setting(runs)

    # the one validating reader of run folders (core.store.reader), its checks after the report's own
    _kind, runs, protocol = read_runs(
        [s.path for s in sources], protocol_spec=protocol_spec, kind=PAIRED_RUNS, check=one_setting
    )
    page = build_page(runs, max_pairs, protocol)
    page.published = [s.uri is not None for s in sources]  # their paths are read inside the run folder only
    page.thumb_size = thumb_size
    page.sections = list(request.sections)
    page.worst, page.worst_n = worst_sections(page, protocol, worst), worst  # per ranked metric, against the first run
    if sensitivity is not None:
        page.sensitivity_path = str(sensitivity)
        page.sensitivity = load_analysis(Path(sensitivity), runs[0])

    track = track_for(page, request.track_spec, progress)  # every input is read before anything is drawn
    with staging_dir(out, what="write the report", fix="give --out a folder in a writable place") as stage:
        (stage / "figures").mkdir()
        (stage / "thumbs").mkdir()
        assign_colors(page)
        thumbnails(page, track, stage, thumb_size, progress)
        metric_figures(page, stage)
        for section in request.sections:
            section.write(stage)
        if page.sensitivity is not None:
            sensitivity_figures(page, stage)
        write_new(stage / "index.html", render(page))
        swap_dir_into_place(stage, out)  # an existing `out` was checked by `_check_out_dir`
    return out


def one_kind(sources) -> str:
    """The kind of every run of the call; runs of two kinds are one line naming both (one page shows one kind)."""
    from pytest_pstbench.core.kinds import run_kind, runs_kind

    first: dict[str, object] = {}
    for s in sources:
        k = run_kind(s.path)
        if k is not None:
            first.setdefault(k, s)
    if len(first) > 1:
        (ka, a), (kb, b) = list(first.items())[:2]
        raise UserError(
            f"{b}: is a {kb} run but {a} is a {ka} run; one report shows runs of one kind, track and "
            f"protocol; fix: report the {ka} runs and the {kb} runs in two calls, each with its own --out"
        )
    return runs_kind([s.path for s in sources])


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError(
            f"matplotlib is not installed; `pstbench report` draws its figures with it; fix: {extra_install('report')}"
        ) from None


def _is_report_dir(path: Path) -> bool:
    index = path / "index.html"
    if not index.is_file():
        return False
    with open(index, encoding="utf-8", errors="replace") as fh:
        head = fh.read(4096)
    return f'<meta name="generator" content="{GENERATOR}">' in head


def _check_out_dir(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: is a file, not a folder; fix: give a new or empty folder")
    if out.is_dir() and any(out.iterdir()) and not _is_report_dir(out):
        raise UserError(
            f"--out {out}: folder is not empty and holds no earlier pstbench report (it is replaced as a whole); "
            "fix: give a new or empty folder"
        )
