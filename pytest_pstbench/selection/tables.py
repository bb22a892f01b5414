"""Terminal tables of the selection kind: a run's tables (one per aggregation, ap@1 and pass^3, one row per
cell), the comparison table of `pstbench compare` and the gate, and the metrics of `pstbench ls metrics`."""

from __future__ import annotations

from pytest_pstbench.core.text import cell as cell_text


def header_line(summary: dict, dataset_id: str, judge: str | None = None) -> str:
    line = (
        f"track: {summary['track']}   protocol: {summary['protocol']}   "
        f"dataset: {dataset_id}@{summary['dataset_revision']}   n={summary['n']} tasks"
    )
    if summary.get("complete") is False:  # a run with tasks not scored or not answered (run.json failures)
        line += f"   incomplete: {summary['n']} of {summary.get('n_tasks')} tasks"
    return line + (f"   judge: {judge}" if judge else "")


def _cell_name(cell: dict) -> str:
    return "overall" if cell["group"] == "overall" else f"{cell['group']}={cell['value']}"


def tables(summary: dict, params, decimals: int = 3, tablefmt: str = "simple") -> str:
    from tabulate import tabulate

    if not summary["cells"]:
        return "(no task scored)"
    blocks = []
    for agg in params.aggregations:
        label = params.data["aggregations"][agg].get("label", agg)
        headers = ["cell", "n"] + [params.metrics[m].get("label", m) for m in params.metrics]
        body = []
        for cell in summary["cells"]:
            row = [cell_text(_cell_name(cell), tablefmt), str(cell["n"])]
            for m in params.metrics:
                e = cell["metrics"][m][agg]
                if e["mean"] is None:  # nothing counted in this cell (official: printed as 0)
                    row.append(f"- [{e['random']:.{decimals}f}]")
                else:
                    row.append(f"{e['mean']:.{decimals}f} ± {e['pm']:.{decimals}f} [{e['random']:.{decimals}f}]")
            body.append(row)
        blocks.append(
            f"{label} (mean ± half the 95% bootstrap CI; [random baseline])\n"
            + ("\n\n" if tablefmt == "github" else "")
            + tabulate(body, headers=headers, tablefmt=tablefmt, disable_numparse=True)
        )
    return "\n\n".join(blocks)


def human_tables(summary: dict, params, decimals: int = 3, tablefmt: str = "simple") -> str | None:
    """The human reference row of summary.json (`human`, leave-one-out; None without one): one table per score
    as printed (aggregations whose rows read the same share one block: an expert's one vote answers every trial,
    so pass^3 = ap@1, up to the last bit), one row per cell, `mean ± pm` over experts, the cell's tasks out of
    the track's where the row covers part of them, then one line on what was left out."""
    from tabulate import tabulate

    human = summary.get("human")
    if not human:
        return None
    conf = float(params.bootstrap["confidence"]) * 100
    of = {(c["group"], c["value"]): c.get("n") for c in summary.get("cells") or []}

    def body(agg: str) -> list[list[str]]:
        rows = []
        for cell in human["cells"]:
            n, total = cell["n_tasks"], of.get((cell["group"], cell["value"]))
            row = [
                cell_text(_cell_name(cell), tablefmt),
                str(cell["n_experts"]),
                str(n) if total is None or n >= total else f"{n} of {total}",  # an incomplete run's cell: fewer
            ]
            for m in params.metrics:
                e = cell["metrics"][m][agg]
                row.append("-" if e["mean"] is None else f"{e['mean']:.{decimals}f} ± {e['pm']:.{decimals}f}")
            rows.append(row)
        return rows

    groups: dict[str, tuple[list[str], list[list[str]]]] = {}  # one block per table as printed
    for agg in params.aggregations:
        rows = body(agg)
        groups.setdefault(repr(rows), ([], rows))[0].append(agg)
    headers = ["cell", "experts", "tasks"] + [params.metrics[m].get("label", m) for m in params.metrics]
    blocks = []
    for aggs, rows in groups.values():
        label = " = ".join(params.data["aggregations"][a].get("label", a) for a in aggs)
        blocks.append(
            f"{cell_text(human['label'], tablefmt)}, {label} (mean over experts ± half the {conf:g}% bootstrap CI over experts)\n"
            + ("\n" if tablefmt == "github" else "")
            + tabulate(rows, headers=headers, tablefmt=tablefmt, disable_numparse=True)
        )
    return "\n\n".join(blocks) + "\n" + human_line(human)


def human_line(human: dict) -> str:
    """What the human row rests on (its tasks out of the track's where it covers part of them) and what it left out."""
    from pytest_pstbench.selection.human import coverage, plural

    on = coverage(human) or plural(human["tasks"], "task")
    parts = [
        f"human: {plural(human['judgments'], 'expert-task vote')} of {plural(human['experts'], 'expert')} on {on}, "
        "each against the consensus of the other experts (threshold one below the full panel's)"
    ]
    if human["excluded_no_consensus"]:
        parts.append(f"{human['excluded_no_consensus']} left out (no consensus among the others)")
    if human["tasks_without_votes"]:
        parts.append(f"{plural(len(human['tasks_without_votes']), 'task')} without votes")
    if human["label_disagreements"]:
        n = len(human["label_disagreements"])
        parts.append(
            f"{plural(n, 'task')} whose full-panel consensus is not the track's label "
            f"({', '.join(map(str, human['label_disagreements'][:5]))}{', ...' if n > 5 else ''})"
        )
    return "; ".join(parts)


