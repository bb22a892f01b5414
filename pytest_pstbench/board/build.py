"""`pstbench board SOURCE... --out DIR`: the runs collected (collect.py), ranked (ranks.py), the site written
(page.py) into a folder built beside DIR and swapped in whole."""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path

from pytest_pstbench.board.collect import Track, collect
from pytest_pstbench.board.page import (
    GENERATOR,
    board_csv,
    board_json,
    decimals,
    index_page,
    label,
    provenance,
    slugs,
    track_page,
)
from pytest_pstbench.board.ranks import is_reference, primary_metric, rank
from pytest_pstbench.board.sparkline import row_history
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.options import Arg, add_args

SELECTION_NOTE = (
    "The random baseline and human reference rows of a selection track are not shown on the board yet; "
    "`pstbench table` shows them."
)


def _values(br, keys=None) -> dict:
    return br.kind.history_values(br.run, br.protocol, keys)


def track_data(t: Track, metric: str | None) -> dict:
    """One track's board as data: its rows (reference rows first, then methods by rank), values, ranks, tests."""
    protocol = t.protocol
    refs = [r for r in t.runs if is_reference(r.run)]
    methods = [r for r in t.runs if not is_reference(r.run)]
    values = {r.name: _values(r) for r in t.runs}
    keys = list(values[t.runs[0].name])
    primary = primary_metric(keys, metric, t.track)
    means = {r.name: (values[r.name].get(primary) or {}).get("mean") for r in methods}
    ranking = rank([r.run for r in methods], protocol, t.runs[0].kind, primary, means)
    by_name = {r.name: r for r in t.runs}
    rows = [
        {
            "name": name,
            "reference": name not in ranking.ranks,
            "rank": ranking.ranks.get(name),
            "better_than_it": sorted(ranking.better.get(name, [])),
            "values": values[name],
            "provenance": provenance(by_name[name]),
            "history": row_history(by_name[name], primary),
        }
        for name in [r.name for r in refs] + ranking.order
    ]
    record = t.runs[0].run.record
    return {
        "track": t.track,
        "kind": t.kind,
        "protocol": record.protocol_id,
        "protocol_sha256": record.protocol_sha256,
        "dataset": record.dataset_id,
        "dataset_revision": record.dataset_revision,
        "primary": primary,
        "metrics": keys,
        "labels": {m: label(protocol, m) for m in keys},
        "decimals": {m: decimals(protocol, m) for m in keys},
        "ranking": {k: v for k, v in asdict(ranking).items() if k not in ("ranks", "better")},
        "rows": rows,
        "notes": [SELECTION_NOTE] if "." in primary else [],
    }


def _is_board_dir(path: Path) -> bool:
    index = path / "index.html"
    if not index.is_file():
        return False
    with open(index, encoding="utf-8", errors="replace") as fh:
        return f'<meta name="generator" content="{GENERATOR}">' in fh.read(4096)


def check_out(out: Path, sources) -> None:
    """`--out` is a new or empty folder, or an earlier board (replaced whole), and holds no run it reads."""
    from pytest_pstbench.core.files.write import refuse_overwriting_inputs
    from pytest_pstbench.core.store.backends import is_published

    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: is a file, not a folder; fix: give a new or empty folder")
    if out.is_dir() and any(out.iterdir()) and not _is_board_dir(out):
        raise UserError(
            f"--out {out}: folder is not empty and holds no earlier pstbench board (it is replaced as a whole); "
            "fix: give a new or empty folder"
        )
    refuse_overwriting_inputs(
        "--out", [out], folders=[("source", Path(s)) for s in sources if not is_published(str(s))]
    )


def build_board(sources, out, *, metric: str | None = None, protocol_spec: str | None = None, progress=None) -> dict:
    """Write the board of `sources` into the folder `out`; its data (board.json's content) is returned."""
    from pytest_pstbench.core.files.jsonfile import loads
    from pytest_pstbench.core.files.write import staging_dir, swap_dir_into_place, write_new
    from pytest_pstbench.report.build import page_css

    out = Path(out)
    check_out(out, sources)
    tracks, left = collect(sources, protocol_spec=protocol_spec, progress=progress)
    if not tracks:
        reasons = "; ".join(f"{x.what}: {x.reason}" for x in left[:2])
        raise UserError(
            f"no run to put on the board ({reasons or 'no run folder found'}); fix: give run folders, "
            "a results folder or a published path holding runs"
        )
    from pytest_pstbench.core.store.published.commits import shared_logs

    with shared_logs():  # the rows' histories: one commit listing per published revision
        data = [track_data(t, metric) for t in tracks]
    for t, folder in zip(data, slugs([t["track"] for t in data])):
        t["folder"] = folder
    left_out = [{"run": x.what, "reason": x.reason} for x in left]
    css = page_css()
    text = board_json(data, left_out)
    with staging_dir(out, what="write the board", fix="give --out a folder in a writable place") as stage:
        write_new(stage / "board.json", text)
        write_new(stage / "board.csv", board_csv(data))
        write_new(stage / "index.html", index_page(data, left_out, css))
        for t in data:
            os.mkdir(stage / t["folder"])
            write_new(stage / t["folder"] / "index.html", track_page(t, left_out, css))
        swap_dir_into_place(stage, out)
    return loads(text, max_bytes=len(text.encode("utf-8")) + 1)


BOARD_ARGS = (
    Arg(
        "sources",
        nargs="+",
        metavar="SOURCE",
        help="run folders, results folders (results/<track>/<name>) or published paths "
        "(hf://datasets/OWNER/NAME[@REV]/PATH holding one or many runs)",
    ),
    Arg("--out", required=True, metavar="DIR", help="folder to write the site into (replaced whole)"),
    Arg(
        "--metric",
        default=None,
        metavar="M",
        help="the metric the ranks rest on (default: the protocol's first ranked metric; selection: METRIC.OUTCOME, "
        "e.g. top1.pass^3)",
    ),
    Arg(
        "--protocol",
        default=None,
        metavar="P",
        help="protocol id or YAML path the runs were made under (default: found by the runs' sha256)",
    ),
)


def add_board_command(sub) -> None:
    """Register `pstbench board`."""
    p = sub.add_parser(
        "board",
        help="write a static leaderboard site (index.html per track, board.json, board.csv) from runs, with rank "
        "groups the paired tests support and each row's provenance",
    )
    add_args(p, BOARD_ARGS)
    p.set_defaults(func=cmd_board)


def cmd_board(args) -> int:
    import sys

    from pytest_pstbench.core.progress import stderr_line
    from pytest_pstbench.core.text import one_line

    data = build_board(args.sources, args.out, metric=args.metric, protocol_spec=args.protocol, progress=stderr_line)
    for t in data["tracks"]:
        n = len(t["ranking"]["order"])
        print(
            f"track {one_line(t['track'])}: {n} method(s), {t['ranking']['separable']} of {max(n - 1, 0)} adjacent pairs separable"
        )
    print(f"board: {Path(args.out) / 'index.html'}")
    if data["left_out"]:  # the board is written, and says so; the exit status says it too (a CI job notices)
        first = data["left_out"][0]
        print(
            f"pstbench: error: {len(data['left_out'])} run(s) left out of the board (listed on its pages), e.g. "
            f"{one_line(first['run'])}: {first['reason']}",
            file=sys.stderr,
        )
        return 1
    return 0
