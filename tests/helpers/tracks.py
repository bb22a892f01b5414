"""A small local paired track made from scikit-image photographs, and method outputs for it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml
from PIL import Image

PHOTOS = ("astronaut", "chelsea", "coffee", "rocket")


def _photo(name: str, size=(64, 48)) -> np.ndarray:
    from skimage import data

    img = getattr(data, name)()
    return np.asarray(Image.fromarray(img).resize(size, Image.Resampling.BILINEAR))


def make_track(root: Path, n: int = 4, size=(64, 48), track_id: str = "small") -> Path:
    """A local track: reference = content with a warm tone shift, style = another photo with it.

    Returns the manifest path. Outputs for methods are made by `make_outputs`.
    """
    root.mkdir(parents=True, exist_ok=True)
    pairs = []
    for i in range(n):
        content = np.roll(_photo(PHOTOS[i % len(PHOTOS)], size), 7 * (i // len(PHOTOS)), axis=1)
        style_src = _photo(PHOTOS[(i + 1) % len(PHOTOS)], size)
        look = lambda a: np.clip(a.astype(np.float64) * [1.08, 1.0, 0.85] + 6, 0, 255).astype(np.uint8)  # noqa: E731
        pid = f"p{i + 1:02d}"
        for role, arr in (("content", content), ("style", look(style_src)), ("reference", look(content))):
            Image.fromarray(arr).save(root / f"{pid}_{role}.png")
        pairs.append(
            {
                "id": pid,
                "content": f"{pid}_content.png",
                "style": f"{pid}_style.png",
                "reference": f"{pid}_reference.png",
            }
        )
    manifest = root / "track.yaml"
    manifest.write_text(yaml.safe_dump({"id": track_id, "pairs": pairs}, sort_keys=False))
    return manifest


def make_outputs(manifest: Path, out: Path, strength: float = 0.5) -> Path:
    """Outputs halfway (by `strength`) from content to reference."""
    data = yaml.safe_load(manifest.read_text())
    out.mkdir(parents=True, exist_ok=True)
    for p in data["pairs"]:
        c = np.asarray(Image.open(manifest.parent / p["content"]), dtype=np.float64)
        r = np.asarray(Image.open(manifest.parent / p["reference"]), dtype=np.float64)
        o = np.clip(np.rint(c + strength * (r - c)), 0, 255).astype(np.uint8)
        Image.fromarray(o).save(out / f"{p['id']}.png")
    return out
