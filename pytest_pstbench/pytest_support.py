"""The pytest side of a run, loaded only when a pstbench option or fixture is used.

Per-pair results travel in each test report's `user_properties` (key `pstbench_result`), so the
same aggregation works in-process and under pytest-xdist, where the controller gathers the
reports of its workers and alone writes the run files.
"""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from .errors import UserError
from .plugin import option_value

RESULT_KEY = "pstbench_result"


class PairFailure(Exception):
    """A pair's output broke an I/O rule; shown as its one-line message."""


def _path_option(config: pytest.Config, suffix: str) -> Path | None:
    dest = "pstbench_" + suffix.replace("-", "_")
    value = config.getoption(dest, default=None)
    if value is not None:
        return Path(value)
    value = config.getini(dest)
    if not value:
        return None
    base = config.inipath.parent if config.inipath else config.rootpath
    return base / value


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


class PairItem(pytest.Item):
    def __init__(self, *, pair, run, **kwargs):
        super().__init__(**kwargs)
        self.pair = pair
        self.run = run
        self.add_marker("pstbench")

    def runtest(self) -> None:
        result = self.run.session.score_pair(self.pair, self.run.outputs[self.pair.id])
        self.user_properties.append((RESULT_KEY, json.dumps(result.to_json(), allow_nan=False)))
        if not result.ok:
            raise PairFailure(result.error)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, PairFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"pstbench {self.run.track.id}::{self.pair.id}"


class TrackCollector(pytest.Collector):
    def __init__(self, *, run, **kwargs):
        super().__init__(**kwargs)
        self.run = run

    def collect(self):
        for pair in self.run.track.pairs:
            yield PairItem.from_parent(self, name=pair.id, pair=pair, run=self.run)


class PstbenchRun:
    """Registered as plugin `pstbench-run` when a track is given."""

    def __init__(self, config, track, protocol, session, outputs):
        self.config = config
        self.track = track
        self.protocol = protocol
        self.session = session
        self.outputs = outputs  # pair id -> path, or None when no outputs folder was given
        self.outcome = None
        self.error: str | None = None

    @classmethod
    def from_config(cls, config: pytest.Config) -> "PstbenchRun":
        from .protocol import load_protocol
        from .session import RunSession, load_method_yaml, parse_method_info
        from .tracks import resolve_outputs, resolve_track

        try:
            protocol = load_protocol(option_value(config, "protocol"))
            track = resolve_track(str(option_value(config, "track")))
            outputs_dir = _path_option(config, "outputs")
            outputs = resolve_outputs(track, outputs_dir) if outputs_dir is not None else None
            method_info = {**load_method_yaml(outputs_dir), **parse_method_info(config.getoption("pstbench_method_info"))}
            name = option_value(config, "name") or (outputs_dir.resolve().name if outputs_dir else "pytest")
            session = RunSession(
                track,
                protocol,
                name=str(name),
                results_dir=_path_option(config, "results") or Path("results"),
                allow_resize=bool(option_value(config, "allow-resize")),
                device=str(option_value(config, "device") or "cpu"),
                outputs_dir=outputs_dir,
                method_info=method_info,
                command="pytest " + shlex.join(config.invocation_params.args),
            )
        except UserError as exc:
            raise pytest.UsageError(f"pstbench: {exc}") from None
        return cls(config, track, protocol, session, outputs)

    # ---- collection ----------------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session, config, items):
        if self.outputs is None:
            return
        where = self.track.manifest if self.track.manifest is not None else config.invocation_params.dir
        collector = TrackCollector.from_parent(session, name=f"pstbench[{self.track.id}]", path=Path(where), run=self)
        new_items = list(collector.collect())
        # Report the collection like any other, so that "collected N items" and xdist count these items.
        session.ihook.pytest_collectreport(
            report=pytest.CollectReport(collector.nodeid, "passed", None, new_items)
        )
        items.extend(new_items)

    # ---- results -------------------------------------------------------------------------------
    def score_for_item(self, item, pair, output):
        """Used by the `pstbench_score` fixture."""
        result = self.session.score_pair(pair, output)
        item.user_properties.append((RESULT_KEY, json.dumps(result.to_json(), allow_nan=False)))
        if not result.ok:
            pytest.fail(result.error, pytrace=False)
        return dict(result.metrics)

    def pytest_runtest_logreport(self, report):
        if _is_worker(self.config):
            return
        from .session import PairResult

        for key, value in getattr(report, "user_properties", ()):
            if key == RESULT_KEY:
                self.session.add(PairResult.from_json(json.loads(value)))

    def pytest_sessionfinish(self, session, exitstatus):
        if _is_worker(self.config) or not self.session.results:
            return
        try:
            self.outcome = self.session.finish()
        except UserError as exc:
            self.error = str(exc)

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        if _is_worker(config):
            return
        tr = terminalreporter
        tr.section("pstbench")
        if self.error:
            tr.write_line(f"pstbench: error: {self.error}")
            return
        if self.outcome is None:
            tr.write_line(f"pstbench: track {self.track.id}: no pair was scored, no run files written")
            return
        from .report import header_line, run_table
        from .session import IDENTITY_NAME, cached_identity_summary

        rows = []
        if self.session.name != IDENTITY_NAME:
            identity = cached_identity_summary(self.track, self.protocol, self.session.results_dir)
            if identity is not None:
                rows.append(("Identity", identity))
        rows.append((self.session.name, self.outcome.summary))
        tr.write_line(header_line(self.outcome.summary, self.track.dataset_id))
        for line in run_table(self.protocol, rows).splitlines():
            tr.write_line(line)
        tr.write_line(f"run files: {self.outcome.run_dir}")
        if not self.outcome.complete:
            n_fail = len(self.outcome.run["failures"])
            tr.write_line(
                f"run incomplete: {self.outcome.run['n_scored']} of {self.outcome.run['n_pairs']} pairs scored"
                + (f", {n_fail} failed" if n_fail else "")
                + "; run.json says complete: false"
            )
