"""`pstbench report` over selection runs: the selection kind's `html_report` hook (core.kinds.ReportRequest).

One page (DIR/index.html) of judges' runs of one track and protocol: the summary (`pstbench table`'s numbers
and marks: selection/paper_table.py), figures of accuracy by domain, topic and k, the tasks' candidates as
thumbnails with the experts' labels and each judge's picks per trial order, and the lists of the tasks each
judge got wrong in some order or whose pick moved between orders, and each judge's position bias
(`bias.py`). The page model is `page.py`, the figures
`figures.py`, the HTML `html.py`. Standard library only at import; numpy, Pillow and matplotlib load when
a page is built.
"""

from __future__ import annotations

from pathlib import Path


def selection_report(request) -> Path:
    """Write the page of the selection runs of `request` (every input read before anything is drawn) into
    request.out, replaced whole; return its path."""
    from pytest_pstbench.core.files.write import staging_dir, swap_dir_into_place, write_new
    from pytest_pstbench.selection.report.bias import draw_bias
    from pytest_pstbench.selection.report.figures import draw_figures
    from pytest_pstbench.selection.report.html import render
    from pytest_pstbench.selection.report.page import read_page, write_thumbnails

    page = read_page(request)
    page.sections = list(request.sections)
    with staging_dir(request.out, what="write the report", fix="give --out a folder in a writable place") as stage:
        (stage / "figures").mkdir()
        (stage / "thumbs").mkdir()
        write_thumbnails(page, stage, request.thumb_size, request.progress)
        draw_figures(page, stage)
        draw_bias(page, stage)
        for section in page.sections:
            section.write(stage)
        write_new(stage / "index.html", render(page, request.generator, request.css))
        swap_dir_into_place(stage, request.out)  # the frame checked that an existing folder is an earlier report
    return request.out
