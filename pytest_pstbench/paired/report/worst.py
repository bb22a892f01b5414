"""The report's Worst pairs section (`pstbench report --worst N`): with two or more runs, per ranked metric,
the N pairs each later run lost most on against the first run, largest loss first. The loss is the one
`pstbench compare --worst` and a failed gate list (`paired.worst.worst_pairs`: the difference in the metric's
worse direction, only pairs made worse); each pair links to its thumbnails on the page (a plain anchor).
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_pstbench.core.text import html_escape as esc


@dataclass(frozen=True)
class WorstSection:
    metric: object  # page.MetricInfo
    per_run: list  # (run index >= 1, [(paired.worst.WorstPair, its cells)] against run 0, largest loss first)


def worst_sections(page, protocol, n: int) -> list[WorstSection]:
    """One section per ranked metric of `page` (none with fewer than two runs or `n` = 0)."""
    if n == 0 or len(page.runs) < 2:
        return []
    from pytest_pstbench.paired.worst import worst_cells, worst_pairs

    def lost(run) -> list:
        return [(p, worst_cells(p, protocol, False)) for p in worst_pairs([(page.runs[0], run)], [m.name], protocol, n)]

    sections = []
    for m in page.metrics:
        if m.ranked:
            sections.append(WorstSection(m, [(i, lost(run)) for i, run in enumerate(page.runs[1:], 1)]))
    return sections


def pair_anchor(k: int) -> str:
    """The id of the k-th shown pair's heading on the page, above its thumbnails (by position: a pair id is not a safe id)."""
    return f"pair-{k}"


def render_worst(page, w) -> None:
    anchors = {pid: pair_anchor(k) for k, pid in enumerate(page.shown)}
    first = page.labels[0]
    w('<section id="worst"><h2>Worst pairs</h2>')
    w(
        f'<p class="hint">Per ranked metric, the pairs (at most {page.worst_n}, --worst) on which each run lost most against '
        f"the first run, {esc(first)}: the loss is the difference in the metric's worse direction (metrics.csv units), "
        "largest first; pairs a run did not make worse are not listed. Each pair links to its thumbnails below.</p>"
    )
    for j, section in enumerate(page.worst):
        m = section.metric
        w(f'<h3 id="worst-{j}">{esc(m.heading)} <span class="dim">({esc(m.name)})</span></h3>')
        for i, pairs in section.per_run:
            label = page.labels[i]
            if not pairs:
                w(f'<p class="hint">{esc(label)} lost on no pair against {esc(first)}.</p>')
                continue
            w(f'<p class="hint">{esc(label)} against {esc(first)}: the {len(pairs)} pair(s) it lost most on.</p>')
            w(
                f'<table class="worst" data-worst-metric="{esc(m.name)}" data-worst-run="{i}"><thead><tr><th>pair</th>'
                f'<th class="num">{esc(first)}</th><th class="num">{esc(label)}</th><th class="num">loss</th></tr></thead><tbody>'
            )
            for p, (pid, base, value, loss) in pairs:
                link = (
                    f'<a href="#{anchors[pid]}">{esc(pid)}</a>'
                    if pid in anchors
                    else f'{esc(pid)} <span class="dim">(not shown: --max-pairs)</span>'
                )
                w(
                    f'<tr><td>{link}</td><td class="num" data-worst-base="{esc(repr(p.value_baseline))}">{esc(base)}</td>'
                    f'<td class="num" data-worst-value="{esc(repr(p.value_candidate))}">{esc(value)}</td>'
                    f'<td class="num" data-worst-pair="{esc(pid)}" data-worst-loss="{esc(repr(p.loss))}">{esc(loss)}</td></tr>'
                )
            w("</tbody></table>")
    w("</section>")
