"""The figures of a method's history (`pstbench history --plot DIR`; matplotlib, extra `[report]`, imported when
drawn): one PNG per metric, each point's value with its interval, the significant steps marked (red: worse,
green: better), a dashed line where a new segment starts (another protocol, track or dataset revision); the
x-axis names each point by its order (oldest first), its commit date and commit, the title the metric's
direction (↑ higher is better, ↓ lower).

`history_section` makes the same plots and the step list a section of `pstbench report`'s page (`--history
SOURCE...`): a `core.kinds.PageSection` the frame hands to the runs' kind; every text of the history (commit
messages, sources, reasons: a stranger's) is escaped."""

from __future__ import annotations

import re
from pathlib import Path


def figure_name(metric: str) -> str:
    return (re.sub(r"[^A-Za-z0-9_-]+", "_", metric)[:60] or "metric") + ".png"


def draw_history(h, metric: str) -> bytes:
    """The PNG of one metric's history."""
    import io

    from matplotlib import rc_context
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with rc_context({"text.parse_math": False}):
        fig = Figure(figsize=(max(6.0, 0.35 * len(h.points) + 2), 3.6), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        labels = [point_label(i, p) for i, p in enumerate(h.points)]
        for i, p in enumerate(h.points):
            e = p.metrics.get(metric)
            if not e or e["mean"] is None:
                continue
            low = e["mean"] - e["low"] if e["low"] is not None else 0.0
            high = e["high"] - e["mean"] if e["high"] is not None else 0.0
            ax.errorbar(
                [i],
                [e["mean"]],
                yerr=[[max(low, 0.0)], [max(high, 0.0)]],
                fmt="o",
                color="#1f77b4",
                ecolor="#7f7f7f",
                capsize=3,
            )
        for seg in sorted({p.segment for p in h.points}):
            idx = [
                i
                for i, p in enumerate(h.points)
                if p.segment == seg and p.metrics.get(metric, {}).get("mean") is not None
            ]
            if len(idx) > 1:
                ax.plot(idx, [h.points[i].metrics[metric]["mean"] for i in idx], "-", color="#1f77b4", alpha=0.5)
            if seg and idx:
                ax.axvline(idx[0] - 0.5, color="#555555", linestyle="--", linewidth=1)
        where = {(p.commit or p.source): i for i, p in enumerate(h.points)}
        for s in h.steps:
            if s["metric"] != metric:
                continue
            i = where.get(s["commit"] or s["source"])
            if i is None:
                continue
            color = "#d62728" if s["direction"] == "worse" else "#2ca02c"
            ax.axvspan(i - 0.5, i + 0.5, color=color, alpha=0.15)
            ax.annotate(
                f"{s['direction']} (p_holm {s['p_holm']:.2g})",
                (i, h.points[i].metrics[metric]["mean"]),
                textcoords="offset points",
                xytext=(4, 8),
                fontsize=7,
                color=color,
            )
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=60, fontsize=7, ha="right")
        ax.set_xlabel("point: order (oldest first), commit date, commit", fontsize=8)
        ax.set_title(f"{metric}{arrow(h, metric)}: value and interval per point", fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=fig.dpi, metadata={"Software": None})
    return buf.getvalue()


def point_label(i: int, p) -> str:
    """A point's tick label: its order (1 = oldest), its commit date and short commit, or the run folder's name
    (runs given in order)."""
    if p.commit and p.date is not None:
        return f"#{i + 1} {p.date[:10]} {p.commit[:7]}"
    return f"#{i + 1} {Path(str(p.source)).name[:16]}"


def arrow(h, metric: str) -> str:
    """' ↑' where higher is better, ' ↓' where lower is, as the points' values say (`higher_is_better`); ''
    when they do not say."""
    for p in h.points:
        better = p.metrics.get(metric, {}).get("higher_is_better")
        if better is not None:
            return " ↑" if better else " ↓"
    return ""


def write_history_plots(h, folder) -> list[Path]:
    """One PNG per metric of the history into `folder`, replaced whole (built beside it, then swapped in). A
    folder that holds anything but PNG files is refused (it is not a folder of history plots)."""
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.core.files.write import staging_dir, swap_dir_into_place

    folder = Path(folder)
    if folder.exists() and (
        not folder.is_dir() or any(not (f.is_file() and f.suffix == ".png") for f in folder.iterdir())
    ):
        raise UserError(
            f"--plot {folder}: exists and holds other things than PNG files, which the plots would replace; "
            "fix: give a new folder (or one written by --plot before)"
        )
    metrics = list(dict.fromkeys(m for p in h.points for m in p.metrics))
    fix = "give --plot a writable folder"
    with staging_dir(folder, what="write the history plots", fix=fix, tag="plot") as stage:
        names = []
        for m in metrics:
            (stage / figure_name(m)).write_bytes(draw_history(h, m))
            names.append(folder / figure_name(m))
        try:
            swap_dir_into_place(stage, folder)
        except OSError as exc:
            raise UserError(
                f"--plot {folder}: cannot put the plots in place ({exc.strerror or exc}); fix: {fix}"
            ) from None
    return names


