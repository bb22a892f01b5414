"""The download-free demo track and the colour-transfer baselines."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image
from skimage.color import lab2rgb, rgb2lab

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.paired import baselines, demo
from pytest_pstbench.paired.looks import draw_look

KINDS = ("content", "style", "reference")


def _read_manifest(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _files(manifest_path: Path) -> list[Path]:
    data = _read_manifest(manifest_path)
    return [manifest_path.parent / p[k] for p in data["pairs"] for k in KINDS]


def _load(path: Path) -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def _png_chunk_types(data: bytes) -> list[str]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    i, types = 8, []
    while i < len(data):
        (n,) = struct.unpack(">I", data[i : i + 4])
        types.append(data[i + 4 : i + 8].decode("ascii"))
        i += 12 + n
    return types


@pytest.fixture(scope="module")
def track(tmp_path_factory) -> Path:
    return demo.build_demo_track(tmp_path_factory.mktemp("demo_a") / "demo")


@pytest.fixture(scope="module")
def track_b(tmp_path_factory) -> Path:
    return demo.build_demo_track(tmp_path_factory.mktemp("demo_b") / "demo")


# --------------------------------------------------------------------------------------------
# The track


def test_build_is_deterministic(track, track_b):
    a, b = _read_manifest(track), _read_manifest(track_b)
    assert a["revision"] == b["revision"]
    assert len(a["revision"]) == 12 and int(a["revision"], 16) >= 0
    assert track.read_bytes() == track_b.read_bytes()
    for fa, fb in zip(_files(track), _files(track_b)):
        assert fa.relative_to(track.parent) == fb.relative_to(track_b.parent)
        assert fa.read_bytes() == fb.read_bytes(), fa.name


def test_manifest_and_files(track):
    data = _read_manifest(track)
    assert data["id"] == "demo"
    assert isinstance(data["name"], str) and data["name"]
    assert data["generator"] == demo.DEMO_PARAMS
    assert data["generator"]["generator_version"] == demo.GENERATOR_VERSION
    pairs = data["pairs"]
    assert len(pairs) >= 8
    assert [p["id"] for p in pairs] == [f"demo-{i:02d}" for i in range(1, len(pairs) + 1)]
    for p in pairs:
        assert set(p) == {"id", *KINDS}
        imgs = {}
        for kind in KINDS:
            assert p[kind] == f"{kind}/{p['id']}.png"
            path = track.parent / p[kind]
            assert path.is_file()
            raw = path.read_bytes()
            assert set(_png_chunk_types(raw)) == {"IHDR", "IDAT", "IEND"}  # no ICC, text, time
            with Image.open(path) as im:
                assert im.format == "PNG" and im.mode == "RGB"
                assert "icc_profile" not in im.info
                w, h = im.size
            assert w != h and w > h  # landscape photos, not square thumbnails
            assert 300 <= w <= 640
            imgs[kind] = _load(path)
        c, s, r = imgs["content"], imgs["style"], imgs["reference"]
        assert c.shape == r.shape
        assert not np.array_equal(c, r)
        assert c.shape != s.shape or not np.array_equal(s, c)
        assert r.shape != s.shape or not np.array_equal(s, r)
        # the look is visible but not garish
        mad = np.abs(c.astype(float) - r).mean()
        assert 3.0 < mad < 40.0, (p["id"], mad)


def test_revision_covers_params_and_pixels(track):
    import hashlib
    import json

    from PIL import Image

    data = _read_manifest(track)
    h = hashlib.sha256()
    h.update(b"pstbench-demo\0")
    h.update(json.dumps(demo.DEMO_PARAMS, sort_keys=True, separators=(",", ":")).encode())
    for p in data["pairs"]:
        for kind in KINDS:
            pixels = np.asarray(Image.open(track.parent / p[kind]).convert("RGB"), dtype=np.uint8)
            h.update(f"\0{p[kind]}\0{pixels.shape}\0".encode())
            h.update(pixels.tobytes())
    assert data["revision"] == h.hexdigest()[:12]


def test_looks_differ_per_pair():
    seed = demo.DEMO_PARAMS["seed"]
    looks = [draw_look(seed, i) for i in range(len(demo.DEMO_PARAMS["pairs"]))]
    assert all(looks[i] != looks[j] for i in range(len(looks)) for j in range(i))
    assert draw_look(seed, 3) == draw_look(seed, 3)


def test_reuse_does_not_rewrite(track):
    paths = [track, *_files(track)]
    before = [os.stat(p).st_mtime_ns for p in paths]
    messages = []
    again = demo.build_demo_track(track.parent, progress=messages.append)
    assert again == track
    assert [os.stat(p).st_mtime_ns for p in paths] == before
    assert any("up to date" in m for m in messages)


def _fake_generate_from(source: Path):
    """A stand-in for demo._generate that copies an already built track (fast)."""

    def fake(dest: Path, progress=None) -> None:
        shutil.copytree(source, dest, dirs_exist_ok=True)

    return fake


def test_stale_track_is_replaced(track, tmp_path, monkeypatch):
    root = tmp_path / "demo"
    shutil.copytree(track.parent, root)
    data = _read_manifest(root / "track.yaml")
    data["generator"] = {**data["generator"], "seed": 1}
    (root / "track.yaml").write_text(yaml.safe_dump(data), encoding="utf-8")
    (root / "reference" / "demo-01.png").write_bytes(b"stale")
    monkeypatch.setattr(demo, "_generate", _fake_generate_from(track.parent))
    manifest = demo.build_demo_track(root)
    assert manifest == root / "track.yaml"
    assert manifest.read_bytes() == track.read_bytes()
    assert (root / "reference" / "demo-01.png").read_bytes() == (
        track.parent / "reference" / "demo-01.png"
    ).read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]  # no temp/stale dirs left


def test_concurrent_builder_wins(track, tmp_path, monkeypatch):
    root = tmp_path / "demo"

    def fake(dest: Path, progress=None) -> None:
        shutil.copytree(track.parent, dest, dirs_exist_ok=True)
        shutil.copytree(track.parent, root)  # another process finishes first

    monkeypatch.setattr(demo, "_generate", fake)
    messages = []
    manifest = demo.build_demo_track(root, progress=messages.append)
    assert manifest == root / "track.yaml"
    assert manifest.read_bytes() == track.read_bytes()
    assert any("concurrent" in m for m in messages)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]


def test_interrupted_build_leaves_nothing(tmp_path, monkeypatch):
    def boom(dest: Path, progress=None) -> None:
        (dest / "content").mkdir()
        (dest / "content" / "demo-01.png").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(demo, "_generate", boom)
    with pytest.raises(KeyboardInterrupt):
        demo.build_demo_track(tmp_path / "demo")
    assert list(tmp_path.iterdir()) == []


def test_foreign_directory_is_not_replaced(tmp_path):
    root = tmp_path / "mine"
    root.mkdir()
    (root / "notes.txt").write_text("keep me")
    with pytest.raises(UserError, match="not a pstbench demo track"):
        demo.build_demo_track(root)
    assert (root / "notes.txt").read_text() == "keep me"


# --------------------------------------------------------------------------------------------
# Baselines


def _smooth_image(h: int, w: int, base: tuple, amp: tuple, seed: int) -> np.ndarray:
    """A smooth, in-gamut synthetic RGB image (mid tones, no clipping after transfer)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    chans = []
    for k in range(3):
        fx, fy, ph = rng.uniform(0.5, 2.0), rng.uniform(0.5, 2.0), rng.uniform(0, 6.28)
        wave = np.sin(2 * np.pi * fx * x / w + ph) * np.cos(2 * np.pi * fy * y / h)
        chans.append(base[k] + amp[k] * wave)
    return np.clip(np.rint(np.stack(chans, -1)), 0, 255).astype(np.uint8)


