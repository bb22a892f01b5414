"""Image files are checked before they are decoded or followed: links out of the outputs folder,
decompression bombs (the size read from the header), animated PNGs, trailing data, sRGB profiles by their
content, a file deleted after the track was read.

Found by issue #11 (a number the kit prints is right or absent): each test reproduces one case of the issue
(its number in the test's docstring) and checks the fixed behaviour."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.pngs import write_png
from helpers.protocols import protocol_without_lpips
from helpers.scoring import score_cli
from helpers.tracks import make_outputs, make_track

from pytest_pstbench.cli import main as cli_main


def test_an_output_link_leaving_the_outputs_folder_is_refused(tmp_path, capsys):
    """Issue #11 case 12."""
    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    outputs = make_outputs(manifest, tmp_path / "out", strength=0.3)
    (outputs / "p02.png").unlink()
    gt = manifest.parent / "p02_reference.png"
    (outputs / "p02.png").symlink_to(gt)  # scores the ground truth: PSNR at its cap
    capsys.readouterr()
    assert score_cli(tmp_path, manifest, outputs, proto) == 2
    assert capsys.readouterr().err.strip() == (
        f"pstbench: error: {outputs / 'p02.png'} (output): is a link to {gt}, outside the outputs folder {outputs.resolve()}; "
        "outputs must be files inside the outputs folder; fix: copy the image into the outputs folder instead of linking to it "
        "(or pass --allow-outside-links, recorded in run.json)"
    )
    assert not (tmp_path / "results" / "small" / "run").exists()
    # allowed on request, and recorded as a deviation
    assert score_cli(tmp_path, manifest, outputs, proto, "--allow-outside-links", name="linked") == 0
    run = json.loads((tmp_path / "results" / "small" / "linked" / "run.json").read_text())
    assert {
        "kind": "outputs_outside_folder",
        "flag": "--allow-outside-links",
        "outputs": [{"pair": "p02", "target": str(gt)}],
    } in run["deviations"]
    # a link inside the outputs folder is fine
    (outputs / "p02.png").unlink()
    (outputs / "copy.bin").write_bytes((outputs / "p01.png").read_bytes())
    (outputs / "p02.png").symlink_to(outputs / "copy.bin")
    assert score_cli(tmp_path, manifest, outputs, proto) == 0


def test_a_pytest_output_link_leaving_the_outputs_folder_is_a_usage_error(pytester):
    """Issue #11 case 12."""
    manifest = make_track(pytester.path / "track")
    outputs = make_outputs(manifest, pytester.path / "out")
    proto = protocol_without_lpips(pytester.path / "proto.yaml")
    (outputs / "p01.png").unlink()
    (outputs / "p01.png").symlink_to(manifest.parent / "p01_reference.png")
    r = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        f"--pstbench-track={manifest}",
        f"--pstbench-protocol={proto}",
        f"--pstbench-outputs={outputs}",
    )
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(
        ["*pstbench: *p01.png (output): is a link to *p01_reference.png, outside the outputs folder *"]
    )


_PEAK = """
import resource, sys
from pathlib import Path
from pytest_pstbench.paired.imageio import load_image
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.core.errors import UserError
p = load_protocol()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    load_image(Path(sys.argv[1]), p, role="output", expected_size=(64, 48), allow_resize=True)
    print("loaded")
except UserError as exc:
    print("refused:", exc)
print("peak_mb", (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
"""


