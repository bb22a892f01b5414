"""Fast metric kernels on the scoring device (torch: CPU threads or CUDA), within the protocol's tolerances
of the reference implementations (`fidelity.ssim`, `color.delta_e00`).

- SSIM (`kernels_ssim`): float64 banded GEMMs over the valid region; `ssim_reference_stats` once per
  reference, `ssim_from_stats` per output; `ssim_fast` = the two in one call.
- CIEDE2000 (`kernels_color`): `lab_of` once per image, `delta_e00_from_lab` per pair; `delta_e00_fast`
  = the two in one call. Pixels at the formula's hue branch points are recomputed exactly on the CPU.
"""
from __future__ import annotations

from pytest_pstbench.metrics.kernels_color import LabImage, delta_e00_fast, delta_e00_from_lab, lab_of
from pytest_pstbench.metrics.kernels_ssim import (
    SsimReferenceStats,
    ssim_fast,
    ssim_from_stats,
    ssim_reference_stats,
    window_taps,
)

__all__ = [
    "LabImage",
    "SsimReferenceStats",
    "delta_e00_fast",
    "delta_e00_from_lab",
    "lab_of",
    "ssim_fast",
    "ssim_from_stats",
    "ssim_reference_stats",
    "window_taps",
]
