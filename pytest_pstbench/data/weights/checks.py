"""What every weights source goes through: the shape check, the digest, the conversion to tensors; how a
source fails (`SourceFailed`, one line) and the progress messages a source writes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np

from pytest_pstbench.data.weights.backbones import EXPECTED_SHAPES

Progress = Callable[[str], None] | None


def say(progress: Progress, msg: str) -> None:
    if progress is not None:
        progress(msg)


def one_line(exc: BaseException | str) -> str:
    text = exc if isinstance(exc, str) else (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    return " ".join(text.split())


class SourceFailed(Exception):
    """One source could not give the weights (the reason is its message)."""


def as_float32_c(value) -> np.ndarray:
    if hasattr(value, "detach"):  # torch.Tensor
        value = value.detach().cpu().contiguous().numpy()
    arr = np.asarray(value)
    if arr.dtype != np.float32:
        raise ValueError(f"dtype {arr.dtype}, expected float32")
    return np.ascontiguousarray(arr, dtype="<f4")


def weights_digest(weights: dict) -> str:
    """sha256 over the layers in sorted key order: for each, the key, the dtype name, the shape
    and the C-contiguous little-endian float32 bytes (fields separated by NUL)."""
    h = hashlib.sha256()
    for key in sorted(weights):
        arr = as_float32_c(weights[key])
        h.update(key.encode("utf-8") + b"\0")
        h.update(b"float32\0")
        h.update(",".join(str(d) for d in arr.shape).encode("ascii") + b"\0")
        h.update(arr.tobytes(order="C"))
    return h.hexdigest()


def check_shapes(weights: dict, what: str, expected: dict | None = None) -> None:
    expected = EXPECTED_SHAPES if expected is None else expected
    if set(weights) != set(expected):
        raise SourceFailed(f"{what} has keys {sorted(weights)}, expected {sorted(expected)}")
    for key, shape in expected.items():
        got = tuple(weights[key].shape)
        if got != shape:
            raise SourceFailed(f"{what}: {key} has shape {got}, expected {shape}")


def to_tensors(weights: dict) -> dict:
    import torch

    return {k: torch.from_numpy(as_float32_c(v).copy()) for k, v in weights.items()}
