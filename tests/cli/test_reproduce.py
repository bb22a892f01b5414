"""`pstbench reproduce RUN --outputs DIR [--report FILE]` (issue #52): a paired run of a local few-pair track scored
again says `reproduced` (its metrics.csv and summary.json byte-identical: the report's digests are checked here with
hashlib); one pair's output changed names that pair and only it; a selection run scored again from its own answers
file is reproduced and, with one answer changed, names the task; bad input (not a run, missing outputs, a protocol
file whose sha256 is not the run's) is one line, exit 2; a kind without a reproduce hook says so
(tests/contract/test_third_kind.py)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers.selection_runs import GOOD, pattern, write_answers
from helpers.tracks import make_outputs, make_track
from PIL import Image

from pytest_pstbench.cli import main

REPO = Path(__file__).resolve().parents[2]


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def paired(tmp_path_factory):
    """A run of a 3-pair local track scored once (the pstbench protocol, LPIPS included), and its outputs."""
    root = tmp_path_factory.mktemp("reproduce")
    manifest = make_track(root / "track", n=3)
    outputs = make_outputs(manifest, root / "method")
    assert main(["score", "--track", str(manifest), "--outputs", str(outputs), "--results", str(root / "results")]) == 0
    return root, root / "results" / "small" / "method", outputs


def test_a_paired_run_scored_again_is_reproduced_and_its_report_names_its_files(paired, capsys):
    root, run, outputs = paired
    report = root / "reports" / "method.json"
    (root / "reports").mkdir(exist_ok=True)
    code, out, err = _cli(capsys, "reproduce", run, "--outputs", outputs, "--report", report)
    assert code == 0, err
    assert out.startswith(f"reproduced: {run} ") and "metrics.csv and summary.json byte-identical" in out
    data = json.loads(report.read_text())
    assert data["verdict"] == "reproduced" and data["differences"] == []
    assert data["run"]["track"] == "small" and data["run"]["name"] == "method" and data["run"]["kind"] == "paired"
    assert data["run"]["sha256"] == {
        "metrics.csv": _sha(run / "metrics.csv"),
        "summary.json": _sha(run / "summary.json"),
    }
    recorded = json.loads((run / "run.json").read_text())
    assert data["run"]["protocol"]["sha256"] == recorded["protocol"]["sha256"]
    # scored under the run's recorded thread count and device
    assert data["environment"]["now"]["torch_threads"] == recorded["environment"]["torch_threads"]
    assert data["environment"]["then"] == recorded["environment"]


def test_one_pair_changed_is_named_and_only_it(paired, capsys, tmp_path):
    root, run, outputs = paired
    changed = tmp_path / "changed"
    shutil.copytree(outputs, changed)
    img = np.asarray(Image.open(changed / "p02.png")).copy()
    img[:8] = 255 - img[:8]
    Image.fromarray(img).save(changed / "p02.png")
    report = tmp_path / "r.json"
    code, out, err = _cli(capsys, "reproduce", run, "--outputs", changed, "--report", report)
    assert code == 1, err
    lines = out.splitlines()
    assert lines[0].startswith("not reproduced:") and "1 of 3 pairs differ, and summary.json" in lines[0]
    listed = [line.split(":")[0].strip() for line in lines[1:] if line.startswith("  ")]
    assert listed == ["p02", "summary.json"]
    assert "psnr" in lines[1] and "metrics.psnr.mean" in lines[2]
    assert lines[-2].startswith("environment: the same as recorded") and lines[-1] == f"report: {report}"
    data = json.loads(report.read_text())
    assert data["verdict"] == "not reproduced" and data["differences"][0]["item"] == "p02"


def test_bad_input_is_one_line(paired, capsys, tmp_path):
    root, run, outputs = paired
    (tmp_path / "empty").mkdir()
    code, out, err = _cli(capsys, "reproduce", tmp_path / "empty", "--outputs", outputs)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "run.json" in err and "Traceback" not in err
    code, out, err = _cli(capsys, "reproduce", tmp_path / "nowhere", "--outputs", outputs)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "RUN" in err
    code, out, err = _cli(capsys, "reproduce", run, "--outputs", tmp_path / "missing")
    assert code == 2 and len(err.strip().splitlines()) == 1 and f"--outputs {tmp_path / 'missing'}" in err
    before = _sha(run / "summary.json")
    code, out, err = _cli(capsys, "reproduce", run, "--outputs", outputs, "--report", run / "summary.json")
    assert code == 2 and "--report" in err and _sha(run / "summary.json") == before


def test_a_protocol_file_with_another_sha256_is_refused_naming_both(paired, capsys, tmp_path):
    root, run, outputs = paired
    moved = tmp_path / "run"
    shutil.copytree(run, moved)
    record = json.loads((moved / "run.json").read_text())
    recorded = record["protocol"]["sha256"]
    other = "0" * 64
    record["protocol"]["sha256"] = other
    record["protocol"]["path"] = str(tmp_path / "gone.yaml")
    (moved / "run.json").write_text(json.dumps(record))
    installed = _sha(REPO / "protocols" / "pstbench.yaml")
    assert installed == recorded
    code, out, err = _cli(capsys, "reproduce", moved, "--outputs", outputs)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert other in err and installed in err and "fix: pass --protocol PATH" in err


@pytest.fixture(scope="module")
def selection_run(tmp_path_factory):
    from pytest_pstbench.selection.commands.vab_common import load_selection

    root = tmp_path_factory.mktemp("reproduce-sel")
    protocol, params, track = load_selection("vab-demo", None)
    answers = write_answers(root / "good.jsonl", track, params, pattern(3, GOOD))
    code = main(["vab", "score", "--track", "vab-demo", "--answers", str(answers), "--results", str(root / "results")])
    assert code == 0
    return root / "results" / "vab-demo" / "good", answers


def test_a_selection_run_is_reproduced_from_its_answers_and_names_a_changed_task(selection_run, capsys, tmp_path):
    run, answers = selection_run
    code, out, err = _cli(capsys, "reproduce", run, "--outputs", answers)
    assert code == 0, err
    assert out.startswith("reproduced:") and "per_task.csv byte-identical" in out
    lines = [json.loads(x) for x in answers.read_text().splitlines()]
    first = next(x for x in lines if x["prompt_type"] == "pick_best")
    first["best"] = "B" if first["best"] == "A" else "A"  # a k >= 2 task's label: now the other candidate
    changed = tmp_path / "good.jsonl"
    changed.write_text("".join(json.dumps(x) + "\n" for x in lines))
    code, out, err = _cli(capsys, "reproduce", run, "--outputs", changed)
    assert code == 1, err
    body = out.splitlines()
    assert body[0].startswith("not reproduced:") and "1 of 30 tasks differ" in body[0]
    assert body[1].split(":")[0].strip() == first["task_id"] and f"best_t{first['trial']}" in body[1]


def test_a_thread_count_no_machine_has_is_not_applied(paired, tmp_path):
    """A stranger's run.json that records torch_threads 100000: torch given that many threads crashes the process
    (a segmentation fault in its first matrix product), so reproduce scores with this machine's count and says the
    environment differs. Run in a subprocess: the crash is the failure this pins."""
    import subprocess
    import sys

    _root, run, outputs = paired
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    record = json.loads((copy / "run.json").read_text())
    record["environment"]["torch_threads"] = 100000
    (copy / "run.json").write_text(json.dumps(record, indent=2))
    r = subprocess.run(
        [sys.executable, "-m", "pytest_pstbench.cli", "reproduce", str(copy), "--outputs", str(outputs)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode in (0, 1), r.stdout + r.stderr  # not -11 (SIGSEGV)
    assert "torch_threads" in r.stdout + r.stderr  # the difference is named
