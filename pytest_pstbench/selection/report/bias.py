"""The Position bias section of a selection report: per judge, a small figure of how often each displayed position
is picked as best and as worst (pick_best and pick_worst answers) against the rate a position-blind judge shows
under the track's permutations, one panel per k, and the numbers as text: per answer role and k the observed and
expected rates, the chi-square statistic and its permutation test (chi2, df, p-value), Cohen's w, the tvd and favoured position, and position
consistency (same image / same slot over the tasks with every trial answered); per role the all-k test.

The numbers are summary.json's `position_bias` as `selection.position_bias.rows` gives them; the run's reader has
checked that entry against per_task.csv's picks and the display orders (run_check.check_position_bias), so the
page shows what position_bias.py computes. matplotlib is imported when a figure is drawn; every text is drawn as
written (no math text)."""

from __future__ import annotations

from pathlib import Path

from pytest_pstbench.core.text import html_escape as esc

FIGURE_ROLES = (("best", "best", "#2e9c4a"), ("worst", "worst", "#c93c3c"))  # (role, legend, colour)
FIELDS = (
    ("n", "n", "d"),
    ("chi2", "chi2", ".2f"),
    ("df", "df", "d"),
    ("p", "p", ".3g"),
    ("effect_w", "w", ".3f"),
    ("tvd", "tvd", ".3f"),
    ("same_image", "same image", ".2f"),
    ("same_slot", "same slot", ".2f"),
)

EXTRA_CSS = """
.bias table.biastab { width:auto; font-size:12px; border-collapse:collapse; margin:6px 0; }
.bias table.biastab td, .bias table.biastab th { padding:1px 7px; border-bottom:1px solid #e3e5e8; text-align:left; }
.bias table.biastab td.num { text-align:right; } .bias td.rates { white-space:nowrap; font-family:monospace; }
.bias img { max-width:100%; } .bias .biased { color:#a11; font-weight:700; }
"""