def history_section(h, sources):
    """The History section of a report page: the significant steps (the rows of `pstbench history --json`'s
    `steps`, in order) and what limits them, one figure per metric (`history/NN-<metric>.png`), the breaks, the
    versions left out, the notes and the points."""
    from pytest_pstbench.core.kinds import PageSection
    from pytest_pstbench.core.text import html_escape as esc

    metrics = list(dict.fromkeys(m for p in h.points for m in p.metrics))
    files = tuple((f"history/{i + 1:02d}-{figure_name(m)}", draw_history(h, m)) for i, m in enumerate(metrics))
    out = [
        '<section id="history"><h2>History</h2>',
        f'<p class="hint">{"The runs given in order" if len(sources) > 1 else "The versions of"} '
        + ", ".join(f"<code>{esc(s)}</code>" for s in sources)
        + f": {len(h.points)} point(s), {len(h.breaks) + 1} segment(s), {len(h.tests)} test(s) between consecutive "
        f"points (the protocol's paired test, Holm over all of them; alpha {esc(h.alpha)}); a version with the same "
        "per-item values as the point before is listed under it, not tested. What <code>pstbench history</code> "
        "gives on the same source.</p>",
        *_steps_html(h),
        '<h3>Figures</h3><p class="hint">Per metric (↑ higher is better, ↓ lower) each point\'s value and interval, '
        "by order, commit date and commit; a step marked red (worse) or green (better); a dashed line where a new "
        'segment starts.</p><div class="figs">',
        *(
            f'<a href="{esc(rel)}"><img src="{esc(rel)}" alt="{esc(m)}: value and interval per point"></a>'
            for (rel, _data), m in zip(files, metrics)
        ),
        "</div>",
        *_lists_html(h),
        *_points_html(h, metrics),
        "</section>",
    ]
    return PageSection("history", "History", "\n".join(out), files)


def _where(d) -> str:
    from pytest_pstbench.core.text import html_escape as esc

    commit = d.get("commit")
    return f'<code title="{esc(commit)}">{esc(commit[:7])}</code>' if commit else f"<code>{esc(d.get('source'))}</code>"


def _num(x, fmt=".4g") -> str:
    from pytest_pstbench.core.text import html_escape as esc

    return "–" if x is None else esc(format(x, fmt))


def _steps_html(h) -> list[str]:
    """The step table (or "no significant step"), then the lines saying why none can be found (`limits`)."""
    from pytest_pstbench.core.text import html_escape as esc

    out = ["<h3>Significant steps</h3>"]
    if not h.steps:
        out.append('<p id="history-steps">no significant step</p>')
    else:
        out.append(
            '<table id="history-steps"><thead><tr><th>metric</th><th>direction</th><th class="num">mean diff (later - earlier)</th>'
            '<th>at</th><th>date</th><th>message</th><th class="num">p</th><th class="num">p_holm</th></tr></thead><tbody>'
        )
        for s in h.steps:
            attrs = "".join(
                f' data-{k}="{esc(s[k] if s[k] is not None else "")}"'
                for k in ("commit", "source", "metric", "direction")
            )
            attrs += "".join(
                f' data-{k.replace("_", "-")}="{esc(repr(float(s[k])))}"' for k in ("mean_diff", "p", "p_holm")
            )
            out.append(
                f'<tr class="step {esc(s["direction"])}"{attrs}><td>{esc(s["metric"])}</td><td>{esc(s["direction"])}</td>'
                f'<td class="num">{_num(s["mean_diff"])}</td><td>{_where(s)}</td><td>{esc((s["date"] or "")[:10])}</td>'
                f'<td>{esc(s["message"] or "")}</td><td class="num">{_num(s["p"], ".3g")}</td><td class="num">{_num(s["p_holm"], ".3g")}</td></tr>'
            )
        out.append("</tbody></table>")
    if h.limits:
        out.append('<ul class="notes" id="history-limits">' + "".join(f"<li>{esc(x)}</li>" for x in h.limits) + "</ul>")
    return out


def _lists_html(h) -> list[str]:
    """The breaks, the versions left out and the notes."""
    from pytest_pstbench.core.text import html_escape as esc

    out = []
    for title, rows, what in (("Breaks", h.breaks, "a new segment; not tested across"), ("Left out", h.left_out, None)):
        if rows:
            out.append(f'<h3>{title}</h3><ul id="history-{title.lower().replace(" ", "-")}">')
            out.extend(f"<li>{_where(r)}: {esc(r['reason'])}{f' ({what})' if what else ''}</li>" for r in rows)
            out.append("</ul>")
    if h.notes or h.said:
        out.append(
            '<ul class="notes" id="history-notes">' + "".join(f"<li>{esc(n)}</li>" for n in h.notes + h.said) + "</ul>"
        )
    return out


def _points_html(h, metrics) -> list[str]:
    """The points, each with its values and the later versions with the same values (reruns), folded."""
    from pytest_pstbench.core.text import html_escape as esc

    out = [
        f'<details><summary>Points ({len(h.points)})</summary><table id="history-points"><thead><tr><th>at</th><th>date</th>'
        '<th>message</th><th class="num">segment</th>'
        + "".join(f'<th class="num">{esc(m)}</th>' for m in metrics)
        + "<th>the same values at</th></tr></thead><tbody>"
    ]
    for p in h.points:
        cells = "".join(
            f'<td class="num">{_num(p.metrics[m]["mean"])} [{_num(p.metrics[m]["low"])}, {_num(p.metrics[m]["high"])}]</td>'
            if m in p.metrics
            else '<td class="num">–</td>'
            for m in metrics
        )
        again = " ".join(_where(r) for r in p.repeats)
        out.append(
            f"<tr><td>{_where({'commit': p.commit if p.date is not None else None, 'source': p.source})}</td>"
            f'<td>{esc((p.date or "")[:10])}</td><td>{esc(p.message or "")}</td><td class="num">{p.segment}</td>{cells}'
            f"<td>{again}</td></tr>"
        )
    out.append("</tbody></table></details>")
    return out
