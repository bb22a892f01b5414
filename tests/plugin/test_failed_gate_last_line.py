"""Issue #45 item 7: a gated session that fails says so in pytest's last line (it ended `10 passed in
5.68s` with exit 1, the reasons only above), and the reasons name metrics as the tables do, the id
beside the label (`PSNR↑ (psnr)`, not `psnr`)."""

from __future__ import annotations

import re

import pytest
from helpers.tracks import make_outputs


def _last_line(r) -> str:
    return [line for line in r.stdout.lines if line.strip()][-1]


def test_a_failed_gate_is_counted_in_the_last_line(pytester, gated_track):
    s = gated_track
    bad = make_outputs(s.manifest, pytester.path / "bad", strength=0.3)
    r = pytester.runpytest_subprocess(*s.base, f"--pstbench-outputs={bad}", f"--pstbench-baseline={s.baseline}")
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    assert re.fullmatch(r"=+ 8 passed, 1 pstbench gate failed in [\d.]+s( \([\d:]+\))? =+", _last_line(r)), _last_line(
        r
    )
    r.stdout.fnmatch_lines(["*pstbench gate FAILED: PSNR↑ (psnr) is significantly worse than baseline run baseline*"])


def test_a_broken_bound_is_named_by_label_and_id(pytester, gated_track):
    s = gated_track
    r = pytester.runpytest_subprocess(
        *s.base, f"--pstbench-outputs={s.good}", "--pstbench-min=psnr=99", "--pstbench-max=delta_e00=0.001"
    )
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    assert "1 pstbench gate failed" in _last_line(r)
    r.stdout.fnmatch_lines(
        [
            "*pstbench gate FAILED: PSNR↑ (psnr) mean * is below the minimum 99 (--pstbench-min)*",
            "*pstbench gate FAILED: ΔE00↓ (delta_e00) mean * is above the maximum 0.001 (--pstbench-max)*",
        ]
    )


def test_a_passing_gate_leaves_the_last_line_alone(pytester, gated_track):
    s = gated_track
    r = pytester.runpytest_subprocess(*s.base, f"--pstbench-outputs={s.good}", f"--pstbench-baseline={s.baseline}")
    assert r.ret == pytest.ExitCode.OK
    assert re.fullmatch(r"=+ 8 passed in [\d.]+s( \([\d:]+\))? =+", _last_line(r)), _last_line(r)
