"""Dataset images in JPEG (and other formats Pillow decodes deterministically), against the local Hub stand-in.

The protocol's PNG rule is for method outputs; content, style and reference images may be PNG, JPEG,
WebP or TIFF, read under the same mode, orientation and colour rules, with the decoder versions in
run.json. Scores are checked against an independent computation: the JPEG decoded with Pillow and the
arrays scored with scikit-image (PSNR, SSIM with the protocol's settings) and numpy.
"""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import numpy as np
import PIL
import pytest
import skimage.metrics
import yaml
from helpers.hub_server import FakeHub, make_acetone_files, point_at
from PIL import Image, features

from pytest_pstbench.cli import main
from pytest_pstbench.core.errors import UserError

ACETONE = "Vivre/AceTone-Bench-Transfer"
SHA = hashlib.sha1(b"acetone jpeg").hexdigest()
N = 4


@pytest.fixture(scope="module")
def files():
    return make_acetone_files(n=N, size=(40, 56), fmt="jpg")


@pytest.fixture(scope="module")
def hub(files):
    hub = FakeHub().start()
    hub.add_commit(ACETONE, SHA, files, refs=["main"])
    yield hub
    hub.stop()


@pytest.fixture
def env(hub, tmp_path, monkeypatch):
    from pytest_pstbench.core.protocol import protocols_dir

    point_at(hub, tmp_path, monkeypatch)
    manifest = yaml.safe_load((protocols_dir() / "tracks" / "acetone.yaml").read_text())
    manifest["pairs"]["sorted"]["count"] = N
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "acetone.yaml").write_text(yaml.safe_dump(manifest))
    monkeypatch.setenv("PSTBENCH_REMOTE_MANIFESTS", str(tmp_path / "manifests"))
    return tmp_path


def _rgb(path: Path) -> np.ndarray:
    """Independent decode: Pillow, nothing else (the fake JPEGs carry no EXIF orientation or ICC profile)."""
    with Image.open(path) as im:
        assert im.format == "JPEG" and im.mode == "RGB"
        return np.asarray(im, dtype=np.uint8)


def test_jpeg_only_track_scored_end_to_end(env, hub, files, tmp_path, capsys):
    from helpers.protocols import protocol_without_lpips

    assert main(["data", "fetch", "acetone", "--revision", "main"]) == 0
    from pytest_pstbench.paired.tracks import resolve_track

    track = resolve_track("acetone-transfer")
    assert [p.content.suffix for p in track.pairs] == [".jpg"] * N
    root = env / "data" / "acetone"

    # a method's outputs (PNG): halfway between content and reference, from the Pillow-decoded JPEGs
    out = tmp_path / "outputs"
    out.mkdir()
    expected_out = {}
    for p in track.pairs:
        c, g = _rgb(p.content).astype(np.float64), _rgb(p.reference).astype(np.float64)
        arr = np.clip(np.rint((c + g) / 2), 0, 255).astype(np.uint8)
        Image.fromarray(arr).save(out / f"{p.id}.png")
        expected_out[p.id] = arr
    proto = protocol_without_lpips(tmp_path / "nolpips.yaml")
    results = tmp_path / "results"
    assert (
        main(
            [
                "score",
                "--track",
                "acetone-transfer",
                "--outputs",
                str(out),
                "--name",
                "half",
                "--results",
                str(results),
                "--protocol",
                str(proto),
                "--no-cache",
            ]
        )
        == 0
    )

    for name, outputs in (("half", expected_out), ("identity", {p.id: _rgb(p.content) for p in track.pairs})):
        run_dir = results / "acetone-transfer" / name
        run = json.loads((run_dir / "run.json").read_text())
        assert run["complete"] is True and run["n_scored"] == N
        assert run["dataset"]["revision"] == SHA
        dec = run["dataset"]["image_decoders"]
        assert dec["formats"] == ["JPEG"] and dec["pillow"] == PIL.__version__
        assert dec["libjpeg"] == features.version("jpg") and dec["libjpeg_turbo"] == features.version("libjpeg_turbo")
        rows = {r["pair_id"]: r for r in csv.DictReader((run_dir / "metrics.csv").open())}
        assert list(rows) == track.pair_ids
        for p in track.pairs:
            ref, _sty, o = _rgb(p.reference), _rgb(p.style), outputs[p.id]
            psnr = skimage.metrics.peak_signal_noise_ratio(ref, o, data_range=255)
            ssim = skimage.metrics.structural_similarity(
                o, ref, channel_axis=2, gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=255
            )
            assert float(rows[p.id]["psnr"]) == pytest.approx(psnr, abs=1e-9)
            assert float(rows[p.id]["ssim"]) == pytest.approx(ssim, abs=1e-9)
        if name == "half":  # the halfway output beats the content on PSNR on every pair
            ident = {
                r["pair_id"]: r
                for r in csv.DictReader((results / "acetone-transfer" / "identity" / "metrics.csv").open())
            }
            assert all(float(rows[k]["psnr"]) > float(ident[k]["psnr"]) for k in rows)
    # the raw bytes scored are the Hub's (nothing re-encoded)
    assert (root / "raw_image" / "00001.jpg").read_bytes() == files["raw_image/00001.jpg"]


