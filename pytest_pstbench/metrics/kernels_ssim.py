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

from dataclasses import dataclass

import numpy as np

from pytest_pstbench.metrics.kernels_color import sum64
from pytest_pstbench.metrics.registry import SSIM_TRUNCATE, SsimParams, ssim_window

K1, K2 = 0.01, 0.03  # skimage's defaults (Wang et al. 2004)
TRUNCATE = SSIM_TRUNCATE  # skimage's Gaussian truncation


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
    if isinstance(img, FloatPlanes):
        return
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError(f"expected an HxWx3 array for {name}, got shape {tuple(img.shape)}")
    if str(img.dtype) not in ("uint8", "torch.uint8"):
        raise ValueError(f"expected uint8 values for {name}, got {img.dtype}")


@dataclass(frozen=True)
class FloatPlanes:
    """Planes to compare as they are (float64 numpy, C x H x W): e.g. a luma plane, or planes downsampled
    as Wang's ssim.m does (`fidelity.channel_planes`, `fidelity.box_downsample`)."""

    planes: np.ndarray

    @property
    def plane_shape(self) -> tuple[int, int]:
        return int(self.planes.shape[1]), int(self.planes.shape[2])


def _strip_sizes(device) -> tuple[int, int]:
    """(output rows per strip, output columns per horizontal block): cache-sized on CPU, large on CUDA.

    On CPU the horizontal block is 24 columns: the band GEMM then multiplies (.., 34) windows by a 34 x 24
    band, 70 flops per output instead of 148 with 64 columns, and BLAS runs that shape at full speed
    (interleaved timings at 1920x1080, 9 maps: 27-52 ms vs 54-72 ms per image; SSIM of one output 0.15 vs 0.20 s)."""
    return (16, 24) if str(device).startswith("cpu") else (256, 128)


class _Filter:
    """Valid separable correlation of (maps, m, W) float64 slabs (m = n + 2r input rows), strip by strip."""

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

    def slab(self, maps: int):
        import torch

        return torch.zeros((maps, self.rows + 2 * self.r, self.wpad), dtype=torch.float64, device=self.gv.device)

    def apply(self, slab, n: int):
        """slab: (maps, >= n + 2r, wpad) -> (maps, n, wp): the filtered maps of n output rows."""
        import torch

        m = n + 2 * self.r
        maps = slab.shape[0]
        k = self.cols + 2 * self.r
        v = torch.matmul(self.gv[:n, :m], slab[:, :m])  # vertical pass: (maps, n, wpad), batched GEMM
        windows = v.view(maps * n, self.wpad).unfold(1, k, self.cols).reshape(-1, k)  # one copy
        f = torch.mm(windows, self.ght)  # horizontal pass: one GEMM
        return f.view(maps, n, self.nb * self.cols)[..., : self.wp]


@dataclass(frozen=True)
class SsimReferenceStats:
    """What SSIM needs of a reference, computed once: its planes y (uint8, 3xHxW) and the windowed means
    mu_y over the valid region (float64, 3 x Hv x Wv), on `device`."""

    y: object
    mu: object
    params: SsimParams  # with data_range and sigma as float, win_size as int
    device: str


def _size_check(shape, win):
    height, width = int(shape[0]), int(shape[1])
    if min(height, width) < win:
        from pytest_pstbench.core.errors import UserError

        raise UserError(
            f"image of {width}x{height} pixels: SSIM with this window needs at least {win}x{win}; "
            "fix: score images of at least that size"
        )


def _planes(img, device):
    """uint8 HxWx3 -> uint8 3xHxW on `device` (converted to float64 strip by strip, in cache); `FloatPlanes`
    -> their float64 C x H x W tensor on `device`."""
    if isinstance(img, FloatPlanes):
        import torch

        return torch.from_numpy(np.ascontiguousarray(img.planes, dtype=np.float64)).to(device)
    return _tensor(img, device).permute(2, 0, 1).contiguous()


def _plane_shape(img) -> tuple[int, int]:
    return img.plane_shape if isinstance(img, FloatPlanes) else (int(img.shape[0]), int(img.shape[1]))


