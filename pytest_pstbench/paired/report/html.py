"""The HTML renderer of `pstbench report` over paired runs: the page model to one self-contained index.html
(the frame's CSS inline, every link relative)."""

from __future__ import annotations

import json
import math

from pytest_pstbench.core.store.reader import run_field
from pytest_pstbench.core.text import html_escape as esc
from pytest_pstbench.paired.report.page import Image, MetricInfo, Page, entry_value, short, swatch
from pytest_pstbench.paired.report.sensitivity import render_sensitivity
from pytest_pstbench.paired.report.worst import pair_anchor, render_worst


def _cell_num(metric: MetricInfo, entry: dict, best: bool) -> str:
    mean, pm = entry_value(entry), entry.get("pm")
    cls = "num best" if best else "num"
    if mean is None:
        return f'<td class="{cls}">–</td>'
    text = f"{metric.fmt(mean)} ± {metric.fmt(pm)}" if pm is not None else metric.fmt(mean)
    attrs = f' data-metric="{esc(metric.name)}" data-mean="{esc(repr(float(mean)))}"'
    if pm is not None:
        attrs += f' data-pm="{esc(repr(float(pm)))}"'
    return f'<td class="{cls}"{attrs}>{esc(text)}</td>'


def _best_index(values: list, higher: bool) -> set[int]:
    present = [(v, i) for i, v in enumerate(values) if v is not None and math.isfinite(v)]
    if len(present) < 2:
        return set()
    target = max(v for v, _ in present) if higher else min(v for v, _ in present)
    return {i for v, i in present if v == target}


def render(page: Page, generator: str, css: str) -> str:
    """The page as HTML: `generator` (the meta tag an earlier page is found by) and `css` are the frame's."""
    out: list[str] = []
    w = out.append
    title = f"pstbench report · track {page.track_id}"
    w("<!DOCTYPE html>")
    w('<html lang="en"><head><meta charset="utf-8">')
    w(f'<meta name="generator" content="{generator}">')
    w('<meta name="viewport" content="width=device-width, initial-scale=1">')
    w(f"<title>{esc(title)}</title><style>\n{css}</style></head><body>")
    w(
        f'<header><h1>{esc(title)}</h1><div class="meta">protocol <code>{esc(page.protocol_id)}</code> '
        f"(sha256 <code>{esc(page.protocol_sha256[:12])}</code>) · dataset <code>{esc(page.dataset_id)}@{esc(page.revision)}</code> · "
        f"{len(page.runs)} run(s) · {len(page.pair_ids)} pair(s)</div></header>"
    )
    nav = [("summary", "Summary"), ("figures", "Figures")]
    if page.sensitivity is not None:
        nav.append(("sensitivity", "Sensitivity"))
    if page.worst:
        nav.append(("worst", "Worst pairs"))
    nav += [(x.anchor, x.title) for x in page.sections]
    nav += [("pairs", "Pairs"), ("provenance", "Provenance")]
    if page.notes:
        nav.append(("notes", f"Notes ({len(page.notes)})"))
    w("<nav>" + "".join(f'<a href="#{a}">{esc(t)}</a>' for a, t in nav) + "</nav><main>")
    if page.notes:
        w(
            f'<p class="notes" style="margin-top:18px">{len(page.notes)} note(s) on this report (e.g. images that could not be '
            'shown): see <a href="#notes">Notes</a>.</p>'
        )
    _render_summary(page, w)
    _render_figures(page, w)
    if page.sensitivity is not None:
        render_sensitivity(page, w)
    if page.worst:
        render_worst(page, w)
    for section in page.sections:
        w(section.html)
    _render_pairs(page, w)
    _render_provenance(page, w)
    if page.notes:
        w('<section id="notes"><h2>Notes</h2><ul class="notes">')
        for note in page.notes:
            w(f"<li>{esc(note)}</li>")
        w("</ul></section>")
    w("</main></body></html>")
    return "\n".join(out) + "\n"


