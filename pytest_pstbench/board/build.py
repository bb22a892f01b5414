"""`pstbench board SOURCE... --out DIR`: the runs collected (collect.py), ranked (ranks.py), the site written
(page.py) into a folder built beside DIR and swapped in whole."""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path

from pytest_pstbench.board.collect import LeftOut, Track, collect
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
from pytest_pstbench.board.reproduced import mark, read_reports
from pytest_pstbench.board.sparkline import row_history
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.options import Arg, add_args

IDENTITY_NOTE = "the content image unchanged (the kit's Identity run)"


def _values(br, keys=None) -> dict:
    return br.kind.history_values(br.run, br.protocol, keys)


def _row(name: str, values: dict, provenance: dict, note: str | None = None, ranking=None, history=None) -> dict:
    ranked = ranking is not None and name in ranking.ranks
    return {
        "name": name,
        "reference": not ranked,
        "rank": ranking.ranks[name] if ranked else None,
        "better_than_it": sorted(ranking.better.get(name, [])) if ranked else [],
        "values": values,
        "note": note,
        "provenance": provenance,
        "history": history,
    }


def track_data(
    t: Track, metric: str | None, left_out: list[LeftOut] | None = None, reports: list | None = None
) -> dict:
    """One track's board as data: its rows (reference rows first, then methods by rank), values, ranks, tests. The
    reference rows: the kit's Identity runs, then those the kind adds that are not runs (`RunKind.board_references`:
    a selection track's random baseline and human row); a run named as one of these is left out (`left_out`).
    `reports`: the reproduce reports of `--reproduced` (each run row's provenance then says whether it was reproduced)."""
    protocol, kind = t.protocol, t.runs[0].kind
    values = {r.name: _values(r) for r in t.runs}
    keys = list(values[t.runs[0].name])
    primary = primary_metric(keys, metric, t.track)
    extra, notes = kind.board_references([r.run for r in t.runs], protocol, keys) if kind.board_references else ([], [])
    taken = {x["name"] for x in extra}
    for r in t.runs:
        if r.name in taken and left_out is not None:
            left_out.append(
                LeftOut(
                    str(r.source),
                    f"track {t.track}: run name {r.name!r} is the name of a reference row; "
                    "fix: give the run another name",
                )
            )
    refs = [r for r in t.runs if is_reference(r.run) and r.name not in taken]
    methods = [r for r in t.runs if not is_reference(r.run) and r.name not in taken]
    means = {r.name: (values[r.name].get(primary) or {}).get("mean") for r in methods}
    ranking = rank([r.run for r in methods], protocol, kind, primary, means)
    by_name = {r.name: r for r in t.runs}

    def run_provenance(r) -> dict:
        return {**provenance(r), **({"reproduced": mark(r, reports)} if reports is not None else {})}

    record = t.runs[0].run.record
    track_provenance = {
        "protocol": record.protocol_id,
        "protocol_sha256": record.protocol_sha256,
        "dataset": record.dataset_id,
        "dataset_revision": record.dataset_revision,
    }
    rows = [
        _row(r.name, values[r.name], run_provenance(r), IDENTITY_NOTE, history=row_history(r, primary)) for r in refs
    ]
    rows += [_row(x["name"], x["values"], dict(track_provenance), x.get("note")) for x in extra]
    rows += [
        _row(
            name,
            values[name],
            run_provenance(by_name[name]),
            ranking=ranking,
            history=row_history(by_name[name], primary),
        )
        for name in ranking.order
    ]
    return {
        "track": t.track,
        "kind": t.kind,
        **track_provenance,
        "primary": primary,
        "metrics": keys,
        "labels": {m: label(protocol, m) for m in keys},
        "decimals": {m: decimals(protocol, m) for m in keys},
        "ranking": {k: v for k, v in asdict(ranking).items() if k not in ("ranks", "better")},
        "rows": rows,
        "notes": notes,
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


def build_board(
    sources, out, *, metric: str | None = None, protocol_spec: str | None = None, progress=None, reproduced=None
) -> dict:
    """Write the board of `sources` into the folder `out`; its data (board.json's content) is returned. `reproduced`:
    a folder of reproduce reports (board/reproduced.py), read before anything is written."""
    from pytest_pstbench.core.files.jsonfile import loads
    from pytest_pstbench.core.files.write import staging_dir, swap_dir_into_place, write_new
    from pytest_pstbench.report.build import page_css

    out = Path(out)
    check_out(out, sources)
    reports = read_reports(reproduced) if reproduced is not None else None
    tracks, left = collect(sources, protocol_spec=protocol_spec, progress=progress)
    if not tracks:
        reasons = "; ".join(f"{x.what}: {x.reason}" for x in left[:2])
        raise UserError(
            f"no run to put on the board ({reasons or 'no run folder found'}); fix: give run folders, "
            "a results folder or a published path holding runs"
        )
    from pytest_pstbench.core.store.published.commits import shared_logs

    with shared_logs():  # the rows' histories: one commit listing per published revision
        data = [track_data(t, metric, left, reports) for t in tracks]
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
    Arg(
        "--reproduced",
        default=None,
        metavar="DIR",
        help="a folder of reproduce reports (pstbench reproduce --report): a row is marked reproduced when a report's "
        "run digests are its run files'",
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

    data = build_board(
        args.sources,
        args.out,
        metric=args.metric,
        protocol_spec=args.protocol,
        progress=stderr_line,
        reproduced=args.reproduced,
    )
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
