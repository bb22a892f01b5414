"""The report's Protocol sensitivity section (`pstbench report --sensitivity SENS_DIR`): the analysis
`pstbench sensitivity` wrote (analysis.json) read and validated, its figures (the Kendall tau heatmap and the
rank charts; matplotlib, imported when drawn) and its HTML."""

from __future__ import annotations

import json
import math
from pathlib import Path

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.jsonfile import read_json
from pytest_pstbench.core.store.reader import run_field
from pytest_pstbench.core.text import html_escape as esc
from pytest_pstbench.paired.report.figures import literal_text, safe_name, save_figure
from pytest_pstbench.paired.report.page import Page, short, swatch

ANALYSIS_FILE = "analysis.json"


# ---- the analysis ------------------------------------------------------------------------------
_ANALYSIS_KEYS = {
    "track": str,
    "protocol": str,
    "protocol_sha256": str,
    "dataset_revision": str,
    "methods": list,
    "metrics": dict,
    "variants": list,
    "aggregates": dict,
    "rankings": dict,
    "kendall_tau": dict,
    "swaps": list,
    "unavailable": list,
}


def _number_or_null(v) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v))


def load_analysis(sens_dir: Path, first_run=None) -> dict:
    """Read and validate SENS_DIR/analysis.json (written by `pstbench sensitivity`)."""
    path = sens_dir / ANALYSIS_FILE if sens_dir.is_dir() or sens_dir.suffix != ".json" else sens_dir
    fix = "fix: give the --out folder of `pstbench sensitivity`"
    if not path.is_file():
        raise UserError(f"--sensitivity {sens_dir}: {path} not found; {fix}")
    try:
        data = read_json(path)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not valid JSON ({exc}); {fix}") from None

    def bad(rule: str) -> UserError:
        return UserError(f"{path}: not a sensitivity analysis ({rule}); {fix}")

    if not isinstance(data, dict):
        raise bad("the file must be a JSON object")
    for key, typ in _ANALYSIS_KEYS.items():
        if key not in data:
            raise bad(f"missing key '{key}'")
        if not isinstance(data[key], typ):
            raise bad(f"'{key}' must be a JSON {'string' if typ is str else 'array' if typ is list else 'object'}")
    for m, info in data["metrics"].items():
        if not isinstance(info, dict) or "label" not in info or not isinstance(info.get("higher_is_better"), bool):
            raise bad(f"metrics.{m} must have 'label' and a boolean 'higher_is_better'")
    if not data["variants"]:
        raise bad("'variants' is empty")
    ids = []
    for i, v in enumerate(data["variants"]):
        if not isinstance(v, dict) or not isinstance(v.get("id"), str):
            raise bad(f"variants[{i}] must be an object with a string 'id'")
        ids.append(v["id"])
    if len(set(ids)) != len(ids):
        raise bad("variant ids must be unique")
    for key in ("aggregates", "rankings", "kendall_tau"):
        for variant, per_metric in data[key].items():
            if variant not in ids:
                raise bad(f"{key} names variant '{variant}', which is not in 'variants'")
            if not isinstance(per_metric, dict):
                raise bad(f"{key}.{variant} must be an object of metric -> value")
    for variant, per_metric in data["rankings"].items():
        for m, order in per_metric.items():
            if not isinstance(order, list):
                raise bad(f"rankings.{variant}.{m} must be a list of methods, best first")
    for variant, per_metric in data["kendall_tau"].items():
        for m, t in per_metric.items():
            if not isinstance(t, dict) or "tau" not in t:
                raise bad(f"kendall_tau.{variant}.{m} must be an object with 'tau' and 'pvalue'")
            if not (_number_or_null(t.get("tau")) and _number_or_null(t.get("pvalue"))):
                raise bad(f"kendall_tau.{variant}.{m}: 'tau' and 'pvalue' must be finite numbers (or null)")
    # the numbers the page shows: what `pstbench sensitivity` wrote (finite numbers, or null), never a string or inf
    for variant, per_metric in data["aggregates"].items():
        for m, per_method in per_metric.items():
            if not isinstance(per_method, dict) or not all(_number_or_null(v) for v in per_method.values()):
                raise bad(f"aggregates.{variant}.{m} must map each method to a finite number (or null)")
    for variant, per_metric in (data.get("ranks") or {}).items() if isinstance(data.get("ranks"), dict) else ():
        for m, per_method in (per_metric or {}).items() if isinstance(per_metric, dict) else ():
            if not isinstance(per_method, dict) or not all(
                isinstance(r, int) and not isinstance(r, bool) and r >= 1 for r in per_method.values()
            ):
                raise bad(f"ranks.{variant}.{m} must map each method to its rank (a whole number >= 1)")
    for i, s in enumerate(data["swaps"]):
        need = ("variant", "metric", "a", "b", "base_significant", "variant_significant")
        if not isinstance(s, dict) or any(k not in s for k in need):
            raise bad(f"swaps[{i}] must be an object with {', '.join(need)}")
    for i, u in enumerate(data["unavailable"]):
        if not isinstance(u, dict) or any(k not in u for k in ("variant", "metric", "reason")):
            raise bad(f"unavailable[{i}] must be an object with variant, metric, reason")
    if first_run is not None:
        for label, key, want in (
            ("track", "track", run_field(first_run, "track")),
            ("dataset_revision", "dataset_revision", run_field(first_run, "dataset", "revision")),
            ("protocol_sha256", "protocol_sha256", run_field(first_run, "protocol", "sha256")),
        ):
            if data[key] != want:
                raise UserError(
                    f"{path}: {label} is {data[key]!r} but the runs ({first_run.path}) have {want!r}; the sensitivity "
                    "analysis must be of the same track, dataset revision and protocol file; fix: give a matching "
                    "--sensitivity folder or report it with runs of its track"
                )
    return data


