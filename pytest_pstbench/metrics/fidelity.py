"""PSNR and SSIM between two uint8 HxWx3 arrays, with the protocol's parameters.

References: PSNR as 10*log10(R^2/MSE) with the MSE over all RGB values of the pair;
SSIM after Wang, Bovik, Sheikh & Simoncelli (2004), computed by
`skimage.metrics.structural_similarity`.
"""
from __future__ import annotations

import math

import numpy as np


def psnr(output: np.ndarray, reference: np.ndarray, *, data_range: float, cap_db: float) -> float:
    """Peak signal-to-noise ratio in dB over all values of the pair, capped at `cap_db`.

    Identical images (MSE 0) give `cap_db`.
    """
    _check_pair(output, reference)
    diff = output.astype(np.float64) - reference.astype(np.float64)
    mse = float(np.mean(diff * diff))
    if mse == 0.0:
        return float(cap_db)
    return float(min(cap_db, 10.0 * math.log10(data_range * data_range / mse)))


def ssim(
    output: np.ndarray,
    reference: np.ndarray,
    *,
    data_range: float,
    gaussian_weights: bool,
    sigma: float,
    use_sample_covariance: bool,
    channel_pooling: str = "mean",
) -> float:
    """Mean SSIM: per RGB channel over skimage's valid (border-cropped) region, then the mean of channels."""
    from skimage.metrics import structural_similarity

    _check_pair(output, reference)
    # skimage's Gaussian window spans 2 * int(3.5 * sigma + 0.5) + 1 pixels (truncate = 3.5).
    win = 2 * int(3.5 * sigma + 0.5) + 1 if gaussian_weights else 7
    if min(output.shape[:2]) < win:
        from ..errors import UserError

        raise UserError(
            f"image of {output.shape[1]}x{output.shape[0]} pixels: SSIM with this window needs at least "
            f"{win}x{win}; fix: score images of at least that size"
        )
    if channel_pooling != "mean":
        raise ValueError(f"unsupported channel_pooling {channel_pooling!r}")
    per_channel = [
        structural_similarity(
            output[..., c].astype(np.float64),
            reference[..., c].astype(np.float64),
            data_range=data_range,
            gaussian_weights=gaussian_weights,
            sigma=sigma,
            use_sample_covariance=use_sample_covariance,
        )
        for c in range(output.shape[2])
    ]
    return float(np.mean(per_channel))


def _check_pair(a: np.ndarray, b: np.ndarray) -> None:
    if a.shape != b.shape or a.ndim != 3 or a.shape[2] != 3:
        raise ValueError(f"expected two HxWx3 arrays of one shape, got {a.shape} and {b.shape}")
