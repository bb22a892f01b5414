"""Issue #45 item 2: an outputs folder holding `demo-03.jpg` (or `demo-03.PNG`) instead of
`demo-03.png` gets an error naming the file that is there and the rule it breaks, not a bare
"missing output; fix: write demo-03.png"."""

from __future__ import annotations

import json

from helpers.protocols import protocol_without_lpips
from helpers.scoring import score_cli
from helpers.tracks import make_outputs, make_track
from PIL import Image


def _failure(tmp_path, capsys, rename):
    manifest = make_track(tmp_path / "track", n=3)
    outputs = make_outputs(manifest, tmp_path / "outputs")
    rename(outputs / "p02.png")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    assert score_cli(tmp_path, manifest, outputs, proto, "--no-cache") == 1
    run = json.loads((tmp_path / "results" / "small" / "run" / "run.json").read_text())
    assert run["complete"] is False
    (failure,) = run["failures"]
    assert failure["pair"] == "p02"
    return failure["message"], capsys.readouterr()


def test_a_jpeg_in_place_of_the_png_is_named_with_the_png_rule(tmp_path, capsys):
    def to_jpeg(png):
        Image.open(png).convert("RGB").save(png.with_suffix(".jpg"), quality=95)
        png.unlink()

    message, _ = _failure(tmp_path, capsys, to_jpeg)
    assert "missing output for pair p02; found p02.jpg: outputs must be PNG files named <pair_id>.png" in message
    assert "fix: save the output as PNG, p02.png" in message
    assert "\n" not in message


def test_an_upper_case_extension_is_named_with_the_exact_name_rule(tmp_path, capsys):
    message, _ = _failure(tmp_path, capsys, lambda png: png.rename(png.with_name("p02.PNG")))
    assert (
        "found p02.PNG: an output's name must be exactly <pair_id>.png (lower-case .png); fix: rename it p02.png"
        in message
    )


def test_a_pair_with_nothing_near_keeps_the_plain_message(tmp_path, capsys):
    message, _ = _failure(tmp_path, capsys, lambda png: png.unlink())
    assert message.endswith("missing output for pair p02; fix: write p02.png into the outputs folder")