def ranks_of(a: dict, variant: str, metric: str) -> dict[str, int] | None:
    """Method -> rank (1 = best) under a variant: the analysis's `ranks` (ties share a rank) when it has them,
    else the position in `rankings`. None when the variant has no ranking for the metric."""
    order = a["rankings"].get(variant, {}).get(metric)
    if not isinstance(order, list):
        return None
    given = (a.get("ranks") or {}).get(variant, {}).get(metric) if isinstance(a.get("ranks"), dict) else None
    if isinstance(given, dict) and all(isinstance(r, int) and not isinstance(r, bool) for r in given.values()):
        return {str(k): r for k, r in given.items()}
    return {str(x): i + 1 for i, x in enumerate(order)}


# ---- figures -----------------------------------------------------------------------------------
@literal_text
def sensitivity_figures(page: Page, stage: Path) -> None:
    """The Kendall tau heatmap and, with two methods or more, one rank chart per metric."""
    _tau_heatmap(page, stage)
    _rank_charts(page, stage)


def _tau_heatmap(page: Page, stage: Path) -> None:
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    a = page.sensitivity
    variants = [v["id"] for v in a["variants"]]
    metrics = list(a["metrics"])
    labels = [f"{a['metrics'][m]['label']}{'↑' if a['metrics'][m]['higher_is_better'] else '↓'}" for m in metrics]
    unavailable = {(u["variant"], u["metric"]) for u in a["unavailable"]}
    sig = {(s["variant"], s["metric"]) for s in a["swaps"] if s.get("base_significant") or s.get("variant_significant")}

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
    save_figure(fig, stage / rel)
    page.sensitivity_figures["tau"] = rel


def _rank_charts(page: Page, stage: Path) -> None:
    """The rank of each method per variant: one bump chart per metric."""
    from matplotlib.figure import Figure

    a = page.sensitivity
    variants = [v["id"] for v in a["variants"]]
    metrics = list(a["metrics"])
    labels = [f"{a['metrics'][m]['label']}{'↑' if a['metrics'][m]['higher_is_better'] else '↓'}" for m in metrics]
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
        rel = f"figures/sensitivity_rank_{i + 1:02d}_{safe_name(m)}.png"
        save_figure(fig, stage / rel)
        page.sensitivity_figures[m] = rel


# ---- HTML --------------------------------------------------------------------------------------
def _order_text(order) -> str:
    if isinstance(order, list):
        return " > ".join(str(x) for x in order)
    return str(order)


def _fmt_p(p) -> str:
    if not isinstance(p, (int, float)) or isinstance(p, bool) or not math.isfinite(p):
        return "–"
    return f"{p:.3g}" if p >= 0.001 else f"{p:.1e}"