def _render_summary(page: Page, w) -> None:
    ci = f"{page.confidence:.0%} percentile bootstrap CI" if page.confidence else "bootstrap CI"
    if page.interval:
        ci = f"{page.confidence:.0%} {page.interval}" if page.confidence else page.interval
    w('<section id="summary"><h2>Summary</h2>')
    w(
        f'<p class="hint">Mean over pairs ± pm (half the width of the {esc(ci)}). Best mean per ranked metric highlighted; '
        "↑ higher is better, ↓ lower is better.</p>"
    )
    w('<table id="summary-table"><thead><tr><th>method</th>')
    for m in page.metrics:
        note = "" if m.ranked else ' <span class="dim">(not ranked)</span>'
        w(f'<th class="num" title="{esc(m.direction)}">{esc(m.heading)}{note}</th>')
    w('<th class="num">n</th><th>complete</th></tr></thead><tbody>')
    best = {}
    for m in page.metrics:
        vals = [entry_value(r.summary["metrics"].get(m.name, {})) for r in page.runs]
        best[m.name] = _best_index(vals, m.higher_is_better) if m.ranked else set()
    for i, (run, label) in enumerate(zip(page.runs, page.labels)):
        w(f'<tr data-method="{esc(label)}"><th>{swatch(page, label)}{esc(label)}</th>')
        for m in page.metrics:
            w(_cell_num(m, run.summary["metrics"].get(m.name, {}), i in best[m.name]))
        w(f'<td class="num">{esc(run.summary.get("n", ""))}</td><td>{_complete_badge(run)}</td></tr>')
    w("</tbody></table></section>")


def _complete_badge(run) -> str:
    if run.complete:
        return '<span class="badge ok">complete</span>'
    return f'<span class="badge no">incomplete: {esc(run.run.get("n_scored"))} of {esc(run.run.get("n_pairs"))} pairs</span>'


def _render_figures(page: Page, w) -> None:
    w('<section id="figures"><h2>Figures</h2>')
    w(
        '<p class="hint">Per metric: each grey dot is one pair; the diamond is the mean and the bar its bootstrap CI.</p><div class="figs">'
    )
    for metric, rel in page.figures:
        alt = f"{metric.label} {metric.arrow} per method: mean and CI"
        w(f'<a href="{esc(rel)}"><img src="{esc(rel)}" alt="{esc(alt)}"></a>')
    w("</div></section>")


def _img_cell(page: Page, img: Image, role: str, height: int, caption_html: str = "") -> str:
    size = page.thumb_size
    if img.src:
        dims = f' width="{img.size[0]}" height="{img.size[1]}"' if img.size else ""
        inner = f'<img src="{esc(img.src)}" alt="{esc(role)}"{dims}>'
    else:
        inner = f'<div class="placeholder">{esc(img.missing or "not available")}</div>'
    warn = f'<br><span class="badge warnbadge">{esc(img.warning)}</span>' if img.warning else ""
    return (
        f'<figure class="cell" style="width:{size}px"><div class="frame" style="width:{size}px;height:{height}px">{inner}</div>'
        f"<figcaption>{caption_html}{warn}</figcaption></figure>"
    )