def answers_line(run: dict) -> str | None:
    a = run.get("answers", {})
    if not a.get("missing") and not a.get("unparseable") and not a.get("error"):
        return None
    return (
        f"answers: {a['missing']} missing, {a['unparseable']} unparseable and {a.get('error', 0)} API errors of {a['expected']} "
        "(counted as the protocol's answers.records says; listed in run.json answers.problems)"
    )


def extras_table(summary: dict, params, decimals: int = 3) -> str:
    """The official extras per cell: TB-1's best-only / worst-only accuracy inside best+worst answers
    (pass^3 and ap@1) and each metric's trial-0 accuracy."""
    from tabulate import tabulate

    body = []
    for cell in summary["cells"]:
        tb = cell.get("tb1_parts")
        row = [_cell_name(cell)]

        def f(v):
            return "-" if v is None else f"{v:.{decimals}f}"

        if tb:
            for part in ("best_only", "worst_only"):
                row += [f(tb[part]["pass^3"]["mean"]), f(tb[part]["ap@1"]["mean"])]
        else:
            row += ["-"] * 4
        for m in params.metrics:
            row.append(f(cell["metrics"][m]["ap@1"]["per_trial"][0]))
        body.append(row)
    headers = ["cell", "TB best p^3", "TB best ap@1", "TB worst p^3", "TB worst ap@1"] + [
        f"{params.metrics[m].get('label', m)} t0" for m in params.metrics
    ]
    return "inside best+worst answers; trial-0 accuracy\n" + tabulate(
        body, headers=headers, tablefmt="simple", disable_numparse=True
    )


# ---- comparing judges (`pstbench compare` on selection runs, the baseline gate) --------------------
def comparison_header(run, comp) -> str:
    """One line: track, protocol, revision, tasks, test and alpha (`run` is a loaded selection run)."""
    s = run.summary
    return (
        f"track: {s['track']}   protocol: {s['protocol']}   dataset revision: {s['dataset_revision']}   "
        f"n={s['n']} tasks   test: exact McNemar, Holm over {len(comp.rows)} tests   alpha={comp.alpha}"
    )


def comparison_table(comp, params, tablefmt: str = "simple") -> str:
    """One row per test: metric, outcome, runs, n, b/c, both right/wrong, accuracies, p, Holm p, verdict."""
    from tabulate import tabulate

    from pytest_pstbench.selection.power import mde_text

    aggs = params.data.get("aggregations", {})
    body = []
    powered = [r.detectable for r in comp.rows if getattr(r, "detectable", None)]
    for r in comp.rows:
        body.append(
            [
                params.metrics[r.metric].get("label", r.metric),
                aggs.get(r.outcome, {}).get("label", r.outcome),
                cell_text(r.baseline, tablefmt),
                cell_text(r.candidate, tablefmt),
                str(r.n),
                f"{r.b}/{r.c}",
                f"{r.both_right}/{r.both_wrong}",
                f"{r.acc_baseline:.3f}",
                f"{r.acc_candidate:.3f}",
                f"{r.diff:+.3f}",
                f"{r.pvalue:.4g}",
                f"{r.p_holm:.4g}",
                *([mde_text(r)] if powered else []),
                r.verdict,  # last: CI scripts read the verdict from the last column
            ]
        )
    headers = [
        "metric",
        "outcome",
        "baseline",
        "candidate",
        "n",
        "b/c",
        "both right/wrong",
        "acc base",
        "acc cand",
        "diff",
        "p",
        "p (Holm)",
        *([f"MDE drop ({powered[0]['power'] * 100:g}% power)"] if powered else []),
        "verdict",
    ]
    return tabulate(body, headers=headers, tablefmt=tablefmt, disable_numparse=True)


def comparison_footer(comp) -> str:
    return (
        "b: candidate right, baseline wrong; c: the reverse; n: tasks (pass^3) or task trials (ap@1). "
        "The trials of a task are not independent, so ap@1 p-values are optimistic."
    )


def metric_table(data: dict) -> tuple[list[list], list[str]]:
    """`pstbench ls metrics` of a selection protocol (its parsed data): a row per metric (label, the prompt type,
    when an answer is correct) and the headings."""
    rows = [
        [name, e.get("label", ""), e.get("prompt_type", ""), e.get("correct", "")]
        for name, e in ((n, v if isinstance(v, dict) else {}) for n, v in data["metrics"].items())
    ]
    return rows, ["metric", "label", "prompt type", "correct when the answer is the consensus"]
