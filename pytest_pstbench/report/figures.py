"""Figures of `pstbench report` (matplotlib, extra `[report]`, imported when drawn): one per metric,
and the Kendall tau heatmap and rank bump charts of the sensitivity section."""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path

from pytest_pstbench.report.model import Page, entry_value, ranks_of, short


def assign_colors(page: Page) -> None:
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    palette = [to_hex(c) for c in colormaps["tab10"].colors]
    names = list(page.labels)
    if page.sensitivity is not None:
        names += [str(m) for m in page.sensitivity["methods"] if str(m) not in names]
    page.colors = {n: palette[i % len(palette)] for i, n in enumerate(names)}


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name)[:40] or "x"


def _save(fig, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fig.savefig(path, format="png", dpi=fig.dpi, metadata={"Software": None})


def _literal_text(draw):
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
@_literal_text
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
        rel = f"figures/metric_{i + 1:02d}_{_safe(metric.name)}.png"
        _save(fig, stage / rel)
        page.figures.append((metric, rel))


@_literal_text
def sensitivity_figures(page: Page, stage: Path) -> None:
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    a = page.sensitivity
    variants = [v["id"] for v in a["variants"]]
    metrics = list(a["metrics"])
    labels = [f"{a['metrics'][m]['label']}{'↑' if a['metrics'][m]['higher_is_better'] else '↓'}" for m in metrics]
    unavailable = {(u["variant"], u["metric"]) for u in a["unavailable"]}
    sig = {(s["variant"], s["metric"]) for s in a["swaps"] if s.get("base_significant") or s.get("variant_significant")}

    # Kendall tau per variant and metric (heatmap).
    import numpy as np

    grid = np.full((len(variants), len(metrics)), np.nan)
    for r, v in enumerate(variants):
        for c, m in enumerate(metrics):
            t = a["kendall_tau"].get(v, {}).get(m)
            if isinstance(t, dict) and isinstance(t.get("tau"), (int, float)) and math.isfinite(t["tau"]):
                grid[r, c] = t["tau"]
    fig = Figure(figsize=(1.6 + 1.05 * len(metrics), 1.2 + 0.36 * len(variants)), dpi=100)
    ax = fig.add_subplot()
    cmap = colormaps["RdYlGn"].with_extremes(bad="#eceef1")
    im = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=-1, vmax=1, aspect="auto")
    for r, v in enumerate(variants):
        for c, m in enumerate(metrics):
            if np.isnan(grid[r, c]):
                text = "n/a" if (v, m) in unavailable or m not in a["rankings"].get(v, {}) else "–"
            else:
                text = f"{grid[r, c]:.2f}" + ("*" if (v, m) in sig else "")
            dark = not np.isnan(grid[r, c]) and abs(grid[r, c]) > 0.6
            ax.text(c, r, text, ha="center", va="center", fontsize=8, color="#fff" if dark else "#222")
    ax.set_xticks(range(len(metrics)))
    ax.set_xticklabels(labels, fontsize=8.5)
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(variants)))
    ax.set_yticklabels([short(v, 32) for v in variants], fontsize=8.5)
    ax.set_title("Kendall τ vs the protocol's ranking", fontsize=10, loc="left", pad=24)
    fig.colorbar(im, ax=ax, fraction=0.035, pad=0.02)
    fig.tight_layout()
    rel = "figures/sensitivity_tau.png"
    _save(fig, stage / rel)
    page.sensitivity_figures["tau"] = rel

    # Rank of each method per variant, one bump chart per metric.
    methods = [str(m) for m in a["methods"]]
    if len(methods) < 2:
        return
    for i, m in enumerate(metrics):
        xs = [k for k, v in enumerate(variants) if ranks_of(a, v, m) is not None]
        if not xs:
            continue
        fig = Figure(figsize=(min(6.6, 2.6 + 0.4 * len(variants)), 2.2 + 0.42 * len(methods)), dpi=100)
        ax = fig.add_subplot()
        base_order = [str(x) for x in a["rankings"].get(variants[0], {}).get(m, [])]
        for method in sorted(
            methods, key=lambda x: (base_order.index(x) if x in base_order else len(methods), methods.index(x))
        ):
            pts = []
            for k in xs:
                pts.append((k, ranks_of(a, variants[k], m).get(method)))
            kx = [k for k, r in pts if r is not None]
            ry = [r for k, r in pts if r is not None]
            color = page.colors.get(method, "#555")
            ax.plot(kx, ry, "-o", color=color, linewidth=2, markersize=5, label=short(method, 24))
        ax.set_ylim(len(methods) + 0.5, 0.5)
        ax.set_yticks(range(1, len(methods) + 1))
        ax.set_ylabel("rank (1 = best)", fontsize=8.5)
        ax.set_xticks(range(len(variants)))
        ax.set_xticklabels(
            [short(v, 24) for v in variants], rotation=55, ha="right", rotation_mode="anchor", fontsize=7.5
        )
        ax.set_xlim(-0.5, len(variants) - 0.5)
        ax.grid(axis="y", color="#e3e5e8")
        ax.set_title(f"{labels[i]}  rank per variant", fontsize=10.5, loc="left")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        fig.tight_layout()
        rel = f"figures/sensitivity_rank_{i + 1:02d}_{_safe(m)}.png"
        _save(fig, stage / rel)
        page.sensitivity_figures[m] = rel
