"""The kind registry (core/kinds.py): kinds register through the entry-point group, core dispatches
tracks, protocols and run folders to them by name, an unknown kind is one line, and a third kind is a
package plus one entry point (shown with a toy kind installed into a temporary folder on sys.path)."""

from __future__ import annotations

import json
import textwrap

import pytest

from pytest_pstbench.core import kinds
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import load_protocol


@pytest.fixture
def fresh_registry():
    kinds.registered.cache_clear()
    yield
    kinds.registered.cache_clear()


def _install_entry_point(folder, monkeypatch, dist: str, line: str) -> None:
    """A distribution `dist` in `folder` (put on sys.path) whose one entry point of the kinds group is `line`."""
    info = folder / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[pytest_pstbench.kinds]\n{line}\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    kinds.registered.cache_clear()


def test_the_shipped_kinds_and_the_default():
    assert kinds.names() == ["paired", "selection"]
    assert kinds.default_kind() == "paired"
    assert kinds.spec("selection").n_key == "n_tasks" and kinds.spec("paired").item_file == "metrics.csv"


def test_track_kind_from_builtin_names_and_manifest_lines(tmp_path):
    assert kinds.track_kind("vab-demo") == "selection" and kinds.track_kind("demo") == "paired"
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "track.yaml").write_text("id: s\nkind: 'selection'  # judged\n", encoding="utf-8")
    (tmp_path / "p.yaml").write_text("id: p\npairs: []\n", encoding="utf-8")
    assert kinds.track_kind(str(tmp_path / "s")) == "selection"
    # an ini path relative to the ini file's folder is resolved by the plugin first (tests/plugin/test_ini_track_path.py)
    assert kinds.track_kind(str(tmp_path / "p.yaml")) == "paired"


def test_an_unknown_kind_is_one_line_naming_the_file(tmp_path):
    manifest = tmp_path / "track.yaml"
    manifest.write_text("id: t\nkind: selction\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"track.yaml: unknown kind selction; available: paired, selection; fix: "):
        kinds.track_kind(str(manifest))
    proto = tmp_path / "p.yaml"
    proto.write_text((load_protocol().path).read_text(encoding="utf-8") + "\nkind: pared\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"p.yaml: unknown kind pared; available: paired, selection"):
        load_protocol(str(proto))
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"kind": 7}), encoding="utf-8")
    with pytest.raises(UserError, match=r"run.json: unknown kind 7; available: paired, selection"):
        kinds.run_kind(run)
    with pytest.raises(UserError, match="unknown kind nope; available: paired, selection"):
        kinds.get("nope")


def test_runs_of_two_kinds_are_refused(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "per_task.csv").write_text("task_id\n", encoding="utf-8")
    (tmp_path / "b" / "metrics.csv").write_text("pair_id\n", encoding="utf-8")
    assert kinds.run_kind(tmp_path / "a") == "selection" and kinds.run_kind(tmp_path / "b") == "paired"
    with pytest.raises(
        UserError, match=r"b is a paired run \(metrics.csv\) but .*a is a selection run \(per_task.csv\)"
    ):
        kinds.runs_kind([tmp_path / "a", tmp_path / "b"])


def test_a_third_kind_is_a_package_and_one_entry_point(tmp_path, monkeypatch, fresh_registry):
    pkg = tmp_path / "toykind"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        textwrap.dedent("""
        from pytest_pstbench.core.errors import UserError
        from pytest_pstbench.core.kinds import KindSpec

        def validate(path, data):
            if "toys" not in data:
                raise UserError(f"{path}: a toy protocol needs toys")

        KIND = KindSpec(name="toy", item_file="per_toy.csv", unit="toys", n_key="n_toys", validate_protocol="toykind:validate", runs="toykind:RUNS",
                        pytest_run="toykind:TOY_RUN", builtin_tracks=("toybox",))
        RUNS = TOY_RUN = object()
    """),
        encoding="utf-8",
    )
    _install_entry_point(tmp_path, monkeypatch, "toykind", "toy = toykind:KIND")

    assert kinds.names() == ["paired", "selection", "toy"]
    assert kinds.track_kind("toybox") == "toy"
    (tmp_path / "track.yaml").write_text("kind: toy\n", encoding="utf-8")
    assert kinds.track_kind(str(tmp_path / "track.yaml")) == "toy"
    proto = tmp_path / "toy.yaml"
    proto.write_text("id: toy\nkind: toy\n", encoding="utf-8")
    with pytest.raises(UserError, match="a toy protocol needs toys"):
        load_protocol(str(proto))
    proto.write_text("id: toy\nkind: toy\ntoys: 3\n", encoding="utf-8")
    assert load_protocol(str(proto)).data["toys"] == 3
    assert kinds.get("toy") is kinds.pytest_run_class("toy")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "per_toy.csv").write_text("toy_id\n", encoding="utf-8")
    assert kinds.run_kind(tmp_path / "run") == "toy"


def test_a_spec_that_is_not_a_kindspec_is_refused(tmp_path, monkeypatch, fresh_registry):
    (tmp_path / "badkind.py").write_text("KIND = 'paired'\n", encoding="utf-8")
    _install_entry_point(tmp_path, monkeypatch, "badkind", "bad = badkind:KIND")
    with pytest.raises(
        UserError, match=r"entry point bad = badkind:KIND \(group pytest_pstbench.kinds\) is not the KindSpec"
    ):
        kinds.names()


def test_the_plugin_says_unknown_kind_in_one_line(pytester):
    pytester.makefile(".yaml", track="id: t\nkind: selction\n")
    r = pytester.runpytest("--pstbench-track", "track.yaml")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*pstbench: *track.yaml: unknown kind selction; available: paired, selection; fix: *"])
    assert "Traceback" not in r.stdout.str() + r.stderr.str()
