"""An output path that is one of the command's inputs (or a file of a run it reads) is refused before any work,
and the input is unchanged (issue #44 case 21)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.damaged_world import _votes
from helpers.protocols import protocol_without_lpips
from helpers.tracks import make_outputs, make_track

from pytest_pstbench.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("outin")
    manifest = make_track(root / "track", n=6)
    proto = protocol_without_lpips(root / "proto.yaml")
    for name, strength in (("a", 0.8), ("b", 0.4)):
        out = make_outputs(manifest, root / "outs" / name, strength=strength)
        assert (
            main(
                [
                    "score",
                    "--track",
                    str(manifest),
                    "--outputs",
                    str(out),
                    "--name",
                    name,
                    "--results",
                    str(root / "results"),
                    "--protocol",
                    str(proto),
                    "--no-cache",
                ]
            )
            == 0
        )
    return {"root": root, "manifest": manifest, "proto": proto, "runs": root / "results" / "small"}


def refused(capsys, code, option: str, what: str) -> None:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("pstbench: error:")]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert f"error: {option} " in lines[0] and what in lines[0] and "which this command reads" in lines[0], lines[0]


def test_study_out_over_the_annotations_is_refused(tmp_path, capsys):
    """Issue #44 case 21: `vab study study.csv --out .` would replace the annotations by the study's table."""
    ann = tmp_path / "study.csv"
    shutil.copy(EXAMPLES / "study" / "annotations.csv", ann)
    before = ann.read_bytes()
    refused(capsys, main(["vab", "study", str(ann), "--out", str(tmp_path)]), "--out", f"is the annotations file {ann}")
    assert ann.read_bytes() == before and not (tmp_path / "study.json").exists()


def test_consensus_out_over_the_votes_is_refused(tmp_path, capsys):
    """Issue #44 case 21: `vab consensus votes.csv --out votes.csv` (here through a link) replaced the votes."""
    votes = tmp_path / "votes.csv"
    votes.write_text(_votes())
    (tmp_path / "same.csv").symlink_to(votes)
    refused(
        capsys, main(["vab", "consensus", str(votes), "--out", str(tmp_path / "same.csv")]), "--out", "the votes file"
    )
    assert votes.read_text() == _votes()


def test_table_out_over_a_run_file_is_refused(world, capsys):
    """Issue #44 case 21: `table RUN --out RUN/metrics.csv` replaced the run's per-pair file."""
    run = world["runs"] / "a"
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    refused(
        capsys,
        main(["table", str(run), str(world["runs"] / "b"), "--out", str(run / "metrics.csv")]),
        "--out",
        f"lies inside run folder {run}",
    )
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before


def test_report_out_holding_the_sensitivity_analysis_is_refused(world, tmp_path, capsys):
    """Issue #44 case 21: the report's folder is replaced whole; one that holds an input is refused."""
    out = tmp_path / "rep"
    assert main(["report", str(world["runs"] / "a"), "--out", str(out), "--track", str(world["manifest"])]) == 0
    (out / "sens").mkdir()
    (out / "sens" / "analysis.json").write_text("{}")
    capsys.readouterr()
    refused(
        capsys,
        main(
            [
                "report",
                str(world["runs"] / "a"),
                "--out",
                str(out),
                "--sensitivity",
                str(out / "sens"),
                "--track",
                str(world["manifest"]),
            ]
        ),
        "--out",
        "holds the sensitivity analysis",
    )
    assert (out / "sens" / "analysis.json").read_text() == "{}"


def test_the_gate_summary_over_the_baseline_summary_is_refused(world, pytester):
    """Issue #44 case 21: `--pstbench-summary BASELINE/summary.json` replaced the baseline's summary by Markdown."""
    base = world["runs"] / "b"
    before = (base / "summary.json").read_bytes()
    pytester.makepyfile(test_m="def test_x(pstbench_pair):\n    pass\n")
    result = pytester.runpytest_inprocess(
        f"--pstbench-track={world['manifest']}",
        f"--pstbench-outputs={world['root'] / 'outs' / 'a'}",
        f"--pstbench-protocol={world['proto']}",
        f"--pstbench-results={pytester.path / 'r'}",
        "--pstbench-name=a",
        f"--pstbench-baseline={base}",
        f"--pstbench-summary={base / 'summary.json'}",
        "--pstbench-gate-metrics=psnr",
    )
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR and "Traceback" not in text
    assert f"--pstbench-summary {base / 'summary.json'}: lies inside baseline run {base}" in text
    assert (base / "summary.json").read_bytes() == before and not (pytester.path / "r").exists()