def test_identity_returns_content():
    c = _smooth_image(30, 40, (120, 110, 100), (40, 40, 40), 1)
    s = _smooth_image(20, 50, (90, 130, 150), (30, 20, 30), 2)
    out = baselines.identity(c, s)
    assert out.dtype == np.uint8 and np.array_equal(out, c)


def test_reinhard_matches_style_statistics():
    c = _smooth_image(96, 128, (128, 118, 105), (45, 40, 35), 3)
    s = _smooth_image(80, 120, (112, 126, 140), (30, 34, 38), 4)
    out = baselines.reinhard_lab(c, s)
    assert out.dtype == np.uint8 and out.shape == c.shape

    lab_s = rgb2lab(s / 255.0)
    lab_o = rgb2lab(out / 255.0)
    for k in range(3):
        # only the final 8-bit rounding separates the result's statistics from the style's
        assert abs(lab_o[..., k].mean() - lab_s[..., k].mean()) < 0.3, k
        assert abs(lab_o[..., k].std() - lab_s[..., k].std()) < 0.02 * lab_s[..., k].std() + 0.2, k

    # before rounding the statistics match exactly
    lab_f = baselines.reinhard_lab_float(c, s)
    np.testing.assert_allclose(lab_f.reshape(-1, 3).mean(0), lab_s.reshape(-1, 3).mean(0), atol=1e-9)
    np.testing.assert_allclose(lab_f.reshape(-1, 3).std(0), lab_s.reshape(-1, 3).std(0), rtol=1e-9)

    # an independent hand computation of the documented recipe
    lab_c = rgb2lab(c / 255.0)
    mu_c, sd_c = lab_c.reshape(-1, 3).mean(0), lab_c.reshape(-1, 3).std(0)
    mu_s, sd_s = lab_s.reshape(-1, 3).mean(0), lab_s.reshape(-1, 3).std(0)
    hand_lab = (lab_c - mu_c) / sd_c * sd_s + mu_s
    hand = np.clip(np.rint(lab2rgb(hand_lab) * 255.0), 0, 255).astype(np.uint8)
    assert np.abs(hand.astype(int) - out).max() <= 1


def test_reinhard_flat_content_is_shifted_only():
    c = np.full((10, 12, 3), 100, np.uint8)
    s = _smooth_image(10, 12, (120, 120, 120), (20, 20, 20), 5)
    out = baselines.reinhard_lab(c, s)
    assert out.shape == c.shape
    assert len(np.unique(out.reshape(-1, 3), axis=0)) == 1  # still flat


def test_identity_refuses_non_rgb8():
    with pytest.raises(ValueError):
        baselines.identity(np.zeros((4, 4), np.uint8), np.zeros((4, 4, 3), np.uint8))


def test_reinhard_beats_identity_on_demo(track, tmp_path):
    data = _read_manifest(track)
    """The demo track is built so that a global colour transfer helps: the CIELAB Reinhard
    transfer brings most outputs closer to the reference than the content is."""
    wins, mae = 0, {"identity": [], "reinhard": []}
    for p in data["pairs"]:
        content = _load(track.parent / p["content"])
        ref = _load(track.parent / p["reference"]).astype(float)
        ident = content
        rein = baselines.reinhard_lab(content, _load(track.parent / p["style"]))
        assert rein.shape == content.shape
        e_i, e_r = np.abs(ident - ref).mean(), np.abs(rein - ref).mean()
        mae["identity"].append(e_i)
        mae["reinhard"].append(e_r)
        wins += e_r < e_i
    n = len(data["pairs"])
    assert wins >= 0.7 * n, (wins, mae)
    assert np.mean(mae["reinhard"]) < 0.8 * np.mean(mae["identity"]), mae