def _f(value, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def bias_rows(page, judge) -> list[dict]:
    from pytest_pstbench.selection.position_bias import rows

    return rows(judge.run.summary, page.params)


def draw_bias(page, stage: Path) -> None:
    """figures/bias-<judge>.png per judge with a position_bias entry; page.bias_figures: judge index -> path."""
    from matplotlib import rc_context

    with rc_context({"text.parse_math": False}):
        for i, judge in enumerate(page.judges):
            rel = _draw(page, judge, bias_rows(page, judge), stage, i + 1)
            if rel:
                page.bias_figures[i] = rel


def _draw(page, judge, rows: list[dict], stage: Path, number: int) -> str | None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    by = {(r["role"], r["k"]): r for r in rows if r["role"] in dict((x[0], x) for x in FIGURE_ROLES) and r["n"]}
    ks = sorted({k for _, k in by})
    if not ks:
        return None
    fig = Figure(figsize=(0.9 + 1.5 * len(ks), 2.3), dpi=90, layout="constrained")
    axes = fig.subplots(1, len(ks), sharey=True, squeeze=False)[0]
    width = 0.38
    for ax, k in zip(axes, ks):
        labels = page.params.labels[:k]
        for j, (role, _legend, color) in enumerate(FIGURE_ROLES):
            r = by.get((role, k))
            if r is None:
                continue
            xs = [p + (j - 0.5) * width for p in range(k)]
            ax.bar(xs, r["rates"], width=width * 0.95, color=color, alpha=0.75, zorder=2)
            for x, e in zip(xs, r["expected_rates"]):
                if e is not None:
                    ax.plot([x - width / 2, x + width / 2], [e, e], color="#222", linewidth=1.4, zorder=3)
        ax.set_xticks(range(k))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_title(f"k={k}", fontsize=9, loc="left")
        ax.set_ylim(0, 1)
        ax.grid(axis="y", color="#e3e5e8", linewidth=0.8)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        ax.tick_params(labelsize=7.5)
    axes[0].set_ylabel("picked rate", fontsize=8)
    handles = [Patch(color=c, alpha=0.75, label=legend) for _, legend, c in FIGURE_ROLES]
    handles.append(Line2D([], [], color="#222", label="position-blind"))
    fig.legend(handles=handles, fontsize=7.5, loc="outside lower center", frameon=False, ncols=3)
    rel = f"figures/bias-{number:02d}.png"
    FigureCanvasAgg(fig)
    fig.savefig(stage / rel, format="png", dpi=fig.dpi, metadata={"Software": None})
    return rel


def render_bias(page, w) -> None:
    w(
        '<section id="bias" class="bias"><h2>Position bias</h2><p class="hint">Per judge, how often each displayed '
        "position (A, B, …) is picked as best (green) and as worst (red) against the rate of a position-blind judge "
        "under the track's permutations (black line). Test: the exact conditional (permutation) test of the "
        "chi-square statistic against that expectation, each task's picks reassigned to its answered trials (per k; "
        "all k: chi-squares summed); w: Cohen's effect size; tvd: total variation distance of the rates; "
        "same image / same slot: share of the tasks answered in every order whose pick stayed on one image / followed "
        "one position. From summary.json position_bias (checked against per_task.csv when read).</p>"
    )
    for i, judge in enumerate(page.judges):
        rows = bias_rows(page, judge)
        pb = judge.run.summary.get("position_bias")
        w(f'<h3 id="bias-{i + 1}">{esc(judge.label)}</h3>')
        if not rows:
            w(
                '<p class="hint">no position_bias in this run\'s summary.json (a run written before it was measured); '
                "score the run again to see it</p>"
            )
            continue
        if i in page.bias_figures:
            rel = page.bias_figures[i]
            w(f'<a href="{esc(rel)}"><img src="{esc(rel)}" alt="{esc("position bias of " + judge.label)}"></a>')
        heads = "".join(f"<th>{h}</th>" for _, h, _ in FIELDS)
        w(
            f'<table class="biastab" data-judge="{i + 1}"><tr><th>role</th><th>k</th><th>observed / position-blind rate per '
            f"position</th>{heads}<th>biased (p &lt; {esc(_f(pb.get('alpha'), 'g'))})</th><th>favoured</th></tr>"
        )
        for r in rows:
            attrs = f'data-judge="{i + 1}" data-role="{esc(r["role"])}" data-k="{r["k"]}"'
            shown = " ".join(
                f"{lab} {_f(o, '.2f')}/{_f(e, '.2f')}"
                for lab, o, e in zip(r["labels"], r["rates"], r["expected_rates"])
            )
            cells = "".join(
                f'<td class="num" {attrs} data-field="{key}" data-value="{esc(repr(r.get(key)))}">'
                f"{_f(r.get(key), spec)}</td>"
                for key, _, spec in FIELDS
            )
            biased = '<span class="biased">yes</span>' if r["biased"] else "no" if r["biased"] is False else "–"
            favoured = f"{esc(r['favoured'])} ({_f(r['excess'], '+.2f')})" if r["favoured"] else "–"
            w(
                f"<tr><td>{esc(r['role'])}</td><td>{r['k']}</td><td class='rates'>{esc(shown)}</td>{cells}<td>{biased}</td>"
                f"<td>{favoured}</td></tr>"
            )
        w("</table>")
        parts = []
        for role, entry in (pb.get("roles") or {}).items():
            a = entry.get("all_k") or {}
            parts.append(
                f'<span data-judge="{i + 1}" data-role="{esc(role)}" data-k="all" data-p="{esc(repr(a.get("p")))}">'
                f"{esc(role)}: chi2 {_f(a.get('chi2'), '.2f')}, df {_f(a.get('df'), 'd')}, p {_f(a.get('p'), '.3g')}"
                f"{' (biased)' if a.get('biased') else ''}</span>"
            )
        w('<p class="hint">all k: ' + "; ".join(parts) + "</p>")
    w("</section>")
