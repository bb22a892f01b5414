"""What a pytest track run reports beyond its tables: why a gate was not evaluated, what a passed gate
rests on, the Markdown summary for CI pages (--pstbench-summary FILE, $GITHUB_STEP_SUMMARY), the JUnit
properties of the gate, and --pstbench-update-baseline.

The frame (`frame.pytest_run.TrackRun`) builds the two dataclasses here from its state: `Collection` (how
much of the track this session ran) and `Verdict` (the finished session's outcome, gate and the kind's
Markdown tables); their methods read nothing else. Imports pytest, the standard library and
core's errors (core.gate, core.kinds and core.store where they are used).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pytest_pstbench.core.errors import UserError


def fail(session) -> None:
    """The session fails (an interrupted or usage-error session keeps its own non-zero status)."""
    if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@dataclass(frozen=True)
class Collection:
    """How much of the track this session ran: what explains a run of which not every item was scored."""

    track_id: str
    noun: str  # "pair" / "task"
    total: int  # the track's items
    collect_only: bool  # --collect-only
    ready: bool  # the kind collected its items (an outputs folder or a judge was given); True under --collect-only
    not_ready_reason: str  # why it did not (the kind's words)
    under_xdist: bool  # this is xdist's controller: the workers collect and deselect
    n_collected: int  # this run's items collected here, and how many of them were deselected
    n_deselected: int
    lost_to_crash: tuple[str, ...] = ()  # items whose xdist worker crashed while running them

    def why_not_run(self) -> str:
        """Why items of this run did not run: collect-only, lost to a crashed worker, deselected, not collected."""
        total, noun = self.total, self.noun
        if self.lost_to_crash:
            n, ids = len(self.lost_to_crash), ", ".join(self.lost_to_crash[:5])
            return (
                f"{n} of the track's {total} {noun}s {'was' if n == 1 else 'were'} lost to a crashed xdist worker "
                f"({ids}{', ...' if n > 5 else ''}: killed, or out of memory)"
            )
        if self.collect_only:
            return f"--collect-only ran none of the track's {total} {noun}s"
        if not self.ready:
            return self.not_ready_reason
        if self.under_xdist:
            return (
                f"the xdist workers ran none of the track's {total} {noun}s (deselected with -k, -m, --deselect, "
                "--lf or a plugin, or stopped early)"
            )
        if self.n_deselected:
            return (
                f"{self.n_deselected} of the track's {total} {noun}s were deselected "
                "(-k, -m, --deselect, --lf, --sw or a plugin)"
            )
        if self.n_collected < total:
            return f"{self.n_collected} of the track's {total} {noun}s were collected"
        return f"none of the track's {total} {noun}s ran (stopped early, e.g. -x or --maxfail)"

    def nothing_scored_reason(self) -> str:
        """The gate's reason when a gated session scored nothing."""
        return (
            f"no {self.noun} of track {self.track_id} was scored in this session ({self.why_not_run()}), so the "
            f"gate was not evaluated; fix: run every {self.noun} of the track, or run without "
            "--pstbench-baseline/--pstbench-min/--pstbench-max (and their ini keys)"
        )


