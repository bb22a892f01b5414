"""What the `vab` commands share: loading a selection track with its protocol, and printing a scored run."""

from __future__ import annotations

from pytest_pstbench.core.progress import stderr_line as _progress
from pytest_pstbench.options import Arg


def load_selection(track_spec: str, protocol_spec: str | None):
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.selection.protocol import DEFAULT_SELECTION_PROTOCOL, SelectionParams
    from pytest_pstbench.selection.tracks import resolve_selection_track

    protocol = load_protocol(protocol_spec or DEFAULT_SELECTION_PROTOCOL)
    params = SelectionParams.of(protocol)
    track = resolve_selection_track(track_spec, progress=_progress)
    return protocol, params, track


SECTIONS = ("cells", "human", "bias", "experts")  # what `--show` prints in full (`-v`: all of them)


#: `--show SECTION` of `vab run` / `vab score`, and `vab run`'s `-v` (vab score's own -v also prints progress).
SHOW_OPTION = Arg(
    "--show",
    action="append",
    choices=[*SECTIONS, "all"],
    default=[],
    metavar="SECTION",
    help="print a section in full: cells (every domain, topic and k row), human (the human row per cell), bias "
    "(position bias per role and k), experts (the judge among the experts), all; repeatable (default: the "
    "headline table, the cost and one line per section; the report holds everything)",
)
VERBOSE_OPTION = Arg("-v", "--verbose", action="store_true", help="print every section in full (--show all)")


def shown_sections(args) -> set[str]:
    show = set(getattr(args, "show", None) or ())
    return set(SECTIONS) if getattr(args, "verbose", False) or "all" in show else show


def _overall(summary: dict) -> dict:
    out = {**summary, "cells": [c for c in summary.get("cells") or [] if c.get("group") == "overall"]}
    if isinstance(summary.get("human"), dict):
        out["human"] = {**summary["human"], "cells": [c for c in summary["human"]["cells"] if c["group"] == "overall"]}
    return out


def section_lines(summary: dict, params) -> list[str]:
    """One line per section not printed in full: what it found, and how to see it."""
    from pytest_pstbench.selection.agreement import among_experts

    out = []
    cells = [c for c in summary.get("cells") or [] if c.get("group") != "overall"]
    if cells:
        groups = sorted({c["group"] for c in cells})
        out.append(f"cells: {len(cells)} rows by {', '.join(groups)} (--show cells)")
    pb = summary.get("position_bias")
    if isinstance(pb, dict) and pb.get("roles"):
        entries = [(r, k, e) for r, v in pb["roles"].items() for k, e in v["by_k"].items() if e.get("p") is not None]
        hit = [f"{r} k={k} ({e['favoured']} {e['excess']:+.2f})" for r, k, e in entries if e.get("biased")]
        found = f"biased in {len(hit)} of {len(entries)} cells: {', '.join(hit[:4])}" if hit else "none"
        if not hit:
            found += f" in {len(entries)} of {len(entries)} cells"
        out.append(f"position bias: {found} at alpha {pb.get('alpha')} (--show bias)")
    rows = among_experts(summary, params)
    if rows:
        pct = [r["percentile"] for r in rows]
        where = (
            "below every expert"
            if max(pct) <= 0
            else "above every expert"
            if min(pct) >= 100
            else "at the "
            + ", ".join(f"{p:.0f}" for p in pct)
            + "th percentile ("
            + ", ".join(params.metrics[r["metric"]].get("label", r["metric"]) for r in rows)
            + ")"
        )
        out.append(f"judge among the experts: {where} of {rows[0]['experts']} experts (--show experts)")
    return out


def print_outcome(outcome, track, label: str, params, *, extras: bool, show: set[str] = frozenset(SECTIONS)) -> None:
    """The tables of a scored selection run: the headline (overall) table, or with `show` the sections named in full
    (cells, human, bias, experts; a line each for the others), the official extras with --extras, the answers
    line, the cost and where the run files are."""
    from pytest_pstbench.selection.agreement import table as experts_table
    from pytest_pstbench.selection.ask.pricing import cost_line
    from pytest_pstbench.selection.position_bias import table as position_table
    from pytest_pstbench.selection.tables import answers_line, extras_table, header_line, human_tables, tables

    summary = outcome.summary
    print(header_line(summary, track.dataset_id, label))
    print(tables(summary if "cells" in show else _overall(summary), params))
    human = human_tables(summary if "human" in show else _overall(summary), params)
    if human:
        print()
        print(human)
    if extras:
        print()
        print(extras_table(summary, params))
    blocks = [position_table(summary, params) if "bias" in show else None]
    blocks.append(experts_table(summary, params) if "experts" in show else None)
    for block in blocks:
        if block:
            print()
            print(block)
    lines = [x for x in section_lines(summary, params) if x.rsplit("--show ", 1)[-1].rstrip(")") not in show]
    if lines:
        print()
        print("\n".join(lines))
    note = answers_line(outcome.run)
    if note:
        print(note)
    line = cost_line(summary.get("cost"))
    if line:
        print(line)
    print(f"run files: {outcome.run_dir}")
