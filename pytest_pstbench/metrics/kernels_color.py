"""CIEDE2000 on torch (CPU threads or CUDA), within 1e-4 of skimage's `deltaE_ciede2000` on `color.srgb_to_lab`.

The formula is continuous except where the two hue angles are antipodal (|h2' - h1'| = pi: the mean hue
jumps by pi) and, far smaller, where the mean-hue sum crosses 2 pi; there the last bit of the hue angles
decides the branch, and torch's (or CUDA's) atan2/pow differ from numpy's in the last bit. So the kernel
computes every pixel in torch float64 and flags the pixels whose hues lie within `BRANCH_BAND` radians of
either branch point (with both chromas non-zero); those few pixels are recomputed on the CPU the way the
reference does: CIELAB by `color.srgb_to_lab` on the gathered pixels (shaped so that numpy's matrix
product takes the same path as for the full image, hence the same bits: `_gather_like_full`), then the
hue angles with numpy's functions on arrays laid out as skimage lays
them out (channel-last (k, 3) views), then the same continuous formula. Everywhere else the result differs
from the reference only by float64 rounding (~1e-13).

Away from the branch points the only difference that is not float64 rounding is at greys: numpy's CIELAB of
a grey has |a|, |b| <= 6e-14 (often exactly 0) and torch's differs, so the grey's hue is arbitrary in both.
The hue enters only through the hue term, which is proportional to sqrt(C1 C2) <= sqrt(6e-14 * 140), so a
pixel moves by at most ~3e-5 (observed: <= 6e-9 on full-HD photographs; the tolerance is 1e-4).

`lab_of` is the separable step: a reference's CIELAB is computed once and reused against every output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

BRANCH_BAND = 1e-6  # radians: hue configurations this close to a branch point are recomputed exactly
TWO_PI = 2.0 * math.pi
EPS = (6.0 / 29.0) ** 3


@dataclass(frozen=True)
class LabImage:
    """CIELAB of one uint8 sRGB image: `lab` float64 3xHxW (planes L, a, b) on `device`, `rgb` the uint8 pixels (numpy, for
    the exact recomputation of branch pixels), and the conversion's parameters."""

    lab: object
    rgb: np.ndarray
    rgb_to_xyz: tuple
    white_point: tuple | None
    device: str


def sum64(t) -> float:
    """The float64 sum of a tensor's values in an order that does not depend on torch's thread count
    (torch's CPU reductions split the work by thread, so their last bit does): numpy's pairwise sum on
    the CPU; on CUDA torch's own (one device, one order)."""
    import torch

    if t.device.type == "cpu":
        return float(np.sum(t.numpy(), dtype=np.float64))
    return float(t.sum(dtype=torch.float64).item())


def _decode_lut() -> np.ndarray:
    """sRGB decoding of the 256 8-bit values, by the same float64 operations as `color.srgb_to_lab`."""
    c = np.arange(256, dtype=np.float64) / 255.0
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


_LUT = None