@dataclass(frozen=True)
class Verdict:
    """The finished session as its reports show it: the error, or the run files, the gate and the baseline
    update. The kind's Markdown tables and JUnit rows are filled in only where they are shown."""

    track_id: str
    noun: str  # "pair" / "task"
    error: str | None = None  # the session's error (no run files written)
    run_dir: Path | None = None  # the run's folder; None when nothing was scored
    n_scored: int | None = None  # run.json's n_scored, and its n_<noun>s
    n_total: int | None = None
    complete: bool = False
    gate: Any = None  # core.gate.GateResult; None without a baseline or a bound
    n_bounds: int = 0  # --pstbench-min / --pstbench-max bounds checked
    updated: str | None = None  # --pstbench-update-baseline: what was written
    results_markdown: str = ""  # the kind's results table(s) as Markdown (when there are run files)
    comparison_markdown: str = ""  # the gate's comparison table as Markdown (when there is one)
    junit_rows: tuple[tuple[str, str, str], ...] = ()  # (baseline, key, value) per comparison row

    def gate_basis(self) -> str:
        """What a passed gate's verdict rests on: how many items, against which baselines and bounds."""
        parts = []
        comparison = self.gate.comparison
        if comparison is not None:
            names = list(dict.fromkeys(r.baseline for r in comparison.rows))
            parts.append(
                f"{len(comparison.rows)} tests against baseline run{'s' if len(names) > 1 else ''} "
                f"{', '.join(names)}, none significantly worse"
            )
        if self.n_bounds:
            parts.append(f"{self.n_bounds} bound{'s' if self.n_bounds > 1 else ''} met")
        parts.extend(self.gate.basis)
        return f"all {self.n_scored} {self.noun}s of track {self.track_id} scored; " + "; ".join(parts)

    def markdown(self) -> str:
        """The results and the gate's verdict, for a CI job's summary page. Every name, path and message in it
        is Markdown-escaped (`core.text`): a run or a server wrote them, not pstbench."""
        from pytest_pstbench.core.text import md_code, md_escape

        lines = [f"## pstbench: track {md_code(self.track_id)}", ""]
        if self.error:
            lines += [f"**Error:** {md_escape(self.error)}", ""]
        elif self.run_dir is None:
            lines += [f"No {self.noun} was scored; no run files were written.", ""]
        else:
            lines += [
                self.results_markdown,
                "",
                f"Run files: {md_code(self.run_dir)} ({self.n_scored} of "
                f"{self.n_total} {self.noun}s scored{'' if self.complete else '; incomplete'})",
                "",
            ]
        if self.updated:
            lines += [f"**Baseline updated:** {md_escape(self.updated)}", ""]
        if self.gate is not None:
            if self.gate.failed:
                lines += ["**Gate: FAILED**", ""] + [f"- {md_escape(reason)}" for reason in self.gate.reasons] + [""]
            else:
                lines += [f"**Gate: passed** ({md_escape(self.gate_basis())})", ""]
            lines += [f"- {md_escape(note)}" for note in self.gate.notes] + ([""] if self.gate.notes else [])
            if self.gate.comparison is not None:
                lines += [self.comparison_markdown, ""]
            lines += worst_markdown(self.gate)
        return "\n".join(lines)

    def junit_properties(self) -> list[tuple[str, str]]:
        """The gate's outcome as JUnit XML test-suite properties: `pstbench_gate`, one
        `pstbench_gate_reason_N` per reason and `pstbench_verdict[BASELINE][KEY]` per test."""
        from pytest_pstbench.core.text import one_line

        # XML 1.0 has no spelling for most control characters: every text a run or a server wrote is shown
        # through core.text (pytest escapes & < > " itself)
        out = [("pstbench_gate", "failed" if self.gate.failed else "passed")]
        out += [(f"pstbench_gate_reason_{i + 1}", one_line(reason)) for i, reason in enumerate(self.gate.reasons)]
        out += [
            (f"pstbench_verdict[{one_line(baseline)}][{key}]", one_line(value))
            for baseline, key, value in self.junit_rows
        ]
        return out


def worst_lines(gate) -> list[str]:
    """A failed gate's items lost most on (`core.gate.WorstItems`, per failing metric and baseline) as the
    terminal summary shows them under the FAILED lines: a title, then a small table (the caller's terminal
    stream shows every line through `core.text.for_terminal`)."""
    from tabulate import tabulate

    lines = []
    for w in gate.worst if gate is not None and gate.failed else ():
        lines.append(f"pstbench worst: {w.title}" + (f": {w.note}" if w.note else ":"))
        if w.rows:
            table = tabulate(
                [list(r) for r in w.rows], headers=list(w.headers), tablefmt="simple", disable_numparse=True
            )
            lines += [f"  {line}" for line in table.splitlines()]
    return lines


def worst_markdown(gate) -> list[str]:
    """The same for the Markdown summary: a title and a small table per failing metric and baseline, every
    text Markdown-escaped (`core.text.md_escape`: run names, item ids and paths come from runs and tracks)."""
    from pytest_pstbench.core.text import md_escape

    lines = []
    for w in gate.worst if gate.failed else ():
        lines += [f"{md_escape(w.title)}" + (f": {md_escape(w.note)}" if w.note else ":"), ""]
        if w.rows:
            lines.append("| " + " | ".join(md_escape(h) for h in w.headers) + " |")
            lines.append("|" + "|".join("---" for _ in w.headers) + "|")
            lines += ["| " + " | ".join(md_escape(c) for c in r) + " |" for r in w.rows]
            lines.append("")
    return lines


