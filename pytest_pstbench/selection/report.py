"""Terminal tables for selection runs: one table per aggregation (ap@1, pass^3), one row per cell."""
from __future__ import annotations


def header_line(summary: dict, dataset_id: str, judge: str | None = None) -> str:
    line = (
        f"track: {summary['track']}   protocol: {summary['protocol']}   "
        f"dataset: {dataset_id}@{summary['dataset_revision']}   n={summary['n']} tasks"
    )
    return line + (f"   judge: {judge}" if judge else "")


def _cell_name(cell: dict) -> str:
    return "overall" if cell["group"] == "overall" else f"{cell['group']}={cell['value']}"


def tables(summary: dict, params, decimals: int = 3) -> str:
    from tabulate import tabulate

    if not summary["cells"]:
        return "(no task scored)"
    blocks = []
    for agg in params.aggregations:
        label = params.data["aggregations"][agg].get("label", agg)
        headers = ["cell", "n"] + [params.metrics[m].get("label", m) for m in params.metrics]
        body = []
        for cell in summary["cells"]:
            row = [_cell_name(cell), str(cell["n"])]
            for m in params.metrics:
                e = cell["metrics"][m][agg]
                row.append(f"{e['mean']:.{decimals}f} ± {e['pm']:.{decimals}f} [{e['random']:.{decimals}f}]")
            body.append(row)
        blocks.append(
            f"{label} (mean ± half the 95% bootstrap CI; [random baseline])\n"
            + tabulate(body, headers=headers, tablefmt="simple", disable_numparse=True)
        )
    return "\n\n".join(blocks)


def answers_line(run: dict) -> str | None:
    a = run.get("answers", {})
    if not a.get("missing") and not a.get("unparseable"):
        return None
    return (
        f"answers: {a['missing']} missing and {a['unparseable']} unparseable of {a['expected']} "
        "(counted as wrong; listed in run.json answers.problems)"
    )
