"""Simple colour-transfer baselines (numpy / scikit-image only) and a writer for their outputs.

A method is a function ``(content, style) -> output`` on 8-bit RGB arrays of shape ``(H, W, 3)``;
the output has the content's shape.
"""
from __future__ import annotations

import os
import uuid
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import yaml
from PIL import Image

from .errors import UserError

Method = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _as_rgb8(img: np.ndarray, what: str) -> np.ndarray:
    arr = np.asarray(img)
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3:
        raise ValueError(f"{what}: expected an 8-bit RGB array of shape (H, W, 3), got {arr.dtype} {arr.shape}")
    return arr


def identity(content: np.ndarray, style: np.ndarray) -> np.ndarray:
    """Return the content unchanged (the "do nothing" lower bound)."""
    return _as_rgb8(content, "content")


def _lab_float(rgb8: np.ndarray) -> np.ndarray:
    from skimage.color import rgb2lab

    return rgb2lab(rgb8.astype(np.float64) / 255.0)


def reinhard_lab_float(content: np.ndarray, style: np.ndarray) -> np.ndarray:
    """The transferred image in CIELAB (float64, before conversion back to RGB and rounding)."""
    c = _lab_float(_as_rgb8(content, "content"))
    s = _lab_float(_as_rgb8(style, "style"))
    out = np.empty_like(c)
    for k in range(3):
        mc, sc = c[..., k].mean(), c[..., k].std()
        ms, ss = s[..., k].mean(), s[..., k].std()
        scale = ss / sc if sc > 1e-6 else 1.0
        out[..., k] = (c[..., k] - mc) * scale + ms
    return out


def reinhard_lab(content: np.ndarray, style: np.ndarray) -> np.ndarray:
    """Global colour transfer after Reinhard et al. (2001), done in CIELAB.

    Exactly:

    1. Both images (8-bit sRGB) are scaled to [0, 1] and converted to CIELAB with
       ``skimage.color.rgb2lab`` (sRGB, D65 white, 2-degree observer).
    2. For each channel L*, a*, b* independently, with the mean ``m`` and population standard
       deviation ``s`` (``ddof=0``) taken over all pixels of each image:
       ``out = (content - m_content) * (s_style / s_content) + m_style``. A channel whose content
       standard deviation is below 1e-6 (flat) is only shifted (scale 1).
    3. The result is converted back with ``skimage.color.lab2rgb`` (which clips out-of-gamut
       values to [0, 1]), multiplied by 255, rounded half-to-even (``np.rint``), clipped to
       [0, 255] and cast to ``uint8``.

    Differences from the paper: CIELAB instead of Ruderman's log-space l-alpha-beta, and no
    local/segment-wise statistics. The output has the content's shape.
    """
    from skimage.color import lab2rgb

    lab = reinhard_lab_float(content, style)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # lab2rgb warns when it clips negative XYZ values
        rgb = lab2rgb(lab)
    return np.clip(np.rint(rgb * 255.0), 0, 255).astype(np.uint8)


BASELINES: dict[str, Method] = {"identity": identity, "reinhard": reinhard_lab}


def _load_rgb(path: Path) -> np.ndarray:
    try:
        with Image.open(path) as im:
            return np.asarray(im.convert("RGB"), dtype=np.uint8)
    except FileNotFoundError as exc:
        raise UserError(f"{path}: image listed in the track manifest does not exist; rebuild or re-download the track") from exc
    except OSError as exc:
        raise UserError(f"{path}: cannot read this image ({exc}); rebuild or re-download the track") from exc


def _read_manifest(manifest_path: Path) -> dict:
    try:
        data = yaml.safe_load(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise UserError(f"{manifest_path}: track manifest does not exist; pass the path of a track.yaml") from exc
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as exc:
        raise UserError(f"{manifest_path}: cannot read the track manifest ({exc}); it must be a YAML file") from exc
    if not isinstance(data, dict) or not isinstance(data.get("pairs"), list):
        raise UserError(f"{manifest_path}: track manifest must be a mapping with a 'pairs' list")
    for i, entry in enumerate(data["pairs"]):
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("id", "content", "style")):
            raise UserError(f"{manifest_path}: pairs[{i}] must have string keys 'id', 'content' and 'style'")
    return data


def _resolve_method(method: str | Method) -> tuple[str, Method]:
    if callable(method):
        return getattr(method, "__name__", "method"), method
    if method in BASELINES:
        return method, BASELINES[method]
    raise UserError(f"unknown baseline {method!r}; choose one of: {', '.join(sorted(BASELINES))}")


def write_outputs(
    manifest_path: Path | str,
    method: str | Method,
    out_dir: Path | str,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Run ``method`` (a name in ``BASELINES`` or a callable) on every pair of a track.

    Reads the manifest, loads each pair's content and style PNG as RGB, and writes
    ``out_dir/<pair id>.png`` atomically (temporary name, then ``os.replace``). Returns ``out_dir``.
    """
    manifest_path = Path(manifest_path)
    out_dir = Path(out_dir)
    name, fn = _resolve_method(method)
    data = _read_manifest(manifest_path)
    base = manifest_path.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    for entry in data["pairs"]:
        pid = entry["id"]
        if not pid or "/" in pid or "\\" in pid or pid.startswith("."):
            raise UserError(f"{manifest_path}: pair id {pid!r} cannot be used as a file name")
        if progress:
            progress(f"{name}: {pid}")
        content = _load_rgb(base / entry["content"])
        style = _load_rgb(base / entry["style"])
        out = np.asarray(fn(content, style))
        if out.dtype != np.uint8 or out.shape != content.shape:
            raise ValueError(f"method {name!r} returned {out.dtype} {out.shape} for {pid}; expected uint8 {content.shape}")
        final = out_dir / f"{pid}.png"
        tmp = out_dir / f".{pid}.png.{uuid.uuid4().hex[:8]}.tmp"
        try:
            Image.fromarray(np.ascontiguousarray(out), "RGB").save(tmp, format="PNG", compress_level=6)
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                tmp.unlink()
    return out_dir
