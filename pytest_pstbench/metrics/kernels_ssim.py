"""SSIM as float64 banded matrix products on torch (CPU threads or CUDA), equal to skimage's value.

The protocol's SSIM is skimage's `structural_similarity` per RGB plane on the float64 values, cropped
to the valid region (the border of half a window is dropped), then the mean of the three planes. In that
region every window lies inside the image, so the Gaussian (or uniform) filter is a plain "valid"
correlation and no boundary mode is involved. Each separable pass is computed as a product with a banded
matrix: the image is cut into strips of `b` output rows; a strip of `b + 2r` input rows times a
`b x (b + 2r)` band gives the vertical pass for every map and channel in one GEMM, and the horizontal pass
is one GEMM of the overlapping `b2 + 2r` column windows (`unfold`) with a `(b2 + 2r) x b2` band. BLAS does
the work at near peak speed in float64, so the variances `E[x^2] - E[x]^2` are formed in float64 as in
skimage (float32 loses ~1e-6 of SSIM to that cancellation in flat regions).

Maps per channel: mu_x, mu_y, E[x^2 + y^2], E[xy] (only the sum of the two variances enters SSIM). The
reference's mu_y is computed once (`ssim_reference_stats`) and reused for every output scored against it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

K1, K2 = 0.01, 0.03  # skimage's defaults (Wang et al. 2004)
TRUNCATE = 3.5  # skimage's Gaussian truncation


def window_taps(*, gaussian_weights: bool, sigma: float, win_size: int = 7) -> np.ndarray:
    """The 1-D filter skimage applies: scipy's Gaussian kernel (radius int(3.5 sigma + 0.5)) or a box."""
    if gaussian_weights:
        radius = int(TRUNCATE * float(sigma) + 0.5)
        x = np.arange(-radius, radius + 1, dtype=np.float64)
        phi = np.exp(-0.5 / (float(sigma) * float(sigma)) * x * x)
        return phi / phi.sum()
    win = int(win_size)
    if win < 1 or win % 2 != 1:
        raise ValueError(f"win_size must be odd and positive, got {win_size!r}")
    return np.full(win, 1.0 / win)


def _band(taps: np.ndarray, rows: int) -> np.ndarray:
    """rows x (rows + len(taps) - 1): row i holds the taps at columns i .. i + len(taps) - 1."""
    k = len(taps)
    g = np.zeros((rows, rows + k - 1))
    for i in range(rows):
        g[i, i : i + k] = taps
    return g


def _tensor(img, device):
    """uint8 HxWx3 (numpy or torch) -> torch uint8 tensor on `device` (no copy on CPU when possible)."""
    import torch

    if isinstance(img, torch.Tensor):
        return img.to(device)
    a = np.ascontiguousarray(img)
    if not a.flags.writeable:
        a = a.copy()
    return torch.from_numpy(a).to(device)


def _check(img, name="image"):
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f"expected an HxWx3 array for {name}, got shape {tuple(img.shape)}")
    if str(img.dtype) not in ("uint8", "torch.uint8"):
        raise ValueError(f"expected uint8 values for {name}, got {img.dtype}")


def _strip_sizes(device) -> tuple[int, int]:
    """(output rows per strip, output columns per horizontal block): cache-sized on CPU, large on CUDA."""
    return (16, 64) if str(device).startswith("cpu") else (256, 128)