def _render_pairs(page: Page, w) -> None:
    w('<section id="pairs"><h2>Pairs</h2>')
    shown = len(page.shown)
    extra = (
        ""
        if shown == len(page.pair_ids)
        else f" Showing the first {shown} of {len(page.pair_ids)} pairs (--max-pairs)."
    )
    w(
        f'<p class="hint">Content, style and reference, then each method\'s output with its scores for this pair '
        f"(best per ranked metric highlighted).{esc(extra)}</p>"
    )
    failures = [
        {f.get("pair"): f.get("message") for f in r.run.get("failures") or [] if isinstance(f, dict)} for r in page.runs
    ]
    for k, pid in enumerate(page.shown):
        w(f'<div class="pair"><h3 id="{pair_anchor(k)}">{esc(pid)}</h3><div class="row">')
        keys = [(pid, role) for role in ("content", "style", "reference")] + [(pid, i) for i in range(len(page.runs))]
        heights = [page.pair_images[k].size[1] for k in keys if page.pair_images[k].size]
        height = max(max(heights) if heights else (page.thumb_size * 2) // 3, 72)
        for role in ("content", "style", "reference"):
            w(_img_cell(page, page.pair_images[(pid, role)], role, height, f'<span class="role">{esc(role)}</span>'))
        w('<div class="sep"></div>')
        values = {m.name: [r.scores.get(pid, {}).get(m.name) for r in page.runs] for m in page.metrics}
        best = {m.name: (_best_index(values[m.name], m.higher_is_better) if m.ranked else set()) for m in page.metrics}
        for i, (run, label) in enumerate(zip(page.runs, page.labels)):
            cap = f'<span class="role">output</span><br>{swatch(page, label)}<b>{esc(label)}</b>'
            if pid in run.scores:
                if all(v is None for v in run.scores[pid].values()):
                    msg = failures[i].get(pid) or "this pair failed"
                    cap += (
                        f'<br><span class="badge no">failed</span> <span class="dim">{esc(short(str(msg), 160))}</span>'
                    )
                else:
                    rows = []
                    for m in page.metrics:
                        cls = ' class="num best"' if i in best[m.name] else ' class="num"'
                        v = run.scores[pid].get(m.name)
                        data = f' data-pair="{esc(pid)}" data-run="{i}" data-metric="{esc(m.name)}"'
                        if v is not None:
                            data += f' data-value="{esc(repr(float(v)))}"'
                        rows.append(f"<tr><td>{esc(m.heading)}</td><td{cls}{data}>{esc(m.fmt(v))}</td></tr>")
                    cap += '<table class="scores">' + "".join(rows) + "</table>"
            w(_img_cell(page, page.pair_images[(pid, i)], "output", height, cap))
        w("</div></div>")
    w("</section>")


def _kv_value(value) -> str:
    if isinstance(value, (dict, list)):
        return f"<code>{esc(json.dumps(value, ensure_ascii=False, sort_keys=True))}</code>"
    return esc(value)


def _render_provenance(page: Page, w) -> None:
    first = page.runs[0]
    w('<section id="provenance"><h2>Provenance</h2>')
    w('<table class="kv">')
    w(f"<tr><th>protocol</th><td><code>{esc(page.protocol_id)}</code></td></tr>")
    w(f"<tr><th>protocol sha256</th><td><code>{esc(page.protocol_sha256)}</code></td></tr>")
    w(f"<tr><th>track</th><td><code>{esc(page.track_id)}</code></td></tr>")
    w(
        f"<tr><th>dataset</th><td><code>{esc(page.dataset_id)}</code> revision <code>{esc(page.revision)}</code>"
        f" (source: {esc(run_field(first, 'dataset', 'source') or '–')})</td></tr>"
    )
    w("</table>")
    for _i, (run, label) in enumerate(zip(page.runs, page.labels)):
        w(f'<h3>{swatch(page, label)}{esc(label)}</h3><table class="kv">')
        w(f"<tr><th>run folder</th><td><code>{esc(run.path)}</code></td></tr>")
        w(
            f"<tr><th>complete</th><td>{_complete_badge(run)} {esc(run.run.get('n_scored'))} of {esc(run.run.get('n_pairs'))} pairs scored</td></tr>"
        )
        method = run.run.get("method") or {}
        if isinstance(method, dict) and method:
            items = "".join(f"<div><b>{esc(k)}</b>: {_kv_value(v)}</div>" for k, v in sorted(method.items()))
        else:
            items = '<span class="dim">none recorded</span>'
        w(f"<tr><th>method</th><td>{items}</td></tr>")
        devs = run.run.get("deviations") or []
        if devs:
            dv = "".join(
                f'<div><span class="badge warnbadge">{esc(d.get("kind", "?") if isinstance(d, dict) else d)}</span> '
                f"{_kv_value({k: v for k, v in d.items() if k != 'kind'} if isinstance(d, dict) else '')}</div>"
                for d in devs
            )
        else:
            dv = '<span class="dim">none</span>'
        w(f"<tr><th>deviations</th><td>{dv}</td></tr>")
        fails = run.run.get("failures") or []
        if fails:
            fl = "".join(
                f"<div><b>{esc(f.get('pair'))}</b>: {esc(f.get('message'))}</div>" for f in fails if isinstance(f, dict)
            )
            w(f"<tr><th>failures</th><td>{fl}</td></tr>")
        for key in ("command", "created"):
            if run.run.get(key):
                w(f"<tr><th>{esc(key)}</th><td><code>{esc(run.run[key])}</code></td></tr>")
        env = run.run.get("environment") or {}
        if isinstance(env, dict) and env:
            parts = [f"{k} {v}" for k, v in env.items() if isinstance(v, (str, int, float)) and k != "platform"]
            w(f'<tr><th>environment</th><td class="dim">{esc(" · ".join(parts))}</td></tr>')
        w("</table>")
    w("</section>")
