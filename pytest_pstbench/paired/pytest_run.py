"""The pytest side of a paired run: one item per pair, scored by the `RunSession`.

The frame (collection, gathering results from xdist workers, finishing, the gate, the terminal
summary) is `pytest_pstbench.frame.pytest_run.TrackRun`; this module supplies the paired kind's parts.

Decode ahead: while a pair's item computes its metrics, a loader thread already hashes, looks up and
decodes the files of the next item pytest will run in this process (`nextitem` of
`pytest_runtest_protocol`; under pytest-xdist, the next item of this worker), as `pstbench score`'s
pipeline does (`paired/planner.py`). One pair ahead: memory stays flat. The values are those of
`RunSession.score_pair`: the same load and compute steps on the same files.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.frame.config import (
    as_on_controller,
    baseline_paths,
    key_values,
    path_value,
    recorded_command,
    track_value,
)
from pytest_pstbench.frame.pytest_run import ItemFailure, TrackRun, record_result
from pytest_pstbench.options import option_value


def gate_options(config: pytest.Config, protocol) -> dict:
    """Baselines, gated metrics, bounds on the protocol's statistic and margins of a paired run."""
    from pytest_pstbench.core.gate import parse_bounds, parse_metrics

    metrics = parse_metrics(option_value(config, "gate-metrics"), protocol)
    return {
        "baselines": baseline_paths(config),
        "metrics": metrics,
        "mins": key_values(config, "min", lambda items: parse_bounds(items, "min", protocol)),
        "maxs": key_values(config, "max", lambda items: parse_bounds(items, "max", protocol)),
        "margins": gate_margins(config, protocol, metrics),
    }


def gate_margins(config: pytest.Config, protocol, metrics) -> dict[str, float]:
    """`--pstbench-gate-margin METRIC=DELTA` (else ini `pstbench_gate_margin`) of a paired run; 0 means no margin."""
    from pytest_pstbench.core.gate import margins_to_apply

    return key_values(config, "gate-margin", lambda items: margins_to_apply(items, protocol, tested=metrics))


class PairItem(pytest.Item):
    def __init__(self, *, pair, run, **kwargs):
        super().__init__(**kwargs)
        self.pair = pair
        self.run = run
        self.add_marker("pstbench")

    def runtest(self) -> None:
        record_result(self, self.run, self.run.score_item(self.pair))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ItemFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"pstbench {self.run.track.id}::{self.pair.id}"


class _LoadAhead:
    """One loader thread that runs `RunSession.load` for the pair pytest will run next."""

    def __init__(self, session):
        self._session = session
        self._pool: ThreadPoolExecutor | None = None
        self._pending: dict[str, tuple[object, object]] = {}  # pair id -> (output, future)
        self._lock = threading.Lock()

    def _load(self, pair, output):
        return self._session.load(pair, output, lambda: self._session.load_dataset_images(pair))

    def submit(self, pair, output) -> None:
        with self._lock:
            if pair.id in self._pending:
                return
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pstbench-load")
            self._pending[pair.id] = (output, self._pool.submit(self._load, pair, output))

    def step(self, pair, output):
        """The load step of `pair`: the one loaded ahead for this output, else loaded now."""
        with self._lock:
            entry = self._pending.pop(pair.id, None)
        if entry is not None and entry[0] == output:
            return entry[1].result()  # its exception (not a user error: those are failed results) is raised here
        return self._load(pair, output)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
            self._pending.clear()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


