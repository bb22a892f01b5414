"""The Identity row: its name is reserved, and it is complete or says it is not.

Found by issue #11 (a number the kit prints is right or absent): each test reproduces one case of the issue
(its number in the test's docstring) and checks the fixed behaviour."""

from __future__ import annotations

import json

from helpers.protocols import protocol_without_lpips
from helpers.scoring import score_cli
from helpers.tracks import make_outputs, make_track

from pytest_pstbench.cli import main as cli_main


def test_a_user_run_named_identity_is_refused(tmp_path, capsys):
    """Issue #11 case 03."""
    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    outputs = make_outputs(manifest, tmp_path / "out")
    assert score_cli(tmp_path, manifest, outputs, proto, name="identity") == 2
    assert capsys.readouterr().err.strip() == (
        "pstbench: error: --name identity: reserved for the Identity run (the track's content unchanged, which "
        "`pstbench score` scores beside every method as the table's Identity row); fix: give this run another "
        "--name, or pass --outputs identity to score Identity"
    )
    assert not (tmp_path / "results").exists()
    # the Identity method itself may (and by default does) use the name
    assert (
        cli_main(
            [
                "score",
                "--track",
                str(manifest),
                "--outputs",
                "identity",
                "--name",
                "identity",
                "--results",
                str(tmp_path / "results"),
                "--protocol",
                str(proto),
            ]
        )
        == 0
    )
    run = json.loads((tmp_path / "results" / "small" / "identity" / "run.json").read_text())
    assert run["method"]["method"] == "identity" and run["complete"] is True


def test_an_incomplete_identity_row_is_marked_and_score_exits_1(tmp_path, capsys):
    """Issue #11 case 10."""
    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    outputs = make_outputs(manifest, tmp_path / "out", strength=0.52)
    content = manifest.parent / "p03_content.png"
    content.write_bytes(b"not a png at all")  # the content is only read by Identity
    capsys.readouterr()
    assert score_cli(tmp_path, manifest, outputs, proto) == 1
    out, err = capsys.readouterr()
    assert "Identity (incomplete: 3 of 4 pairs)" in out
    assert (
        "pstbench: error: the Identity row is incomplete: 3 of 4 pairs scored (p03: "
        f"{content} (output): not an image Pillow can read"
    ) in err  # content is read as a dataset image
    assert json.loads((tmp_path / "results" / "small" / "run" / "run.json").read_text())["complete"] is True
