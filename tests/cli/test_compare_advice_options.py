"""Issue #45 item 5: `compare --fail-on-worse` on runs too small to decide advises with compare's own
options (`--metrics`), never the pytest gate's (`--pstbench-gate-metrics`); the gate keeps its own."""

from __future__ import annotations

from helpers.protocols import protocol_without_lpips
from helpers.scoring import score_cli
from helpers.tracks import make_outputs, make_track

from pytest_pstbench.cli import main as cli_main


def test_fail_on_worse_too_small_names_compare_options(tmp_path, capsys):
    manifest = make_track(tmp_path / "track", n=4)
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    for name, strength in (("base", 0.5), ("cand", 0.4)):
        assert score_cli(tmp_path, manifest, make_outputs(manifest, tmp_path / name, strength), proto, name=name) == 0
    runs = tmp_path / "results" / "small"
    capsys.readouterr()
    assert (
        cli_main(["compare", str(runs / "base"), str(runs / "cand"), "--protocol", str(proto), "--fail-on-worse"]) == 1
    )
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("pstbench compare: FAILED: the baseline comparison cannot detect a worse run: with 4 pairs")
    assert "fix: compare on a track with more items or on fewer metrics (--metrics)" in line
    assert "--pstbench" not in line
