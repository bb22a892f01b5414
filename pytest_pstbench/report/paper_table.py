"""`pstbench table`: the results table of a paper from run folders, built by the runs' kind and rendered here.

The table (core/paper_table.py: rows, columns, cells with their marks and tests) is built by the kind of the
run folders, through the kind registry (paired/paper_table.py, selection/paper_table.py); this module
renders it: Markdown (a GitHub pipe table), LaTeX (booktabs; every user string escaped), CSV (one line per
cell) and JSON. The command itself is cli/table.py.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.paper_table import DAGGER, Table, legend_lines
from pytest_pstbench.core.text import NoTexSpelling, md_escape, tex_escape

FORMATS = ("markdown", "latex", "csv", "json")


def build_table(paths, *, metrics=None, against: str = "best", protocol_spec: str | None = None) -> Table:
    """The table of the run folders `paths`, built by their kind (its KindSpec's `paper_table`)."""
    from pytest_pstbench.core.kinds import runs_kind, spec

    paths = [Path(p) for p in paths]
    if not paths:
        raise UserError("table needs at least one run folder")
    kind = runs_kind(paths)  # a mix of kinds is refused here
    build = spec(kind).load("paper_table")
    return build(paths, metrics=metrics, against=against, protocol_spec=protocol_spec)


# ---- renderers ------------------------------------------------------------------------------------
def _multi_track(t: Table) -> bool:
    return len(t.tracks) > 1


def _marked(cell, escape, best: str, second: str, dagger: str) -> str:
    """A cell's text in a format: escaped, the best / second-best mark (`best`/`second`: format strings
    around the text), and the dagger when significantly worse. An absent cell is empty."""
    if cell is None:
        return ""
    text = escape(cell.text)
    text = best.format(text) if cell.rank == 1 else second.format(text) if cell.rank == 2 else text
    return text + (dagger.format() if cell.worse else "")


def render_markdown(t: Table) -> str:
    multi = _multi_track(t)
    head = ["Method"] + [md_escape(f"{c.track}: {c.label}" if multi else c.label) for c in t.columns]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join([":---"] + ["---:"] * len(t.columns)) + "|"]
    for name in t.rows:
        cells = [md_escape(name)]
        cells += [_marked(c.cells.get(name), md_escape, "**{}**", "<ins>{}</ins>", f" {DAGGER}") for c in t.columns]
        lines.append("| " + " | ".join(cells) + " |")
    legend = [
        md_escape(x).replace("BEST", "**bold**", 1).replace("SECOND", "<ins>underlined</ins>", 1)
        for x in legend_lines(t)
    ]
    return (
        "\n".join(lines)
        + "\n\n"
        + "\n".join(f"{x}<br>" if i < len(legend) - 1 else x for i, x in enumerate(legend))
        + "\n"
    )


def render_latex(t: Table) -> str:
    try:
        return _latex(t)
    except NoTexSpelling as exc:
        raise UserError(str(exc)) from None


def _latex(t: Table) -> str:
    multi = _multi_track(t)
    ncol = len(t.columns)
    out = [
        "% pstbench table: needs \\usepackage{booktabs} in the preamble",
        "\\begin{table}[t]",
        "\\centering",
        "\\begin{tabular}{l" + "r" * ncol + "}",
        "\\toprule",
    ]
    if multi:
        spans, start = [], 2
        for tr in t.tracks:
            k = sum(1 for c in t.columns if c.track == tr["track"])
            spans.append((tr["track"], start, start + k - 1))
            start += k
        out.append(
            " & "
            + " & ".join(f"\\multicolumn{{{b - a + 1}}}{{c}}{{{tex_escape(name)}}}" for name, a, b in spans)
            + " \\\\"
        )
        out.append(" ".join(f"\\cmidrule(lr){{{a}-{b}}}" for _, a, b in spans))
    out.append("Method & " + " & ".join(tex_escape(c.label) for c in t.columns) + " \\\\")
    out.append("\\midrule")
    for i, name in enumerate(t.rows):
        cells = [tex_escape(name)]
        cells += [
            _marked(c.cells.get(name), tex_escape, "\\textbf{{{}}}", "\\underline{{{}}}", "$^{{\\dagger}}$")
            for c in t.columns
        ]
        out.append(" & ".join(cells) + " \\\\")
        if i == len(t.reference_rows) - 1:
            out.append("\\midrule")  # the reference rows (Identity / Random, Human) apart
    out.append("\\bottomrule")
    out.append("\\end{tabular}")
    legend = " ".join(
        tex_escape(x).replace("BEST", "\\textbf{bold}", 1).replace("SECOND", "\\underline{underlined}", 1)
        for x in legend_lines(t)
    )
    out.append("\\par\\smallskip")
    out.append("\\parbox{\\linewidth}{\\footnotesize " + legend + "}")
    out.append("\\end{table}")
    return "\n".join(out) + "\n"


def render_csv(t: Table) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        [
            "track",
            "metric",
            "aggregation",
            "row",
            "value",
            "pm",
            "ci_low",
            "ci_high",
            "text",
            "mark",
            "worse_than_reference",
            "reference",
            "pvalue",
            "p_holm",
        ]
    )
    for c in t.columns:
        for name in t.rows:
            cell = c.cells.get(name)
            if cell is None:
                continue
            test = cell.test or {}
            w.writerow(
                [
                    c.track,
                    c.metric,
                    c.aggregation or "",
                    name,
                    "" if cell.value is None else repr(cell.value),
                    "" if cell.pm is None else repr(cell.pm),
                    "" if cell.ci_low is None else repr(cell.ci_low),
                    "" if cell.ci_high is None else repr(cell.ci_high),
                    cell.text,
                    {1: "best", 2: "second"}.get(cell.rank, ""),
                    int(cell.worse),
                    c.reference or "",
                    "" if not test else repr(test["pvalue"]),
                    "" if not test else repr(test["p_holm"]),
                ]
            )
    return buf.getvalue()


def render(t: Table, fmt: str) -> str:
    if fmt == "markdown":
        return render_markdown(t)
    if fmt == "latex":
        return render_latex(t)
    if fmt == "csv":
        return render_csv(t)
    return json.dumps(t.to_json(), indent=2, ensure_ascii=False) + "\n"