def _pair_rows_table(a: dict, rows: list, table_id: str, w) -> None:
    w(
        f'<table id="{esc(table_id)}"><thead><tr><th>variant</th><th>metric</th><th>methods</th><th>protocol order</th>'
        '<th>variant order</th><th class="num">p (protocol, Holm)</th><th class="num">p (variant, Holm)</th></tr></thead><tbody>'
    )

    def p_cell(p, flag):
        badge = ' <span class="badge no">significant</span>' if flag else ""
        return f'<td class="num">{esc(_fmt_p(p))}{badge}</td>'

    for s in rows:
        metric = a["metrics"].get(s.get("metric"), {})
        sig = bool(s.get("base_significant")) or bool(s.get("variant_significant"))
        row_cls = ' class="sig"' if sig else ""
        w(
            f"<tr{row_cls}><td>{esc(s.get('variant'))}</td><td>{esc(metric.get('label', s.get('metric')))}</td>"
            f"<td>{esc(s.get('a'))} vs {esc(s.get('b'))}</td><td>{esc(_order_text(s.get('base_order', '')))}</td>"
            f"<td>{esc(_order_text(s.get('variant_order', '')))}</td>"
            f"{p_cell(s.get('base_p_holm'), s.get('base_significant'))}{p_cell(s.get('variant_p_holm'), s.get('variant_significant'))}</tr>"
        )
    w("</tbody></table>")


def render_sensitivity(page: Page, w) -> None:
    """The page's Protocol sensitivity section: the swapped pairs, the ranks per variant, the variants."""
    a = page.sensitivity
    variants = a["variants"]
    base = variants[0]["id"]
    w('<section id="sensitivity"><h2>Protocol sensitivity</h2>')
    w(
        f'<p class="hint">From <code>{esc(Path(page.sensitivity_path) / ANALYSIS_FILE)}</code>: every method scored under each '
        f"evaluation variant; ranks compared with the protocol's (<code>{esc(base)}</code>) by Kendall τ. "
        "In the heatmap, * marks a variant and metric with a swapped pair of methods whose difference is significant "
        "(Holm-adjusted) under the protocol or the variant; n/a: the variant is unavailable for that metric. "
        "Below, changed ranks are highlighted (▲ better, ▼ worse than under the protocol; the variant's description and "
        "each aggregate on hover; the variants are described at the end of this section).</p>"
    )
    if "tau" in page.sensitivity_figures:
        rel = page.sensitivity_figures["tau"]
        w(
            f'<div class="figs wide"><a href="{esc(rel)}"><img src="{esc(rel)}" alt="Kendall tau per variant and metric"></a></div>'
        )
    swaps = a["swaps"]
    w("<h3>Swapped pairs</h3>")
    if not swaps:
        w('<p class="hint">No pair of methods changes order under any variant.</p>')
    else:
        w(
            '<p class="hint">Pairs of methods whose order differs from the protocol\'s; rows with a significant paired difference '
            "(Holm-adjusted) under the protocol or the variant are highlighted.</p>"
        )
        _pair_rows_table(a, swaps, "swaps", w)
    changes = a.get("significance_changes")
    if isinstance(changes, list) and changes and all(isinstance(s, dict) for s in changes):
        w("<h3>Same order, significance changed</h3>")
        w(
            '<p class="hint">Pairs of methods in the same order under the protocol and the variant, but significantly different '
            "under only one of them.</p>"
        )
        _pair_rows_table(a, changes, "significance-changes", w)
    _render_ranks(page, w)
    _render_variants(a, w)
    w("</section>")


