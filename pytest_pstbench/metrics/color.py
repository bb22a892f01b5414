"""Colour metrics: colour difference in CIELAB (CIEDE2000 or CIE76) and histogram correlation.

CIEDE2000 follows Sharma, Wu & Dalal (2005) as implemented by `skimage.color.deltaE_ciede2000`;
CIE76 is the Euclidean distance in CIELAB. The sRGB -> CIELAB conversion is written here so that
the matrix and white point come from the protocol file (white point = row sums of the matrix
unless the protocol gives `white_point`; not skimage's default D65 values).
"""

from __future__ import annotations

import numpy as np

from pytest_pstbench.metrics.registry import DELTA_E_FORMULAS as FORMULAS  # the formulas allowed


def srgb_to_lab(rgb: np.ndarray, rgb_to_xyz, white_point=None) -> np.ndarray:
    """uint8 sRGB HxWx3 -> CIELAB (float64), decoding with the standard sRGB transfer function.

    The reference white is `white_point` [Xn, Yn, Zn] when given, else the row sums of `rgb_to_xyz`.
    """
    m = np.asarray(rgb_to_xyz, dtype=np.float64)
    c = rgb.astype(np.float64) / 255.0
    lin = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    xyz = lin @ m.T
    white = m.sum(axis=1) if white_point is None else np.asarray(white_point, dtype=np.float64)
    t = xyz / white
    eps = (6.0 / 29.0) ** 3
    f = np.where(t > eps, np.cbrt(t), t / (3.0 * (6.0 / 29.0) ** 2) + 4.0 / 29.0)
    lab = np.empty_like(f)
    lab[..., 0] = 116.0 * f[..., 1] - 16.0
    lab[..., 1] = 500.0 * (f[..., 0] - f[..., 1])
    lab[..., 2] = 200.0 * (f[..., 1] - f[..., 2])
    return lab


def delta_e00(
    output: np.ndarray,
    reference: np.ndarray,
    *,
    rgb_to_xyz,
    kL: float,
    kC: float,
    kH: float,
    pooling: str = "mean",
    transfer: str = "srgb",
    illuminant: str = "D65",
    observer: str = "2",
    formula: str = "ciede2000",
    white_point=None,
) -> float:
    """Mean colour difference over pixels: CIEDE2000 (`formula: ciede2000`) or CIE76 (`cie76`).

    `transfer` must be "srgb" (the only decoding implemented); `illuminant` and `observer` document
    the white point, which is `white_point` when given, else the row sums of `rgb_to_xyz`.
    """
    from skimage.color import deltaE_ciede2000

    if formula not in FORMULAS:
        raise ValueError(f"unsupported formula {formula!r} (ciede2000 or cie76)")
    if transfer != "srgb":
        raise ValueError(f"unsupported transfer {transfer!r} (only 'srgb')")

    if output.shape != reference.shape:
        raise ValueError(f"shapes differ: {output.shape} vs {reference.shape}")
    if pooling != "mean":
        raise ValueError(f"unsupported pooling {pooling!r}")
    if white_point is None:
        lab_out, lab_ref = srgb_to_lab(output, rgb_to_xyz), srgb_to_lab(reference, rgb_to_xyz)
    else:
        lab_out = srgb_to_lab(output, rgb_to_xyz, white_point=white_point)
        lab_ref = srgb_to_lab(reference, rgb_to_xyz, white_point=white_point)
    if formula == "cie76":
        diff = lab_out - lab_ref
        d = np.sqrt(np.sum(diff * diff, axis=-1))
    else:
        d = deltaE_ciede2000(lab_out, lab_ref, kL=kL, kC=kC, kH=kH, channel_axis=-1)
    return float(np.mean(d))


def hist_corr(
    output: np.ndarray,
    other: np.ndarray,
    *,
    bins: int,
    constant_both: float,
    constant_one: float,
    channel_pooling: str = "mean",
) -> float:
    """Pearson correlation of the `bins`-bin histograms of each 8-bit channel, mean over channels.

    A histogram with zero variance (all bins equal) makes Pearson's r undefined: the protocol's
    `constant_both` is used when both histograms of a channel are constant, `constant_one` when one is.
    """
    if channel_pooling != "mean":
        raise ValueError(f"unsupported channel_pooling {channel_pooling!r}")
    return hist_corr_from(
        channel_histograms(output, bins),
        channel_histograms(other, bins),
        constant_both=constant_both,
        constant_one=constant_one,
    )


def channel_histograms(img: np.ndarray, bins: int) -> list[np.ndarray]:
    """The three channels' counts (float64) of 8-bit values in `bins` equal-width bins over [0, 256):
    value v goes to bin floor(v * bins / 256). Counted per value, then summed into the bins."""
    check_bins(bins)
    if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f"expected a uint8 HxWx3 array, got {img.dtype} {img.shape}")
    flat = img.reshape(-1, 3)
    return histograms_from_counts([np.bincount(flat[:, c], minlength=256) for c in range(3)], bins)


def check_bins(bins) -> None:
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ValueError(f"bins must be a positive integer, got {bins!r}")


def histograms_from_counts(per_value, bins: int) -> list[np.ndarray]:
    """`channel_histograms` from each channel's count of every 8-bit value (three length-256 integer arrays)."""
    to_bin = np.arange(256) * int(bins) // 256
    out = []
    for counts in per_value:
        counts = np.asarray(counts, dtype=np.int64)
        if bins != 256:
            counts = np.bincount(to_bin, weights=counts, minlength=int(bins))  # sums of integers < 2**53: exact
        out.append(counts.astype(np.float64))
    return out


def hist_corr_from(
    h_out: list[np.ndarray], h_other: list[np.ndarray], *, constant_both: float, constant_one: float
) -> float:
    """`hist_corr` from the two images' `channel_histograms`."""
    vals = []
    for h1, h2 in zip(h_out, h_other):
        d1 = h1 - h1.mean()
        d2 = h2 - h2.mean()
        s1 = float(np.dot(d1, d1))
        s2 = float(np.dot(d2, d2))
        if s1 == 0.0 and s2 == 0.0:
            vals.append(float(constant_both))
        elif s1 == 0.0 or s2 == 0.0:
            vals.append(float(constant_one))
        else:
            vals.append(float(np.dot(d1, d2) / np.sqrt(s1 * s2)))
    return float(np.mean(vals))
