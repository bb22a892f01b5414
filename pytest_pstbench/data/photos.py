"""The scikit-image photographs both demo tracks are built from (``demo``: paired; ``vab-demo``:
selection): loading one as 8-bit RGB, and rendering a view of it (crop box, then Lanczos resize).

Only photographs that ``skimage.data`` ships inside its wheel (no network download) are used.
numpy, Pillow and scikit-image are imported when called.
"""

from __future__ import annotations


def load_photo(name: str):
    """The ``skimage.data`` photograph `name` as a uint8 RGB array (HxWx3).

    ``motorcycle_left`` / ``motorcycle_right`` are the two views of ``stereo_motorcycle``; an RGBA
    photograph (``logo``) is composited onto white.
    """
    import numpy as np
    import skimage.data as skd

    if name in ("motorcycle_left", "motorcycle_right"):
        left, right, _disp = skd.stereo_motorcycle()
        img = left if name == "motorcycle_left" else right
    elif hasattr(skd, name):
        img = getattr(skd, name)()
    else:  # pragma: no cover - guarded by the demo parameters
        raise ValueError(f"unknown demo photo {name!r}")
    img = np.asarray(img)
    if img.ndim == 3 and img.shape[2] == 4:  # RGBA (logo): composite onto white
        a = img[..., 3:4].astype(np.float64) / 255.0
        img = np.rint(img[..., :3] * a + 255.0 * (1.0 - a)).astype(np.uint8)
    if img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:  # pragma: no cover
        raise RuntimeError(f"skimage.data photo {name!r} is not 8-bit RGB: {img.dtype} {img.shape}")
    return img


def render_view(photo, box, size):
    """The crop `box` [left, top, right, bottom] of `photo`, resized (Lanczos) to `size` [width, height]
    when it differs from the box; a contiguous uint8 RGB array."""
    import numpy as np
    from PIL import Image

    left, top, right, bottom = box
    h, w = photo.shape[:2]
    if not (0 <= left < right <= w and 0 <= top < bottom <= h):  # pragma: no cover
        raise RuntimeError(f"crop box {box} outside a {w}x{h} photo")
    crop = np.ascontiguousarray(photo[top:bottom, left:right])
    im = Image.fromarray(crop, "RGB")
    if (right - left, bottom - top) != tuple(size):
        im = im.resize(tuple(size), Image.Resampling.LANCZOS)
    return np.ascontiguousarray(np.asarray(im, dtype=np.uint8))
