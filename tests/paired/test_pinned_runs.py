"""Run files pinned: the engine may be reorganised, but unless a change says so on purpose, the same
inputs under the same protocol give the same metrics.csv and summary.json as the files under
tests/paired/golden/ (written by the engine before the one-engine redesign): byte for byte on the machine that
wrote them, up to CPU-dependent rounding elsewhere (tests/helpers/pins.py says how close).

The demo track's pins are checked by tests/project/test_installed_wheel.py (`pstbench demo` from the
installed wheel); this file pins a local track made by helpers.tracks.make_track.
"""

from __future__ import annotations

from pathlib import Path

from helpers.pins import assert_matches_pin, mismatch
from helpers.tracks import make_outputs, make_track

from pytest_pstbench.cli import main

GOLDEN = Path(__file__).parent / "golden"


def _check_pinned(run_dir: Path, golden: Path) -> None:
    for name in ("metrics.csv", "summary.json"):
        assert_matches_pin(run_dir / name, golden / name)


def test_local_track_run_files_are_pinned(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    manifest = make_track(tmp_path / "track")
    outputs = make_outputs(manifest, tmp_path / "method")
    assert main(["score", "--track", str(manifest), "--outputs", str(outputs), "--no-cache"]) == 0
    for run in ("identity", "method"):
        _check_pinned(tmp_path / "results" / "small" / run, GOLDEN / "local-small" / run)


def test_the_pin_comparison_tolerates_rounding_only():
    pinned = "pair_id,psnr,lpips\np01,25.519789055172062,0.015807537361979485\n"
    assert mismatch(pinned, pinned) is None
    # CPU-dependent rounding of a float32 network: accepted
    assert mismatch(pinned.replace("0.015807537361979485", "0.015807507559657097"), pinned) is None
    # a real change of a value, a changed column name, a changed count: refused
    assert "number" in mismatch(pinned.replace("25.519789055172062", "25.5299"), pinned)
    assert "text differs" in mismatch(pinned.replace("lpips", "lpips_vgg"), pinned)
    assert "integer" in mismatch('{"n": 5}', '{"n": 4}')
    assert mismatch(pinned + "p02,1.0,2.0\n", pinned) is not None
