"""The fast metric kernels against their independent references, within the issue's tolerances.

SSIM: skimage `structural_similarity` on the float64 planes (`fidelity.ssim`), |diff| <= 1e-6.
CIEDE2000: skimage `deltaE_ciede2000` on `color.srgb_to_lab` (`color.delta_e00`), |diff of the mean| <= 1e-4.
Cases: full-HD photographs (skimage.data, resized with PIL, a plausible output made by a colour shift, a blur
and noise), odd sizes down to the smallest SSIM window, flat images, extreme colours (black, white, primaries,
greys, hue pairs exactly 180 degrees apart). Every case runs on CPU and, where it exists, on CUDA.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pytest_pstbench.metrics import (  # noqa: E402
    color,
    fidelity,
    kernels_color,  # noqa: E402
    kernels_ssim,  # noqa: E402
)

SSIM_TOL = 1e-6
DE_TOL = 1e-4
MATRIX = [[0.412453, 0.357580, 0.180423], [0.212671, 0.715160, 0.072169], [0.019334, 0.119193, 0.950227]]
SSIM_P = dict(data_range=255, gaussian_weights=True, sigma=1.5, use_sample_covariance=False)
DE_P = dict(rgb_to_xyz=MATRIX, kL=1.0, kC=1.0, kH=1.0)

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")),
]

# Colour pairs whose hue angles h' differ by exactly pi in float64 (dark colours on the linear segment of
# the CIELAB function, found by a search over all 2^24 colours): the CIEDE2000 branch point.
ANTIPODAL = [
    ((0, 0, 22), (22, 22, 1)),
    ((0, 0, 23), (23, 23, 2)),
    ((0, 0, 24), (24, 24, 1)),
    ((0, 21, 0), (24, 3, 24)),
    ((0, 23, 0), (20, 2, 20)),
    ((1, 1, 22), (24, 24, 4)),
    ((1, 1, 25), (24, 24, 2)),
    ((1, 22, 1), (23, 2, 23)),
    ((2, 24, 2), (22, 0, 22)),
    ((2, 25, 2), (22, 6, 22)),
    ((2, 27, 2), (24, 1, 24)),
    ((3, 24, 3), (24, 2, 24)),
]


def photo(name: str, size: tuple[int, int]) -> np.ndarray:
    import skimage.data
    from PIL import Image

    a = getattr(skimage.data, name)()
    if a.ndim == 2:
        a = np.stack([a] * 3, axis=-1)
    return np.asarray(Image.fromarray(a[..., :3]).resize(size, Image.BICUBIC))


def method_output(ref: np.ndarray, seed: int) -> np.ndarray:
    """A plausible stylised output: per-channel gain and offset, a 3x3 box blur, Gaussian noise."""
    from scipy.ndimage import uniform_filter

    rng = np.random.default_rng(seed)
    x = ref.astype(np.float64) * rng.uniform(0.85, 1.1, 3) + rng.uniform(-12, 12, 3)
    x = uniform_filter(x, size=(3, 3, 1)) + rng.normal(0.0, 4.0, x.shape)
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def full_hd():
    pairs = []
    for i, name in enumerate(("astronaut", "coffee")):
        ref = photo(name, (1920, 1080))
        pairs.append((name, method_output(ref, i), ref))
    return pairs


def small_cases():
    rng = np.random.default_rng(7)
    cases = []
    for w, h in ((53, 37), (11, 11), (12, 19), (64, 11)):
        ref = photo("chelsea", (w, h))
        cases.append((f"chelsea{w}x{h}", method_output(ref, w), ref))
    cases.append(
        ("noise", rng.integers(0, 256, (23, 29, 3), dtype=np.uint8), rng.integers(0, 256, (23, 29, 3), dtype=np.uint8))
    )
    flat = np.full((20, 30, 3), 128, np.uint8)
    cases.append(("flat-equal", flat, flat.copy()))
    cases.append(("flat-vs-flat", np.full((20, 30, 3), 3, np.uint8), np.full((20, 30, 3), 250, np.uint8)))
    cases.append(("flat-vs-photo", np.full((20, 30, 3), 0, np.uint8), photo("rocket", (30, 20))))
    extremes = np.array(
        [
            [0, 0, 0],
            [255, 255, 255],
            [255, 0, 0],
            [0, 255, 0],
            [0, 0, 255],
            [255, 255, 0],
            [0, 255, 255],
            [255, 0, 255],
            [128, 128, 128],
            [1, 1, 1],
            [254, 254, 254],
            [7, 7, 7],
        ],
        np.uint8,
    )
    a = np.repeat(np.repeat(extremes[None], 12, axis=0), 1, axis=1)  # 12 x 12: every pair of extreme colours
    b = np.transpose(a, (1, 0, 2)).copy()
    cases.append(("extremes", a, b))
    return cases


# ---------------------------------------------------------------- SSIM


@pytest.mark.parametrize("device", DEVICES)
def test_ssim_full_hd(full_hd, device):
    for name, out, ref in full_hd:
        want = fidelity.ssim(out, ref, **SSIM_P)
        got = kernels_ssim.ssim_fast(out, ref, **SSIM_P, device=device)
        assert abs(got - want) <= SSIM_TOL, (name, got, want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("gaussian", [True, False])
@pytest.mark.parametrize("sample_cov", [False, True])
def test_ssim_small_and_flat(device, gaussian, sample_cov):
    p = dict(SSIM_P, gaussian_weights=gaussian, use_sample_covariance=sample_cov)
    for win_size in (7, 11, 3):
        for name, out, ref in small_cases():
            want = fidelity.ssim(out, ref, **p, win_size=win_size)
            got = kernels_ssim.ssim_fast(out, ref, **p, win_size=win_size, device=device)
            assert abs(got - want) <= SSIM_TOL, (name, win_size, got, want)


def test_ssim_too_small_is_a_user_error():
    from pytest_pstbench.core.errors import UserError

    img = np.zeros((10, 40, 3), np.uint8)
    with pytest.raises(UserError, match="at least 11x11"):
        kernels_ssim.ssim_fast(img, img, **SSIM_P)


@pytest.mark.parametrize("device", DEVICES)
def test_ssim_reuse_equals_one_shot(full_hd, device):
    _, _, ref = full_hd[0]
    stats = kernels_ssim.ssim_reference_stats(ref, **SSIM_P, device=device)
    for seed in (11, 12, 13):
        out = method_output(ref, seed)
        assert kernels_ssim.ssim_from_stats(out, stats) == kernels_ssim.ssim_fast(out, ref, **SSIM_P, device=device)


# ---------------------------------------------------------------- CIEDE2000


@pytest.mark.parametrize("device", DEVICES)
def test_delta_e00_full_hd(full_hd, device):
    for name, out, ref in full_hd:
        want = color.delta_e00(out, ref, **DE_P)
        got = kernels_color.delta_e00_fast(out, ref, **DE_P, device=device)
        assert abs(got - want) <= DE_TOL, (name, got, want)


@pytest.mark.parametrize("device", DEVICES)
def test_delta_e00_small_flat_extreme(device):
    for name, out, ref in small_cases():
        want = color.delta_e00(out, ref, **DE_P)
        got = kernels_color.delta_e00_fast(out, ref, **DE_P, device=device)
        assert abs(got - want) <= DE_TOL, (name, got, want)


@pytest.mark.parametrize("device", DEVICES)
def test_delta_e00_hue_exactly_180_degrees(device):
    a = np.array([[p for p, _ in ANTIPODAL]], np.uint8)  # 1 x 12
    b = np.array([[q for _, q in ANTIPODAL]], np.uint8)
    # the reference really is at the branch point: h2' - h1' == +-pi exactly for every pair
    from skimage.color import deltaE_ciede2000

    la, lb = color.srgb_to_lab(a, MATRIX), color.srgb_to_lab(b, MATRIX)
    for x, y in ((a, b), (b, a)):  # both orders, 12 pixels: one flipped branch would move the mean by > 1e-4
        want = color.delta_e00(x, y, **DE_P)
        got = kernels_color.delta_e00_fast(x, y, **DE_P, device=device)
        assert abs(got - want) <= DE_TOL, (got, want)
        # pixel by pixel: the per-pixel values of the 12-pixel image, and 1x1 images of each pair. (The
        # reference itself is shape-dependent here: numpy's 1x1 matrix product rounds differently from the
        # 1x12 one, and one pair lands on the other branch, 5.2 units away.)
        ref_px = deltaE_ciede2000(color.srgb_to_lab(x, MATRIX), color.srgb_to_lab(y, MATRIX), channel_axis=-1)[0]
        lab_x = kernels_color.lab_of(x, rgb_to_xyz=MATRIX, device=device)
        lab_y = kernels_color.lab_of(y, rgb_to_xyz=MATRIX, device=device)
        for i in range(12):
            one = kernels_color.delta_e00_fast(x[:, i : i + 1], y[:, i : i + 1], **DE_P, device=device)
            assert abs(one - color.delta_e00(x[:, i : i + 1], y[:, i : i + 1], **DE_P)) <= 1e-9
        got_px = kernels_color.delta_e00_map(lab_x, lab_y, kL=1.0, kC=1.0, kH=1.0)
        np.testing.assert_allclose(got_px.reshape(-1), ref_px, rtol=0, atol=1e-9)
    assert la.shape == lb.shape


def test_delta_e00_branch_band_matters():
    """Without the exact recomputation near the branch point, the antipodal pairs may land on the other
    branch; with it they never do. (Shows the recomputation is exercised: the flagged set is non-empty.)"""
    a = np.array([[p for p, _ in ANTIPODAL]], np.uint8)
    b = np.array([[q for _, q in ANTIPODAL]], np.uint8)
    la = kernels_color.lab_of(a, rgb_to_xyz=MATRIX)
    lb = kernels_color.lab_of(b, rgb_to_xyz=MATRIX)
    from pytest_pstbench.metrics import kernels_color as kc

    L1, C1, h1, L2, C2, h2 = kc._polar_fast(*la.lab.view(3, -1), *lb.lab.view(3, -1))
    assert int(kc._near_branch(C1, h1, C2, h2).sum()) == len(ANTIPODAL)


@pytest.mark.parametrize("device", DEVICES)
def test_delta_e00_reuse_equals_one_shot(full_hd, device):
    _, _, ref = full_hd[1]
    lab_ref = kernels_color.lab_of(ref, rgb_to_xyz=MATRIX, device=device)
    for seed in (21, 22):
        out = method_output(ref, seed)
        lab_out = kernels_color.lab_of(out, rgb_to_xyz=MATRIX, device=device)
        reused = kernels_color.delta_e00_from_lab(lab_out, lab_ref, kL=1.0, kC=1.0, kH=1.0)
        assert reused == kernels_color.delta_e00_fast(out, ref, **DE_P, device=device)


def test_delta_e00_white_point_given():
    out, ref = small_cases()[0][1:]
    wp = [0.95047, 1.0, 1.08883]
    want = color.delta_e00(out, ref, **DE_P, white_point=wp)
    assert abs(kernels_color.delta_e00_fast(out, ref, **DE_P, white_point=wp) - want) <= DE_TOL


def test_lab_of_matches_srgb_to_lab():
    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, (64, 256, 3), dtype=np.uint8)
    img[0, :, 0] = img[0, :, 1] = img[0, :, 2] = np.arange(256)  # every grey
    got = kernels_color.lab_of(img, rgb_to_xyz=MATRIX).lab.permute(1, 2, 0).numpy()
    np.testing.assert_allclose(got, color.srgb_to_lab(img, MATRIX), rtol=0, atol=1e-10)


@pytest.mark.parametrize("shape", [(1, 1), (7, 1), (1, 9), (2, 2), (37, 53), (1080, 1920)])
def test_exact_path_gathers_the_reference_bits(shape):
    """The pixels recomputed near the branch points get bit for bit the CIELAB of the full-image conversion."""
    rng = np.random.default_rng(shape[0] * 7919 + shape[1])
    img = rng.integers(0, 256, shape + (3,), dtype=np.uint8)
    full = color.srgb_to_lab(img, MATRIX).reshape(-1, 3)
    n = img.shape[0] * img.shape[1]
    for k in sorted({1, min(n, 2), min(n, 5), min(n, 1000)}):
        idx = rng.choice(n, size=k, replace=False)
        got = color.srgb_to_lab(kernels_color._gather_like_full(img, idx), MATRIX).reshape(-1, 3)[:k]
        assert np.array_equal(got, full[idx]), (shape, k)


def test_real_photos_hit_the_branch_point(full_hd):
    """Quantised dark colours make exactly antipodal hues common: the exact path is not an exotic case."""
    _, out, ref = full_hd[0]
    la, lb = kernels_color.lab_of(out, rgb_to_xyz=MATRIX), kernels_color.lab_of(ref, rgb_to_xyz=MATRIX)
    polar = kernels_color._polar_fast(*la.lab.view(3, -1), *lb.lab.view(3, -1))
    assert int(kernels_color._near_branch(polar[1], polar[2], polar[4], polar[5]).sum()) > 0


# ---------------------------------------------------------------- the registry's classes in the metric engine


def test_cie76_and_ciede2000_from_one_cielab_match_skimage(full_hd):
    import skimage.color

    from pytest_pstbench.metrics.scorer import MetricComputer

    name, out, ref = full_hd[0]
    base = {"kind": "ciede2000", "against": "reference", **DE_P}
    engine = MetricComputer()
    other_store, output_store = {}, {}
    stores = (other_store, "reference", output_store, "output")
    de00 = engine.value(base, out, ref, stores=stores)
    de76 = engine.value({**base, "formula": "cie76"}, out, ref, stores=stores)
    assert len(other_store) == 1 and len(output_store) == 1  # one CIELAB per image, shared by both formulas
    lab_out, lab_ref = color.srgb_to_lab(out, MATRIX), color.srgb_to_lab(ref, MATRIX)
    assert abs(de76 - skimage.color.deltaE_cie76(lab_out, lab_ref).mean()) < DE_TOL
    assert abs(de00 - skimage.color.deltaE_ciede2000(lab_out, lab_ref, channel_axis=-1).mean()) < DE_TOL


def test_hist_corr_class_matches_numpy_and_shares_histograms():
    from pytest_pstbench.metrics.scorer import MetricComputer

    ref = photo("chelsea", (96, 64))
    out = method_output(ref, 3)
    style = photo("coffee", (40, 30))  # another size: histograms do not need one
    params = {"kind": "hist_corr", "against": "reference", "bins": 64, "constant_both": 1.0, "constant_one": 0.0}
    engine = MetricComputer()
    output_store: dict = {}
    got_ref = engine.value(params, out, ref, stores=({}, "reference", output_store, "output"))
    got_style = engine.value(params, out, style, stores=({}, "style", output_store, "output"))
    assert len(output_store) == 1  # the output's histograms once for both

    def numpy_reference(a, b):
        vals = []
        for c in range(3):
            h1 = np.histogram(a[..., c], bins=64, range=(0, 256))[0].astype(float)
            h2 = np.histogram(b[..., c], bins=64, range=(0, 256))[0].astype(float)
            vals.append(np.corrcoef(h1, h2)[0, 1])
        return float(np.mean(vals))

    assert got_ref == pytest.approx(numpy_reference(out, ref), abs=1e-12)
    assert got_style == pytest.approx(numpy_reference(out, style), abs=1e-12)


# ---------------------------------------------------------------- PSNR and histograms on the device


@pytest.mark.parametrize("device", DEVICES)
def test_psnr_class_equals_skimage_and_the_numpy_mse(full_hd, device):
    import skimage.metrics

    from pytest_pstbench.metrics import fidelity
    from pytest_pstbench.metrics.kernels import PsnrMetric

    m = PsnrMetric({"kind": "psnr", "data_range": 255, "cap_db": 100.0}, device)
    for name, out, ref in full_hd + small_cases():
        diff = out.astype(np.float64) - ref.astype(np.float64)
        assert m.mse(out, ref) == float(np.mean(diff * diff)), name  # exact in integers on every device
        expected = (
            100.0 if not diff.any() else min(100.0, skimage.metrics.peak_signal_noise_ratio(ref, out, data_range=255))
        )
        assert m.distance(out, ref) == pytest.approx(expected, abs=1e-9), name
        assert m.distance(out, ref) == fidelity.psnr(out, ref, data_range=255, cap_db=100.0)


def test_psnr_class_luma_uses_the_reference_function():
    from pytest_pstbench.metrics import fidelity
    from pytest_pstbench.metrics.kernels import PsnrMetric

    ref = photo("chelsea", (53, 37))
    out = method_output(ref, 1)
    w = [0.299, 0.587, 0.114]
    m = PsnrMetric({"kind": "psnr", "data_range": 255, "cap_db": 100.0, "channels": "luma", "luma_weights": w})
    assert not m.fast
    assert m.distance(out, ref) == fidelity.psnr(
        out, ref, data_range=255, cap_db=100.0, channels="luma", luma_weights=w
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bins", [256, 64, 7, 1])
def test_channel_histograms_on_device_equal_numpy_histogram(full_hd, device, bins):
    from pytest_pstbench.metrics.kernels import channel_histograms_on

    for name, out, _ in full_hd[:1] + small_cases():
        got = channel_histograms_on(out, bins, device)
        for c in range(3):  # value v in bin floor(v * bins / 256): numpy's equal-width bins over [0, 256)
            edges = np.arange(bins + 1) * 256 / bins
            expected = np.histogram(out[..., c], bins=edges)[0].astype(np.float64)
            assert got[c].dtype == np.float64 and np.array_equal(got[c], expected), (name, c)


def test_channel_histograms_on_refuses_bad_bins():
    from pytest_pstbench.metrics.kernels import channel_histograms_on

    with pytest.raises(ValueError, match="bins must be a positive integer"):
        channel_histograms_on(np.zeros((4, 4, 3), np.uint8), 0)


def test_psnr_kind_is_the_device_class():
    from pytest_pstbench.metrics.kernels import PsnrMetric
    from pytest_pstbench.metrics.registry import get

    kind = get("psnr")
    assert kind.stateful and isinstance(kind.instance({"kind": "psnr", "data_range": 255, "cap_db": 100.0}), PsnrMetric)


# ---------------------------------------------------------------- values independent of torch's thread count


def test_metrics_and_torchs_thread_count():
    """What holds across torch's CPU thread counts (1, 2, 3), on full HD and odd sizes: every metric but
    LPIPS gives the same bits (torch's own CPU reductions split by thread: the kernels sum in numpy,
    `kernels_color.sum64`). LPIPS does not: oneDNN picks its convolution algorithm by thread count
    (measured here: 0.22090244038426526 / ...37325973 / ...35777357 at 1 / 2 / 3 threads), so its value
    is the same bits for the same thread count, within 1e-7 relative across thread counts (measured here: up
    to 5e-9), and the
    score cache is keyed by the thread count (`test_cache_key_names_torchs_thread_count`)."""
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.paired.engine import metric_computer, pair_scorer

    proto = load_protocol()
    vgg = {**proto.metrics["lpips"], "net": "vgg"}
    before = torch.get_num_threads()
    cases = [(photo("astronaut", (1920, 1080)), photo("coffee", (1920, 1080)))]
    cases += [
        (photo("chelsea", (w, h)), method_output(photo("chelsea", (w, h)), w)) for w, h in ((333, 251), (640, 481))
    ]
    try:
        for ref, style in cases:
            out = method_output(ref, 9)
            seen = {}
            for threads in (1, 2, 3, 2):
                torch.set_num_threads(threads)
                values = pair_scorer(proto).score(out, ref, style)
                if ref.shape[1] < 1000:
                    values["lpips_vgg"] = metric_computer().value(vgg, out, ref)
                if threads in seen:  # the same thread count again: the same bits, every metric
                    assert values == seen[threads]
                seen[threads] = values
            exact = {k: [seen[t][k] for t in (1, 2, 3)] for k in seen[1] if not k.startswith("lpips")}
            assert all(len(set(v)) == 1 for v in exact.values()), exact
            for k in ("lpips", "lpips_vgg"):
                if k in seen[1]:
                    assert [seen[t][k] for t in (2, 3)] == pytest.approx([seen[1][k]] * 2, rel=1e-7, abs=0)
    finally:
        torch.set_num_threads(before)


# ---------------------------------------------------------------- SSIM on luma and with Wang's downsampling


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "variant",
    [
        {"channels": "luma", "luma_weights": [0.299, 0.587, 0.114]},
        {"downsample": "wang"},
        {"channels": "luma", "luma_weights": [0.2126, 0.7152, 0.0722], "downsample": "wang"},
        {
            "gaussian_weights": False,
            "win_size": 7,
            "use_sample_covariance": True,
            "channels": "luma",
            "luma_weights": [0.299, 0.587, 0.114],
        },
    ],
)
def test_ssim_class_luma_and_wang_equal_fidelity_ssim(full_hd, device, variant):
    """The kernel on the float64 planes `fidelity.ssim` gives skimage (luma; Wang's box downsampling):
    skimage's value on full HD, odd, flat and extreme images; too small after downsampling: the
    reference function's one-line error."""
    from pytest_pstbench.core.errors import UserError
    from pytest_pstbench.metrics import fidelity
    from pytest_pstbench.metrics.kernels import SsimMetric

    params = {"kind": "ssim", **SSIM_P, **variant}
    m = SsimMetric(params, device)
    assert m.fast
    kw = {k: v for k, v in params.items() if k != "kind"}
    for name, out, ref in (
        full_hd + small_cases() + [("odd", method_output(photo("coffee", (777, 523)), 2), photo("coffee", (777, 523)))]
    ):
        try:
            expected = fidelity.ssim(out, ref, **kw)
        except UserError as exc:
            with pytest.raises(UserError, match="SSIM with this window needs"):
                m.distance(out, ref)
            assert "window needs" in str(exc)
            continue
        assert abs(m.distance(out, ref) - expected) < 1e-12, name
