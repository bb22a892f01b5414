"""The frames of reports: the static HTML page of `pstbench report` and the paper table of `pstbench table`.

Each kind brings its own pages and tables through the kind registry (`paired/report/`, `selection/report/`;
the terminal tables are paired/tables.py, selection/tables.py). Here: build.py (the page frame: the options,
the --out folder, the runs checked, the kind's `html_report` hook called with a `core.kinds.ReportRequest`; the
style sheet page.css, shipped as package data), history.py (the History section any page can carry) and
paper_table.py (the table frame: a kind's table rendered as Markdown, LaTeX, CSV or JSON). Nothing is imported
here: each module loads what it needs.
"""
