"""Colour-transfer baselines and writers for their outputs.

- the reference baselines of `pstbench baseline` and `pstbench demo` (`REFERENCE_METHODS`: identity,
  reinhard, mkl, idt, histmatch), each a direct call of a pinned package, with
  `write_reference_baseline`, which also writes a `method.yaml` with the provenance;
- `reinhard_lab`, a small numpy / scikit-image CIELAB Reinhard transfer used as the stand-in "user
  method" of `examples/method-repo/` (not a reference baseline).

A method is a function ``(content, style) -> output`` on 8-bit RGB arrays of shape ``(H, W, 3)``;
the output has the content's shape.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml
from PIL import Image

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.write import staging_dir, swap_dir_into_place, write_new

Method = Callable[[np.ndarray, np.ndarray], np.ndarray]


def check_baseline_protocol(protocol, given) -> None:
    """Reference baselines are paired runs: a protocol of another kind (`--protocol given`) is refused."""
    from pytest_pstbench.core.kinds import protocol_kind
    from pytest_pstbench.paired.kind import KIND

    kind = protocol_kind(protocol.data, protocol.path)
    if kind != KIND.name:
        raise UserError(
            f"--protocol {given}: {protocol.id} is a {kind} protocol; fix: use a paired protocol (pstbench)"
        )


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


# =============================================================================================
# Reference baselines of `pstbench baseline`: each one a direct call of a pinned package.
# =============================================================================================

REFERENCE_METHODS = ("identity", "reinhard", "mkl", "idt", "histmatch")

COLOR_MATCHER_VERSION = "0.6.0"
_UNIT_INPUT = "content (src) and style (ref) as RGB float64 in [0, 1] (8-bit values / 255)"
_UNIT_OUTPUT = "clipped to [0, 1], multiplied by 255, rounded half to even (numpy.rint), cast to uint8"


def unit_to_rgb8(x, what: str) -> np.ndarray:
    """A float RGB image in [0, 1] -> uint8: clip to [0, 1], x255, round half to even, cast.

    A complex result (numpy's `eig` can return one with zero imaginary parts) is taken as its real
    part when every imaginary part is below 1e-9; non-finite values are an error.
    """
    arr = np.asarray(x)
    if np.iscomplexobj(arr):
        if arr.size and float(np.abs(arr.imag).max()) > 1e-9:
            raise ValueError(f"{what} returned complex values (max |imag| {float(np.abs(arr.imag).max()):.3g})")
        arr = arr.real
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} returned non-finite values (NaN or inf)")
    return np.rint(np.clip(arr.astype(np.float64), 0.0, 1.0) * 255.0).astype(np.uint8)


@dataclass
class PreparedBaseline:
    """A reference baseline ready to run: `fn(content, style) -> output` on uint8 RGB arrays, and the
    provenance written to method.yaml (`implementation`, `settings`)."""

    name: str
    fn: Method
    implementation: dict
    settings: dict
    description: str


def _dist_version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _color_matcher(method: str):
    from pytest_pstbench.core.install_hints import extra_install

    version = _dist_version("color-matcher")
    if version is None:
        raise UserError(
            f"baseline {method} needs color-matcher {COLOR_MATCHER_VERSION}, which is not installed; fix: {extra_install('baselines')}"
        )
    if version != COLOR_MATCHER_VERSION:
        raise UserError(
            f"baseline {method} is pinned to color-matcher {COLOR_MATCHER_VERSION}, but {version} is installed; "
            f"fix: pip install color-matcher=={COLOR_MATCHER_VERSION} (or {extra_install('baselines')})"
        )
    from color_matcher import ColorMatcher

    return ColorMatcher


def _prepare_color_matcher(method: str) -> PreparedBaseline:
    ColorMatcher = _color_matcher(method)

    def run(content: np.ndarray, style: np.ndarray) -> np.ndarray:
        # Fresh float arrays: color-matcher's reinhard writes into its inputs (zeros -> 1/255).
        src = _as_rgb8(content, "content").astype(np.float64) / 255.0
        ref = _as_rgb8(style, "style").astype(np.float64) / 255.0
        return unit_to_rgb8(ColorMatcher().transfer(src=src, ref=ref, method=method), f"color-matcher {method}")

    run.__name__ = method
    import color_matcher

    return PreparedBaseline(
        name=method,
        fn=run,
        implementation={
            "package": "color-matcher",
            "version": COLOR_MATCHER_VERSION,
            "path": str(Path(color_matcher.__file__).parent),
            "call": f'ColorMatcher().transfer(src=src, ref=ref, method="{method}")',
        },
        settings={"input": _UNIT_INPUT, "output": _UNIT_OUTPUT, "randomness": "none"},
        description={
            "reinhard": "Reinhard et al. (2001) colour transfer (color-matcher's implementation)",
            "mkl": "Monge-Kantorovich linearisation colour transfer (Pitie & Kokaram 2007; color-matcher)",
        }[method],
    )


def _prepare_histmatch() -> PreparedBaseline:
    from skimage.exposure import match_histograms

    def histmatch(content: np.ndarray, style: np.ndarray) -> np.ndarray:
        src = _as_rgb8(content, "content").astype(np.float64) / 255.0
        ref = _as_rgb8(style, "style").astype(np.float64) / 255.0
        return unit_to_rgb8(match_histograms(src, ref, channel_axis=-1), "match_histograms")

    return PreparedBaseline(
        name="histmatch",
        fn=histmatch,
        implementation={
            "package": "scikit-image",
            "version": _dist_version("scikit-image"),
            "call": "skimage.exposure.match_histograms(src, ref, channel_axis=-1)",
        },
        settings={
            "input": _UNIT_INPUT,
            "channels": "each RGB channel matched on its own (channel_axis=-1)",
            "output": _UNIT_OUTPUT,
            "randomness": "none",
        },
        description="per-channel histogram matching of the content to the style (scikit-image)",
    )


def _prepare_idt(progress) -> PreparedBaseline:
    from pytest_pstbench.data.pinned_packages import PYTHON_COLOR_TRANSFER, load_pinned

    mod, info = load_pinned(PYTHON_COLOR_TRANSFER, "python_color_transfer.color_transfer", progress)
    ColorTransfer = mod.ColorTransfer

    def idt(content: np.ndarray, style: np.ndarray) -> np.ndarray:
        # RGB -> BGR and back by reversing the channel axis (the same as cv2.cvtColor's
        # COLOR_RGB2BGR / COLOR_BGR2RGB on 8-bit arrays).
        bgr_in = np.ascontiguousarray(_as_rgb8(content, "content")[..., ::-1])
        bgr_ref = np.ascontiguousarray(_as_rgb8(style, "style")[..., ::-1])
        out = ColorTransfer().pdf_transfer(img_arr_in=bgr_in, img_arr_ref=bgr_ref, regrain=False)
        return np.ascontiguousarray(np.asarray(out)[..., ::-1])

    return PreparedBaseline(
        name="idt",
        fn=idt,
        implementation={
            **info,
            "call": "ColorTransfer().pdf_transfer(img_arr_in=bgr_in, img_arr_ref=bgr_ref, regrain=False)",
            "opencv": _dist_version("opencv-python-headless") or _dist_version("opencv-python"),
        },
        settings={
            "input": "content (img_arr_in) and style (img_arr_ref) as 8-bit BGR arrays (RGB channel axis reversed)",
            "output": "the package's own 8-bit result (it clips to [0, 1], multiplies by 255 and truncates), "
            "BGR -> RGB by reversing the channel axis",
            "randomness": "none: ColorTransfer() (c=3) uses the six fixed rotations of Rotations.optimal_rotations(); "
            "no random numbers are drawn, so no seed is needed",
        },
        description="iterative distribution transfer (Pitie et al. 2005/2007), without regrain (python-color-transfer)",
    )


def _prepare_identity() -> PreparedBaseline:
    def identity_copy(content: np.ndarray, style: np.ndarray) -> np.ndarray:
        return _as_rgb8(content, "content").copy()

    return PreparedBaseline(
        name="identity",
        fn=identity_copy,
        implementation={"package": "pytest-pstbench", "call": "the content image, unchanged"},
        settings={
            "input": "content decoded under the protocol's I/O rules",
            "output": "the same 8-bit RGB values",
            "randomness": "none",
        },
        description="the content image, unchanged",
    )


def parse_methods(names: list[str]) -> list[str]:
    """`all` and method names -> the methods in the order given (duplicates dropped)."""
    out: list[str] = []
    for name in names:
        expanded = REFERENCE_METHODS if name == "all" else (name,)
        for m in expanded:
            if m not in REFERENCE_METHODS:
                raise UserError(
                    f"baseline {m!r}: unknown method; fix: choose from {', '.join(REFERENCE_METHODS)} or all"
                )
            if m not in out:
                out.append(m)
    return out


def prepare_reference_baseline(name: str, progress=None) -> PreparedBaseline:
    """Check the pinned package of baseline `name` (fetching python-color-transfer for `idt`)."""
    if name == "identity":
        return _prepare_identity()
    if name in ("reinhard", "mkl"):
        return _prepare_color_matcher(name)
    if name == "histmatch":
        return _prepare_histmatch()
    if name == "idt":
        return _prepare_idt(progress)
    parse_methods([name])  # raises the one-line error
    raise AssertionError(name)  # pragma: no cover


class BaselineFailed(Exception):
    """A baseline failed on one pair (message: one line naming the method and the pair)."""


_OVERWRITABLE = ("*.png", "method.yaml")


def check_out_dir(out: Path, overwrite: bool) -> None:
    """Refuse an existing non-empty `out` unless `overwrite`; even then, only a folder that holds
    nothing but PNGs and a method.yaml (what this command writes) is replaced."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: exists and is not a folder; fix: give a new folder")
    if not out.is_dir() or not any(out.iterdir()):
        return
    if not overwrite:
        raise UserError(
            f"--out {out}: folder exists and is not empty; fix: give a new folder, or pass --overwrite to replace it"
        )
    other = sorted(p.name for p in out.iterdir() if p.is_dir() or not any(p.match(g) for g in _OVERWRITABLE))
    if other:
        shown = ", ".join(other[:5]) + (f" and {len(other) - 5} more" if len(other) > 5 else "")
        raise UserError(
            f"--out {out}: --overwrite only replaces an outputs folder (PNGs and method.yaml), but it also holds {shown}; "
            "fix: give another folder or remove it yourself"
        )


