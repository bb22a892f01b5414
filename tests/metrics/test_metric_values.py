"""Metrics against independent computations: hand-derived values, skimage/scipy/numpy, and published data.

Every parameter comes from the protocol via `load_protocol()`; numbers typed here are hand-derived
expected values or published reference data (Sharma, Wu & Dalal 2005).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
import skimage.color
import skimage.data
import skimage.metrics
import yaml

from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.metrics import color as color_mod
from pytest_pstbench.metrics.color import delta_e00, hist_corr, srgb_to_lab
from pytest_pstbench.metrics.fidelity import psnr, ssim
from pytest_pstbench.metrics.registry import function_kwargs as metric_params
from pytest_pstbench.paired.engine import pair_scorer

PROTO = load_protocol()


def params(name: str) -> dict:
    """Keyword arguments of one metric, straight from the protocol file."""
    return metric_params(PROTO.metrics[name])


def of_kind(kind: str) -> str:
    """The first metric of the protocol with this kind."""
    return next(n for n, p in PROTO.metrics.items() if p["kind"] == kind)


PSNR = params(of_kind("psnr"))
SSIM = params(of_kind("ssim"))
DE = params(of_kind("ciede2000"))
HC = params("hcorr_gt")


def photo(name: str, top: int, left: int, h: int = 64, w: int = 96) -> np.ndarray:
    """A small crop of a real photograph shipped with scikit-image."""
    img = getattr(skimage.data, name)()
    crop = img[top : top + h, left : left + w, :3]
    assert crop.shape == (h, w, 3) and crop.dtype == np.uint8
    return np.ascontiguousarray(crop)


def random_image(seed: int, shape=(48, 40, 3)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


# --- PSNR -----------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 3, 17])
def test_psnr_uniform_offset_hand_derived(k):
    # every value differs by k (half +k, half -k): MSE = k^2, PSNR = 10 log10(255^2 / k^2)
    ref = np.random.default_rng(k).integers(20, 230, (32, 24, 3)).astype(np.uint8)
    sign = np.where(np.arange(ref.size).reshape(ref.shape) % 2 == 0, 1, -1)
    out = (ref.astype(np.int64) + sign * k).astype(np.uint8)
    assert np.all(np.abs(out.astype(int) - ref.astype(int)) == k)
    assert psnr(out, ref, **PSNR) == pytest.approx(10 * math.log10(255**2 / k**2), abs=1e-12)


def test_psnr_hand_value_off_by_one():
    # 20 log10(255) = 48.130803608679...
    ref = np.full((8, 8, 3), 100, np.uint8)
    assert psnr(ref + 1, ref, **PSNR) == pytest.approx(48.1308036086791, abs=1e-10)


def test_psnr_identical_gives_the_cap():
    img = random_image(0)
    assert psnr(img, img.copy(), **PSNR) == PSNR["cap_db"]


def test_psnr_above_the_cap_is_capped_and_below_is_not():
    # One value off by 1 among N values: MSE = 1/N, PSNR = 20 log10(255) + 10 log10(N).
    # 256x256x3 = 196608 values -> 101.07 dB, above a 100 dB cap; 200x200x3 = 120000 -> 98.92 dB.
    big = np.full((256, 256, 3), 77, np.uint8)
    big_out = big.copy()
    big_out[3, 5, 1] += 1
    uncapped = 20 * math.log10(255) + 10 * math.log10(big.size)
    assert uncapped == pytest.approx(101.0668, abs=1e-4)
    assert uncapped > PSNR["cap_db"]
    assert psnr(big_out, big, **PSNR) == PSNR["cap_db"]

    small = np.full((200, 200, 3), 77, np.uint8)
    small_out = small.copy()
    small_out[0, 0, 2] -= 1
    expected = 20 * math.log10(255) + 10 * math.log10(small.size)
    assert expected == pytest.approx(98.9226, abs=1e-4)
    assert psnr(small_out, small, **PSNR) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_psnr_matches_skimage_on_random_images(seed):
    ref = random_image(seed)
    out = random_image(seed + 100)
    expected = skimage.metrics.peak_signal_noise_ratio(ref, out, data_range=255)
    assert psnr(out, ref, **PSNR) == pytest.approx(expected, abs=1e-10)


def test_psnr_matches_skimage_on_a_noisy_photo():
    ref = photo("astronaut", 30, 200)
    noise = np.random.default_rng(4).normal(0, 6, ref.shape)
    out = np.clip(ref + noise, 0, 255).astype(np.uint8)
    expected = skimage.metrics.peak_signal_noise_ratio(ref, out, data_range=255)
    assert 25 < expected < 40
    assert psnr(out, ref, **PSNR) == pytest.approx(expected, abs=1e-10)


def test_psnr_refuses_shape_mismatch():
    with pytest.raises(ValueError, match=r"expected two HxWx3 arrays of one shape, got \(4, 4, 3\) and \(4, 5, 3\)"):
        psnr(np.zeros((4, 4, 3), np.uint8), np.zeros((4, 5, 3), np.uint8), **PSNR)


# --- SSIM -----------------------------------------------------------------------------------


def ssim_cases():
    astro = photo("astronaut", 40, 180)
    coffee = photo("coffee", 100, 250)
    chelsea = photo("chelsea", 80, 150)
    rng = np.random.default_rng(7)
    return {
        "noise": (np.clip(astro + rng.normal(0, 12, astro.shape), 0, 255).astype(np.uint8), astro),
        "shifted": (photo("coffee", 102, 253), coffee),
        "tinted": (np.clip(chelsea * np.array([1.1, 0.95, 0.8]) + 5, 0, 255).astype(np.uint8), chelsea),
        "other_photo": (photo("rocket", 200, 300), chelsea),
    }


@pytest.mark.parametrize("case", ["noise", "shifted", "tinted", "other_photo"])
def test_ssim_matches_skimage_with_protocol_settings(case):
    out, ref = ssim_cases()[case]
    expected = skimage.metrics.structural_similarity(
        out,
        ref,
        channel_axis=2,
        gaussian_weights=True,
        sigma=1.5,
        use_sample_covariance=False,
        data_range=255,
    )
    got = ssim(out, ref, **SSIM)
    assert got == pytest.approx(expected, abs=1e-12)
    assert -1.0 <= got < 0.999  # the images do differ


@pytest.mark.parametrize("case", ["noise", "shifted", "tinted"])
def test_ssim_protocol_settings_matter(case):
    # skimage's defaults (7x7 uniform window, sample covariance) give a measurably different value
    out, ref = ssim_cases()[case]
    default = skimage.metrics.structural_similarity(out, ref, channel_axis=2, data_range=255)
    assert abs(ssim(out, ref, **SSIM) - default) > 1e-3


def test_ssim_identical_is_one():
    img = photo("astronaut", 0, 0)
    assert ssim(img, img.copy(), **SSIM) == pytest.approx(1.0, abs=1e-12)


def test_ssim_constant_images_hand_derived():
    # Constant channels: means a and b, zero variances. SSIM = (2ab + C1) / (a^2 + b^2 + C1) * (C2 / C2),
    # C1 = (0.01 * 255)^2; mean over the three channels.
    a = np.array([100.0, 50.0, 200.0])
    b = np.array([110.0, 50.0, 180.0])
    out = np.broadcast_to(a.astype(np.uint8), (32, 32, 3)).copy()
    ref = np.broadcast_to(b.astype(np.uint8), (32, 32, 3)).copy()
    c1 = (0.01 * 255) ** 2
    expected = np.mean((2 * a * b + c1) / (a * a + b * b + c1))
    # channels: 22006.5025/22106.5025 = 0.995476, 1, 72006.5025/72406.5025 = 0.994476
    assert expected == pytest.approx(0.996651, abs=1e-6)
    assert ssim(out, ref, **SSIM) == pytest.approx(expected, abs=1e-9)


# --- CIEDE2000 ------------------------------------------------------------------------------

# Sharma, Wu & Dalal (2005), "The CIEDE2000 color-difference formula: implementation notes,
# supplementary test data, and mathematical observations", Table 1: pair, L1 a1 b1, L2 a2 b2, dE00.
SHARMA_2005 = [
    (1, (50.0000, 2.6772, -79.7751), (50.0000, 0.0000, -82.7485), 2.0425),
    (2, (50.0000, 3.1571, -77.2803), (50.0000, 0.0000, -82.7485), 2.8615),
    (3, (50.0000, 2.8361, -74.0200), (50.0000, 0.0000, -82.7485), 3.4412),
    (4, (50.0000, -1.3802, -84.2814), (50.0000, 0.0000, -82.7485), 1.0000),
    (5, (50.0000, -1.1848, -84.8006), (50.0000, 0.0000, -82.7485), 1.0000),
    (6, (50.0000, -0.9009, -85.5211), (50.0000, 0.0000, -82.7485), 1.0000),
    (7, (50.0000, 0.0000, 0.0000), (50.0000, -1.0000, 2.0000), 2.3669),
    (8, (50.0000, -1.0000, 2.0000), (50.0000, 0.0000, 0.0000), 2.3669),
    (9, (50.0000, 2.4900, -0.0010), (50.0000, -2.4900, 0.0009), 7.1792),
    (10, (50.0000, 2.4900, -0.0010), (50.0000, -2.4900, 0.0010), 7.1792),
    (11, (50.0000, 2.4900, -0.0010), (50.0000, -2.4900, 0.0011), 7.2195),
    (12, (50.0000, 2.4900, -0.0010), (50.0000, -2.4900, 0.0012), 7.2195),
    (13, (50.0000, -0.0010, 2.4900), (50.0000, 0.0009, -2.4900), 4.8045),
    (14, (50.0000, -0.0010, 2.4900), (50.0000, 0.0010, -2.4900), 4.8045),
    (15, (50.0000, -0.0010, 2.4900), (50.0000, 0.0011, -2.4900), 4.7461),
    (16, (50.0000, 2.5000, 0.0000), (50.0000, 0.0000, -2.5000), 4.3065),
    (17, (50.0000, 2.5000, 0.0000), (73.0000, 25.0000, -18.0000), 27.1492),
    (18, (50.0000, 2.5000, 0.0000), (61.0000, -5.0000, 29.0000), 22.8977),
    (19, (50.0000, 2.5000, 0.0000), (56.0000, -27.0000, -3.0000), 31.9030),
    (20, (50.0000, 2.5000, 0.0000), (58.0000, 24.0000, 15.0000), 19.4535),
    (21, (50.0000, 2.5000, 0.0000), (50.0000, 3.1736, 0.5854), 1.0000),
    (22, (50.0000, 2.5000, 0.0000), (50.0000, 3.2972, 0.0000), 1.0000),
    (23, (50.0000, 2.5000, 0.0000), (50.0000, 1.8634, 0.5757), 1.0000),
    (24, (50.0000, 2.5000, 0.0000), (50.0000, 3.2592, 0.3350), 1.0000),
    (25, (60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
    (26, (63.0109, -31.0961, -5.8663), (62.8187, -29.7946, -4.0864), 1.2630),
    (27, (61.2901, 3.7196, -5.3901), (61.4292, 2.2480, -4.9620), 1.8731),
    (28, (35.0831, -44.1164, 3.7933), (35.0232, -40.0716, 1.5901), 1.8645),
    (29, (22.7233, 20.0904, -46.6940), (23.0331, 14.9730, -42.5619), 2.0373),
    (30, (36.4612, 47.8580, 18.3852), (36.2715, 50.5065, 21.2231), 1.4146),
    (31, (90.8027, -2.0831, 1.4410), (91.1528, -1.6435, 0.0447), 1.4441),
    (32, (90.9257, -0.5406, -0.9208), (88.6381, -0.8985, -0.7239), 1.5381),
    (33, (6.7747, -0.2908, -2.4247), (5.8714, -0.0985, -2.2286), 0.6377),
    (34, (2.0776, 0.0795, -1.1350), (0.9033, -0.0636, -0.5514), 0.9082),
]


@pytest.fixture
def lab_passthrough(monkeypatch):
    """Make delta_e00 take CIELAB 'images' directly, so its whole path after the sRGB->Lab step is tested."""
    calls = []

    def passthrough(arr, rgb_to_xyz):
        calls.append(rgb_to_xyz)
        return np.asarray(arr, dtype=np.float64)

    monkeypatch.setattr(color_mod, "srgb_to_lab", passthrough)
    return calls


@pytest.mark.parametrize("pair,lab1,lab2,published", SHARMA_2005, ids=[f"pair{r[0]}" for r in SHARMA_2005])
def test_delta_e00_sharma_2005_table(lab_passthrough, pair, lab1, lab2, published):
    a = np.array(lab1, dtype=np.float64).reshape(1, 1, 3)
    b = np.array(lab2, dtype=np.float64).reshape(1, 1, 3)
    assert delta_e00(a, b, **DE) == pytest.approx(published, abs=1e-4)
    assert delta_e00(b, a, **DE) == pytest.approx(published, abs=1e-4)  # symmetric
    assert lab_passthrough and all(m == DE["rgb_to_xyz"] for m in lab_passthrough)


def test_delta_e00_pools_the_sharma_pairs_by_mean(lab_passthrough):
    a = np.array([r[1] for r in SHARMA_2005]).reshape(2, 17, 3)
    b = np.array([r[2] for r in SHARMA_2005]).reshape(2, 17, 3)
    published = np.mean([r[3] for r in SHARMA_2005])
    assert delta_e00(a, b, **DE) == pytest.approx(published, abs=1e-4)


def skimage_lab_protocol_white(rgb: np.ndarray) -> np.ndarray:
    """sRGB -> Lab through skimage, with XYZ rescaled so that the protocol's white point maps to skimage's D65."""
    white_protocol = np.asarray(DE["rgb_to_xyz"], dtype=np.float64).sum(axis=1)
    white_skimage = skimage.color.xyz_tristimulus_values(illuminant="D65", observer="2")
    xyz = skimage.color.rgb2xyz(rgb)
    return skimage.color.xyz2lab(xyz * (white_skimage / white_protocol), illuminant="D65", observer="2")


def test_skimage_uses_the_protocol_matrix_and_transfer():
    # premise of the independent route: skimage's sRGB->XYZ matrix is the protocol's (primaries give its columns)
    primaries = np.array([[[255, 0, 0], [0, 255, 0], [0, 0, 255]]], np.uint8)
    xyz = skimage.color.rgb2xyz(primaries)[0]
    np.testing.assert_allclose(xyz.T, np.asarray(DE["rgb_to_xyz"]), atol=1e-12)
    # and the sRGB decoding at a value on each side of the 0.04045 knee (hand-derived)
    grey = np.array([[[10, 10, 10], [128, 128, 128]]], np.uint8)
    y = skimage.color.rgb2xyz(grey)[0, :, 1]
    c = np.array([10, 128]) / 255.0
    np.testing.assert_allclose(y, [c[0] / 12.92, ((c[1] + 0.055) / 1.055) ** 2.4], rtol=1e-12)


@pytest.mark.parametrize("source", ["astronaut", "coffee", "random", "all_values"])
def test_srgb_to_lab_matches_skimage_route(source):
    if source == "random":
        rgb = random_image(9, (40, 40, 3))
    elif source == "all_values":  # every 8-bit level in every channel, darkest included
        v = np.arange(256, dtype=np.uint8)
        rgb = np.stack([v, np.roll(v, 85), np.roll(v, 170)], axis=-1).reshape(16, 16, 3)
    else:
        rgb = photo(source, 50, 60)
    ours = srgb_to_lab(rgb, DE["rgb_to_xyz"])
    theirs = skimage_lab_protocol_white(rgb)
    # skimage rounds the CIE constants of f(t) (7.787 for 1/(3*(6/29)^2) = 7.787037, 0.008856 for
    # (6/29)^3), so where some t = XYZ/white is below ~0.0089 f differs by up to ~3.3e-7, i.e. up to
    # 500 * 2 * 3.3e-7 = 3.3e-4 in a or b. Elsewhere the two routes agree to rounding error.
    t = skimage.color.rgb2xyz(rgb) / np.asarray(DE["rgb_to_xyz"]).sum(axis=1)
    bright = (t > 0.0089).all(axis=-1)
    assert bright.sum() > 0.5 * bright.size
    np.testing.assert_allclose(ours[bright], theirs[bright], atol=1e-9)
    np.testing.assert_allclose(ours[~bright], theirs[~bright], atol=4e-4)


def test_srgb_to_lab_hand_values():
    # black -> (0, 0, 0); white -> (100, 0, 0) exactly when the white point is the matrix's row sums
    lab = srgb_to_lab(np.array([[[0, 0, 0], [255, 255, 255]]], np.uint8), DE["rgb_to_xyz"])
    np.testing.assert_allclose(lab[0, 0], [0.0, 0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(lab[0, 1], [100.0, 0.0, 0.0], atol=1e-9)


def test_white_point_is_the_protocol_row_sums_not_skimage_default():
    white = np.array([[[255, 255, 255], [250, 252, 255]]], np.uint8)
    ours = srgb_to_lab(white, DE["rgb_to_xyz"])
    default = skimage.color.rgb2lab(white)  # skimage's D65 2-degree white (0.95047, 1, 1.08883)
    routed = skimage_lab_protocol_white(white)
    # with skimage's default white point, sRGB white is not neutral: a, b about -0.002 and +0.005
    assert abs(default[0, 0, 1]) > 1e-3 and abs(default[0, 0, 2]) > 3e-3
    np.testing.assert_allclose(ours, routed, atol=1e-9)
    assert np.max(np.abs(ours - default)) > 3e-3
    # and the metric itself: white vs white-with-offset measured along our route, not the default one
    out, ref = white[:, :1], white[:, 1:]
    d_ours = delta_e00(out, ref, **DE)
    d_routed = skimage.color.deltaE_ciede2000(routed[:, :1], routed[:, 1:], channel_axis=-1).mean()
    d_default = skimage.color.deltaE_ciede2000(default[:, :1], default[:, 1:], channel_axis=-1).mean()
    assert d_ours == pytest.approx(d_routed, abs=1e-9)
    assert abs(d_ours - d_default) > 1e-4


def test_delta_e00_identical_is_zero():
    img = photo("chelsea", 10, 10)
    assert delta_e00(img, img.copy(), **DE) == 0.0


@pytest.mark.parametrize("seed", [3, 4])
def test_delta_e00_matches_independent_route(seed):
    out = random_image(seed)
    ref = random_image(seed + 50)
    expected = skimage.color.deltaE_ciede2000(
        skimage_lab_protocol_white(out), skimage_lab_protocol_white(ref), channel_axis=-1
    ).mean()
    assert delta_e00(out, ref, **DE) == pytest.approx(expected, abs=1e-6)


# --- histogram correlation ------------------------------------------------------------------


def hcorr_numpy(a: np.ndarray, b: np.ndarray, bins: int) -> float:
    rs = []
    for c in range(3):
        h1, _ = np.histogram(a[..., c], bins=bins, range=(0, 256))
        h2, _ = np.histogram(b[..., c], bins=bins, range=(0, 256))
        rs.append(np.corrcoef(h1, h2)[0, 1])
    return float(np.mean(rs))


def hcorr_scipy(a: np.ndarray, b: np.ndarray, bins: int) -> float:
    rs = []
    for c in range(3):
        h1, _ = np.histogram(a[..., c], bins=bins, range=(0, 256))
        h2, _ = np.histogram(b[..., c], bins=bins, range=(0, 256))
        rs.append(scipy.stats.pearsonr(h1, h2).statistic)
    return float(np.mean(rs))


@pytest.mark.parametrize(
    "out,other",
    [
        (lambda: photo("astronaut", 0, 0), lambda: photo("coffee", 0, 0)),
        (lambda: photo("chelsea", 30, 30), lambda: photo("chelsea", 120, 200)),
        (lambda: random_image(1), lambda: photo("rocket", 100, 100)),
    ],
    ids=["astronaut_coffee", "chelsea_two_crops", "random_rocket"],
)
def test_hist_corr_matches_numpy_and_scipy(out, other):
    a, b = out(), other()
    got = hist_corr(a, b, **HC)
    assert got == pytest.approx(hcorr_numpy(a, b, HC["bins"]), abs=1e-12)
    assert got == pytest.approx(hcorr_scipy(a, b, HC["bins"]), abs=1e-12)


def test_hist_corr_other_bin_count_matches_numpy():
    a, b = photo("astronaut", 0, 0), photo("coffee", 0, 0)
    got = hist_corr(a, b, **{**HC, "bins": 32})
    assert got == pytest.approx(hcorr_numpy(a, b, 32), abs=1e-12)
    assert got != pytest.approx(hist_corr(a, b, **HC), abs=1e-3)  # the bin count is used


def test_hist_corr_identical_is_one():
    img = photo("coffee", 200, 100)
    assert hist_corr(img, img.copy(), **HC) == pytest.approx(1.0, abs=1e-12)


def flat_image(seed: int) -> np.ndarray:
    """16x16 image in which every channel holds each of the 256 values exactly once (flat histograms)."""
    rng = np.random.default_rng(seed)
    img = np.stack([rng.permutation(256) for _ in range(3)], axis=-1).reshape(16, 16, 3).astype(np.uint8)
    for c in range(3):
        assert np.all(np.bincount(img[..., c].ravel(), minlength=256) == 1)
    return img


def test_hist_corr_both_histograms_constant():
    assert hist_corr(flat_image(1), flat_image(2), **HC) == HC["constant_both"]


def test_hist_corr_one_histogram_constant():
    other = random_image(5, (16, 16, 3))
    assert hist_corr(flat_image(1), other, **HC) == HC["constant_one"]
    assert hist_corr(other, flat_image(1), **HC) == HC["constant_one"]


def test_hist_corr_constant_cases_per_channel():
    # channel 0 flat in both, channel 1 flat in the output only, channel 2 ordinary in both
    out = flat_image(3)
    other = random_image(6, (16, 16, 3))
    other[..., 0] = flat_image(4)[..., 0]
    out[..., 2] = random_image(7, (16, 16, 3))[..., 2]
    h1, _ = np.histogram(out[..., 2], bins=HC["bins"], range=(0, 256))
    h2, _ = np.histogram(other[..., 2], bins=HC["bins"], range=(0, 256))
    r2 = np.corrcoef(h1, h2)[0, 1]
    expected = (HC["constant_both"] + HC["constant_one"] + r2) / 3
    assert hist_corr(out, other, **HC) == pytest.approx(expected, abs=1e-12)


# --- PairScorer -----------------------------------------------------------------------------


@pytest.fixture
def protocol_without_lpips(tmp_path):
    data = yaml.safe_load(PROTO.path.read_text(encoding="utf-8"))
    del data["metrics"]["lpips"]
    data["comparison"]["tie_threshold"].pop("lpips", None)  # a threshold must name a metric of the protocol
    path = tmp_path / "no_lpips.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return load_protocol(path)


def test_pair_scorer_without_lpips(protocol_without_lpips):
    proto = protocol_without_lpips
    expected_names = [n for n in PROTO.metric_names if PROTO.metrics[n]["kind"] != "lpips"]
    assert proto.metric_names == expected_names
    ref = photo("astronaut", 100, 100)
    out = np.clip(ref.astype(int) + np.random.default_rng(2).integers(-8, 9, ref.shape), 0, 255).astype(np.uint8)
    style = photo("coffee", 0, 0)
    scores = pair_scorer(proto).score(out, ref, style)
    assert list(scores) == proto.metric_names
    assert all(type(v) is float for v in scores.values())
    # each value against an independent computation
    assert scores["psnr"] == pytest.approx(skimage.metrics.peak_signal_noise_ratio(ref, out, data_range=255), abs=1e-10)
    assert scores["ssim"] == pytest.approx(
        skimage.metrics.structural_similarity(
            out, ref, channel_axis=2, gaussian_weights=True, sigma=1.5, use_sample_covariance=False, data_range=255
        ),
        abs=1e-12,
    )
    de = skimage.color.deltaE_ciede2000(
        skimage_lab_protocol_white(out), skimage_lab_protocol_white(ref), channel_axis=-1
    )
    assert scores["delta_e00"] == pytest.approx(de.mean(), abs=1e-6)
    assert scores["hcorr_gt"] == pytest.approx(hcorr_numpy(out, ref, HC["bins"]), abs=1e-12)
    assert scores["hcorr_style"] == pytest.approx(hcorr_numpy(out, style, HC["bins"]), abs=1e-12)


def test_pair_scorer_style_changes_only_hcorr_style(protocol_without_lpips):
    scorer = pair_scorer(protocol_without_lpips)
    ref = photo("chelsea", 0, 0)
    out = photo("chelsea", 3, 2)
    first = scorer.score(out, ref, photo("coffee", 0, 0))
    second = scorer.score(out, ref, photo("rocket", 0, 0))
    changed = [n for n in first if first[n] != second[n]]
    assert changed == ["hcorr_style"]
    # and with the reference as the style, hcorr_style equals hcorr_gt
    third = scorer.score(out, ref, ref)
    assert third["hcorr_style"] == third["hcorr_gt"]


def test_pair_scorer_needs_the_style_image(protocol_without_lpips):
    img = photo("chelsea", 0, 0)
    with pytest.raises(ValueError, match="metric hcorr_style needs the style image"):
        pair_scorer(protocol_without_lpips).score(img, img, None)


def test_pair_scorer_style_of_another_size(protocol_without_lpips):
    # the style image need not have the output's size: only histograms compare against it
    ref = photo("chelsea", 0, 0)
    out = np.clip(ref.astype(int) + 7, 0, 255).astype(np.uint8)
    style = np.ascontiguousarray(photo("coffee", 0, 0)[:37, :53])
    assert style.shape[:2] != out.shape[:2]
    scores = pair_scorer(protocol_without_lpips).score(out, ref, style)
    assert scores["hcorr_style"] == pytest.approx(hcorr_numpy(out, style, HC["bins"]), abs=1e-12)