def _chunk_rows(device, width: int) -> int:
    """Rows per chunk: ~64k pixels on CPU (intermediates stay in cache), the whole image on CUDA."""
    return max(1, 65536 // max(1, width)) if str(device).startswith("cpu") else 1 << 30


def lab_of(image, *, rgb_to_xyz, white_point=None, device: str = "cpu") -> LabImage:
    """uint8 sRGB HxWx3 -> `LabImage` (float64 CIELAB on `device`; white = `white_point` or the row sums)."""
    import torch

    global _LUT
    rgb = np.asarray(image)
    if rgb.ndim != 3 or rgb.shape[2] != 3 or rgb.dtype != np.uint8:
        raise ValueError(f"expected a uint8 HxWx3 array, got {rgb.dtype} {rgb.shape}")
    if _LUT is None:
        _LUT = _decode_lut()
    m = np.asarray(rgb_to_xyz, dtype=np.float64)
    white = m.sum(axis=1) if white_point is None else np.asarray(white_point, dtype=np.float64)
    lut = torch.from_numpy(_LUT).to(device)
    src = torch.from_numpy(np.ascontiguousarray(rgb) if rgb.flags.writeable else rgb.copy()).to(device)
    h, w = rgb.shape[:2]
    lab = torch.empty((3, h, w), dtype=torch.float64, device=device)
    mt = [[float(v) for v in row] for row in m]
    k = 3.0 * (6.0 / 29.0) ** 2
    for r0 in range(0, h, _chunk_rows(device, w)):
        lin = lut.take(src[r0 : r0 + _chunk_rows(device, w)].long())  # exact: the LUT holds the decoded values
        r, g, b = lin[..., 0], lin[..., 1], lin[..., 2]
        f = []
        for i in range(3):
            # t = (M @ rgb) / white, the division folded into the row: equal up to float64 rounding
            wi = float(white[i])
            t = (r * (mt[i][0] / wi)).add_(g, alpha=mt[i][1] / wi).add_(b, alpha=mt[i][2] / wi)
            cube_root = torch.log(t).mul_(1.0 / 3.0).exp_()  # within a few ulp of cbrt, 2.5x faster than pow
            f.append(torch.where(t > EPS, cube_root, t.mul_(1.0 / k).add_(4.0 / 29.0)))
        out = lab[:, r0 : r0 + lin.shape[0]]
        torch.mul(f[1], 116.0, out=out[0]).sub_(16.0)
        torch.sub(f[0], f[1], out=out[1]).mul_(500.0)
        torch.sub(f[1], f[2], out=out[2]).mul_(200.0)
    wp = None if white_point is None else tuple(float(v) for v in white_point)
    return LabImage(lab=lab, rgb=rgb, rgb_to_xyz=tuple(tuple(r) for r in mt), white_point=wp, device=str(device))


def _polar_fast(L1, a1, b1, L2, a2, b2):
    """G-scaled chroma and hue (in [0, 2 pi)) of both colours, torch on contiguous planes."""
    import torch

    bb1, bb2 = b1 * b1, b2 * b2
    cbar = torch.sqrt(torch.addcmul(bb1, a1, a1)).add_(torch.sqrt(torch.addcmul(bb2, a2, a2))).mul_(0.5)
    c2 = cbar * cbar
    c7 = (c2 * c2).mul_(c2).mul_(cbar)
    scale = torch.sqrt(c7 / (c7 + 25.0**7)).mul_(-0.5).add_(1.5)  # 1 + G
    x1, x2 = a1 * scale, a2 * scale
    C1, C2 = torch.sqrt(bb1.addcmul_(x1, x1)), torch.sqrt(bb2.addcmul_(x2, x2))
    h1, h2 = torch.atan2(b1, x1), torch.atan2(b2, x2)
    h1 = torch.where(h1 < 0, h1 + TWO_PI, h1)
    h2 = torch.where(h2 < 0, h2 + TWO_PI, h2)
    return L1, C1, h1, L2, C2, h2


def _polar(lab1, lab2, lib):
    """G-scaled chroma and hue as skimage computes them (numpy, channel-last (k, 3) arrays)."""
    L1, a1, b1 = lab1[..., 0], lab1[..., 1], lab1[..., 2]
    L2, a2, b2 = lab2[..., 0], lab2[..., 1], lab2[..., 2]
    cbar = 0.5 * (lib.hypot(a1, b1) + lib.hypot(a2, b2))
    c7 = cbar**7
    g = 0.5 * (1 - lib.sqrt(c7 / (c7 + 25**7)))
    scale = 1 + g
    x1, x2 = a1 * scale, a2 * scale
    C1, h1 = lib.hypot(x1, b1), lib.arctan2(b1, x1) if lib is np else lib.atan2(b1, x1)
    C2, h2 = lib.hypot(x2, b2), lib.arctan2(b2, x2) if lib is np else lib.atan2(b2, x2)
    h1 = h1 + (h1 < 0) * 2 * np.pi
    h2 = h2 + (h2 < 0) * 2 * np.pi
    return L1, C1, h1, L2, C2, h2


def _de00(L1, C1, h1, L2, C2, h2, kL, kC, kH):
    """CIEDE2000 from lightness, G-scaled chroma and hue (torch tensors), Sharma, Wu & Dalal (2005).

    Written with fewer operations than the textbook form, each step equal to it up to float64 rounding:
    sin((dh -+ 2 pi) / 2) = -sin(dh / 2); where C1 C2 = 0 the hue term is 0 and the mean hue has no effect.
    (Python floats only ever meet float64 tensors here: `where(c, 2 pi, -2 pi)` or `2 pi * mask` would be float32.)
    """
    import torch

    lm = (L1 + L2).mul_(0.5).sub_(50.0)
    tmp = lm.mul_(lm)
    sl = torch.sqrt(tmp + 20.0).reciprocal_().mul_(tmp).mul_(0.015).add_(1.0)
    l_term = (L2 - L1).div_(sl.mul_(kL) if kL != 1.0 else sl)
    cbar = (C1 + C2).mul_(0.5)
    c_term = (C2 - C1).div_((cbar * (0.045 * kC)).add_(kC))
    h_diff = h2 - h1
    h_sum = h1 + h2
    far = h_diff.abs() > math.pi
    half_sin = torch.sin(h_diff.mul_(0.5))
    dh_term = torch.where(far, -half_sin, half_sin).mul_(torch.sqrt(C1 * C2).mul_(2.0))
    half = h_sum.mul_(0.5)
    hbar = torch.where(far, torch.where(half < math.pi, half + math.pi, half - math.pi), half)
    t = torch.cos(hbar - math.radians(30.0)).mul_(-0.17).add_(1.0)
    t.add_(torch.cos(hbar * 2.0).mul_(0.24))
    t.add_(torch.cos((hbar * 3.0).add_(math.radians(6.0))).mul_(0.32))
    t.sub_(torch.cos((hbar * 4.0).sub_(math.radians(63.0))).mul_(0.20))
    h_term = dh_term.div_(t.mul_(cbar).mul_(0.015 * kH).add_(kH))
    c2 = cbar * cbar
    c7 = (c2 * c2).mul_(c2).mul_(cbar)
    rc = torch.sqrt(c7 / (c7 + 25.0**7)).mul_(2.0)
    z = torch.rad2deg(hbar).sub_(275.0).div_(25.0)
    dtheta = torch.exp(z.mul_(z).neg_()).mul_(math.radians(60.0))  # 2 * dtheta
    r_term = torch.sin(dtheta).mul_(rc).mul_(c_term).mul_(h_term).neg_()
    de2 = (l_term * l_term).addcmul_(c_term, c_term).addcmul_(h_term, h_term).add_(r_term)
    return de2.clamp_(min=0.0).sqrt_()


def _near_branch(C1, h1, C2, h2):
    """Pixels whose hue pair lies within BRANCH_BAND of a branch point of the formula (both chromas > 0)."""
    h_diff = h2 - h1
    h_sum = h1 + h2
    ad = h_diff.abs()
    both = (C1 * C2) != 0.0
    return both & (
        ((ad - math.pi).abs() < BRANCH_BAND) | ((ad > math.pi - BRANCH_BAND) & ((h_sum - TWO_PI).abs() < BRANCH_BAND))
    )


def _gather_like_full(rgb: np.ndarray, flat_idx: np.ndarray) -> np.ndarray:
    """The pixels `flat_idx` as an array whose `@ M.T` takes the same BLAS path as the full image's: numpy
    multiplies an (H, W, 3) stack row by row, a matrix product for W >= 2 and a vector product for W == 1;
    the per-element result does not depend on the row length, but a 1-row product differs (see tests)."""
    h, w = rgb.shape[:2]
    if w == 1:
        return rgb.reshape(-1, 1, 3)[flat_idx]  # (k, 1, 3): vector products, as for a one-column image
    sel = flat_idx if len(flat_idx) >= 2 else np.concatenate([flat_idx, flat_idx])
    return rgb.reshape(-1, 3)[sel][None]  # (1, k, 3), k >= 2: a matrix product


def _exact_pixels(lab_out: LabImage, lab_ref: LabImage, flat_idx: np.ndarray, kL, kC, kH):
    """CIEDE2000 of the given pixels with CIELAB and hue angles computed exactly as the reference does."""
    import torch

    from pytest_pstbench.metrics.color import srgb_to_lab

    k = len(flat_idx)
    labs = []
    for img in (lab_out, lab_ref):
        lab = srgb_to_lab(_gather_like_full(img.rgb, flat_idx), img.rgb_to_xyz, white_point=img.white_point)
        labs.append(np.ascontiguousarray(lab.reshape(-1, 3)[:k]))  # (k, 3), channel-last like skimage
    L1, C1, h1, L2, C2, h2 = _polar(labs[0], labs[1], np)
    dev = lab_out.device
    t = [torch.from_numpy(np.ascontiguousarray(v)).to(dev) for v in (L1, C1, h1, L2, C2, h2)]
    return _de00(*t, kL, kC, kH)


def delta_e00_from_lab(lab_out: LabImage, lab_ref: LabImage, *, kL: float, kC: float, kH: float) -> float:
    """Mean CIEDE2000 over pixels between two `LabImage`s of one shape, conversion and device."""
    h, w = lab_out.lab.shape[1:]
    return float(_delta_e00(lab_out, lab_ref, kL, kC, kH, keep_map=False)) / float(h * w)


def delta_e00_map(lab_out: LabImage, lab_ref: LabImage, *, kL: float, kC: float, kH: float) -> np.ndarray:
    """Per-pixel CIEDE2000 (HxW float64 numpy), the values `delta_e00_from_lab` averages."""
    return _delta_e00(lab_out, lab_ref, kL, kC, kH, keep_map=True).reshape(lab_out.lab.shape[1:]).cpu().numpy()


def _delta_e00(lab_out: LabImage, lab_ref: LabImage, kL, kC, kH, *, keep_map: bool):
    """The sum of per-pixel CIEDE2000 (a float), or the flat per-pixel map when `keep_map`."""
    import torch

    if lab_out.lab.shape != lab_ref.lab.shape:
        raise ValueError(f"shapes differ: {tuple(lab_out.lab.shape)} vs {tuple(lab_ref.lab.shape)}")
    if (lab_out.rgb_to_xyz, lab_out.white_point, lab_out.device) != (
        lab_ref.rgb_to_xyz,
        lab_ref.white_point,
        lab_ref.device,
    ):
        raise ValueError("the two LabImages were made with different conversions or devices")
    h, w = lab_out.lab.shape[1:]
    a = lab_out.lab.view(3, -1)
    b = lab_ref.lab.view(3, -1)
    step = _chunk_rows(lab_out.device, w) * w
    total = 0.0  # chunk sums in an order that does not depend on torch's thread count (`sum64`)
    full = torch.empty(a.shape[1], dtype=torch.float64, device=a.device) if keep_map else None
    flagged = []
    for p0 in range(0, a.shape[1], step):
        sl = slice(p0, p0 + step)
        L1, C1, h1, L2, C2, h2 = _polar_fast(a[0, sl], a[1, sl], a[2, sl], b[0, sl], b[1, sl], b[2, sl])
        de = _de00(L1, C1, h1, L2, C2, h2, kL, kC, kH)
        near = _near_branch(C1, h1, C2, h2)
        if bool(near.any()):
            idx = torch.nonzero(near).flatten()
            total -= sum64(de[idx])
            flagged.append((idx + p0).cpu().numpy())
        total += sum64(de)
        if keep_map:
            full[sl] = de
    if flagged:
        idx = np.concatenate(flagged)
        exact = _exact_pixels(lab_out, lab_ref, idx, kL, kC, kH)
        total += sum64(exact)
        if keep_map:
            full[torch.from_numpy(idx).to(full.device)] = exact
    return full if keep_map else total


def delta_e00_fast(
    output,
    reference,
    *,
    rgb_to_xyz,
    kL: float,
    kC: float,
    kH: float,
    white_point=None,
    device: str = "cpu",
) -> float:
    """Mean CIEDE2000 with the arguments of `color.delta_e00` (sRGB decoding, formula ciede2000, mean pooling)."""
    if np.shape(output) != np.shape(reference):
        raise ValueError(f"shapes differ: {np.shape(output)} vs {np.shape(reference)}")
    lo = lab_of(output, rgb_to_xyz=rgb_to_xyz, white_point=white_point, device=device)
    lr = lab_of(reference, rgb_to_xyz=rgb_to_xyz, white_point=white_point, device=device)
    return delta_e00_from_lab(lo, lr, kL=kL, kC=kC, kH=kH)
