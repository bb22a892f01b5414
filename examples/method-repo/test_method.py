"""Score the method on every pair of the track, in-process (one test per pair)."""
import numpy as np
from PIL import Image

from pytest_pstbench.paired.baselines import reinhard_lab  # stand-in for the repository's own method


def stylize(content: np.ndarray, style: np.ndarray) -> np.ndarray:
    return reinhard_lab(content, style)


def test_stylize(pstbench_pair, pstbench_score):
    content = np.asarray(Image.open(pstbench_pair.content).convert("RGB"))
    style = np.asarray(Image.open(pstbench_pair.style).convert("RGB"))
    metrics = pstbench_score(stylize(content, style))
    assert metrics["psnr"] > 0
