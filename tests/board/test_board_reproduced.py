"""`pstbench board --reproduced DIR` (issue #52): a row is marked reproduced only by a reproduce report whose run
digests are that row's run files; a report written before the run changed marks nothing and the row says "report is
for another version"; a row no report is about has no mark; a folder holding something that is not a report is one
line, before anything is written."""

from __future__ import annotations

import json

from helpers.selection_runs import BAD, GOOD, pattern, score
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_pstbench.board.reproduced import read_reports
from pytest_pstbench.cli import main
from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.core.reproduce import REPORT_GENERATOR


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_board_marks_exactly_the_reproduced_row_and_not_a_stale_report(tmp_path, capsys):
    from pytest_pstbench.selection.protocol import SelectionParams
    from pytest_pstbench.selection.tracks import resolve_selection_track

    demo = resolve_selection_track("vab-demo")
    params = SelectionParams.of(load_protocol("vab"))
    runs = {
        name: score(tmp_path, name, demo, params, pattern(seed, rates))
        for name, seed, rates in (("good", 1, GOOD), ("bad", 2, BAD), ("other", 3, GOOD))
    }
    capsys.readouterr()
    reports = tmp_path / "reports"
    reports.mkdir()
    for name in ("good", "bad"):
        code, out, err = _cli(
            capsys,
            "reproduce",
            runs[name],
            "--outputs",
            tmp_path / f"{name}.jsonl",
            "--report",
            reports / f"{name}.json",
        )
        assert code == 0, err
    score(tmp_path, "bad", demo, params, pattern(7, BAD))  # the run changed after its report was written
    capsys.readouterr()

    code, out, err = _cli(capsys, "board", *runs.values(), "--out", tmp_path / "site", "--reproduced", reports)
    assert code == 0, err
    (track,) = json.loads((tmp_path / "site" / "board.json").read_text())["tracks"]
    marks = {row["name"]: row["provenance"].get("reproduced") for row in track["rows"] if row["name"] in runs}
    assert marks == {"good": "reproduced", "bad": "report is for another version", "other": None}
    page = (tmp_path / "site" / track["folder"] / "index.html").read_text()
    assert "<code>report is for another version</code>" in page and "<code>reproduced</code>" in page

    # without --reproduced the rows carry no mark at all
    code, out, err = _cli(capsys, "board", *runs.values(), "--out", tmp_path / "plain")
    (track,) = json.loads((tmp_path / "plain" / "board.json").read_text())["tracks"]
    assert code == 0 and all("reproduced" not in row["provenance"] for row in track["rows"])

    # a file that is not a reproduce report: one line naming it, nothing written
    (reports / "note.json").write_text('{"hello": 1}')
    code, out, err = _cli(capsys, "board", *runs.values(), "--out", tmp_path / "none", "--reproduced", reports)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "note.json" in err
    assert not (tmp_path / "none").exists()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)
REPORTISH = st.fixed_dictionaries(
    {},
    optional={
        "generator": st.sampled_from([REPORT_GENERATOR, "other"]) | JSON,
        "verdict": st.sampled_from(["reproduced", "not reproduced"]) | JSON,
        "run": st.fixed_dictionaries({}, optional={"sha256": st.dictionaries(st.text(max_size=12), JSON), "kind": JSON})
        | JSON,
    },
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=JSON | REPORTISH)
def test_any_json_in_the_reports_folder_is_read_or_one_line(tmp_path, data):
    """A reports folder is text someone else may have written: any JSON value in it is a report the marks can read
    (a dict with the generator, run.sha256 and a verdict) or one UserError naming the file, never another error."""
    folder = tmp_path / "reports"
    folder.mkdir(exist_ok=True)
    (folder / "r.json").write_text(json.dumps(data))
    try:
        (report,) = read_reports(folder)
    except UserError as exc:
        assert str(folder / "r.json") in str(exc) and "\n" not in str(exc)
    else:
        assert report["generator"] == REPORT_GENERATOR and isinstance(report["run"]["sha256"], dict)
