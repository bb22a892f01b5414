"""PSNR, MSE and SSIM between two uint8 HxWx3 arrays, with the protocol's parameters.

References: PSNR as 10*log10(R^2/MSE), the MSE over all RGB values of the pair (`channels: rgb`)
or over a luma plane Y = wr*R' + wg*G' + wb*B' of the 8-bit values (`channels: luma`, weights
from the protocol, e.g. BT.601); SSIM after Wang, Bovik, Sheikh & Simoncelli (2004), computed by
`skimage.metrics.structural_similarity`, optionally after the downsampling step of Wang's
reference implementation `ssim.m` (`downsample: wang`).
"""

from __future__ import annotations

import math

import numpy as np

from pytest_pstbench.metrics.registry import CHANNELS, SsimParams  # the values allowed
from pytest_pstbench.metrics.registry import SSIM_DOWNSAMPLE as DOWNSAMPLE


def luma(img: np.ndarray, weights) -> np.ndarray:
    """The weighted sum wr*R + wg*G + wb*B of the 8-bit values as float64 (no rounding, no offset)."""
    wr, wg, wb = (float(w) for w in weights)
    x = img.astype(np.float64)
    return wr * x[..., 0] + wg * x[..., 1] + wb * x[..., 2]


def channel_planes(img: np.ndarray, channels: str, luma_weights) -> list[np.ndarray]:
    """The float64 planes a metric works on: R, G, B, or the single luma plane."""
    if channels not in CHANNELS:
        raise ValueError(f"unsupported channels {channels!r} (rgb or luma)")
    if channels == "rgb":
        return [img[..., c].astype(np.float64) for c in range(img.shape[2])]
    if channels == "luma":
        if luma_weights is None or len(luma_weights) != 3:
            raise ValueError("channels 'luma' needs luma_weights [wr, wg, wb]")
        return [luma(img, luma_weights)]
    raise AssertionError(channels)  # CHANNELS and this function disagree


def mse(output: np.ndarray, reference: np.ndarray, *, channels: str = "rgb", luma_weights=None) -> float:
    """Mean squared error over all RGB values of the pair, or over the luma plane."""
    _check_pair(output, reference)
    if channels == "rgb" and output.dtype == np.uint8 and reference.dtype == np.uint8:
        # exact in integers: the float64 mean of these integer squares is exact too (every partial sum < 2**53),
        # so this is the same value, bit for bit, at a fifth of the cost
        d = np.subtract(output, reference, dtype=np.int32)
        np.multiply(d, d, out=d)
        return float(int(d.sum(dtype=np.int64)) / d.size)
    if channels == "rgb":
        diff = output.astype(np.float64) - reference.astype(np.float64)
    else:
        (a,), (b,) = channel_planes(output, channels, luma_weights), channel_planes(reference, channels, luma_weights)
        diff = a - b
    return float(np.mean(diff * diff))


def psnr(
    output: np.ndarray,
    reference: np.ndarray,
    *,
    data_range: float,
    cap_db: float,
    channels: str = "rgb",
    luma_weights=None,
) -> float:
    """Peak signal-to-noise ratio in dB over all values of the pair (or of its luma plane), capped at `cap_db`.

    Identical images (MSE 0) give `cap_db`.
    """
    return psnr_from_mse(
        mse(output, reference, channels=channels, luma_weights=luma_weights), data_range=data_range, cap_db=cap_db
    )


def psnr_from_mse(err: float, *, data_range: float, cap_db: float) -> float:
    """PSNR in dB of a mean squared error: 10 log10(data_range^2 / err), capped at `cap_db` (and `cap_db` for 0)."""
    if err == 0.0:
        return float(cap_db)
    return float(min(cap_db, 10.0 * math.log10(data_range * data_range / err)))


def wang_factor(height: int, width: int) -> int:
    """Downsampling factor of Wang's ssim.m: f = max(1, round(min(M, N) / 256)).

    MATLAB's round() takes halves away from zero (round(2.5) = 3), unlike Python's round().
    """
    return max(1, int(math.floor(min(height, width) / 256.0 + 0.5)))


