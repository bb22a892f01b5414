"""Simple no-reference judges for pstbench selection tracks: f(image) -> float, higher = better.

Each function takes a uint8 HxWx3 RGB numpy array (as pstbench passes it) and needs numpy only.

    pstbench vab score --track vab-demo --judge examples/judges/no_reference.py:sharpness
    pytest --pstbench-track vab-demo --pstbench-judge examples/judges/no_reference.py:colourfulness

They are baselines, not aesthetic models: `sharpness` rewards detail, so it catches blur, heavy
JPEG and upscaled crops but mistakes noise for detail; `colourfulness` rewards saturated,
varied colour, so it prefers a colour cast or overexposure only when they add chroma.
"""

from __future__ import annotations

import numpy as np

# Rec. 601 luma weights on the 8-bit values.
_LUMA = np.array([0.299, 0.587, 0.114])


def sharpness(image: np.ndarray) -> float:
    """Variance of the 4-neighbour Laplacian of the luma (Pech-Pacheco et al., ICPR 2000).

    Blur lowers it; so do JPEG block smoothing and the upscaling of a crop. Noise raises it.
    """
    y = np.asarray(image, dtype=np.float64) @ _LUMA
    lap = y[:-2, 1:-1] + y[2:, 1:-1] + y[1:-1, :-2] + y[1:-1, 2:] - 4.0 * y[1:-1, 1:-1]
    return float(lap.var())


def colourfulness(image: np.ndarray) -> float:
    """Hasler & Suesstrunk's colourfulness metric M (SPIE 5007, 2003).

    rg = R - G, yb = (R + G)/2 - B; M = sqrt(sd_rg^2 + sd_yb^2) + 0.3 * sqrt(mean_rg^2 + mean_yb^2).
    """
    x = np.asarray(image, dtype=np.float64)
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    rg = r - g
    yb = 0.5 * (r + g) - b
    return float(np.sqrt(rg.std() ** 2 + yb.std() ** 2) + 0.3 * np.sqrt(rg.mean() ** 2 + yb.mean() ** 2))


def constant(image: np.ndarray) -> float:
    """Scores every image the same: ties everywhere, so its picks follow the presentation order
    (the earliest presented candidate). Useful to see how the permutations penalise ties."""
    return 0.0
