"""What a pytest track run reports beyond its tables: why a gate was not evaluated, what a passed gate
rests on, the Markdown summary for CI pages (--pstbench-summary FILE, $GITHUB_STEP_SUMMARY), the JUnit
properties of the gate, and --pstbench-update-baseline. Functions of the run (`plugin.frame.TrackRun`),
which calls them; standard library and pytest only.
"""
from __future__ import annotations

import os

import pytest

from pytest_pstbench.core.errors import UserError


def fail(session) -> None:
    """The session fails (an interrupted or usage-error session keeps its own non-zero status)."""
    if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def update_baseline(run, session) -> None:
    """--pstbench-update-baseline: the finished, complete run's files replace the baseline folder whole
    (under its lock, `core.runs.write_run_files`: a kill leaves the old baseline or the new one), and
    the session fails so that the update is seen."""
    from pytest_pstbench.core.gate import GateResult
    from pytest_pstbench.core.kinds import get, run_kind
    from pytest_pstbench.core.runs import write_run_files

    target = run.gate_options["baselines"][0]
    run_dir = run.outcome.run_dir
    if not run.outcome.complete:
        run.gate = GateResult(reasons=[
            f"baseline {target} not updated: the run is incomplete ({run.outcome.run.get('n_scored')} of "
            f"{run.n_items} {run.noun}s scored); fix: score every {run.noun}, then update"])
        fail(session)
        return
    files = {name: (run_dir / name).read_text(encoding="utf-8") for name in get(run_kind(run_dir)).run_files}
    try:
        write_run_files(target, files, run.outcome.run)
    except UserError as exc:
        run.gate = GateResult(reasons=[f"baseline {target} not updated: {exc}"])
        fail(session)
        return
    run.updated = (f"baseline {target} updated from this run ({run_dir}, {run.outcome.run.get('n_scored')} "
                   f"{run.noun}s); the session fails so that a baseline is never updated silently: review and "
                   "commit it, then run without --pstbench-update-baseline")
    fail(session)


def why_not_run(run) -> str:
    """Why items of this run did not run: collect-only, deselected, not collected."""
    total = run.n_items
    if run.config.option.collectonly:
        return f"--collect-only ran none of the track's {total} {run.noun}s"
    if not run.ready_to_collect(run.config):
        return run.not_ready_reason()
    if run.config.pluginmanager.has_plugin("dsession"):  # xdist's controller: the workers collect and deselect
        return (f"the xdist workers ran none of the track's {total} {run.noun}s (deselected with -k, -m, --deselect, "
                "--lf or a plugin, or stopped early)")
    if run.n_deselected:
        return (f"{run.n_deselected} of the track's {total} {run.noun}s were deselected "
                "(-k, -m, --deselect, --lf, --sw or a plugin)")
    if run.n_collected < total:
        return f"{run.n_collected} of the track's {total} {run.noun}s were collected"
    return f"none of the track's {total} {run.noun}s ran (stopped early, e.g. -x or --maxfail)"


def nothing_scored_reason(run) -> str:
    return (f"no {run.noun} of track {run.track.id} was scored in this session ({why_not_run(run)}), so the "
            f"gate was not evaluated; fix: run every {run.noun} of the track, or run without "
            "--pstbench-baseline/--pstbench-min/--pstbench-max (and their ini keys)")


def gate_basis(run) -> str:
    """What a passed gate's verdict rests on: how many items, against which baselines and bounds."""
    n = run.outcome.run.get("n_scored")
    parts = []
    comparison = run.gate.comparison
    if comparison is not None:
        names = list(dict.fromkeys(r.baseline for r in comparison.rows))
        parts.append(f"{len(comparison.rows)} tests against baseline run{'s' if len(names) > 1 else ''} "
                     f"{', '.join(names)}, none significantly worse")
    opts = run.gate_options
    n_bounds = len(opts.get("mins") or {}) + len(opts.get("maxs") or {})
    if n_bounds:
        parts.append(f"{n_bounds} bound{'s' if n_bounds > 1 else ''} met")
    parts.extend(run.gate.basis)
    return f"all {n} {run.noun}s of track {run.track.id} scored; " + "; ".join(parts)


def markdown_summary(run) -> str:
    """The results and the gate's verdict, for a CI job's summary page."""
    lines = [f"## pstbench: track `{run.track.id}`", ""]
    if run.error:
        lines += [f"**Error:** {run.error}", ""]
    elif run.outcome is None:
        lines += [f"No {run.noun} was scored; no run files were written.", ""]
    else:
        record = run.outcome.run
        lines += [run.results_markdown(), "", f"Run files: `{run.outcome.run_dir}` ({record.get('n_scored')} of "
                  f"{record.get(f'n_{run.noun}s')} {run.noun}s scored{'' if run.outcome.complete else '; incomplete'})", ""]
    if run.updated:
        lines += [f"**Baseline updated:** {run.updated}", ""]
    if run.gate is not None:
        if run.gate.failed:
            lines += ["**Gate: FAILED**", ""] + [f"- {reason}" for reason in run.gate.reasons] + [""]
        else:
            lines += [f"**Gate: passed** ({gate_basis(run)})", ""]
        lines += [f"- {note}" for note in run.gate.notes] + ([""] if run.gate.notes else [])
        if run.gate.comparison is not None:
            lines += [run.comparison_markdown(), ""]
    return "\n".join(lines)


def write_markdown_summary(run, session, target) -> None:
    """--pstbench-summary FILE (`target`, or None) is written whole (a failure fails the session);
    $GITHUB_STEP_SUMMARY is appended to, as GitHub Actions expects (a failure there is reported, not fatal)."""
    from pytest_pstbench.core.runs import write_atomic

    github = os.environ.get("GITHUB_STEP_SUMMARY")
    if target is None and not github:
        return
    text = markdown_summary(run)
    if target is not None:
        try:
            write_atomic(target, text)
        except OSError as exc:
            run.summary_error = f"--pstbench-summary {target}: cannot write the summary ({exc}); fix: give a writable path"
            fail(session)
    if github:
        try:
            with open(github, "a", encoding="utf-8") as fh:
                fh.write(text + "\n")
        except OSError as exc:
            run.summary_error = f"GITHUB_STEP_SUMMARY={github}: cannot append the summary ({exc})"


def add_junit_gate_properties(run) -> None:
    """The gate's outcome as JUnit XML test-suite properties (when --junitxml is used): `pstbench_gate`,
    one `pstbench_gate_reason_N` per reason and `pstbench_verdict[BASELINE][KEY]` per test."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover - junitxml internals moved
        return
    xml = run.config.stash.get(xml_key, None)
    if xml is None or run.gate is None:
        return
    xml.add_global_property("pstbench_gate", "failed" if run.gate.failed else "passed")
    for i, reason in enumerate(run.gate.reasons):
        xml.add_global_property(f"pstbench_gate_reason_{i + 1}", reason)
    if run.gate.comparison is not None:
        for r in run.gate.comparison.rows:
            key, value = run.junit_verdict(r)
            xml.add_global_property(f"pstbench_verdict[{r.baseline}][{key}]", value)
