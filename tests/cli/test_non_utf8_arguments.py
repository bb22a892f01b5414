"""A path with a byte that is not UTF-8 (as the OS gives it: os.fsdecode(b'out\\xff')) is refused before any work,
in one line, by every command and the pytest face; the one writer refuses such text too (issue #44 case 20)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track

from pytest_pstbench.cli import main
from pytest_pstbench.core.errors import UserError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def name(parent: Path, raw: bytes) -> str:
    return os.path.join(str(parent), os.fsdecode(raw))


def one_line(capsys, code) -> str:
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pstbench: error:"), err
    return lines[0]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("utf8")
    manifest = make_track(root / "track", n=2)
    proto = protocol_without_lpips(root / "proto.yaml")
    bad_outs = name(root, b"outs\xff")
    make_outputs(manifest, Path(bad_outs), strength=0.3)
    good = make_outputs(manifest, root / "good", strength=0.3)
    assert (
        main(
            [
                "score",
                "--track",
                str(manifest),
                "--outputs",
                str(good),
                "--name",
                "a",
                "--results",
                str(root / "results"),
                "--protocol",
                str(proto),
                "--no-cache",
            ]
        )
        == 0
    )
    return {
        "root": root,
        "manifest": manifest,
        "proto": proto,
        "bad_outs": bad_outs,
        "good": good,
        "run": root / "results" / "small" / "a",
    }


def test_score_refuses_an_outputs_folder_whose_name_is_not_utf8_before_scoring(world, tmp_path, capsys):
    """Issue #44 case 20: it ended in a traceback writing run.json, after scoring every pair."""
    capsys.readouterr()
    code = main(
        [
            "score",
            "--track",
            str(world["manifest"]),
            "--outputs",
            world["bad_outs"],
            "--name",
            "b",
            "--results",
            str(tmp_path / "results"),
            "--protocol",
            str(world["proto"]),
            "--no-cache",
        ]
    )
    line = one_line(capsys, code)  # no progress line: nothing was scored
    assert "outs\\xff" in line and "not UTF-8" in line and "fix:" in line
    assert not (tmp_path / "results").exists()


def test_vab_score_refuses_an_answers_file_whose_name_is_not_utf8(tmp_path, capsys):
    """Issue #44 case 20: `vab score --answers` ended in a traceback after scoring every task."""
    from pytest_pstbench.selection.tracks import resolve_selection_track

    demo = resolve_selection_track("vab-demo")
    answers = name(tmp_path, b"answers\xe9.jsonl")
    Path(answers).write_text('{"task_id": "x", "trial": 0, "prompt_type": "a", "response": "BEST: 1"}\n')
    capsys.readouterr()
    code = main(
        [
            "vab",
            "score",
            "--track",
            str(demo.manifest),
            "--answers",
            answers,
            "--name",
            "g",
            "--results",
            str(tmp_path / "results"),
        ]
    )
    assert "answers\\xe9.jsonl" in one_line(capsys, code)
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("form", ["table-out", "report-out", "study-in", "study-out", "run-dir"])
def test_other_commands_refuse_such_a_path_before_any_work(world, tmp_path, capsys, form):
    """Issue #44 case 20: every command takes arguments as UTF-8 text, or refuses them before any work."""
    bad = name(tmp_path, b"x\xff")
    if form == "run-dir":
        shutil.copytree(world["run"], bad)
    argv = {
        "table-out": ["table", str(world["run"]), "--out", bad],
        "report-out": ["report", str(world["run"]), "--out", bad, "--track", str(world["manifest"])],
        "study-in": ["vab", "study", bad, "--out", str(tmp_path / "study")],
        "study-out": ["vab", "study", str(EXAMPLES / "study" / "annotations.csv"), "--out", bad],
        "run-dir": ["report", bad, "--out", str(tmp_path / "rep"), "--track", str(world["manifest"])],
    }[form]
    if form == "study-in":
        shutil.copy(EXAMPLES / "study" / "annotations.csv", bad)
    before = sorted(os.listdir(tmp_path))
    capsys.readouterr()
    assert "x\\xff" in one_line(capsys, main(argv))
    assert sorted(os.listdir(tmp_path)) == before


def test_the_writer_refuses_text_that_is_not_utf8(tmp_path):
    """Issue #44 case 20: the one writer names the file instead of a UnicodeEncodeError traceback."""
    from pytest_pstbench.core.files.write import write_atomic, write_new

    with pytest.raises(UserError, match=r"run\.json: not written: its text holds a byte that is not UTF-8 .*out\\xff"):
        write_new(tmp_path / "run.json", '{"outputs_dir": "' + os.fsdecode(b"/tmp/out\xff") + '"}')
    with pytest.raises(UserError, match=r"t\.md: not written"):
        write_atomic(tmp_path / "t.md", os.fsdecode(b"a\xff"))
    assert os.listdir(tmp_path) == []  # nothing written, no temporary file left


def test_the_pytest_face_refuses_such_an_argument_before_any_work(world, pytester):
    """Issue #44 case 20: `--pstbench-outputs` with a name that is not UTF-8 is a usage error, not a traceback."""
    pytester.makepyfile(test_m="def test_x(pstbench_pair):\n    pass\n")
    result = pytester.runpytest_inprocess(
        f"--pstbench-track={world['manifest']}",
        f"--pstbench-outputs={world['bad_outs']}",
        f"--pstbench-protocol={world['proto']}",
        f"--pstbench-results={pytester.path / 'r'}",
    )
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "Traceback" not in text
    assert "outs\\xff" in text and "not UTF-8" in text
    assert not (pytester.path / "r").exists()
