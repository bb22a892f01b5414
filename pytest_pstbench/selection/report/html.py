"""The HTML of a selection report: the page model (page.py) to one self-contained index.html (the frame's
style sheet inline, every link relative, plain anchors: no script). Every text of a run, a track or a
protocol is escaped (core.text.html_escape)."""

from __future__ import annotations

from pytest_pstbench.core.paper_table import DAGGER, legend_lines
from pytest_pstbench.core.text import html_escape as esc
from pytest_pstbench.selection.human import coverage
from pytest_pstbench.selection.report.answers import EXTRA_CSS as ANSWERS_CSS
from pytest_pstbench.selection.report.answers import render_answers
from pytest_pstbench.selection.report.bias import EXTRA_CSS as BIAS_CSS
from pytest_pstbench.selection.report.bias import render_bias
from pytest_pstbench.selection.report.page import PICK_VIEWS, metric_cells

EXTRA_CSS = """
.cands { display:flex; flex-wrap:wrap; gap:8px; }
.cand { margin:0; padding:3px; border:2px solid transparent; border-radius:6px; }
.cand.lbest { border-color:#2e9c4a; } .cand.lworst { border-color:#c93c3c; }
.cand figcaption { font-size:12px; text-align:center; }
.cand .frame { display:flex; align-items:center; justify-content:center; background:#f0f2f5; border-radius:4px; }
table.picks { font-size:12px; margin-top:6px; } table.picks td, table.picks th { padding:2px 6px; }
.wrong { color:#a11; font-weight:700; } .moved { background:#fff4d6; }
td.second { text-decoration:underline; } tr.ref td:first-child { font-style:italic; }
ul.tasks { columns: 14em; }
"""


def _letter(params, position: int) -> str:
    labels = params.labels
    return labels[position] if position < len(labels) else str(position + 1)


def _summary(page, w) -> None:
    t = page.table
    w('<section id="summary"><h2>Summary</h2>')
    w(
        '<table class="summary"><tr><th>judge</th>'
        + "".join(f'<th class="num">{esc(c.label)}</th>' for c in t.columns)
        + "</tr>"
    )
    for row in t.rows:
        cls = ' class="ref"' if row in t.reference_rows else ""
        cells = []
        for c in t.columns:
            cell = c.cells.get(row)
            if cell is None:
                cells.append('<td class="num">–</td>')
                continue
            klass = "num best" if cell.rank == 1 else "num second" if cell.rank == 2 else "num"
            attrs = f' data-row="{esc(row)}" data-col="{esc(c.label)}"'
            if cell.value is not None:
                attrs += f' data-mean="{esc(repr(float(cell.value)))}"'
            mark = ""
            if cell.worse and cell.test:
                mark = (
                    f' <span title="{esc("p = {:.4g}, Holm p = {:.4g} against {}".format(cell.test["pvalue"], cell.test["p_holm"], c.reference))}">'
                    f"{DAGGER}</span>"
                )
            cells.append(f'<td class="{klass}"{attrs}>{esc(cell.text)}{mark}</td>')
        w(f"<tr{cls}><td>{esc(row)}</td>{''.join(cells)}</tr>")
    w("</table>")
    w('<p class="hint">')
    for line in legend_lines(t):
        text = esc(line).replace("BEST: best, SECOND: second best", "<b>bold</b>: best, <u>underlined</u>: second best")
        w(f"{text}<br>")
    w("</p>")
    human = next((j.run.summary.get("human") for j in page.judges if j.run.summary.get("human")), None)
    if human:
        part = coverage(human)
        w(
            f'<p class="hint">Human row: {esc(human.get("experts"))} experts, '
            f"{esc(part or str(human.get('tasks')) + ' tasks (all of the track)')}.</p>"
        )
    from pytest_pstbench.selection.ask.pricing import cost_line

    for j in page.judges:  # a model run's cost (summary.json `cost`, #40)
        said = cost_line(j.run.summary.get("cost"))
        if said:
            w(f'<p class="hint cost">{esc(j.label)}: {esc(said)}</p>')
    w("</section>")


def _figures(page, w) -> None:
    w('<section id="figures"><h2>Figures</h2><div class="figs">')
    for caption, rel in page.figures:
        w(f'<a href="{esc(rel)}"><img src="{esc(rel)}" alt="{esc(caption)}"></a>')
    w("</div></section>")


def _task_link(page, tid: str) -> str:
    if tid in page.shown_index:
        return f'<a href="#task-{page.shown_index[tid]}">{esc(tid)}</a>'
    return esc(tid)


