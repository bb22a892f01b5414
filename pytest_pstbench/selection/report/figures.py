"""Figures of a selection report (matplotlib, imported when drawn): per cell group (domain, topic, k) and
aggregation, each metric's accuracy per cell and judge with the bootstrap interval of summary.json, and the
cell's random baseline. Every text is drawn as written (no math text: run names and topics are foreign)."""

from __future__ import annotations

from pathlib import Path

GROUPS = ("domain", "topic", "k")


def _short(text: str, limit: int = 24) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def assign_colors(page) -> None:
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    palette = [to_hex(c) for c in colormaps["tab10"].colors]
    page.colors = {j.label: palette[i % len(palette)] for i, j in enumerate(page.judges)}


def cells_of(summary: dict, group: str) -> dict[str, dict]:
    """Cell value -> the summary cell of `group` (its order in summary.json kept)."""
    return {str(c["value"]): c for c in summary.get("cells") or [] if c.get("group") == group}


def draw_figures(page, stage: Path) -> None:
    from matplotlib import rc_context

    assign_colors(page)
    with rc_context({"text.parse_math": False}):
        for group in GROUPS:
            for agg in page.params.aggregations:
                rel = _draw(page, stage, group, agg, len(page.figures) + 1)
                if rel:
                    agg_label = page.params.data["aggregations"][agg].get("label", agg)
                    page.figures.append((f"accuracy by {group}, {agg_label}", rel))


def _draw(page, stage: Path, group: str, agg: str, number: int) -> str | None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    values: list[str] = []
    per_judge = []
    for j in page.judges:
        cells = cells_of(j.run.summary, group)
        per_judge.append(cells)
        values += [v for v in cells if v not in values]
    if not values:
        return None
    metrics = list(page.params.metrics)
    n, m = len(values), len(page.judges)
    conf = float(page.params.bootstrap["confidence"]) * 100
    fig = Figure(
        figsize=(3.6 * len(metrics) + 1.4, 1.1 + 0.34 * n * max(1, (m + 1) // 2)), dpi=100, layout="constrained"
    )
    axes = fig.subplots(1, len(metrics), sharey=True, squeeze=False)[0]
    for ax, metric in zip(axes, metrics):
        _draw_metric(ax, page, metric, agg, values, per_judge)
    axes[0].set_yticks(range(n))
    axes[0].set_yticklabels([_short(f"{group}={v}") for v in reversed(values)], fontsize=8.5)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker="o", color=page.colors[j.label], label=_short(j.label)) for j in page.judges]
    fig.legend(handles=handles, fontsize=8, loc="outside upper right", frameon=False, ncols=min(m, 4))
    fig.supxlabel(
        f"accuracy: mean and {conf:g}% bootstrap CI per judge; grey line: random baseline", fontsize=8.5, color="#444"
    )
    rel = f"figures/{number:02d}-{group}.png"
    FigureCanvasAgg(fig)
    fig.savefig(stage / rel, format="png", dpi=fig.dpi, metadata={"Software": None})
    return rel


def _draw_metric(ax, page, metric: str, agg: str, values: list, per_judge: list) -> None:
    """One metric's panel: each judge's accuracy per cell (with its interval where summary.json has one) and the
    cell's random baseline. One call per judge and kind of mark: a call per point is slow with many cells."""
    n, step = len(values), 0.7 / max(len(page.judges), 1)
    segments = []
    points = [([], [], [], []) for _ in page.judges]  # per judge: means, ys, lower and upper error (with a CI)
    bare = [([], []) for _ in page.judges]  # per judge: means, ys (no CI)
    for row, value in enumerate(values):
        y = n - 1 - row
        randoms = [c[value]["metrics"][metric][agg].get("random") for c in per_judge if value in c]
        if randoms and randoms[0] is not None:
            segments.append((randoms[0], y))
        for i, cells in enumerate(per_judge):
            e = cells.get(value, {}).get("metrics", {}).get(metric, {}).get(agg) or {}
            mean, lo, hi = e.get("mean"), e.get("ci_low"), e.get("ci_high")
            if mean is None:
                continue
            yy = y + 0.35 - step * (i + 0.5)
            if lo is not None and hi is not None:
                for column, v in zip(points[i], (mean, yy, mean - lo, hi - mean)):
                    column.append(v)
            else:
                bare[i][0].append(mean)
                bare[i][1].append(yy)
    if segments:
        ax.vlines(
            [x for x, _ in segments],
            [y - 0.4 for _, y in segments],
            [y + 0.4 for _, y in segments],
            color="#9aa0a8",
            linewidth=1.2,
            zorder=1,
        )
    for j, (xs, ys, lo, hi), (bx, by) in zip(page.judges, points, bare):
        if xs:
            ax.errorbar(
                xs,
                ys,
                xerr=[lo, hi],
                fmt="o",
                color=page.colors[j.label],
                elinewidth=1.8,
                capsize=3,
                markersize=5,
                zorder=3,
            )
        if bx:
            ax.plot(bx, by, "o", color=page.colors[j.label], markersize=5, zorder=3)
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.6, n - 0.4)
    agg_label = page.params.data["aggregations"][agg].get("label", agg)
    ax.set_title(f"{page.params.metrics[metric].get('label', metric)} {agg_label}", fontsize=10.5, loc="left")
    ax.grid(axis="x", color="#e3e5e8", linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