class _Filter:
    """Valid separable correlation of (rows, maps, 3, W) float64 slabs, strip by strip."""

    def __init__(self, taps: np.ndarray, width: int, device, rows: int, cols: int):
        import torch

        self.r = (len(taps) - 1) // 2
        self.rows, self.cols = rows, cols
        self.width = width
        self.wp = width - 2 * self.r
        self.nb = -(-self.wp // cols)
        self.wpad = self.nb * cols + 2 * self.r  # the unfold needs this many columns (zeros beyond `width`)
        self.gv = torch.from_numpy(_band(taps, rows)).to(device)
        self.ght = torch.from_numpy(_band(taps, cols).T.copy()).to(device)

    def apply(self, slab, n: int):
        """slab: (n + 2r, maps, 3, wpad) -> (maps, n, 3, wp): the filtered maps of n output rows."""
        import torch

        m = n + 2 * self.r
        maps = slab.shape[1]
        v = torch.matmul(self.gv[:n, :m], slab[:m].reshape(m, -1))  # vertical pass: one GEMM
        v = v.view(n, maps, 3, self.wpad).transpose(0, 1).reshape(maps * n * 3, self.wpad)
        f = torch.matmul(v.unfold(1, self.cols + 2 * self.r, self.cols), self.ght)  # horizontal pass
        return f.view(maps, n, 3, self.nb * self.cols)[..., : self.wp]


@dataclass(frozen=True)
class SsimReferenceStats:
    """What SSIM needs of a reference, computed once: its pixels and its filtered mean mu_y per channel."""

    reference: object  # torch uint8 HxWx3 on `device`
    mu: object  # torch float64 (Hv, 3, Wv): the windowed means over the valid region
    params: tuple  # (data_range, gaussian_weights, sigma, use_sample_covariance, win_size)
    device: str


def _win(gaussian_weights, sigma, win_size) -> int:
    return 2 * int(TRUNCATE * sigma + 0.5) + 1 if gaussian_weights else int(win_size)


def _size_check(shape, win):
    height, width = int(shape[0]), int(shape[1])
    if min(height, width) < win:
        from pytest_pstbench.core.errors import UserError

        raise UserError(
            f"image of {width}x{height} pixels: SSIM with this window needs at least {win}x{win}; "
            "fix: score images of at least that size"
        )


def ssim_reference_stats(
    reference,
    *,
    data_range: float,
    gaussian_weights: bool,
    sigma: float,
    use_sample_covariance: bool,
    channel_pooling: str = "mean",
    win_size: int = 7,
    device: str = "cpu",
) -> SsimReferenceStats:
    """The reference-only part of SSIM (pixels on the device and mu_y), for `ssim_from_stats`."""
    import torch

    if channel_pooling != "mean":
        raise ValueError(f"unsupported channel_pooling {channel_pooling!r}")
    _check(reference, "reference")
    win = _win(gaussian_weights, sigma, win_size)
    _size_check(reference.shape, win)
    ref = _tensor(reference, device)
    taps = window_taps(gaussian_weights=gaussian_weights, sigma=sigma, win_size=win_size)
    height, width = ref.shape[:2]
    rows, cols = _strip_sizes(device)
    filt = _Filter(taps, width, device, rows, cols)
    r = filt.r
    hv = height - 2 * r
    mu = torch.empty((hv, 3, filt.wp), dtype=torch.float64, device=device)
    slab = torch.zeros((rows + 2 * r, 1, 3, filt.wpad), dtype=torch.float64, device=device)
    for i0 in range(0, hv, rows):
        n = min(rows, hv - i0)
        slab[: n + 2 * r, 0, :, :width] = ref[i0 : i0 + n + 2 * r].permute(0, 2, 1)
        mu[i0 : i0 + n] = filt.apply(slab, n)[0]
    params = (float(data_range), bool(gaussian_weights), float(sigma), bool(use_sample_covariance), int(win_size))
    return SsimReferenceStats(reference=ref, mu=mu, params=params, device=str(device))


def ssim_from_stats(output, stats: SsimReferenceStats) -> float:
    """Mean SSIM of `output` against the reference summarised by `stats` (skimage's value, float64)."""
    import torch

    _check(output, "output")
    ref = stats.reference
    if tuple(output.shape) != tuple(ref.shape):
        raise ValueError(f"expected two HxWx3 arrays of one shape, got {tuple(output.shape)} and {tuple(ref.shape)}")
    data_range, gaussian_weights, sigma, use_sample_covariance, win_size = stats.params
    device = stats.device
    out = _tensor(output, device)
    taps = window_taps(gaussian_weights=gaussian_weights, sigma=sigma, win_size=win_size)
    win = len(taps)
    height, width = out.shape[:2]
    rows, cols = _strip_sizes(device)
    filt = _Filter(taps, width, device, rows, cols)
    r = filt.r
    hv, wv = height - 2 * r, filt.wp
    c1 = (K1 * data_range) ** 2
    c2 = (K2 * data_range) ** 2
    cov_norm = win * win / (win * win - 1.0) if use_sample_covariance else 1.0
    total = torch.zeros(3, dtype=torch.float64, device=device)
    slab = torch.zeros((rows + 2 * r, 3, 3, filt.wpad), dtype=torch.float64, device=device)
    for i0 in range(0, hv, rows):
        n = min(rows, hv - i0)
        m = n + 2 * r
        x = slab[:m, 0, :, :width]
        x.copy_(out[i0 : i0 + m].permute(0, 2, 1))
        y = ref[i0 : i0 + m].permute(0, 2, 1).to(torch.float64)
        torch.mul(x, x, out=slab[:m, 1, :, :width]).addcmul_(y, y)  # x^2 + y^2 (exact integers)
        torch.mul(x, y, out=slab[:m, 2, :, :width])  # xy (exact integers)
        mx, sq, sxy = filt.apply(slab, n)
        my = stats.mu[i0 : i0 + n]
        mxy = mx * my
        b1 = torch.addcmul(my * my, mx, mx)  # mu_x^2 + mu_y^2
        a2 = (sxy - mxy).mul_(2.0 * cov_norm).add_(c2)
        b2 = (sq - b1).mul_(cov_norm).add_(c2)
        a1 = mxy.mul_(2.0).add_(c1)
        s = a1.mul_(a2).div_(b1.add_(c1).mul_(b2))
        total += s.sum(dim=(0, 2))
    per_channel = total / float(hv * wv)
    return float(per_channel.mean())


def ssim_fast(
    output,
    reference,
    *,
    data_range: float,
    gaussian_weights: bool,
    sigma: float,
    use_sample_covariance: bool,
    channel_pooling: str = "mean",
    win_size: int = 7,
    device: str = "cpu",
) -> float:
    """SSIM with the arguments of `fidelity.ssim` (RGB, no downsampling): `ssim_from_stats` of the reference's stats."""
    stats = ssim_reference_stats(
        reference,
        data_range=data_range,
        gaussian_weights=gaussian_weights,
        sigma=sigma,
        use_sample_covariance=use_sample_covariance,
        channel_pooling=channel_pooling,
        win_size=win_size,
        device=device,
    )
    return ssim_from_stats(output, stats)