def _save_png(arr: np.ndarray, path: Path) -> None:
    Image.fromarray(np.ascontiguousarray(arr), "RGB").save(path, format="PNG", compress_level=6)


def method_yaml(prepared: PreparedBaseline, track, protocol, command: str | None) -> dict:
    """The provenance written to `method.yaml` (and, when the folder is scored, to run.json `method`)."""
    from pytest_pstbench import __version__

    return {
        "method": prepared.name,
        "description": prepared.description,
        "implementation": prepared.implementation,
        "settings": prepared.settings,
        "pstbench_version": __version__,
        "numpy": _dist_version("numpy"),
        "track": {
            "id": track.id,
            "dataset": track.dataset_id,
            "revision": track.revision,
            "source": track.source,
            "n_pairs": len(track.pairs),
        },
        "inputs_read_with": {"protocol": protocol.id, "sha256": protocol.sha256},
        "command": command,
    }


def write_reference_baseline(
    prepared: PreparedBaseline,
    track,
    out: Path | str,
    *,
    protocol=None,
    overwrite: bool = False,
    command: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Run `prepared` on every pair of `track` and write `<out>/<pair_id>.png` plus `method.yaml`.

    Inputs are read under the protocol's I/O rules (default protocol `pstbench`), as the scorer
    reads them. The folder is built in a temporary folder next to `out` and renamed into place, so
    `out` is either absent/unchanged or complete. Raises `BaselineFailed` (naming the pair) when the
    method fails on a pair, `UserError` for bad input; in both cases nothing is written to `out`.
    """
    from pytest_pstbench.core.protocol import load_protocol
    from pytest_pstbench.paired.imageio import load_dataset_image

    protocol = protocol or load_protocol()
    out = Path(out)
    check_out_dir(out, overwrite)
    with staging_dir(out, what="write the baseline outputs", fix="give a writable --out folder") as tmp:
        n = len(track.pairs)
        for i, pair in enumerate(track.pairs, 1):
            content = load_dataset_image(pair.content, protocol, role=f"content of {pair.id}").array
            style = load_dataset_image(pair.style, protocol, role=f"style of {pair.id}").array
            try:
                result = np.asarray(prepared.fn(content, style))
            except Exception as exc:  # the method's own failure: name the pair
                msg = " ".join(f"{type(exc).__name__}: {exc}".split())
                raise BaselineFailed(
                    f"baseline {prepared.name} failed on pair {pair.id} ({pair.content.name}): {msg}"
                ) from exc
            if result.dtype != np.uint8 or result.shape != content.shape:
                raise BaselineFailed(
                    f"baseline {prepared.name} failed on pair {pair.id}: returned {result.dtype} {result.shape}, "
                    f"expected uint8 {content.shape}"
                )
            _save_png(result, tmp / f"{pair.id}.png")
            if progress:
                progress(f"baseline {prepared.name}: [{i}/{n}] {pair.id}")
        text = yaml.safe_dump(method_yaml(prepared, track, protocol, command), sort_keys=False, allow_unicode=True)
        write_new(tmp / "method.yaml", text)
        swap_dir_into_place(tmp, out)  # an existing `out` was checked by `check_out_dir`
    return out
