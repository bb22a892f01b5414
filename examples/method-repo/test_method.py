"""Score the method on every pair of the track, in-process (one test per pair)."""

import numpy as np

from pytest_pstbench.paired.baselines import reinhard_lab  # stand-in for the repository's own method


def stylize(content: np.ndarray, style: np.ndarray) -> np.ndarray:
    return reinhard_lab(content, style)


def test_stylize(pstbench_images, pstbench_score):
    # pstbench_images: the pair's content and style read as the protocol reads them (EXIF orientation,
    # ICC profiles to sRGB), the same pixels the scorer compares the output with
    metrics = pstbench_score(stylize(pstbench_images.content, pstbench_images.style))
    assert metrics["psnr"] > 0
