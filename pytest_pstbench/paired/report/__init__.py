"""`pstbench report` over paired runs: the paired kind's `html_report` hook (core.kinds.ReportRequest).

One page (DIR/index.html) of paired runs of one track and protocol: a summary table (mean ± pm per method and
metric), one figure per metric (per-pair scores, the mean and its bootstrap CI per method), thumbnails of every
shown pair (content, style, reference and each method's output with its scores), the runs' provenance; with two
runs or more, the pairs each run lost most on against the first (`worst.py`, `--worst N`); with `--sensitivity
SENS_DIR`, the rank changes of `pstbench sensitivity` (`sensitivity.py`). The page model is `page.py`, the figures
`figures.py`, the thumbnails `thumbnails.py`, the HTML `html.py`. Standard library only at import; numpy, Pillow
and matplotlib load when a page is built.
"""

from __future__ import annotations

from pathlib import Path


def paired_report(request) -> Path:
    """Write the page of the paired runs of `request` (every input read before anything is drawn) into
    request.out, replaced whole; return its path."""
    from pytest_pstbench.core.errors import UserError

    if "--max-tasks" in request.given:
        raise UserError(
            f"--max-tasks {request.kind_options['max_tasks']}: bounds the tasks of a page of selection runs, and "
            "these are paired runs; fix: use --max-pairs N"
        )
    page, track = _read_page(request)
    _write_page(page, track, request)
    return request.out


def _read_page(request):
    """The page model of the request's runs and the track their images come from (None: shown as notes)."""
    from pytest_pstbench.core.store.reader import check_same_setting, read_runs
    from pytest_pstbench.paired.compare import PAIRED_RUNS
    from pytest_pstbench.paired.report.page import build_page, check_paired
    from pytest_pstbench.paired.report.sensitivity import load_analysis
    from pytest_pstbench.paired.report.thumbnails import track_for
    from pytest_pstbench.paired.report.worst import worst_sections

    def one_setting(runs) -> None:
        for run in runs:
            check_paired(run)
        check_same_setting(runs)

    # the one validating reader of run folders (core.store.reader), its checks after the report's own
    _kind, runs, protocol = read_runs(
        [s.path for s in request.sources], protocol_spec=request.protocol_spec, kind=PAIRED_RUNS, check=one_setting
    )
    worst = request.kind_options["worst"]
    page = build_page(runs, request.kind_options["max_pairs"], protocol)
    page.published = [s.uri is not None for s in request.sources]  # their paths are read inside the run folder only
    page.thumb_size = request.thumb_size
    page.sections = list(request.sections)
    page.worst, page.worst_n = worst_sections(page, protocol, worst), worst  # per ranked metric, against the first run
    if request.sensitivity is not None:
        page.sensitivity_path = str(request.sensitivity)
        page.sensitivity = load_analysis(Path(request.sensitivity), runs[0])
    return page, track_for(page, request.track_spec, request.progress)


def _write_page(page, track, request) -> None:
    from pytest_pstbench.core.files.write import staging_dir, swap_dir_into_place, write_new
    from pytest_pstbench.paired.report.figures import assign_colors, metric_figures
    from pytest_pstbench.paired.report.html import render
    from pytest_pstbench.paired.report.sensitivity import sensitivity_figures
    from pytest_pstbench.paired.report.thumbnails import thumbnails

    with staging_dir(request.out, what="write the report", fix="give --out a folder in a writable place") as stage:
        (stage / "figures").mkdir()
        (stage / "thumbs").mkdir()
        assign_colors(page)
        thumbnails(page, track, stage, request.thumb_size, request.progress)
        metric_figures(page, stage)
        for section in request.sections:
            section.write(stage)
        if page.sensitivity is not None:
            sensitivity_figures(page, stage)
        write_new(stage / "index.html", render(page, request.generator, request.css))
        swap_dir_into_place(stage, request.out)  # the frame checked that an existing folder is an earlier report