def test_outputs_stay_png_only(env, hub, tmp_path, capsys):
    from helpers.protocols import protocol_without_lpips

    assert main(["data", "fetch", "acetone", "--revision", "main"]) == 0
    out = tmp_path / "outputs"
    out.mkdir()
    root = env / "data" / "acetone"
    for i in range(N):  # a JPEG written as <pair>.png: refused for an output, even though the dataset is JPEG
        (out / f"acetone-{i:04d}.png").write_bytes((root / "gt_image" / f"{i:05d}.jpg").read_bytes())
    proto = protocol_without_lpips(tmp_path / "nolpips.yaml")
    assert (
        main(
            [
                "score",
                "--track",
                "acetone-transfer",
                "--outputs",
                str(out),
                "--results",
                str(tmp_path / "r"),
                "--protocol",
                str(proto),
                "--no-cache",
            ]
        )
        == 1
    )
    run = json.loads((tmp_path / "r" / "acetone-transfer" / tmp_path.name / "run.json").read_text())
    assert run["complete"] is False and len(run["failures"]) == N
    assert "is a JPEG file, not a PNG" in run["failures"][0]["message"]


# ---- the rule itself, on local files -----------------------------------------------------------
def _save(path: Path, arr: np.ndarray, fmt: str, **kw) -> Path:
    Image.fromarray(arr).save(path, format=fmt, **kw)
    return path


def test_dataset_image_formats_and_refusals(tmp_path):
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.paired.imageio import load_dataset_image

    proto = load_protocol()
    rng = np.random.default_rng(0)
    arr = rng.integers(0, 256, size=(12, 16, 3), dtype=np.uint8)
    for fmt, kw in (("PNG", {}), ("TIFF", {}), ("WEBP", {"lossless": True})):
        got = load_dataset_image(
            _save(tmp_path / f"a.{fmt.lower()}", arr, fmt, **kw), proto, role="content of p1"
        ).array
        assert np.array_equal(got, arr), fmt  # lossless formats decode to the same pixels
    jpg = _save(tmp_path / "a.jpg", arr, "JPEG", quality=95)
    assert np.array_equal(load_dataset_image(jpg, proto, role="style of p1").array, np.asarray(Image.open(jpg)))

    # EXIF orientation is applied as for outputs
    exif = Image.Exif()
    exif[0x0112] = 6
    rot = tmp_path / "rot.jpg"
    Image.fromarray(arr).save(rot, format="JPEG", quality=95, exif=exif)
    loaded = load_dataset_image(rot, proto, role="content of p1")
    assert loaded.notes["exif_orientation"] == 6 and loaded.array.shape == (16, 12, 3)

    # refused, one line each: grayscale JPEG (mode rule), truncated JPEG, GIF, 16-bit TIFF
    gray = _save(tmp_path / "g.jpg", arr[..., 0], "JPEG")
    with pytest.raises(
        UserError, match=r"g.jpg \(content of p1\): is JPEG in Pillow mode L .*requires 8-bit RGB .*fix:"
    ):
        load_dataset_image(gray, proto, role="content of p1")
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(jpg.read_bytes()[:200])
    with pytest.raises(UserError, match=r"cut.jpg \(reference of p1\): truncated or corrupt JPEG .*fix:"):
        load_dataset_image(cut, proto, role="reference of p1")
    gif = _save(tmp_path / "a.gif", arr, "GIF")
    with pytest.raises(
        UserError, match=r"a.gif \(style of p1\): is a GIF file; dataset images must be PNG, JPEG, WEBP, TIFF"
    ):
        load_dataset_image(gif, proto, role="style of p1")
    t16 = tmp_path / "t16.tif"
    Image.fromarray(arr[..., 0].astype(np.uint16) * 257).save(t16, format="TIFF")
    with pytest.raises(UserError, match=r"t16.tif \(content of p1\): .*fix:"):
        load_dataset_image(t16, proto, role="content of p1")


def test_local_track_with_jpeg_images_gets_the_same_rule(tmp_path):
    from pytest_pstbench.paired.tracks import load_manifest

    rng = np.random.default_rng(1)
    for role in ("c", "s", "r"):
        _save(tmp_path / f"{role}.jpg", rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8), "JPEG")
    (tmp_path / "track.yaml").write_text(
        yaml.safe_dump({"id": "t", "pairs": [{"id": "p1", "content": "c.jpg", "style": "s.jpg", "reference": "r.jpg"}]})
    )
    track = load_manifest(tmp_path / "track.yaml")
    assert track.info["image_decoders"]["formats"] == ["JPEG"]
    _save(tmp_path / "p.png", np.zeros((8, 8, 3), np.uint8), "PNG")
    (tmp_path / "png.yaml").write_text(
        yaml.safe_dump(
            {"id": "t2", "pairs": [{"id": "p1", "content": "p.png", "style": "p.png", "reference": "p.png"}]}
        )
    )
    assert "image_decoders" not in load_manifest(tmp_path / "png.yaml").info
