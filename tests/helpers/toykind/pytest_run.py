"""The toy kind's pytest face: one item per track item, over the frame's `TrackRun`."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.toykind.engine import ItemScore, ToySession, load_protocol, resolve_track, score_item
from pytest_pstbench.frame.config import path_value, recorded_command, track_value
from pytest_pstbench.frame.pytest_run import ItemFailure, TrackRun, record_result
from pytest_pstbench.options import option_value


class ToyItem(pytest.Item):
    def __init__(self, *, item_id, run, **kwargs):
        super().__init__(**kwargs)
        self.item_id, self.run = item_id, run

    def runtest(self):
        record_result(self, self.run, score_item(self.run.track, self.run.answers, self.item_id))

    def repr_failure(self, excinfo):
        return str(excinfo.value) if isinstance(excinfo.value, ItemFailure) else super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, self.name


class ToyRun(TrackRun):
    noun = "item"

    @classmethod
    def from_config(cls, config):
        track = resolve_track(track_value(config))
        protocol = load_protocol(option_value(config, "protocol"))
        results = path_value(config, "results") or Path("results")
        run = cls(config, track, protocol, ToySession(track, protocol, "pytest", results, recorded_command(config)))
        run.answers = path_value(config, "toy-answers")
        return run

    def ready_to_collect(self, config) -> bool:
        return self.answers is not None

    def make_items(self, collector):
        for item_id in self.track.items:
            yield ToyItem.from_parent(collector, name=item_id, item_id=item_id, run=self)

    def result_from_json(self, data: dict):
        return ItemScore.from_json(data)

    def write_results(self, tr) -> None:
        tr.write_line(f"toy accuracy: {self.outcome.summary['accuracy']}")

    def results_markdown(self) -> str:
        return f"toy accuracy: {self.outcome.summary['accuracy']}"