def _render_ranks(page: Page, w) -> None:
    a = page.sensitivity
    variants = a["variants"]
    base = variants[0]["id"]
    methods = [str(m) for m in a["methods"]]
    w("<h3>Ranks per variant</h3>")
    for m, info in a["metrics"].items():
        heading = f"{info['label']}{'↑' if info['higher_is_better'] else '↓'}"
        base_order = [str(x) for x in a["rankings"].get(base, {}).get(m, [])]
        base_ranks = ranks_of(a, base, m) or {}
        changed_any = any(ranks_of(a, v["id"], m) not in (None, base_ranks) for v in variants[1:])
        status = "rank changes" if changed_any else "no rank change"
        w(f"<details{' open' if changed_any else ''}><summary>{esc(heading)} · {esc(status)}</summary>")
        cols = base_order + [x for x in methods if x not in base_order]
        w('<div class="rankrow"><table class="ranks"><thead><tr><th>variant</th>')
        for x in cols:
            w(f'<th class="num">{swatch(page, x)}{esc(x)}</th>')
        w('<th class="num">Kendall τ</th><th class="num">p</th></tr></thead><tbody>')
        for v in variants:
            _render_rank_row(page, w, v, m, cols, base_ranks)
        w("</tbody></table>")
        if m in page.sensitivity_figures:
            rel = page.sensitivity_figures[m]
            w(
                f'<div class="figs wide"><a href="{esc(rel)}"><img src="{esc(rel)}" alt="{esc(heading)} rank per variant"></a></div>'
            )
        w("</div></details>")


def _render_rank_row(page: Page, w, v: dict, m: str, cols: list, base_ranks: dict) -> None:
    """One variant's row of a metric's rank table: each method's rank (a change from the protocol's marked),
    Kendall tau and its p; or why the variant has no ranking."""
    a = page.sensitivity
    base = a["variants"][0]["id"]
    vid = v["id"]
    unavailable = {(u["variant"], u["metric"]): u["reason"] for u in a["unavailable"]}
    description = v.get("description", "")
    ranks = ranks_of(a, vid, m)
    w(f'<tr><td title="{esc(description or "")}"><code>{esc(vid)}</code></td>')
    if ranks is None:
        reason = unavailable.get((vid, m), "no ranking in the analysis")
        w(f'<td colspan="{len(cols) + 2}" class="dim">unavailable: {esc(reason)}</td></tr>')
        return
    aggs = a["aggregates"].get(vid, {}).get(m, {})
    for x in cols:
        if x not in ranks:
            w('<td class="num dim">–</td>')
            continue
        rank = ranks[x]
        base_rank = base_ranks.get(x)
        changed = base_rank is not None and rank != base_rank and vid != base
        mark = ""
        if changed:
            mark = f" ({'▲' if rank < base_rank else '▼'}{abs(rank - base_rank)})"
        value = aggs.get(x) if isinstance(aggs, dict) else None
        tip = f"{x}: {value!r}" if value is not None else x
        cls = "num changed" if changed else "num"
        w(f'<td class="{cls}" title="{esc(tip)}">{rank}{esc(mark)}</td>')
    t = a["kendall_tau"].get(vid, {}).get(m, {})
    tau = t.get("tau") if isinstance(t, dict) else None
    tau_txt = f"{tau:.3f}" if isinstance(tau, (int, float)) and math.isfinite(tau) else "–"
    w(
        f'<td class="num">{esc(tau_txt)}</td><td class="num">{esc(_fmt_p(t.get("pvalue") if isinstance(t, dict) else None))}</td></tr>'
    )


def _render_variants(a: dict, w) -> None:
    variants = a["variants"]
    if a["unavailable"]:
        w(
            "<h3>Unavailable variants</h3><table><thead><tr><th>variant</th><th>metric</th><th>reason</th></tr></thead><tbody>"
        )
        for u in a["unavailable"]:
            label = a["metrics"].get(u["metric"], {}).get("label", u["metric"])
            w(f"<tr><td><code>{esc(u['variant'])}</code></td><td>{esc(label)}</td><td>{esc(u['reason'])}</td></tr>")
        w("</tbody></table>")
    w(
        '<h3>Variants</h3><table id="variants"><thead><tr><th>variant</th><th>description</th><th>changes</th><th>file</th></tr></thead><tbody>'
    )
    for v in variants:
        changes = v.get("changes")
        ch = json.dumps(changes, ensure_ascii=False, sort_keys=True) if changes not in (None, {}, []) else "–"
        w(
            f"<tr><td><code>{esc(v['id'])}</code></td><td>{esc(v.get('description') or '')}</td>"
            f"<td><code>{esc(ch)}</code></td><td><code>{esc(v.get('file') or '')}</code></td></tr>"
        )
    w("</tbody></table>")
    timings = a.get("timings")
    if timings:
        w(
            "<details><summary>Timings</summary><pre><code>"
            + esc(json.dumps(timings, indent=2, ensure_ascii=False, sort_keys=True))
            + "</code></pre></details>"
        )