class PairedRun(TrackRun):
    """A paired track's run (`--pstbench-track demo`, `pst50-paired`, a local manifest)."""

    result_key = "pstbench_result"
    noun = "pair"

    def __init__(self, config, track, protocol, session, outputs, gate_options=None):
        super().__init__(config, track, protocol, session, gate_options)
        self.outputs = outputs  # pair id -> path, or None when no outputs folder was given
        self._ahead = _LoadAhead(session)

    @classmethod
    def from_config(cls, config: pytest.Config) -> PairedRun:
        from pytest_pstbench.core.store.names import refuse_baseline_is_run_dir
        from pytest_pstbench.frame.verdict import refuse_summary_over_inputs
        from pytest_pstbench.paired.identity import is_identity_spec
        from pytest_pstbench.paired.request import ScoreRequest, open_scoring

        try:
            raw_outputs = option_value(config, "outputs")
            if raw_outputs is not None and not is_identity_spec(str(raw_outputs)):
                raw_outputs = str(path_value(config, "outputs"))
            scoring = open_scoring(
                ScoreRequest(
                    track=track_value(config),
                    outputs=raw_outputs,
                    name=option_value(config, "name"),
                    results=path_value(config, "results") or Path("results"),
                    protocol=as_on_controller(config, option_value(config, "protocol")),
                    allow_resize=bool(option_value(config, "allow-resize")),
                    device=str(option_value(config, "device") or "cpu"),
                    method_info=tuple(config.getoption("pstbench_method_info") or ()),
                    use_cache=not bool(option_value(config, "no-cache")),
                    verify_cache=option_value(config, "verify-cache"),
                    allow_outside_links=bool(option_value(config, "allow-outside-links")),
                    command=recorded_command(config),
                    option_prefix="--pstbench-",
                    verify_seed=getattr(config, "workerinput", {}).get("testrunuid"),  # xdist workers: the same draw
                )
            )
            opts = gate_options(config, scoring.protocol)
            refuse_baseline_is_run_dir(opts["baselines"], scoring.session.run_dir)
            refuse_summary_over_inputs(
                config, opts["baselines"], scoring.session.run_dir, scoring.track, scoring.protocol
            )
        except UserError as exc:
            raise pytest.UsageError(f"pstbench: {exc}") from None
        return cls(config, scoring.track, scoring.protocol, scoring.session, scoring.outputs, opts)

    # -- items -------------------------------------------------------------------------------------
    def pair_fixture_problem(self, nodeid: str) -> str | None:
        """Why test `nodeid` cannot use the pstbench_pair fixture on this track: never (it has pairs)."""
        return None

    def ready_to_collect(self, config) -> bool:
        return self.outputs is not None

    def not_ready_reason(self) -> str:
        return "no --pstbench-outputs folder was given and no test scored a pair with the pstbench_score fixture"

    def make_items(self, collector):
        for pair in self.track.pairs:
            yield PairItem.from_parent(collector, name=pair.id, pair=pair, run=self)

    def score_item(self, pair):
        """A pair item's result: its files loaded ahead (or now), then the metrics."""
        from pytest_pstbench.paired.session import PairResult

        step = self._ahead.step(pair, self.outputs[pair.id])
        return step if isinstance(step, PairResult) else self.session.compute(step)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        """Before an item runs: start loading the next item's files if it is one of this run's pairs."""
        if isinstance(nextitem, PairItem) and nextitem.run is self and self.outputs is not None:
            self._ahead.submit(nextitem.pair, self.outputs[nextitem.pair.id])
        # returns None: pytest's own protocol runs the item

    def pytest_unconfigure(self, config):
        self._ahead.close()

    def score_for_item(self, item, pair, output):
        """Used by the `pstbench_score` fixture: the metrics dict; a failed pair fails the test."""
        result = self.session.score_pair(pair, output)
        try:
            record_result(item, self, result)
        except ItemFailure as exc:
            pytest.fail(str(exc), pytrace=False)
        return dict(result.metrics)

    def result_from_json(self, data: dict):
        from pytest_pstbench.paired.session import PairResult

        return PairResult.from_json(data)

    # -- gate --------------------------------------------------------------------------------------
    def evaluate_gate(self):
        from pytest_pstbench.core.kinds import runs_kind
        from pytest_pstbench.paired.gate import evaluate_gate

        opts = self.gate_options
        runs_kind([*opts.get("baselines", []), self.outcome.run_dir])  # refuses a selection baseline
        files = {p.id: (str(p.content), str(p.style)) for p in self.track.pairs}  # the worst pairs' files
        return evaluate_gate(self.outcome.run_dir, self.outcome.summary, self.protocol, **opts, item_files=files)

    def junit_verdict(self, r) -> tuple[str, str]:
        from pytest_pstbench.paired.power import mde_text

        mde = f"; mde {mde_text(r, 6)}" if r.detectable else ""  # the minimum detectable effect (paired/power.py)
        return f"{r.metric}", f"{r.verdict}; mean diff {r.mean_diff:+.6g}; p {r.pvalue:.4g}; p_holm {r.p_holm:.4g}{mde}"

    # -- terminal summary ----------------------------------------------------------------------------
    def _table_rows(self) -> list[tuple[str, dict]]:
        # The run's own row. The Identity row is `pstbench score`'s, scored there beside the method under the same
        # cache rules; an earlier Identity run folder is not shown here (its dataset revision may be a label that
        # did not change with the track's files).
        return [(self.session.name, self.outcome.summary)]

    def write_results(self, tr) -> None:
        from pytest_pstbench.paired.tables import header_line, run_table

        n_items = len(self.track.pairs)
        tr.write_line(header_line(self.outcome.summary, self.track.dataset_id, n_items))
        for line in run_table(self.protocol, self._table_rows(), n_items=n_items).splitlines():
            tr.write_line(line)

    def results_markdown(self) -> str:
        from pytest_pstbench.core.text import md_code
        from pytest_pstbench.paired.tables import header_line, run_table

        n_items = len(self.track.pairs)  # names are escaped by the table (tablefmt github)
        return f"{md_code(header_line(self.outcome.summary, self.track.dataset_id, n_items))}\n\n" + run_table(
            self.protocol, self._table_rows(), tablefmt="github", n_items=n_items
        )

    def comparison_markdown(self) -> str:
        from pytest_pstbench.paired.tables import comparison_table

        return f"Baseline gate (paired Wilcoxon, Holm, alpha {self.gate.comparison.alpha}):\n\n" + comparison_table(
            self.gate.comparison, self.protocol, tablefmt="github"
        )

    def write_after_run_files(self, tr) -> None:
        if self.session.verify_cache:
            from pytest_pstbench.paired.verify_cache import verify_line

            tr.write_line(verify_line(self.session.results))

    def write_gate_comparison(self, tr) -> None:
        from pytest_pstbench.paired.tables import comparison_table

        margins = self.gate_options.get("margins") or {}
        with_margins = (
            f"; one-sided beyond the margins {', '.join(f'{m}={d:g}' for m, d in margins.items())}" if margins else ""
        )
        tr.write_line(f"baseline gate (paired Wilcoxon, Holm, alpha {self.gate.comparison.alpha}{with_margins}):")
        for line in comparison_table(self.gate.comparison, self.protocol).splitlines():
            tr.write_line(line)
