"""Figures of `pstbench report` over paired runs (matplotlib, extra `[report]`, imported when drawn): one per
metric (the sensitivity section's are sensitivity.py's), and the colours of the runs."""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path

from pytest_pstbench.paired.report.page import Page, entry_value, short


def assign_colors(page: Page) -> None:
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    palette = [to_hex(c) for c in colormaps["tab10"].colors]
    names = list(page.labels)
    if page.sensitivity is not None:
        names += [str(m) for m in page.sensitivity["methods"] if str(m) not in names]
    page.colors = {n: palette[i % len(palette)] for i, n in enumerate(names)}


def safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name)[:40] or "x"


def save_figure(fig, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fig.savefig(path, format="png", dpi=fig.dpi, metadata={"Software": None})


def literal_text(draw):
    """Draw with every text shown as written: run names, method names and variant ids are the user's
    (`v$^{$`), never matplotlib math text (which fails on, or changes, labels holding `$`)."""

    @functools.wraps(draw)
    def drawn(*args, **kwargs):
        from matplotlib import rc_context

        with rc_context({"text.parse_math": False}):
            return draw(*args, **kwargs)

    return drawn


def _jitter(i: int) -> float:
    """Deterministic spread of dots around a row (golden-ratio sequence in [-0.5, 0.5))."""
    return ((i * 0.6180339887498949) % 1.0) - 0.5


# ---- figures -----------------------------------------------------------------------------------
@literal_text
def metric_figures(page: Page, stage: Path) -> None:
    from matplotlib.figure import Figure

    n = len(page.runs)
    ci_name = f"{page.confidence:.0%} bootstrap CI" if page.confidence else "bootstrap CI"
    for i, metric in enumerate(page.metrics):
        fig = Figure(figsize=(5.6, 1.35 + 0.5 * n), dpi=100)
        ax = fig.add_subplot()
        for row, (run, label) in enumerate(zip(page.runs, page.labels)):
            y = n - 1 - row
            values = [v.get(metric.name) for v in run.scores.values()]
            values = [v for v in values if v is not None and math.isfinite(v)]
            if values:
                ax.scatter(
                    values,
                    [y + 0.32 * _jitter(k) for k in range(len(values))],
                    s=9,
                    color="#8a8f98",
                    alpha=0.55,
                    linewidths=0,
                    zorder=1,
                )
            entry = run.summary["metrics"].get(metric.name, {})
            mean, lo, hi = entry_value(entry), entry.get("ci_low"), entry.get("ci_high")
            if mean is not None:
                xerr = [[mean - lo], [hi - mean]] if lo is not None and hi is not None else None
                ax.errorbar(
                    [mean],
                    [y],
                    xerr=xerr,
                    fmt="D",
                    color=page.colors[label],
                    ecolor=page.colors[label],
                    elinewidth=2.2,
                    capsize=5,
                    markersize=7,
                    zorder=3,
                )
                ax.annotate(
                    metric.fmt(mean),
                    (mean, y),
                    xytext=(0, 7),
                    textcoords="offset points",
                    ha="center",
                    va="bottom",
                    fontsize=8,
                    color=page.colors[label],
                    fontweight="bold",
                )
        ax.set_yticks(range(n))
        ax.set_yticklabels([short(label) for label in reversed(page.labels)])
        ax.set_ylim(-0.6, n - 0.4)
        ax.set_title(f"{metric.label} {metric.arrow}  ({metric.direction})", fontsize=11, loc="left")
        ax.set_xlabel(f"{metric.label}: per-pair scores (grey), mean and {ci_name}", fontsize=8.5, color="#444")
        ax.grid(axis="x", color="#e3e5e8", linewidth=0.8)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        fig.tight_layout()
        rel = f"figures/metric_{i + 1:02d}_{safe_name(metric.name)}.png"
        save_figure(fig, stage / rel)
        page.figures.append((metric, rel))
