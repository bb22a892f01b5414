"""The one pytest integration of a track run, written once for every track kind.

`TrackRun` is registered by `pytest_pstbench.plugin` as plugin `pstbench-run` when a track is given;
each kind subclasses it (`paired.pytest_run.PairedRun`, `selection.pytest_run.SelectionRun`, found through
`core.kinds`) and supplies only what differs: how it is built from the options, its items, how a
result travels, how the gate is evaluated and how its tables are written. Collection of the track's
items, gathering results (in-process or from pytest-xdist workers, whose reports carry each result
in `user_properties`), finishing the run, the gate and the terminal summary's frame are here; what
the session reports beyond its tables (the gate's basis, the Markdown summary, JUnit properties, the
baseline update) is `frame.verdict`, from the `Verdict` and `Collection` this frame builds; the option
readers every kind uses (paths, the track, baselines, bounds) are `frame.config`.

Loaded only when a pstbench option or fixture is used (it imports pytest and the standard library;
the kinds import numpy and friends).

"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.jsonfile import loads
from pytest_pstbench.frame.config import baseline_records, is_worker, path_value
from pytest_pstbench.frame.verdict import (
    Collection,
    Verdict,
    count_in_last_line,
    fail,
    junit_xml,
    update_baseline,
    worst_lines,
    write_markdown,
)

# ---- items ------------------------------------------------------------------------------------


class ItemFailure(Exception):
    """An item (a pair or a task) could not be scored; shown as its one-line message."""


def collector_name(track_id: str) -> str:
    """The collector's name and node id, `pstbench-<track>`: its items are `pstbench-<track>::<pair id>`.

    No brackets and no leading `::`: pytest's junitxml splits a node id at the first `[` (parameters) and
    on `::` (classname = all but the last part), so `pstbench[demo]` gave `classname=""` and
    `name="pstbench[demo]::demo-01"`; now JUnit shows classname `pstbench-demo` and name `demo-01`, and
    `-k demo-03` / `--lf` select by these plain ids."""
    return f"pstbench-{track_id}"


class TrackCollector(pytest.Collector):
    """`pstbench-<track>`: one item per pair or task, made by the run's `make_items`."""

    def __init__(self, *, run, **kwargs):
        super().__init__(**kwargs)
        self.run = run

    def collect(self):
        yield from self.run.make_items(self)


ENV_KEY = "pstbench_environment"  # a worker's environment, in the report of each item it computed


def record_result(item, run, result) -> None:
    """Put a scored item's result into its report (the controller gathers it) and fail the item when
    the result is a failure. On a pytest-xdist worker the report also carries the environment the result
    was computed in (run.json records where the workers' environments differ: `core.environment`)."""
    item.user_properties.append((run.result_key, json.dumps(result.to_json(), allow_nan=False)))
    if is_worker(item.config) and not any(key == ENV_KEY for key, _ in item.user_properties):
        item.user_properties.append((ENV_KEY, json.dumps(run.session.environment(), allow_nan=False)))
    if not result.ok:
        raise ItemFailure(result.error)