def _lists(page, w) -> None:
    w(
        '<section id="wrong"><h2>Wrong in some order</h2><p class="hint">Per judge, every task with a trial counted '
        "wrong in some metric (a 0 in per_task.csv's &lt;metric&gt;_t&lt;trial&gt; columns).</p>"
    )
    for i, j in enumerate(page.judges):
        w(f'<h3 id="wrong-{i + 1}">{esc(j.label)}: {len(j.wrong)} of {len(j.run.task_ids)} tasks</h3>')
        w(
            f'<ul class="tasks" id="wrong-list-{i + 1}">'
            + "".join(f'<li data-task="{esc(t)}" data-list="wrong-{i + 1}">{_task_link(page, t)}</li>' for t in j.wrong)
            + "</ul>"
        )
    w("</section>")
    w(
        '<section id="moved"><h2>Pick moved between orders</h2><p class="hint">Per judge, every task whose answer '
        "(best, worst, or best+worst) names another candidate in another trial order.</p>"
    )
    for i, j in enumerate(page.judges):
        w(f'<h3 id="moved-{i + 1}">{esc(j.label)}: {len(j.moved)} of {len(j.run.task_ids)} tasks</h3>')
        w(
            f'<ul class="tasks" id="moved-list-{i + 1}">'
            + "".join(f'<li data-task="{esc(t)}" data-list="moved-{i + 1}">{_task_link(page, t)}</li>' for t in j.moved)
            + "</ul>"
        )
    w("</section>")
    w('<section id="groups"><h2>Tasks by domain, topic and k</h2>')
    for group in ("domain", "topic", "k"):
        values: dict[str, list[str]] = {}
        for tid in page.task_ids:
            values.setdefault(str(getattr(page.tasks[tid], group)), []).append(tid)
        w(f"<h3>{group}</h3><ul>")
        for value, tids in sorted(values.items()):
            w(f"<li>{esc(group)}={esc(value)} ({len(tids)}): " + ", ".join(_task_link(page, t) for t in tids) + "</li>")
        w("</ul>")
    w("</section>")


def _pick_text(page, info, picks, cells, order) -> str:
    if picks is None:
        return "–"
    parts = []
    for idx in picks:
        pos = f" ({_letter(page.params, order.index(idx))})" if order and idx in order else ""
        parts.append(f"#{idx + 1}{pos}")
    text = esc(" / ".join(parts))
    return f'<span class="wrong" title="wrong">{text} ✗</span>' if "0" in cells else text


def _task(page, i: int, tid: str, w) -> None:
    info = page.tasks[tid]
    w(
        f'<div class="pair" id="task-{i + 1}"><h3>{esc(tid)} <span class="hint">· domain {esc(info.domain)} · topic '
        f"{esc(info.topic)} · k={info.k} · experts: best #{info.best + 1}, worst #{info.worst + 1}</span></h3>"
    )
    w('<div class="cands">')
    for j, thumb in enumerate(info.thumbs):
        cls = " lbest" if j == info.best else " lworst" if j == info.worst else ""
        role = " best" if j == info.best else " worst" if j == info.worst else ""
        if thumb.src:
            img = (
                f'<img src="{esc(thumb.src)}" alt="candidate {j + 1}" width="{thumb.size[0]}" height="{thumb.size[1]}">'
            )
        else:
            img = f'<div class="placeholder">{esc(thumb.missing)}</div>'
        w(f'<figure class="cand{cls}"><div class="frame">{img}</div><figcaption>#{j + 1}{role}</figcaption></figure>')
    w("</div>")
    trials = page.params.trials
    metric_of = {"best": "top1", "worst": "bot1", "best+worst": "tb1"}
    for ji, judge in enumerate(page.judges):
        if tid not in judge.run.rows:
            continue
        moved = judge.moved_picks(tid, trials)
        w(
            f'<table class="picks{" moved" if moved else ""}"><tr><th>{esc(judge.label)}'
            f"{' · pick moved ↔' if moved else ''}</th><th>order seen</th>"
            + "".join(f"<th>{h}</th>" for h, _ in PICK_VIEWS)
            + "</tr>"
        )
        error = judge.run.rows[tid].get("error")
        if error:
            w(f'<tr><td colspan="{2 + len(PICK_VIEWS)}" class="wrong">error: {esc(error[:300])}</td></tr>')
        for t in range(trials):
            order = info.orders[t] if info.orders else None
            seen = " ".join(f"{_letter(page.params, p)}=#{c + 1}" for p, c in enumerate(order)) if order else "–"
            picks = judge.picks(tid, t)
            row = [f"<td>trial {t}</td>", f"<td>{esc(seen)}</td>"]
            for heading, cols in PICK_VIEWS:
                metric = metric_of[heading]
                cells = [metric_cells(judge.run, tid, metric, trials)[t]] if metric in page.params.metrics else []
                raw = ",".join(judge.run.rows[tid].get(f"{c}{t}", "") for c in cols)
                mark = ' <span class="moved" title="moved between orders">↔</span>' if heading in moved else ""
                row.append(
                    f'<td data-judge="{ji + 1}" data-task="{esc(tid)}" data-trial="{t}" data-pick="{esc(heading)}" '
                    f'data-cols="{esc(raw)}">{_pick_text(page, info, picks[heading], cells, order)}{mark}</td>'
                )
            w("<tr>" + "".join(row) + "</tr>")
        w("</table>")
        render_answers(page, judge, ji, tid, info.k, w)
    w("</div>")


