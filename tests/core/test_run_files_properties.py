"""Issue #54 "Find the class, not the case": a property-based test (Hypothesis, the profile of tests/conftest.py) of
the one validating reader of published run files (core/store/reader.py `read_runs`: run.json, summary.json and
metrics.csv of a paired run folder, as a stranger may publish them). A run written by hand in the documented
formats (tests/helpers/paired_runs.py) gets one hostile edit: a JSON value anywhere replaced (nan, inf, huge and
negative integers, unicode with control characters, lists, null), a key removed or given twice, or a metrics.csv
cell, header or row changed. The contract: a one-line UserError naming the run's folder, or runs whose counts are
the rows actually there (never negative) and whose numbers are finite. It found that a run.json with n_scored -1 was
read (and shown on the report page as "-1 of 6 pairs"): paired/compare.py validate_run now refuses it."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import numpy as np
from helpers.paired_runs import scores_from, write_run
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.store.reader import read_runs

HOSTILE_VALUES = st.one_of(
    st.sampled_from([None, -1, 0, -(10**30), 10**30, 1e308, [], {}, "", True, "p00", "\x1f", "\u2028", 0.5]),
    st.text(st.characters(codec="utf-8"), max_size=8),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
)
HOSTILE_JSON_NUMBERS = ("NaN", "Infinity", "-Infinity", "1e400", "9" * 80, "-5")
CSV_CELLS = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "1e400", "", "-1", "p00", "x\x00", "1,2", '"', "\r"]),
    st.text(st.characters(codec="utf-8"), max_size=6),
)


def _paths(obj, prefix=()):
    """Every key path of a JSON object, nested."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield (*prefix, k)
            yield from _paths(v, (*prefix, k))


def _set(obj, path, value):
    for k in path[:-1]:
        obj = obj[k]
    if value is _DELETE:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value


_DELETE = object()


COUNTS = {"summary.json": ("n",), "run.json": ("n_pairs", "n_scored")}  # the counts a run's files state


@st.composite
def edits(draw):
    kind = draw(st.sampled_from(["count", "json", "json", "json-number", "json-twice", "csv-cell", "csv-row"]))
    if kind == "count":  # a count given as a negative, zero, huge or other number (a third of the json edits)
        which = draw(st.sampled_from(sorted(COUNTS)))
        return kind, which, draw(st.sampled_from(COUNTS[which])), draw(st.sampled_from([-1, 0, 10**30, 5, 7])), ""
    which = draw(st.sampled_from(["run.json", "summary.json"]))
    return kind, which, draw(st.integers(0, 10**6)), draw(st.one_of(HOSTILE_VALUES, st.just(_DELETE))), draw(CSV_CELLS)


def _edit(run: Path, kind, which, pick, value, cell) -> None:
    if kind == "count":
        data = json.loads((run / which).read_text())
        data[pick] = value
        (run / which).write_text(json.dumps(data))
        return
    if kind.startswith("json"):
        path = run / which
        data = json.loads(path.read_text())
        keys = list(_paths(data))
        key = keys[pick % len(keys)]
        if kind == "json":
            _set(data, key, value)
            path.write_text(json.dumps(data, ensure_ascii=False))
            return
        marker = "\u0007MARK\u0007"
        _set(data, key, marker)
        text = json.dumps(data)
        token = json.dumps(marker)
        if kind == "json-number":  # a number JSON cannot hold as a float, written as such
            text = text.replace(token, HOSTILE_JSON_NUMBERS[pick % len(HOSTILE_JSON_NUMBERS)])
        else:  # the key given twice: first a hostile value, then the original
            original = json.loads(path.read_text())
            for k in key[:-1]:
                original = original[k]
            good = json.dumps(original[key[-1]])
            text = text.replace(token, f"{json.dumps(str(value))}, {json.dumps(key[-1])}: {good}")
        path.write_text(text)
        return
    path = run / "metrics.csv"
    lines = path.read_text().splitlines()
    row = pick % len(lines)
    cells = lines[row].split(",")
    if kind == "csv-cell":
        cells[(pick // len(lines)) % len(cells)] = cell
        lines[row] = ",".join(cells)
    else:
        lines.insert(row, lines[row]) if pick % 2 else lines.pop(row)
    path.write_text("\n".join(lines) + "\n")


@settings(max_examples=40)  # each example scores the bootstrap of every metric: lowered to keep it near 5 s
@given(edit=edits())
def test_published_run_files_property(edit):
    with tempfile.TemporaryDirectory() as d:
        n = 6
        run = write_run(Path(d), "a", scores_from({"psnr": np.linspace(20, 25, n)}, n))
        _edit(run, *edit)
        try:
            _, runs, _ = read_runs([run])
        except UserError as exc:
            assert "\n" not in str(exc) and str(run) in str(exc), str(exc)
            return
        (got,) = runs
        rows = (run / "metrics.csv").read_text().splitlines()[1:]
    assert len(got.scores) == len([r for r in rows if r.strip()]) >= 0
    assert got.summary["n"] == len(got.scores) >= 0
    assert 0 <= got.run["n_scored"] == got.run["n_pairs"] == len(got.scores)  # a complete run: every count agrees
    for values in got.scores.values():
        assert all(v is None or math.isfinite(v) for v in values.values())