def box_downsample(plane: np.ndarray, f: int) -> np.ndarray:
    """MATLAB `img = imfilter(img, ones(f)/f^2, 'symmetric', 'same'); img = img(1:f:end, 1:f:end)`.

    MATLAB's 'symmetric' boundary mirrors the array with the border value repeated (c b a | a b c | c b a):
    that is scipy.ndimage's mode 'reflect' (scipy's 'mirror' leaves the border value out: c b | a b c | b a).
    imfilter puts the kernel's centre at floor((f + 1) / 2) (1-based), so for an even f the window covers
    offsets -(f/2 - 1) .. f/2; scipy centres an even window at f // 2 (offsets -f/2 .. f/2 - 1), hence
    origin -1 for even f to match.
    """
    if f <= 1:
        return plane
    from scipy.ndimage import uniform_filter

    filtered = uniform_filter(
        np.asarray(plane, dtype=np.float64), size=f, mode="reflect", origin=-1 if f % 2 == 0 else 0
    )
    return filtered[::f, ::f]


def ssim(
    output: np.ndarray,
    reference: np.ndarray,
    *,
    channels: str = "rgb",
    luma_weights=None,
    downsample: str = "none",
    **params,
) -> float:
    """Mean SSIM over skimage's valid (border-cropped) region: per RGB channel then the mean of channels,
    or on the luma plane. `params`: skimage's parameters (`registry.SsimParams`: data_range, gaussian_weights,
    sigma, use_sample_covariance; channel_pooling, win_size, the uniform window's side, used when
    gaussian_weights is false). `downsample: wang` first downsamples each plane as Wang's ssim.m does
    (`wang_factor`, `box_downsample`).
    """
    from skimage.metrics import structural_similarity

    p = SsimParams(**params)
    _check_pair(output, reference)
    if p.channel_pooling != "mean":
        raise ValueError(f"unsupported channel_pooling {p.channel_pooling!r}")
    if downsample not in DOWNSAMPLE:
        raise ValueError(f"unsupported downsample {downsample!r} (none or wang)")
    planes_out = channel_planes(output, channels, luma_weights)
    planes_ref = channel_planes(reference, channels, luma_weights)
    if downsample == "wang":
        f = wang_factor(*output.shape[:2])
        planes_out = [box_downsample(p, f) for p in planes_out]
        planes_ref = [box_downsample(p, f) for p in planes_ref]
    # skimage's Gaussian window spans 2 * int(3.5 * sigma + 0.5) + 1 pixels (truncate = 3.5).
    win = 2 * int(3.5 * p.sigma + 0.5) + 1 if p.gaussian_weights else int(p.win_size)
    height, width = planes_out[0].shape
    if min(height, width) < win:
        from pytest_pstbench.core.errors import UserError

        scaled = f" ({width}x{height} after downsampling)" if (height, width) != output.shape[:2] else ""
        raise UserError(
            f"image of {output.shape[1]}x{output.shape[0]} pixels{scaled}: SSIM with this "
            f"window needs at least {win}x{win}; fix: score images of at least that size"
        )
    extra = {} if p.gaussian_weights else {"win_size": int(p.win_size)}
    per_plane = [
        structural_similarity(
            a,
            b,
            data_range=p.data_range,
            gaussian_weights=p.gaussian_weights,
            sigma=p.sigma,
            use_sample_covariance=p.use_sample_covariance,
            **extra,
        )
        for a, b in zip(planes_out, planes_ref)
    ]
    return float(np.mean(per_plane))


def _check_pair(a: np.ndarray, b: np.ndarray) -> None:
    if a.shape != b.shape or a.ndim != 3 or a.shape[2] != 3:
        raise ValueError(f"expected two HxWx3 arrays of one shape, got {a.shape} and {b.shape}")
