"""The protocol's evaluation resolution (`resolution.evaluate`): the size every metric sees.

`full` (the default) scores at the reference's size. `short_side` (PIXELS, FILTER) resizes each
image so that its shorter side is PIXELS (aspect ratio kept, no upscaling); `fixed` (WIDTH, HEIGHT,
FILTER) resizes each image to WIDTH x HEIGHT. Output, reference and style are each resized on their
8-bit arrays with the PIL filter named. `pstbench score` and `pstbench sensitivity` both resize here.
"""

from __future__ import annotations

import json

FULL_RESOLUTION = {"mode": "full"}


def evaluation_resolution(protocol) -> dict:
    """The protocol's `resolution.evaluate` (default: full resolution)."""
    return protocol.resolution.evaluate_spec


def res_key(spec: dict) -> str:
    return json.dumps(spec, sort_keys=True)


def target_size(shape: tuple[int, ...], spec: dict) -> tuple[int, int] | None:
    """(width, height) to resize an image of `shape` to under `spec`, or None to leave it as it is."""
    h, w = shape[:2]
    mode = spec["mode"]
    if mode == "full":
        return None
    if mode == "fixed":
        size = (int(spec["width"]), int(spec["height"]))
        return None if size == (w, h) else size
    px = int(spec["pixels"])  # short_side: no upscaling
    if min(h, w) <= px:
        return None
    if h <= w:
        return (max(1, round(w * px / h)), px)
    return (px, max(1, round(h * px / w)))


def resize_image(arr, spec: dict):
    """The image at the evaluation resolution (PIL resize on uint8); the same object when unchanged."""
    size = target_size(arr.shape, spec)
    if size is None:
        return arr
    import numpy as np
    from PIL import Image

    resample = getattr(Image.Resampling, str(spec["filter"]).upper())
    return np.ascontiguousarray(np.asarray(Image.fromarray(arr).resize(size, resample=resample), dtype=np.uint8))
