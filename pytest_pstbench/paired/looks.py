"""The seeded "photographic looks" of the ``demo`` paired track (paired/demo.py): a look's parameters drawn
from a seed and a pair index (`draw_look`), and the pixel pipeline that applies it (`apply_look`).

A look is a composition of white-balance gains, a small neutral-preserving channel mix, a per-channel
tone curve (midtone lift and S-curve, black lift / white roll-off), a saturation change and split toning
(one tint in the shadows, another in the highlights). Parameters are drawn with
``numpy.random.default_rng([seed, pair index])`` and rounded to four decimals (stable across NumPy
versions); the pipeline uses only IEEE-exact elementwise arithmetic, then ``np.rint`` + ``np.clip``
before the cast to ``uint8`` (the demo track's pixels are pinned).
"""

from __future__ import annotations

import numpy as np

# Rec. 709 luma weights, applied to the (non-linear) display values.
_LUMA = (0.2126, 0.7152, 0.0722)


# --------------------------------------------------------------------------------------------
# Photographic looks


def _r4(x) -> float:
    return round(float(x), 4)


def draw_look(seed: int, index: int) -> dict:
    """The look parameters of pair number ``index`` (0-based), a plain dict of floats."""
    rng = np.random.default_rng([int(seed), int(index)])
    u = rng.uniform

    def signed(lo, hi):  # magnitude in [lo, hi], random sign
        mag = u(lo, hi)
        return mag if u() < 0.5 else -mag

    temp = signed(0.05, 0.16)  # warm (+) / cool (-)
    tint = u(-0.05, 0.05)  # magenta (+) / green (-)
    # small channel mix, rows renormalised so neutrals stay neutral
    mix = [[1.0 if i == j else u(-0.07, 0.07) for j in range(3)] for i in range(3)]
    mix = [[_r4(v / sum(row)) for v in row] for row in mix]
    sat = u(1.15, 1.4) if u() < 0.5 else u(0.62, 0.85)
    sh_hue = u(0.0, 2.0 * np.pi)
    hi_hue = sh_hue + np.pi + u(-0.8, 0.8)  # roughly complementary (teal/orange family)
    look = {
        "gains": [_r4(1.0 + temp), _r4(1.0 + tint), _r4(1.0 - temp)],
        "mix": mix,
        "midtone": _r4(u(-0.3, 0.3)),  # >0 brightens midtones
        "contrast": _r4(u(-0.2, 0.45)),  # S-curve strength, <0 flattens
        "black": _r4(u(0.0, 0.06)),  # faded blacks
        "white": _r4(u(0.93, 1.0)),  # rolled-off whites
        "saturation": _r4(sat),
        "shadow_tint": [_r4(c) for c in _tint_vector(sh_hue, u(0.03, 0.09))],
        "highlight_tint": [_r4(c) for c in _tint_vector(hi_hue, u(0.02, 0.07))],
    }
    return look


def _tint_vector(hue: float, strength: float) -> tuple[float, float, float]:
    """An RGB offset of zero luma pointing at ``hue`` in an opponent (a, b)-like plane."""
    # cos/sin here act on a single scalar and are rounded to 4 decimals by the caller.
    a, b = np.cos(hue) * strength, np.sin(hue) * strength
    # opponent axes: a = red-green, b = yellow-blue; build RGB then remove its luma.
    r, g, bl = a + 0.5 * b, -a + 0.5 * b, -b
    luma = _LUMA[0] * r + _LUMA[1] * g + _LUMA[2] * bl
    return float(r - luma), float(g - luma), float(bl - luma)


def apply_look(img: np.ndarray, look: dict) -> np.ndarray:
    """Apply a look to an 8-bit RGB image (elementwise float64 arithmetic only)."""
    x = img.astype(np.float64) / 255.0
    ch = [x[..., 0], x[..., 1], x[..., 2]]
    # white balance
    ch = [ch[i] * look["gains"][i] for i in range(3)]
    # channel mix (explicit elementwise sums; no BLAS)
    m = look["mix"]
    ch = [m[i][0] * ch[0] + m[i][1] * ch[1] + m[i][2] * ch[2] for i in range(3)]
    # tone curve per channel
    b, k = look["midtone"], look["contrast"]
    lo, hi = look["black"], look["white"]
    out = []
    for c in ch:
        c = np.clip(c, 0.0, 1.0)
        c = c + b * c * (1.0 - c)  # midtone lift, monotone for |b| < 1
        c = c + k * c * (1.0 - c) * (2.0 * c - 1.0)  # S-curve, monotone for -2 < k < 1
        c = lo + (hi - lo) * c
        out.append(c)
    ch = out
    # saturation around luma
    luma = _LUMA[0] * ch[0] + _LUMA[1] * ch[1] + _LUMA[2] * ch[2]
    s = look["saturation"]
    ch = [luma + s * (c - luma) for c in ch]
    # split toning: shadow tint weighted by (1-L)^2, highlight tint by L^2
    lc = np.clip(luma, 0.0, 1.0)
    w_sh = (1.0 - lc) * (1.0 - lc)
    w_hi = lc * lc
    st, ht = look["shadow_tint"], look["highlight_tint"]
    ch = [ch[i] + st[i] * w_sh + ht[i] * w_hi for i in range(3)]
    y = np.stack(ch, axis=-1) * 255.0
    return np.clip(np.rint(y), 0, 255).astype(np.uint8)