def _provenance(page, w) -> None:
    w(
        '<section id="provenance"><h2>Provenance</h2><table class="kv"><tr><th>judge</th><th>run</th><th>judge spec</th>'
        "<th>created</th><th>command</th></tr>"
    )
    for j, published in zip(page.judges, page.published):
        judge = j.run.run.get("judge") if isinstance(j.run.run.get("judge"), dict) else {}
        spec = judge.get("spec") or judge.get("answers") or judge.get("kind") or ""
        w(
            f"<tr><td>{esc(j.label)}</td><td><code>{esc(j.run.path)}</code>{' (published)' if published else ''}</td>"
            f"<td><code>{esc(spec)}</code></td><td>{esc(j.run.run.get('created', ''))}</td>"
            f"<td><code>{esc(j.run.run.get('command', ''))}</code></td></tr>"
        )
    w("</table></section>")


def render(page, generator: str, css: str) -> str:
    page.shown_index = {tid: i + 1 for i, tid in enumerate(page.shown)}
    out: list[str] = []
    w = out.append
    title = f"pstbench report · track {page.track_id}"
    w("<!DOCTYPE html>")
    w('<html lang="en"><head><meta charset="utf-8">')
    w(f'<meta name="generator" content="{esc(generator)}">')
    w('<meta name="viewport" content="width=device-width, initial-scale=1">')
    w(f"<title>{esc(title)}</title><style>\n{css}{EXTRA_CSS}{ANSWERS_CSS}{BIAS_CSS}</style></head><body>")
    w(
        f'<header><h1>{esc(title)}</h1><div class="meta">selection runs · protocol <code>{esc(page.protocol_id)}</code> '
        f"(sha256 <code>{esc(page.protocol_sha256[:12])}</code>) · dataset <code>{esc(page.dataset_id)}@{esc(page.revision)}</code> · "
        f"{len(page.judges)} judge(s) · {len(page.task_ids)} task(s)</div></header>"
    )
    nav = [
        ("summary", "Summary"),
        ("figures", "Figures"),
        ("bias", "Position bias"),
        *((x.anchor, x.title) for x in page.sections),
        ("tasks", "Tasks"),
        ("wrong", "Wrong"),
        ("moved", "Moved"),
        ("groups", "By domain/topic/k"),
        ("provenance", "Provenance"),
    ]
    w("<nav>" + "".join(f'<a href="#{a}">{esc(t)}</a>' for a, t in nav) + "</nav><main>")
    if page.notes:
        w('<ul class="notes">' + "".join(f"<li>{esc(n)}</li>" for n in page.notes) + "</ul>")
    _summary(page, w)
    _figures(page, w)
    render_bias(page, w)
    for section in page.sections:
        w(section.html)
    w(
        '<section id="tasks"><h2>Tasks</h2><p class="hint">Candidates in track order (#1 …), the experts\' best '
        "(green) and worst (red); per judge and trial the order it saw (label=candidate) and its picks (#candidate "
        "(label)); ✗: wrong; ↔: the answer changed between orders (the judge's table is marked “pick moved”).</p>"
    )
    if page.left_out:
        w(
            f'<p class="notes" id="left-out">{len(page.shown)} of {len(page.task_ids)} tasks shown (--max-tasks); left out: '
            + ", ".join(esc(t) for t in page.left_out)
            + "</p>"
        )
    for i, tid in enumerate(page.shown):
        _task(page, i, tid, w)
    w("</section>")
    _lists(page, w)
    _provenance(page, w)
    w("</main></body></html>")
    return "\n".join(out) + "\n"