def junit_xml(config):
    """pytest's JUnit XML writer of this session (--junitxml), or None."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover - junitxml internals moved
        return None
    return config.stash.get(xml_key, None)


def refuse_summary_over_inputs(config, baselines, run_dir: Path, track, protocol, files=()) -> None:
    """--pstbench-summary FILE must not replace what the session reads or writes: a baseline run's files, the
    run folder it writes, the track's manifest, the protocol file or `files` (label, path: the answers file).
    Refused before anything is scored (`core.files.write.refuse_overwriting_inputs`)."""
    from pytest_pstbench.core.files.write import refuse_overwriting_inputs
    from pytest_pstbench.frame.config import path_value

    target = path_value(config, "summary")
    if target is None:
        return
    refuse_overwriting_inputs(
        "--pstbench-summary",
        [target],
        files=[("the track manifest", getattr(track, "manifest", None)), ("protocol file", protocol.path), *files],
        folders=[*(("baseline run", b) for b in baselines or []), ("the run folder this session writes", run_dir)],
    )


def write_markdown(text: str, target: Path | None) -> tuple[str | None, bool]:
    """--pstbench-summary FILE (`target`, or None) is written whole; $GITHUB_STEP_SUMMARY is appended to, as
    GitHub Actions expects. -> (the last write's error, or None; whether it fails the session: a failure
    to write FILE does, one to append to $GITHUB_STEP_SUMMARY is reported only)."""
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.core.files.write import write_atomic

    error, fatal = None, False
    if target is not None:
        try:
            write_atomic(target, text, what="the summary", fix="give a writable path")
        except UserError as exc:
            error, fatal = f"--pstbench-summary {exc}", True
    github = os.environ.get("GITHUB_STEP_SUMMARY")
    if github:
        try:
            with open(github, "a", encoding="utf-8") as fh:
                fh.write(text + "\n")
        except OSError as exc:
            error = f"GITHUB_STEP_SUMMARY={github}: cannot append the summary ({exc})"
    return error, fatal


def update_baseline(target: Path, outcome, n_items: int, noun: str):
    """--pstbench-update-baseline: the finished run's files (`outcome`) replace the baseline folder `target`
    whole (under its lock, `core.store.folder.write_run_files`: a kill leaves the old baseline or the new one), when
    the run is complete. -> (a failed core.gate.GateResult saying why it was not updated, or None; the line
    saying it was, or None). The caller fails the session either way, so that the update is seen."""
    from pytest_pstbench.core.gate import GateResult
    from pytest_pstbench.core.kinds import get, run_kind
    from pytest_pstbench.core.store.folder import write_run_files

    run_dir = outcome.run_dir
    if not outcome.complete:
        return GateResult(
            reasons=[
                f"baseline {target} not updated: the run is incomplete ({outcome.run.get('n_scored')} of "
                f"{n_items} {noun}s scored); fix: score every {noun}, then update"
            ]
        ), None
    files = {name: (run_dir / name).read_text(encoding="utf-8") for name in get(run_kind(run_dir)).run_files}
    try:
        write_run_files(target, files, outcome.run)
    except UserError as exc:
        return GateResult(reasons=[f"baseline {target} not updated: {exc}"]), None
    return None, (
        f"baseline {target} updated from this run ({run_dir}, {outcome.run.get('n_scored')} "
        f"{noun}s); the session fails so that a baseline is never updated silently: review and "
        "commit it, then run without --pstbench-update-baseline"
    )


class SessionMark:
    """One count in pytest's last line for what failed the session (`count_in_last_line`)."""

    count_towards_summary = True

    def __init__(self, what: str):
        self.what = what

    def __repr__(self) -> str:
        return f"SessionMark({self.what!r})"


def count_in_last_line(tr, what: str) -> None:
    """`10 passed, 1 pstbench gate failed in 5.68s`, red: a session pstbench failed says so in pytest's last
    line, not only above it. An entry in the terminal reporter's counts under `what`, and an empty "failed"
    list, which turns the line red and counts nothing."""
    tr.stats.setdefault(what, []).append(SessionMark(what))
    tr.stats.setdefault("failed", [])
