"""Issue #32 item 4: every reader of a run folder (compare, table, report, the API, the gate) reads it
through one validating loader (core.store.reader.read_runs: the kind's loader and its validate under the
protocol found by sha256). A catalogue of damaged run folders, each tried with `pstbench table`,
`pstbench report`, `pstbench compare` and `pytest_pstbench.load_run`: each is refused with one line
naming the file (exit 2, no traceback), never printed as a number. Found by the third audit (#32)."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from helpers.protocols import protocol_without_lpips
from helpers.selection_runs import (
    selection,  # noqa: F401  (the selection runs good, bad, good2: a module fixture)
    set_key,
)
from helpers.tracks import make_outputs, make_track

from pytest_pstbench.cli import main as cli_main
from pytest_pstbench.core.errors import UserError


def _cli(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """results/small/{identity,a,b}: a small track scored with two methods (no LPIPS: fast)."""
    root = tmp_path_factory.mktemp("runs")
    track = make_track(root / "track", n=6)
    proto = protocol_without_lpips(root / "proto.yaml")
    for name, strength in (("a", 0.5), ("b", 0.8)):
        outs = make_outputs(track, root / name, strength=strength)
        code, _, err = _cli(
            "score", "--track", track, "--outputs", outs, "--protocol", proto, "--results", root / "results"
        )
        assert code == 0, err
    return root


def _edit_json(path: Path, edit) -> None:
    """`edit` changes the parsed file in place (returns None) or returns what to write instead."""
    data = json.loads(path.read_text())
    out = edit(data)
    path.write_text(json.dumps(data if out is None else out))


def _edit_csv(path: Path, column: str, value: str) -> None:
    rows = list(csv.reader(path.open()))
    rows[1][rows[0].index(column)] = value
    with path.open("w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)


# (id, file, edit, what the one-line error must name)
DAMAGES = [
    ("summary-psnr-edited", "summary.json", set_key("metrics.psnr.mean", 30.0), "summary.json"),
    ("summary-pm-edited", "summary.json", set_key("metrics.ssim.pm", 0.5), "summary.json"),
    ("summary-list", "summary.json", lambda d: [d], "summary.json"),
    ("summary-string", "summary.json", lambda d: "x", "summary.json"),
    ("summary-metrics-list", "summary.json", set_key("metrics", []), "summary.json"),
    ("summary-entry-string", "summary.json", set_key("metrics.psnr", "30"), "summary.json"),
    ("summary-mean-string", "summary.json", set_key("metrics.psnr.mean", "30.0"), "summary.json"),
    ("summary-pm-string", "summary.json", set_key("metrics.psnr.pm", "0.1"), "summary.json"),
    ("summary-ci-null", "summary.json", set_key("metrics.ssim.ci_low", None), "summary.json"),
    ("summary-n-string", "summary.json", set_key("n", "6"), "summary.json"),
    ("summary-hib-string", "summary.json", set_key("metrics.psnr.higher_is_better", "yes"), "summary.json"),
    (
        "summary-metric-missing",
        "summary.json",
        lambda d: {**d, "metrics": {k: v for k, v in d["metrics"].items() if k != "ssim"}},
        "summary.json",
    ),
    ("run-list", "run.json", lambda d: [d], "run.json"),
    ("run-protocol-string", "run.json", set_key("protocol", "pstbench"), "a"),
    ("run-dataset-string", "run.json", set_key("dataset", "small"), "a"),
    ("run-n-pairs-string", "run.json", set_key("n_pairs", "6"), "a"),
    ("run-name-number", "run.json", set_key("name", 5), "a"),
    ("csv-cell-text", "metrics.csv", ("psnr", "abc"), "metrics.csv"),
    ("csv-cell-nan", "metrics.csv", ("ssim", "nan"), "metrics.csv"),
]


@pytest.fixture(params=DAMAGES, ids=[d[0] for d in DAMAGES])
def damaged(request, scored, tmp_path):
    _, file, edit, names = request.param
    results = tmp_path / "results"
    shutil.copytree(scored / "results", results)
    path = results / "small" / "a" / file
    if file == "metrics.csv":
        _edit_csv(path, *edit)
    else:
        _edit_json(path, edit)
    return results / "small", names, scored


def _refused(code, out, err, names):
    assert "Traceback" not in out + err
    assert code == 2, (code, out, err)
    assert err.count("\n") == 1 and err.startswith("pstbench: error: ") and names in err, err
    assert "30.00" not in out


def test_table_refuses_a_damaged_run(damaged):
    runs, names, _ = damaged
    _refused(*_cli("table", runs / "a", runs / "b"), names)


def test_report_refuses_a_damaged_run(damaged, tmp_path):
    runs, names, scored = damaged
    _refused(
        *_cli("report", runs / "a", runs / "b", "--out", tmp_path / "page", "--track", scored / "track" / "track.yaml"),
        names,
    )
    assert not (tmp_path / "page").exists()


def test_compare_refuses_a_damaged_run(damaged):
    runs, names, _ = damaged
    _refused(*_cli("compare", runs / "b", runs / "a"), names)


def test_api_load_run_refuses_a_damaged_run(damaged):
    import pytest_pstbench as pst

    runs, names, _ = damaged
    with pytest.raises(UserError, match=names):
        pst.load_run(runs / "a")


def test_valid_runs_still_read(scored, tmp_path):
    import pytest_pstbench as pst

    runs = scored / "results" / "small"
    code, out, err = _cli("table", runs / "a", runs / "b")
    assert code == 0 and "Identity" in out, err
    run = pst.load_run(runs / "a")
    assert run.complete and len(run.scores) == 6
    code, out, err = _cli("report", runs / "a", runs / "b", "--out", tmp_path / "page")
    assert code == 0, err


# ---- selection runs: the same reader (selection.compare.validate_run through core.store.reader.read_runs) ----
def _overall(d):
    return next(c for c in d["cells"] if c["group"] == "overall")


SELECTION_DAMAGES = [
    ("cells-string", lambda d: {**d, "cells": "x"}),
    ("overall-metrics-list", lambda d: (_overall(d).__setitem__("metrics", []), d)[1]),
    ("mean-string", lambda d: (_overall(d)["metrics"]["tb1"]["pass^3"].__setitem__("mean", "0.9"), d)[1]),
    ("pm-string", lambda d: (_overall(d)["metrics"]["tb1"]["pass^3"].__setitem__("pm", "0.1"), d)[1]),
    ("random-out-of-range", lambda d: (_overall(d)["metrics"]["tb1"]["pass^3"].__setitem__("random", 7), d)[1]),
    ("entry-string", lambda d: (_overall(d)["metrics"]["tb1"].__setitem__("pass^3", "x"), d)[1]),
]


@pytest.mark.parametrize("edit", [e for _, e in SELECTION_DAMAGES], ids=[i for i, _ in SELECTION_DAMAGES])
def test_selection_table_and_compare_refuse_a_damaged_summary(selection, tmp_path, edit):
    import pytest_pstbench as pst

    bad = tmp_path / "bad"
    shutil.copytree(selection["bad"], bad)
    _edit_json(bad / "summary.json", edit)
    _refused(*_cli("table", selection["good"], bad), "summary.json")
    _refused(*_cli("compare", selection["good"], bad), "summary.json")
    with pytest.raises(UserError, match="summary.json"):
        pst.load_run(bad)


def test_table_refuses_a_run_whose_name_reads_as_identity(scored, tmp_path):
    """Item 9: a run named in fullwidth letters reading IDENTITY is not a second Identity row."""
    results = tmp_path / "results"
    shutil.copytree(scored / "results", results)
    fullwidth = "\uff29\uff24\uff25\uff2e\uff34\uff29\uff34\uff39"
    for f in ("run.json", "summary.json"):
        _edit_json(results / "small" / "a" / f, set_key("name", fullwidth))
    code, out, err = _cli("table", results / "small" / "a", results / "small" / "b")
    assert code == 2 and f"run name '{fullwidth}' reads as 'Identity'" in err and "Traceback" not in err