def test_a_large_output_is_refused_before_decoding_even_with_allow_resize(tmp_path, capsys):
    """Issue #11 case 13."""
    import subprocess
    import sys

    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    outputs = make_outputs(manifest, tmp_path / "out")
    bomb = write_png(outputs / "p03.png", 6000, 6000)  # 36 MP: under the absolute cap, 108 MB decoded
    assert bomb.stat().st_size < 1_000_000
    capsys.readouterr()
    assert score_cli(tmp_path, manifest, outputs, proto, "--allow-resize") == 1
    err = capsys.readouterr().err
    assert (
        f"{bomb} (output): size 6000x6000 is more than 4 times the reference's 64x48 per side; refused before "
        "decoding (decompression-bomb guard); fix: write the output at 64x48"
    ) in err
    r = subprocess.run([sys.executable, "-c", _PEAK, str(bomb)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("refused: ")
    peak = float(lines[1].split()[1])
    assert peak < 100, f"peak memory {peak:.0f} MB for a refused file"


def test_a_huge_reference_or_selection_candidate_is_refused_from_the_header(tmp_path, capsys):
    """Issue #11 case 13."""
    from pytest_pstbench.selection.demo import build_vab_demo
    from pytest_pstbench.selection.tracks import load_selection_manifest

    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    outputs = make_outputs(manifest, tmp_path / "out")
    ref = write_png(manifest.parent / "p04_reference.png", 30000, 30000, valid=False)
    capsys.readouterr()
    assert score_cli(tmp_path, manifest, outputs, proto, "--no-cache") == 1
    err = capsys.readouterr().err
    assert (
        f"{ref} (reference of p04): header says 30000x30000 pixels (900 MP), more than the kit decodes (64 MP); "
        "refused before decoding (decompression-bomb guard); fix: use a smaller image"
    ) in err
    assert "Traceback" not in err

    vab = build_vab_demo(tmp_path / "vab-demo", size=(32, 24))
    track = load_selection_manifest(vab)
    cand = track.tasks[0].candidates[1]
    write_png(cand, 30000, 30000, valid=False)
    judges = Path(__file__).resolve().parents[2] / "examples" / "judges" / "no_reference.py"
    capsys.readouterr()
    code = cli_main(
        ["vab", "score", "--track", str(vab), "--judge", f"{judges}:sharpness", "--results", str(tmp_path / "r")]
    )
    err = capsys.readouterr().err
    assert code == 1, err
    assert "Traceback" not in err
    run = json.loads((tmp_path / "r" / "vab-demo" / "sharpness" / "run.json").read_text())
    assert run["failures"][0]["message"] == (
        f"{cand} (candidate): header says 30000x30000 pixels (900 MP), more than the kit decodes (64 MP); refused "
        "before decoding (decompression-bomb guard); fix: use a smaller image"
    )


def _animated(path, frames=2):
    import numpy as np
    from PIL import Image

    first = Image.open(path).convert("RGB")
    others = [Image.fromarray(255 - np.asarray(first)) for _ in range(frames - 1)]
    first.save(path, save_all=True, append_images=others)
    return path


def test_animated_png_outputs_and_candidates_are_refused(tmp_path, capsys):
    """Issue #11 case 11."""
    from pytest_pstbench.selection.demo import build_vab_demo
    from pytest_pstbench.selection.tracks import load_selection_manifest

    manifest = make_track(tmp_path / "track")
    proto = protocol_without_lpips(tmp_path / "proto.yaml")
    outputs = make_outputs(manifest, tmp_path / "out", strength=0.61)
    anim = _animated(outputs / "p01.png")
    capsys.readouterr()
    assert score_cli(tmp_path, manifest, outputs, proto) == 1
    assert (
        f"{anim} (output): is an animated PNG (2 frames); protocol pstbench scores one still image; "
        "fix: save the frame to score as a plain PNG"
    ) in capsys.readouterr().err

    vab = build_vab_demo(tmp_path / "vab-demo", size=(32, 24))
    cand = load_selection_manifest(vab).tasks[0].candidates[0]
    _animated(cand, frames=3)
    judges = Path(__file__).resolve().parents[2] / "examples" / "judges" / "no_reference.py"
    assert (
        cli_main(
            ["vab", "score", "--track", str(vab), "--judge", f"{judges}:sharpness", "--results", str(tmp_path / "r")]
        )
        == 1
    )
    run = json.loads((tmp_path / "r" / "vab-demo" / "sharpness" / "run.json").read_text())
    assert run["failures"][0]["message"] == (
        f"{cand} (candidate): is animated (3 frames), not one still image; fix: replace the file with one frame"
    )


def test_trailing_data_after_iend_is_named(tmp_path):
    """Issue #11 (found beside case 11)."""
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.paired.imageio import load_image

    manifest = make_track(tmp_path / "track")
    out = make_outputs(manifest, tmp_path / "out") / "p01.png"
    out.write_bytes(out.read_bytes() + b"GARBAGE")
    with pytest.raises(UserError) as info:
        load_image(out, load_protocol())
    assert str(info.value) == (
        f"{out} (output): trailing data after the image end (7 bytes after the IEND chunk); "
        "fix: write the file again without anything after the PNG's end"
    )


def _srgb_profile_bytes(*, red_x_delta: float = 0.0, rename: bytes | None = None) -> bytes:
    """lcms's built-in sRGB profile, optionally with its red colorant's X moved (another profile that
    still says "sRGB built-in") or its description renamed (sRGB content under another name)."""
    import struct

    from PIL import ImageCms

    b = bytearray(ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes())
    if red_x_delta:
        n = struct.unpack(">I", b[128:132])[0]
        for i in range(n):
            sig, off, _size = struct.unpack(">4sII", b[132 + 12 * i : 144 + 12 * i])
            if sig == b"rXYZ":
                x = struct.unpack(">i", b[off + 8 : off + 12])[0]
                b[off + 8 : off + 12] = struct.pack(">i", x + int(red_x_delta * 65536))
    if rename is not None:
        old = "sRGB built-in".encode("utf-16-be")
        assert old in b and len(rename) == len(old)
        b = bytearray(bytes(b).replace(old, rename))
    return bytes(b)


def test_srgb_is_decided_by_the_profile_content(tmp_path):
    """Issue #11 case 09."""
    import numpy as np
    from PIL import Image, ImageCms

    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.paired.imageio import load_image

    proto = load_protocol()
    rng = np.random.default_rng(0)
    arr = rng.integers(0, 256, size=(24, 32, 3), dtype=np.uint8)
    fake = _srgb_profile_bytes(red_x_delta=0.08)
    assert "srgb" in ImageCms.getProfileDescription(ImageCms.ImageCmsProfile(__import__("io").BytesIO(fake))).lower()
    p = tmp_path / "fake.png"
    Image.fromarray(arr).save(p, icc_profile=fake)
    loaded = load_image(p, proto)
    assert loaded.notes["icc_converted"]["from"] == "sRGB built-in"  # not sRGB by content: converted, recorded
    assert not np.array_equal(loaded.array, arr)

    renamed = _srgb_profile_bytes(rename="Xyzw built-in".encode("utf-16-be"))
    p = tmp_path / "renamed.png"
    Image.fromarray(arr).save(p, icc_profile=renamed)
    loaded = load_image(p, proto)
    assert "icc_converted" not in loaded.notes  # sRGB by content, whatever its name
    assert np.array_equal(loaded.array, arr)


def test_a_reference_deleted_after_the_track_was_read_fails_the_pair_in_one_line(tmp_path, capsys):
    """Issue #11 case 16."""
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.paired.session import RunSession, RunSettings
    from pytest_pstbench.paired.tracks import load_manifest

    manifest = make_track(tmp_path / "track")
    outputs = make_outputs(manifest, tmp_path / "out", strength=0.44)
    track = load_manifest(manifest)
    session = RunSession(
        track,
        load_protocol(protocol_without_lpips(tmp_path / "proto.yaml")),
        RunSettings(
            name="r",
            results_dir=tmp_path / "results",
        ),
    )
    ref = track.pair("p02").reference
    ref.unlink()
    result = session.score_pair(track.pair("p02"), outputs / "p02.png")
    assert result.error == (
        f"{ref} (reference of p02): cannot be read (No such file or directory); fix: restore the "
        "track's files (for a remote track: pstbench data verify / fetch)"
    )


def test_a_dataset_jpeg_size_is_checked_before_decoding(tmp_path, monkeypatch):
    """Issue #11 case 13."""
    import numpy as np
    import yaml

    from pytest_pstbench.core.errors import UserError

    """A JPEG dataset image is held to the same header-size guard as a PNG: Pillow's decoder is never run."""
    from PIL import Image as PILImage

    from pytest_pstbench.core.protocol import load_protocol as _load
    from pytest_pstbench.paired.imageio import load_dataset_image

    path = tmp_path / "big.jpg"
    PILImage.fromarray(np.zeros((40, 50, 3), np.uint8)).save(path, quality=90)
    data = yaml.safe_load(_load().path.read_text(encoding="utf-8"))
    data["io"]["max_pixels"] = 1000  # 50x40 = 2000 pixels: over it
    proto_path = tmp_path / "small_max.yaml"
    proto_path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    decoded = []
    monkeypatch.setattr(PILImage.Image, "load", lambda self, *a, **k: decoded.append(1))
    with pytest.raises(
        UserError, match=r"big.jpg \(reference of p01\): header says 50x40 pixels .* refused before decoding"
    ):
        load_dataset_image(path, _load(proto_path), role="reference of p01")
    assert not decoded
