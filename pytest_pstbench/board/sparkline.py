"""A board row's history sparkline: the method's value on the board's primary metric at each version of its run, as
`pstbench history` reads them (`core.history.read_history`: a run folder inside a git repository, its commits; a
published run path, its revision's Hub commits), the newest MAX_POINTS only. A run folder outside any git work tree
has no history and costs a few `stat` calls; a board's published runs of one revision share one commit listing
(`core.store.published.commits.shared_logs`). The sparkline is inline SVG (no script) whose `<title>` and
aria-label list the points (commit, date, value, commit subject), every text escaped."""

from __future__ import annotations

import os

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.text import html_escape as esc

MAX_POINTS = 20  # the newest versions of a run read for its sparkline
MAX_MESSAGE = 80  # characters of a commit's subject kept (a stranger's text)
WIDTH, HEIGHT, PAD = 96, 22, 2


def in_git_work_tree(folder) -> bool:
    """Whether `folder` lies inside a git work tree: a `.git` in it or a folder above (stat calls only)."""
    path = os.path.realpath(folder)
    while True:
        if os.path.lexists(os.path.join(path, ".git")):
            return True
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent


def history_source(br) -> str | None:
    """What `read_history` reads for the board run `br`: its pinned Hub URI, its folder when inside a git work
    tree, else None (no history)."""
    uri = getattr(br.source, "uri", None)
    if uri:
        return str(uri)
    folder = br.source.path
    return str(folder) if in_git_work_tree(folder) else None


def row_history(br, primary: str) -> list[dict] | None:
    """The row's history points on `primary` (oldest first, at most MAX_POINTS), or None where the source has no
    history or none can be read (the board is written without it)."""
    from pytest_pstbench.core.history import read_history

    source = history_source(br)
    if source is None:
        return None
    try:
        h = read_history([source], metrics=[primary.partition(".")[0]], newest=MAX_POINTS)
    except UserError:
        return None
    points = []
    for p in h.points:
        value = (p.metrics.get(primary) or {}).get("mean")
        if value is None:
            continue
        message = p.message or ""
        points.append(
            {
                "commit": p.commit,
                "date": p.date,
                "message": message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 1] + "…",
                "value": value,
                "segment": p.segment,
            }
        )
    return points or None


def describe(points: list[dict], dec: int) -> str:
    """The sparkline's text: each point's commit (7 characters), date (day), value and commit subject."""
    parts = []
    for p in points:
        where = (p["commit"] or "")[:7] or "?"
        day = (p["date"] or "")[:10]
        subject = f" “{p['message']}”" if p["message"] else ""
        parts.append(f"{where} {day} {p['value']:.{dec}f}{subject}".replace("  ", " "))
    return f"history, {len(points)} point(s), oldest first: " + "; ".join(parts)


def sparkline_svg(points: list[dict] | None, dec: int) -> str:
    """Inline SVG of `points`' values (one polyline per segment, a dot at the newest), its text in `<title>` and
    aria-label; an empty string without points."""
    if not points:
        return ""
    values = [p["value"] for p in points]
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    step = (WIDTH - 2 * PAD) / max(len(points) - 1, 1)

    def xy(i: int, v: float) -> tuple[float, float]:
        y = HEIGHT - PAD - (v - lo) / span * (HEIGHT - 2 * PAD) if hi > lo else HEIGHT / 2
        return round(PAD + i * step, 2), round(y, 2)

    segments: dict[int, list[str]] = {}
    for i, p in enumerate(points):
        x, y = xy(i, p["value"])
        segments.setdefault(p["segment"], []).append(f"{x},{y}")
    lines = "".join(
        f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{" ".join(pts)}"/>'
        for pts in segments.values()
    )
    x, y = xy(len(points) - 1, values[-1])
    text = esc(describe(points, dec))
    return (
        f'<svg class="spark" role="img" aria-label="{text}" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" xmlns="http://www.w3.org/2000/svg"><title>{text}</title>{lines}'
        f'<circle cx="{x}" cy="{y}" r="2" fill="currentColor"/></svg>'
    )