def ssim_reference_stats(reference, *, device: str = "cpu", **params) -> SsimReferenceStats:
    """The reference-only part of SSIM (planes and mu_y on the device), for `ssim_from_stats`; `params` are
    those of `fidelity.ssim` (`registry.SsimParams`)."""
    import torch

    p = SsimParams(**params)
    if p.channel_pooling != "mean":
        raise ValueError(f"unsupported channel_pooling {p.channel_pooling!r}")
    _check(reference, "reference")
    win = ssim_window(p.gaussian_weights, p.sigma, p.win_size)
    _size_check(_plane_shape(reference), win)
    y = _planes(reference, device)
    nc = int(y.shape[0])
    taps = window_taps(gaussian_weights=p.gaussian_weights, sigma=p.sigma, win_size=p.win_size)
    height, width = y.shape[1:]
    rows, cols = _strip_sizes(device)
    filt = _Filter(taps, width, device, rows, cols)
    r = filt.r
    hv = height - 2 * r
    mu = torch.empty((nc, hv, filt.wp), dtype=torch.float64, device=device)
    slab = filt.slab(nc)
    for i0 in range(0, hv, rows):
        n = min(rows, hv - i0)
        slab[:, : n + 2 * r, :width] = y[:, i0 : i0 + n + 2 * r]
        mu[:, i0 : i0 + n] = filt.apply(slab, n)
    params = SsimParams(
        float(p.data_range),
        bool(p.gaussian_weights),
        float(p.sigma),
        bool(p.use_sample_covariance),
        p.channel_pooling,
        int(p.win_size),
    )
    return SsimReferenceStats(y=y, mu=mu, params=params, device=str(device))


def ssim_from_stats(output, stats: SsimReferenceStats) -> float:
    """Mean SSIM of `output` against the reference summarised by `stats` (skimage's value, float64)."""
    import torch

    _check(output, "output")
    nc = int(stats.y.shape[0])
    if _plane_shape(output) != (stats.y.shape[1], stats.y.shape[2]):
        raise ValueError(f"expected two images of one shape, got {_plane_shape(output)} and {tuple(stats.y.shape[1:])}")
    p = stats.params
    device = stats.device
    x_all = _planes(output, device)
    if x_all.shape[0] != nc:
        raise ValueError(f"expected {nc} planes, got {x_all.shape[0]}")
    taps = window_taps(gaussian_weights=p.gaussian_weights, sigma=p.sigma, win_size=p.win_size)
    win = len(taps)
    height, width = x_all.shape[1:]
    rows, cols = _strip_sizes(device)
    filt = _Filter(taps, width, device, rows, cols)
    r = filt.r
    hv, wv = height - 2 * r, filt.wp
    c1 = (K1 * p.data_range) ** 2
    c2 = (K2 * p.data_range) ** 2
    cov_norm = win * win / (win * win - 1.0) if p.use_sample_covariance else 1.0
    total = [0.0] * nc  # per plane, summed in an order independent of torch's thread count (`sum64`)
    slab = filt.slab(3 * nc)  # maps [0, nc): x per plane, then x^2 + y^2, then xy (exact integers for uint8)
    ybuf = torch.empty((nc, rows + 2 * r, width), dtype=torch.float64, device=device)
    for i0 in range(0, hv, rows):
        n = min(rows, hv - i0)
        m = n + 2 * r
        rows_ = slice(i0, i0 + m)
        x = slab[0:nc, :m, :width]
        x.copy_(x_all[:, rows_])
        y = ybuf[:, :m]
        y.copy_(stats.y[:, rows_])
        torch.mul(y, y, out=slab[nc : 2 * nc, :m, :width]).addcmul_(x, x)
        torch.mul(x, y, out=slab[2 * nc : 3 * nc, :m, :width])
        f = filt.apply(slab, n)
        mx, sq, sxy = f[0:nc], f[nc : 2 * nc], f[2 * nc : 3 * nc]
        my = stats.mu[:, i0 : i0 + n]
        mxy = mx * my
        b1 = torch.addcmul(my * my, mx, mx)  # mu_x^2 + mu_y^2
        a2 = sxy - mxy
        b2 = sq - b1
        if cov_norm != 1.0:
            a2.mul_(cov_norm)
            b2.mul_(cov_norm)
        a2.mul_(2.0).add_(c2)
        b2.add_(c2)
        a1 = mxy.mul_(2.0).add_(c1)
        s = a1.mul_(a2).div_(b1.add_(c1).mul_(b2))
        for c in range(nc):
            total[c] += sum64(s[c])
    return float(np.mean([t / float(hv * wv) for t in total]))


def ssim_fast(output, reference, *, device: str = "cpu", **params) -> float:
    """SSIM with the arguments of `fidelity.ssim` (RGB, no downsampling): `ssim_from_stats` of the reference's stats."""
    return ssim_from_stats(output, ssim_reference_stats(reference, device=device, **params))