# ---- the run ----------------------------------------------------------------------------------
class TrackRun:
    """What every kind's pytest run does. Subclasses set `result_key`, `noun` and implement the hooks
    marked below."""

    result_key = "pstbench_result"
    noun = "item"  # "pair" / "task": the terminal summary's words and run.json's `n_<noun>s`

    def __init__(self, config, track, protocol, session, gate_options=None):
        self.config = config
        self.track = track
        self.protocol = protocol
        self.session = session
        self.gate_options = gate_options or {}
        self.gate = None  # gate.GateResult when a baseline or bound was given
        self.outcome = None
        self.error: str | None = None
        self.update_baseline = bool(config.getoption("pstbench_update_baseline", default=None))
        self.updated: str | None = None  # --pstbench-update-baseline: what was written (the session then fails)
        self.summary_error: str | None = None  # --pstbench-summary FILE / $GITHUB_STEP_SUMMARY could not be written
        self.n_collected = 0  # this run's items collected, and how many of them were deselected
        self.n_deselected = 0
        self.lost_to_crash: list[str] = []  # item ids whose xdist worker crashed while running them
        self.duplicates: list[str] = []  # "<id> (by <nodeid> and <nodeid>)": items with more than one result
        self._result_from: dict[str, str] = {}  # item id -> the node id whose report carried its result
        self._seen: set[tuple[str, int]] = set()  # (node id, index among its results) already gathered
        self._computed_in: list[
            tuple[dict, str | None, str]
        ] = []  # (environment, worker id, item id) of workers' results

    # -- what a kind supplies --------------------------------------------------------------------
    def ready_to_collect(self, config) -> bool:
        """Whether the track's items are added (e.g. an outputs folder or a judge was given)."""
        raise NotImplementedError

    def make_items(self, collector):
        raise NotImplementedError

    def result_from_json(self, data: dict):
        raise NotImplementedError

    def evaluate_gate(self):
        """The gate's result for the finished run (`self.outcome`): a gate.GateResult."""
        raise NotImplementedError

    def junit_verdict(self, row) -> tuple[str, str]:
        """One comparison row of the gate as a JUnit property (KEY, value)."""
        raise NotImplementedError

    def before_finish(self) -> None:
        """Called on the controller just before the run is finished."""

    def summary_problem(self) -> str | None:
        """A line the terminal summary shows instead of results (e.g. no judge was given)."""
        return None

    def write_results(self, tr) -> None:
        """The run's tables (and notes) in the terminal summary."""
        raise NotImplementedError

    def write_after_run_files(self, tr) -> None:
        """Lines after `run files: ...` (e.g. the --verify-cache result)."""

    def write_gate_comparison(self, tr) -> None:
        """The gate's comparison table."""
        raise NotImplementedError

    # -- hooks -----------------------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session, config, items):
        if not self.ready_to_collect(config):
            return
        # Report the collection like any other, so that "collected N items" and xdist count these items.
        where = self.track.manifest if self.track.manifest is not None else config.invocation_params.dir
        name = collector_name(self.track.id)
        collector = TrackCollector.from_parent(session, name=name, nodeid=name, path=Path(where), run=self)
        new_items = list(collector.collect())
        session.ihook.pytest_collectreport(report=pytest.CollectReport(collector.nodeid, "passed", None, new_items))
        items.extend(new_items)
        self.n_collected = len(new_items)

    def pytest_deselected(self, items):
        """-k, -m, --deselect, --lf, --sw: how many of this run's items will not run (the gate says so)."""
        self.n_deselected += sum(1 for item in items if getattr(item, "run", None) is self)

    def pytest_runtest_logreport(self, report):
        """On the controller (or without xdist): every result an item put in its report. One result per
        item id per run: a second one (the `pstbench_score` fixture scoring a pair that an outputs item,
        another test or the same test already scored) is recorded as a duplicate and fails the session
        without run files (which of the two would be kept depended on the order, serial or xdist)."""
        if is_worker(self.config):
            return
        prefix = collector_name(self.track.id) + "::"
        if (
            report.failed
            and report.nodeid.startswith(prefix)
            and "crashed while running" in getattr(report, "longreprtext", "")
        ):
            lost = report.nodeid[len(prefix) :]  # xdist's report for an item whose worker died (killed, out of memory)
            if lost not in self.lost_to_crash:
                self.lost_to_crash.append(lost)
        # An item's user_properties travel in each of its reports (setup, call, teardown), growing as results
        # are recorded: the i-th result of a node is new only the first time it is seen.
        results = [value for key, value in getattr(report, "user_properties", ()) if key == self.result_key]
        envs = [value for key, value in getattr(report, "user_properties", ()) if key == ENV_KEY]
        for i, value in enumerate(results):
            if (report.nodeid, i) in self._seen:
                continue
            self._seen.add((report.nodeid, i))
            result = self.result_from_json(loads(value))
            item_id = result.item_id
            if item_id in self._result_from:
                first = self._result_from[item_id]
                self.duplicates.append(f"{item_id} (by {first} and {report.nodeid})")
                continue
            self._result_from[item_id] = report.nodeid
            self.session.add(result)
            if envs:
                node = getattr(report, "node", None)  # xdist's WorkerController of the worker that sent it
                worker = getattr(getattr(node, "gateway", None), "id", None)
                self._computed_in.append((loads(envs[-1]), worker, item_id))

    def gated(self) -> bool:
        """A baseline or a bound was given: the session passes only on a complete, compared run."""
        opts = self.gate_options
        return bool(opts.get("baselines") or opts.get("mins") or opts.get("maxs"))

    @pytest.hookimpl(tryfirst=True)  # before junitxml writes its report
    def pytest_sessionfinish(self, session, exitstatus):
        if is_worker(self.config):
            return
        try:
            self._finish_session(session)
        finally:
            self._write_markdown_summary(session)

    def _finish_session(self, session) -> None:
        if self.duplicates:  # nothing written: which result would stand is not defined
            n = len(self.duplicates)
            self.error = (
                f"track {self.track.id}: {self.noun} {self.duplicates[0]} was scored twice in this session"
                + (f" (and {n - 1} more {self.noun}s)" if n > 1 else "")
                + f"; a run holds one result per {self.noun}, so no run files were written; fix: score each "
                f"{self.noun} once (either --pstbench-outputs or the pstbench_score fixture, once per test)"
            )
            fail(session)
            return
        if not self.session.results:
            if self.gated() or self.update_baseline:
                from pytest_pstbench.core.gate import GateResult

                self.gate = GateResult(reasons=[self.collection().nothing_scored_reason()])
                self._add_junit_gate_properties()
                fail(session)
            return
        if self.gate_options.get("baselines") and not self.update_baseline:
            self.session.baselines = baseline_records(self.config)  # run.json records what the gate compares against
        self.before_finish()
        self.session.computed_in = self._computed_in
        try:
            self.outcome = self.session.finish()
        except UserError as exc:  # e.g. a partial session over a complete run: nothing written, the session fails
            self.error = str(exc)
            fail(session)
            return
        if self.update_baseline:  # the finished run replaces the baseline (when complete); the session fails either way
            self.gate, self.updated = update_baseline(
                self.gate_options["baselines"][0], self.outcome, self.n_items, self.noun
            )
            fail(session)
            return
        if not self.gated():
            return
        self.gate = self._run_gate()
        self._add_junit_gate_properties()
        if self.gate.failed:
            fail(session)

    @property
    def n_items(self) -> int:
        return len(getattr(self.track, f"{self.noun}s"))  # the track's pairs, tasks, ...: one item each

    def not_ready_reason(self) -> str:
        """Why the run's items are not collected (no outputs folder, no judge)."""
        return f"no {self.noun} items were collected"

    def _run_gate(self):
        """The gate's result: a failed result when the run is incomplete or a baseline is refused."""
        from pytest_pstbench.core.gate import GateResult

        missing = [b for b in self.gate_options.get("baselines") or [] if not Path(b).exists()]
        if missing:
            return GateResult(
                reasons=[
                    f"baseline {missing[0]} does not exist; fix: make it from a run you trust: run once with "
                    "--pstbench-update-baseline (it writes this run there and fails the session, so the update is seen), "
                    "or copy a complete run folder (results/<track>/<name>) there"
                ]
            )
        if not self.outcome.complete:
            run = self.outcome.run
            scored, total = run.get("n_scored"), run.get(f"n_{self.noun}s")
            xdist = self.config.pluginmanager.has_plugin("dsession")
            why = (
                f"; {self.collection().why_not_run()}"
                if self.lost_to_crash or (not xdist and (self.n_deselected or self.n_collected < self.n_items))
                else ""
            )
            return GateResult(
                reasons=[
                    f"the run is incomplete ({scored} of {total} {self.noun}s scored{why}), "
                    "so the gate could not be evaluated"
                ]
            )
        try:
            result = self.evaluate_gate()
        except UserError as exc:
            return GateResult(reasons=[f"baseline refused: {exc}"])
        for src in getattr(self.config, "_pstbench_baselines", []):
            if src.uri is not None:
                moved = f", resolved from {src.requested}" if src.requested and src.requested != src.uri else ""
                result.notes.append(f"baseline {src.uri}: published run at commit {src.commit}{moved}")
        from pytest_pstbench.core.drift import gate_drift
        from pytest_pstbench.options import option_value

        gate_drift(
            result,
            self.outcome.run,
            self.gate_options.get("baselines") or [],
            strict=bool(option_value(self.config, "strict-environment")),
        )  # a note; with the option, a reason
        return result

    # -- what the session reports beyond its tables: frame.verdict ---------------------------------
    def collection(self) -> Collection:
        """How much of the track this session ran."""
        config = self.config
        return Collection(
            track_id=self.track.id,
            noun=self.noun,
            total=self.n_items,
            collect_only=bool(config.option.collectonly),
            ready=bool(config.option.collectonly) or self.ready_to_collect(config),  # not asked under --collect-only
            not_ready_reason=self.not_ready_reason(),
            under_xdist=config.pluginmanager.has_plugin("dsession"),
            n_collected=self.n_collected,
            n_deselected=self.n_deselected,
            lost_to_crash=tuple(self.lost_to_crash),
        )

    def verdict(self, *, markdown: bool = False, junit: bool = False) -> Verdict:
        """The session's verdict; with `markdown` the kind's Markdown tables it shows, with `junit` the
        comparison's rows as JUnit properties (each made only where it is shown)."""
        record = self.outcome.run if self.outcome is not None else {}
        comparison = self.gate.comparison if self.gate is not None else None
        opts = self.gate_options
        return Verdict(
            track_id=self.track.id,
            noun=self.noun,
            error=self.error,
            run_dir=self.outcome.run_dir if self.outcome is not None else None,
            n_scored=record.get("n_scored"),
            n_total=record.get(f"n_{self.noun}s"),
            complete=self.outcome is not None and self.outcome.complete,
            gate=self.gate,
            n_bounds=len(opts.get("mins") or {}) + len(opts.get("maxs") or {}),
            updated=self.updated,
            results_markdown=self.results_markdown()
            if markdown and not self.error and self.outcome is not None
            else "",
            comparison_markdown=self.comparison_markdown() if markdown and comparison is not None else "",
            junit_rows=tuple((r.baseline, *self.junit_verdict(r)) for r in comparison.rows)
            if junit and comparison is not None
            else (),
        )

    def results_markdown(self) -> str:
        """The run's results table(s) as Markdown."""
        raise NotImplementedError

    def comparison_markdown(self) -> str:
        """The gate's comparison table as Markdown."""
        raise NotImplementedError

    def _count_in_last_line(self, tr) -> None:
        """A session that pstbench failed says so in pytest's last line (`frame.verdict.count_in_last_line`)."""
        if self.error or self.summary_error:
            count_in_last_line(tr, "pstbench error")
        elif self.gate is not None and self.gate.failed:
            count_in_last_line(tr, "pstbench gate failed")

    def _write_markdown_summary(self, session) -> None:
        """--pstbench-summary FILE and $GITHUB_STEP_SUMMARY (`frame.verdict.write_markdown`)."""
        target = path_value(self.config, "summary")
        if target is None and not os.environ.get("GITHUB_STEP_SUMMARY"):
            return
        self.summary_error, fatal = write_markdown(self.verdict(markdown=True).markdown(), target)
        if fatal:
            fail(session)

    def _add_junit_gate_properties(self) -> None:
        """The gate's outcome as JUnit XML test-suite properties (when --junitxml is used)."""
        xml = junit_xml(self.config)
        if xml is not None and self.gate is not None:
            for name, value in self.verdict(junit=True).junit_properties():
                xml.add_global_property(name, value)

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        if is_worker(config) or exitstatus == pytest.ExitCode.USAGE_ERROR:  # pytest prints the one-line error
            return
        from pytest_pstbench.core.text import TerminalLines

        self._count_in_last_line(terminalreporter)
        tr = TerminalLines(terminalreporter)  # every line through core.text.for_terminal (names, fields, messages)
        tr.section("pstbench")
        if self.summary_error:
            tr.write_line(f"pstbench: error: {self.summary_error}", red=True)
        if self.error:
            tr.write_line(f"pstbench: error: {self.error}")
            return
        problem = self.summary_problem()
        if problem:
            tr.write_line(problem)
            return
        if self.outcome is None:
            tr.write_line(f"pstbench: track {self.track.id}: no {self.noun} was scored, no run files written")
            if self.gate is not None:
                for reason in self.gate.reasons:
                    tr.write_line(f"pstbench gate FAILED: {reason}", red=True)
            return
        self.write_results(tr)
        tr.write_line(f"run files: {self.outcome.run_dir}")
        self.write_after_run_files(tr)
        for d in self.outcome.run.get("deviations", []):
            if d.get("kind") == "environment_differs":
                tr.write_line(
                    f"pstbench: the workers computed in different environments ({', '.join(d['fields'])}), so a value's last "
                    f"digits may depend on the worker; run.json records each worker's and its {self.noun}s (deviation "
                    "environment_differs); fix: give every worker the same versions and thread count (//env:OMP_NUM_THREADS=N)",
                    yellow=True,
                )
        if self.updated:
            tr.write_line(f"pstbench: {self.updated}", yellow=True)
        if self.gate is not None:
            for note in self.gate.notes:
                tr.write_line(f"pstbench gate: {note}")
            if self.gate.comparison is not None:
                tr.write_line("")
                self.write_gate_comparison(tr)
            if self.gate.failed:
                for reason in self.gate.reasons:
                    tr.write_line(f"pstbench gate FAILED: {reason}", red=True)
                for line in worst_lines(self.gate):  # per failing metric, the items the candidate lost most on
                    tr.write_line(line)
            else:
                tr.write_line(f"pstbench gate passed: {self.verdict().gate_basis()}", green=True)
        if not self.outcome.complete:
            run = self.outcome.run
            n_fail = len(run["failures"])
            tr.write_line(
                f"run incomplete: {run['n_scored']} of {run[f'n_{self.noun}s']} {self.noun}s scored"
                + (f", {n_fail} failed" if n_fail else "")
                + "; run.json says complete: false"
            )
