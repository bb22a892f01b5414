"""The board's data (one dict per track: rows, values, ranks, provenance) and its files: board.json, board.csv, an
index.html per track and one listing them. Every text a run brings (names, method and judge fields, reasons) is
escaped with core.text.html_escape; the style sheet is the report's (report/page.css)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re

from pytest_pstbench.board.sparkline import MAX_POINTS, sparkline_svg
from pytest_pstbench.core.store.reader import run_field
from pytest_pstbench.core.text import html_escape as esc

GENERATOR = "pstbench board"
MAX_FIELD = 300  # characters of one provenance field shown (a run's text is bounded on the page)
CSV_HEADER = ("track", "kind", "row", "reference", "rank", "metric", "mean", "low", "high")


def _short(value) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= MAX_FIELD else text[: MAX_FIELD - 1] + "…"


def provenance(br) -> dict:
    """What a row says about where its numbers came from, as its run.json records it (absent fields: None)."""
    run = br.run
    method = run_field(run, "method")
    judge = run_field(run, "judge")
    out = {
        "protocol": run.record.protocol_id,
        "protocol_sha256": run.record.protocol_sha256,
        "dataset": run.record.dataset_id,
        "dataset_revision": run.record.dataset_revision,
        "method": _short(method) if method else None,
        "commit": _short(run_field(run, "git", "outputs", "commit")),
        "kit_version": _short(run_field(run, "environment", "pytest_pstbench")),
        "created": _short(run_field(run, "created")),
        "uri": getattr(br.source, "uri", None),
    }
    if isinstance(judge, dict):
        out["judge_model"] = _short(judge.get("model") or judge.get("function") or judge.get("name"))
        out["judge_endpoint"] = _short(judge.get("api_base") or judge.get("endpoint") or judge.get("base_url"))
    elif judge is not None:
        out["judge_model"] = _short(judge)
    return out


def decimals(protocol, metric: str) -> int:
    entry = protocol.data.get("metrics", {}).get(metric.partition(".")[0])
    d = entry.get("decimals", 4) if isinstance(entry, dict) else 4
    return d if isinstance(d, int) and 0 <= d <= 12 else 4


def label(protocol, metric: str) -> str:
    base, _, rest = metric.partition(".")
    entry = protocol.data.get("metrics", {}).get(base)
    name = entry.get("label", base) if isinstance(entry, dict) else base
    return f"{name} {rest}" if rest else str(name)


def slugs(tracks: list[str]) -> list[str]:
    """A folder name per track id: its safe characters, with a digest where any was replaced or names collide."""
    out, used = [], set()
    for t in tracks:
        clean = re.sub(r"[^A-Za-z0-9_-]", "_", t)[:60] or "track"
        if clean != t or clean.lower() in used:
            clean = f"{clean}-{hashlib.sha256(t.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"
        used.add(clean.lower())
        out.append(clean)
    return out


# ---- files --------------------------------------------------------------------------------------
def board_json(tracks: list[dict], left_out: list[dict]) -> str:
    return (
        json.dumps({"generator": GENERATOR, "tracks": tracks, "left_out": left_out}, indent=2, allow_nan=False) + "\n"
    )


def board_csv(tracks: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_HEADER)
    for t in tracks:
        for row in t["rows"]:
            for m in t["metrics"]:
                v = row["values"].get(m) or {}
                w.writerow(
                    [t["track"], t["kind"], row["name"], int(row["reference"]), row["rank"] or "", m]
                    + ["" if v.get(k) is None else repr(float(v[k])) for k in ("mean", "low", "high")]
                )
    return buf.getvalue()


def _head(title: str, css: str) -> list[str]:
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta name="generator" content="{GENERATOR}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title><style>\n{css}\n.ref td {{ color: var(--muted); font-style: italic; }}\n"
        ".rank { font-weight: 600; text-align: right; }\n</style></head><body>",
    ]


def fmt(v, dec: int) -> str:
    return "–" if v is None else f"{v:.{dec}f}"


def value_cell(v: dict | None, dec: int) -> str:
    v = v or {}
    if v.get("mean") is None:
        return "<td>–</td>"
    interval = "" if v.get("low") is None else f' <span class="ci">[{fmt(v["low"], dec)}, {fmt(v["high"], dec)}]</span>'
    return f"<td>{fmt(v['mean'], dec)}{interval}</td>"


def _left_out_html(left_out: list[dict]) -> list[str]:
    if not left_out:
        return []
    lines = [
        f'<section id="left-out"><h2>Left out ({len(left_out)})</h2><p class="hint">Runs that could not be read, '
        'validated or compared with the track\'s others; not on the board.</p><ul class="notes">'
    ]
    lines += [f"<li><code>{esc(x['run'])}</code>: {esc(x['reason'])}</li>" for x in left_out]
    return [*lines, "</ul></section>"]


PROVENANCE_FIELDS = (
    ("protocol", "protocol"),
    ("protocol_sha256", "sha256"),
    ("dataset_revision", "dataset revision"),
    ("method", "method"),
    ("commit", "outputs commit"),
    ("judge_model", "judge"),
    ("judge_endpoint", "endpoint"),
    ("kit_version", "kit"),
    ("created", "created"),
    ("uri", "pinned URI"),
    ("reproduced", "reproduced"),  # board/reproduced.py: --reproduced DIR
)


def track_page(t: dict, left_out: list[dict], css: str) -> str:
    title = f"pstbench board · track {t['track']}"
    out = _head(title, css)
    w = out.append
    r = t["ranking"]
    w(
        f'<header><h1>{esc(title)}</h1><div class="meta">{esc(t["kind"])} track · protocol <code>{esc(t["protocol"])}'
        f"</code> (sha256 <code>{esc(str(t['protocol_sha256'])[:12])}</code>) · dataset <code>{esc(t['dataset'])}@"
        f"{esc(t['dataset_revision'])}</code> · {len(t['rows'])} row(s)</div></header>"
    )
    w(
        '<nav><a href="../index.html">All tracks</a><a href="#board">Board</a><a href="#provenance">Provenance</a>'
        + ('<a href="#left-out">Left out</a>' if left_out else "")
        + "</nav><main>"
    )
    w('<section id="board"><h2>Board</h2>')
    n_methods = len(r["order"])
    w(
        f'<p class="hint" id="ranks-note">Rank: 1 + the number of methods significantly better on '
        f"<b>{esc(t['labels'][t['primary']])}</b> ({esc(t['kind'])} kind's paired test between runs, Holm over the "
        f"board's {r['n_tests']} test(s) of this track"
        f"{'' if r['alpha'] is None else ', alpha ' + esc(r['alpha'])}); methods the tests cannot separate "
        f"share a rank. <b>{r['separable']} of {max(n_methods - 1, 0)}</b> adjacent pairs are separable. "
        f"Values: mean [interval] as each run's summary.json gives them.</p>"
    )
    spark = any(row.get("history") for row in t["rows"])
    w(
        "<table><thead><tr><th>rank</th><th>method</th>"
        + "".join(f"<th>{esc(t['labels'][m])}</th>" for m in t["metrics"])
        + ("<th>history</th>" if spark else "")
        + "</tr></thead><tbody>"
    )
    dec = t["decimals"][t["primary"]]
    for row in t["rows"]:
        cells = "".join(value_cell(row["values"].get(m), t["decimals"][m]) for m in t["metrics"])
        if spark:
            cells += f"<td>{sparkline_svg(row.get('history'), dec)}</td>"
        rank = "ref." if row["reference"] else str(row["rank"])
        cls = ' class="ref"' if row["reference"] else ""
        w(f'<tr{cls}><td class="rank">{rank}</td><td>{esc(row["name"])}</td>{cells}</tr>')
    w("</tbody></table>")
    if spark:
        w(
            f'<p class="hint">history: the row\'s {esc(t["labels"][t["primary"]])} at each commit of its run (git '
            f"commits of a run folder in a repository, Hub commits of a published run), oldest first, the newest "
            f"{MAX_POINTS} at most; hover a line for its points.</p>"
        )
    refs = [row for row in t["rows"] if row["reference"]]
    if refs:
        what = "; ".join(f"{esc(row['name'])}: {esc(row.get('note') or 'a reference')}" for row in refs)
        w(f'<p class="hint" id="references-note">ref.: a reference row, not ranked nor tested ({what}).</p>')
    for note in t["notes"]:
        w(f'<p class="hint">{esc(note)}</p>')
    w(
        '</section><section id="provenance"><h2>Provenance</h2><div style="overflow-x:auto">'
        "<table><thead><tr><th>row</th>"
        + "".join(f"<th>{esc(lab)}</th>" for _, lab in PROVENANCE_FIELDS)
        + "</tr></thead><tbody>"
    )
    for row in t["rows"]:
        p = row["provenance"]
        vals = "".join(
            f"<td>{'' if p.get(k) is None else '<code>' + esc(p[k]) + '</code>'}</td>" for k, _ in PROVENANCE_FIELDS
        )
        w(f"<tr><td>{esc(row['name'])}</td>{vals}</tr>")
    w("</tbody></table></div></section>")
    out += _left_out_html(left_out)
    w("</main></body></html>")
    return "\n".join(out) + "\n"


def index_page(tracks: list[dict], left_out: list[dict], css: str) -> str:
    out = _head("pstbench board", css)
    w = out.append
    w(
        f'<header><h1>pstbench board</h1><div class="meta">{len(tracks)} track(s) · '
        '<a style="color:#fff" href="board.json">board.json</a> · <a style="color:#fff" href="board.csv">board.csv</a>'
        "</div></header><main><section><h2>Tracks</h2><table><thead><tr><th>track</th><th>kind</th><th>methods</th>"
        "<th>ranked on</th><th>separable adjacent pairs</th></tr></thead><tbody>"
    )
    for t in tracks:
        r = t["ranking"]
        w(
            f'<tr><td><a href="{esc(t["folder"])}/index.html">{esc(t["track"])}</a></td><td>{esc(t["kind"])}</td>'
            f"<td>{len(r['order'])}</td><td>{esc(t['labels'][t['primary']])}</td>"
            f"<td>{r['separable']} of {max(len(r['order']) - 1, 0)}</td></tr>"
        )
    w("</tbody></table></section>")
    out += _left_out_html(left_out)
    w("</main></body></html>")
    return "\n".join(out) + "\n"
