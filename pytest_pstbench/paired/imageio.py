"""The protocol's I/O rules: a file -> a uint8 HxWx3 sRGB array plus notes.

Everything that is not an 8-bit RGB PNG is refused with a one-line `UserError` naming the file,
its actual format/mode, the rule and the fix, unless the protocol lists a conversion as allowed
(`io.allowed_conversions`), in which case the conversion is applied and noted.
"""

from __future__ import annotations

import hashlib
import io
import os
import struct
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageCms, ImageOps, UnidentifiedImageError

from pytest_pstbench.core.errors import UserError
from pytest_pstbench.core.files.images import MAX_PIXELS, check_header_size, exif_orientation, sniff_format
from pytest_pstbench.paired.protocol import PairedProtocol

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_IEND = b"\x00\x00\x00\x00IEND\xaeB`\x82"
_PNG_COLOUR_TYPES = {0: "grayscale", 2: "RGB", 3: "palette", 4: "grayscale+alpha", 6: "RGBA"}
_MODE_WORDS = {
    "L": "8-bit grayscale",
    "LA": "grayscale with alpha",
    "P": "palette",
    "PA": "palette with alpha",
    "RGBA": "RGB with alpha",
    "CMYK": "CMYK",
    "I": "32-bit integer grayscale",
    "I;16": "16-bit grayscale",
    "I;16B": "16-bit grayscale",
    "F": "32-bit float",
    "1": "1-bit",
    "YCbCr": "YCbCr",
}
_FIX = "fix: save it as an 8-bit RGB PNG (no alpha, no palette)"
RESIZE_MAX_FACTOR = 4  # with --allow-resize, an output may be at most this many times the reference's size per side


def size_mismatch(path, size: tuple[int, int], ref_size: tuple[int, int], protocol: PairedProtocol) -> UserError:
    (ow, oh), (w, h) = size, ref_size
    return UserError(
        f"{path} (output): size {ow}x{oh} differs from the reference's {w}x{h} "
        f"(protocol {protocol.id}: resolution.size = reference, no crop or resampling); "
        f"fix: write the output at {w}x{h}, or pass --allow-resize to resize it (each resize is recorded as a deviation)"
    )


@dataclass
class LoadedImage:
    array: np.ndarray  # uint8, HxWx3
    notes: dict = field(default_factory=dict)  # e.g. {"icc_converted": {...}, "resized": {...}}
    sha256: str | None = None  # of the file bytes that were decoded (None for an in-memory array)


def _png_header(raw: bytes) -> tuple[int, int, int, int] | None:
    """(width, height, bit depth, colour type) from a PNG's IHDR, or None if it is not a PNG."""
    if not raw.startswith(_PNG_SIGNATURE) or len(raw) < 33 or raw[12:16] != b"IHDR":
        return None
    width, height, depth, ctype = struct.unpack(">IIBB", raw[16:26])
    return width, height, depth, ctype


SRGB_TOLERANCE = 1  # code values (8-bit): a profile within this of sRGB on the probe colours is sRGB


@lru_cache(maxsize=1)
def _srgb_probe() -> Image.Image:
    """Probe colours: the 16x16x16 grid of levels 0, 17, ..., 255 and the full gray ramp (64x68 pixels)."""
    levels = np.arange(0, 256, 17, dtype=np.uint8)
    grid = np.stack(np.meshgrid(levels, levels, levels, indexing="ij"), axis=-1).reshape(-1, 3)
    ramp = np.repeat(np.arange(256, dtype=np.uint8)[:, None], 3, axis=1)
    return Image.fromarray(np.concatenate([grid, ramp]).reshape(68, 64, 3), "RGB")


@lru_cache(maxsize=64)
def _is_srgb(profile_bytes: bytes) -> tuple[bool, str]:
    """Whether an embedded ICC profile is sRGB by its content (not its description): the probe colours,
    converted from the profile to lcms's built-in sRGB (relative colorimetric, which compares the
    colorants and tone curves), move by at most SRGB_TOLERANCE code values. Returns (is sRGB, description)."""
    try:
        prof = ImageCms.ImageCmsProfile(io.BytesIO(profile_bytes))
    except (OSError, ImageCms.PyCMSError):
        return False, "unreadable ICC profile"
    desc = (ImageCms.getProfileDescription(prof) or "").strip() or "unnamed ICC profile"
    if str(getattr(prof.profile, "xcolor_space", "")).strip() != "RGB":
        return False, desc
    probe = _srgb_probe()
    try:
        out = ImageCms.profileToProfile(
            probe,
            prof,
            ImageCms.createProfile("sRGB"),
            renderingIntent=ImageCms.Intent.RELATIVE_COLORIMETRIC,
            outputMode="RGB",
        )
    except (OSError, ImageCms.PyCMSError):
        return False, desc
    diff = np.abs(np.asarray(out, dtype=np.int16) - np.asarray(probe, dtype=np.int16)).max()
    return bool(diff <= SRGB_TOLERANCE), desc


def _in_protocol_mode(
    img, protocol: PairedProtocol, where: str, notes: dict, actual: str, *, eight_bit: bool, fix: str
):
    """The decoded image in the protocol's mode (io.mode, 8 bits): as it is when it has that mode, converted
    (and noted in `notes`) when it is `eight_bit` and io.allowed_conversions lists its mode, else a UserError
    naming what it is (`actual`)."""
    mode = img.mode
    allowed, wanted = protocol.io.allowed_conversions, protocol.io.mode
    if eight_bit and mode == wanted:
        return img
    if eight_bit and mode in allowed:
        notes["converted"] = {"from": actual, "to": f"8-bit {wanted}", "rule": allowed[mode]}
        return img.convert(wanted)
    raise UserError(
        f"{where}: is {actual}, but protocol {protocol.id} requires 8-bit {wanted} "
        f"(io.mode; no conversion of this mode is allowed); {fix}"
    )


def _oriented_srgb_array(img, rules, where: str, notes: dict, *, icc_fix: str, fix: str) -> np.ndarray:
    """The decoded image's 8-bit RGB array after the protocol's orientation and colour rules (outputs and
    dataset images alike): the EXIF orientation applied (io.exif_orientation), a non-sRGB ICC profile
    converted to sRGB with the protocol's rendering intent; each step taken is noted in `notes`."""
    if rules.exif_orientation:
        orientation = exif_orientation(img, where)
        if orientation != 1:
            img = ImageOps.exif_transpose(img)
            notes["exif_orientation"] = int(orientation)
    icc = img.info.get("icc_profile")
    if icc:
        is_srgb, desc = _is_srgb(icc)
        if not is_srgb:
            intent = getattr(ImageCms.Intent, rules.rendering_intent.upper())
            try:
                src = ImageCms.ImageCmsProfile(io.BytesIO(icc))
                img = ImageCms.profileToProfile(
                    img, src, ImageCms.createProfile("sRGB"), renderingIntent=intent, outputMode="RGB"
                )
            except (OSError, ImageCms.PyCMSError) as exc:
                raise UserError(
                    f"{where}: its embedded ICC profile '{desc}' cannot be converted to sRGB ({exc}); {icc_fix}"
                ) from None
            notes["icc_converted"] = {"from": desc, "to": "sRGB", "intent": rules.rendering_intent}
    arr = np.asarray(img, dtype=np.uint8)
    if arr.ndim != 3 or arr.shape[2] != 3:  # pragma: no cover - guarded by the mode check
        raise UserError(f"{where}: decoded to shape {arr.shape}, expected HxWx3; {fix}")
    return arr


def load_image(
    path: Path,
    protocol: PairedProtocol,
    role: str = "output",
    *,
    expected_size: tuple[int, int] | None = None,
    allow_resize: bool = False,
) -> LoadedImage:
    """Read `path` under the protocol's I/O rules; `role` names the file's part in error messages.

    The size in the header is checked before any pixel is decoded: against `expected_size` (width,
    height; the reference's, for an output: equal, or at most RESIZE_MAX_FACTOR times per side with
    `allow_resize`) and against the largest image the kit decodes (MAX_PIXELS)."""
    path = Path(path)
    rules = protocol.io
    where = f"{path} ({role})"
    if not path.is_file():
        raise UserError(f"{where}: file not found; fix: write the {role} PNG at this path")
    try:
        with open(path, "rb") as fh:
            head = fh.read(33)
            header = _png_header(head)
            if header is not None:  # before the rest of the file is read or Pillow parses anything
                check_header_size(where, header[0], header[1], max_pixels=rules.max_pixels or MAX_PIXELS)
            raw = head + fh.read()
    except OSError as exc:
        raise UserError(f"{where}: cannot be read ({exc.strerror or exc}); fix: make the file readable") from None
    try:
        img = Image.open(io.BytesIO(raw))
        fmt = img.format
    except Image.DecompressionBombError as exc:
        raise UserError(
            f"{where}: refused by Pillow's decompression-bomb check ({exc}); fix: write a normal-sized image"
        ) from None
    except (UnidentifiedImageError, OSError):  # OSError: e.g. a file cut inside its PNG header
        raise UserError(
            f"{where}: not a readable image (protocol {protocol.id}: io.format {rules.format}); {_FIX}"
        ) from None
    if fmt != rules.format or header is None:
        raise UserError(
            f"{where}: is a {fmt} file, not a {rules.format} (protocol {protocol.id}: io.format; "
            f"the extension does not count); {_FIX}"
        )
    width, height, depth, ctype = header
    if expected_size is not None and (width, height) != tuple(expected_size):
        w, h = expected_size
        if not allow_resize:
            raise size_mismatch(path, (width, height), (w, h), protocol)
        if width > RESIZE_MAX_FACTOR * w or height > RESIZE_MAX_FACTOR * h:
            raise UserError(
                f"{where}: size {width}x{height} is more than {RESIZE_MAX_FACTOR} times the reference's {w}x{h} per side; "
                f"refused before decoding (decompression-bomb guard); fix: write the output at {w}x{h}"
            )
    n_frames = getattr(img, "n_frames", 1)
    if getattr(img, "is_animated", False) or n_frames > 1:
        raise UserError(
            f"{where}: is an animated PNG ({n_frames} frames); protocol {protocol.id} scores one still image; "
            "fix: save the frame to score as a plain PNG"
        )
    try:
        img.load()
    except (OSError, SyntaxError, ValueError) as exc:
        raise UserError(f"{where}: truncated or corrupt PNG ({exc}); fix: write the file again completely") from None
    if not raw.endswith(_PNG_IEND):
        end = raw.rfind(_PNG_IEND)
        if end >= 0:
            extra = len(raw) - end - len(_PNG_IEND)
            raise UserError(
                f"{where}: trailing data after the image end ({extra} bytes after the IEND chunk); "
                "fix: write the file again without anything after the PNG's end"
            )
        raise UserError(
            f"{where}: truncated or corrupt PNG (no IEND chunk at the end); fix: write the file again completely"
        )
    notes: dict = {}
    actual = f"{depth}-bit {_PNG_COLOUR_TYPES.get(ctype, f'colour type {ctype}')} (Pillow mode {img.mode})"
    # Only 8-bit modes can be allowed: a conversion from 16 bits would have to choose a scaling.
    img = _in_protocol_mode(img, protocol, where, notes, actual, eight_bit=depth == 8, fix=_FIX)
    arr = _oriented_srgb_array(img, rules, where, notes, icc_fix="fix: save the file in sRGB", fix=_FIX)
    return LoadedImage(np.ascontiguousarray(arr), notes, hashlib.sha256(raw).hexdigest())


def fit_to_reference(
    loaded: LoadedImage, ref_shape: tuple[int, ...], path: Path, protocol: PairedProtocol, allow_resize: bool
) -> LoadedImage:
    """Apply the resolution rule: the output must have the reference's size, or be resized if allowed."""
    h, w = ref_shape[:2]
    oh, ow = loaded.array.shape[:2]
    if (oh, ow) == (h, w):
        return loaded
    if not allow_resize:
        raise size_mismatch(path, (ow, oh), (w, h), protocol)
    filt = protocol.resolution.allow_resize_filter
    if filt is None:
        raise UserError(
            f"{path}: is {ow}x{oh}, the reference {w}x{h}, and --allow-resize was given, but protocol {protocol.id} "
            f"({protocol.path}) names no resolution.allow_resize_filter; fix: add one to the protocol "
            "(e.g. allow_resize_filter: bicubic), or write outputs at the reference's size"
        )
    resample = getattr(Image.Resampling, str(filt).upper())
    arr = np.asarray(Image.fromarray(loaded.array).resize((w, h), resample=resample), dtype=np.uint8)
    notes = dict(loaded.notes)
    notes["resized"] = {"from": [ow, oh], "to": [w, h], "filter": filt}
    return LoadedImage(np.ascontiguousarray(arr), notes)


# ---- dataset images (content, style, reference) ------------------------------------------------
# The protocol's io.format rule is for method outputs. Dataset images are what a benchmark publishes
# (AceTone-Bench may ship JPEG): any of these formats, which Pillow decodes losslessly (PNG, TIFF,
# lossless WebP) or deterministically for a given decoder version (JPEG, lossy WebP), is read under
# the same mode, orientation and colour rules as an output; the decoder versions go into run.json
# (`dataset.image_decoders`) whenever a track holds a format other than PNG.
DATASET_FORMATS = ("PNG", "JPEG", "WEBP", "TIFF")
_EIGHT_BIT_MODES = {"1", "L", "LA", "P", "PA", "RGB", "RGBA", "RGBX", "CMYK", "YCbCr", "LAB", "HSV"}
_DATASET_FIX = "fix: publish or convert the dataset image as an 8-bit RGB PNG, JPEG, WebP or TIFF"


def dataset_decoders(formats) -> dict:
    """Pillow and the decoder libraries (with versions) that read dataset images of `formats`."""
    import PIL
    from PIL import features

    def ver(feature: str) -> str | None:
        try:
            return features.version(feature)
        except (ValueError, KeyError):  # pragma: no cover - unknown feature on an old Pillow
            return None

    formats = sorted(set(formats))
    out: dict = {"formats": formats, "pillow": PIL.__version__}
    if "PNG" in formats:
        out["zlib"] = ver("zlib")
    if "JPEG" in formats:
        out["libjpeg"] = ver("jpg")  # the libjpeg API version Pillow was built against
        out["libjpeg_turbo"] = ver("libjpeg_turbo")  # None when Pillow uses IJG libjpeg
    if "WEBP" in formats:
        out["libwebp"] = ver("webp")
    if "TIFF" in formats:
        out["libtiff"] = ver("libtiff")
    return out


def load_dataset_image(path: Path, protocol: PairedProtocol, role: str) -> LoadedImage:
    """Read a content, style or reference image: a PNG exactly as `load_image`; JPEG, WebP or TIFF under
    the same mode, EXIF-orientation and ICC rules (8-bit, Pillow mode io.mode or an allowed conversion)."""
    path = Path(path)
    where = f"{path} ({role})"
    if not path.is_file():
        raise UserError(
            f"{where}: file not found; fix: fetch the dataset again, or correct the path in the track manifest"
        )
    if sniff_format(path) == "PNG":
        return load_image(path, protocol, role=role)
    rules = protocol.io
    raw = path.read_bytes()
    try:
        img = Image.open(io.BytesIO(raw))
        fmt = img.format
    except Image.DecompressionBombError as exc:
        raise UserError(f"{where}: refused by Pillow's decompression-bomb check ({exc}); {_DATASET_FIX}") from None
    except (UnidentifiedImageError, OSError) as exc:
        sniffed = sniff_format(path)
        if sniffed != "other":  # starts like one of the formats, but cannot be opened: cut or damaged
            raise UserError(
                f"{where}: truncated or corrupt {sniffed} ({exc}); fix: replace it with a complete copy (remote track: `pstbench data fetch` fetches it again)"
            ) from None
        raise UserError(
            f"{where}: not an image Pillow can read (dataset images may be {', '.join(DATASET_FORMATS)}); {_DATASET_FIX}"
        ) from None
    if fmt not in DATASET_FORMATS:
        raise UserError(
            f"{where}: is a {fmt} file; dataset images must be {', '.join(DATASET_FORMATS)} (read by the file's "
            f"bytes, not its name); {_DATASET_FIX}"
        )
    bits = img.tag_v2.get(258) if fmt == "TIFF" else None  # BitsPerSample
    if bits is not None and any(int(b) != 8 for b in (bits if isinstance(bits, tuple) else (bits,))):
        raise UserError(
            f"{where}: is a {'/'.join(str(b) for b in (bits if isinstance(bits, tuple) else (bits,)))}-bit TIFF, but protocol "
            f"{protocol.id} reads 8 bits per channel (io.mode; no bit-depth conversion is done); {_DATASET_FIX}"
        )
    if getattr(img, "n_frames", 1) != 1:
        raise UserError(
            f"{where}: a {fmt} with {img.n_frames} frames/pages; a dataset image must be a single image; {_DATASET_FIX}"
        )
    # the size from the header (Image.open has decoded no pixel yet): the decompression-bomb guard
    check_header_size(where, img.size[0], img.size[1], max_pixels=rules.max_pixels or MAX_PIXELS)
    try:
        img.load()
    except (OSError, SyntaxError, ValueError) as exc:
        raise UserError(
            f"{where}: truncated or corrupt {fmt} ({exc}); fix: replace it with a complete copy (remote track: `pstbench data fetch` fetches it again)"
        ) from None
    notes: dict = {}
    actual = f"{fmt} in Pillow mode {img.mode} ({_MODE_WORDS.get(img.mode, img.mode)})"
    img = _in_protocol_mode(
        img, protocol, where, notes, actual, eight_bit=img.mode in _EIGHT_BIT_MODES, fix=_DATASET_FIX
    )
    arr = _oriented_srgb_array(img, rules, where, notes, icc_fix=f"{_DATASET_FIX} in sRGB", fix=_DATASET_FIX)
    return LoadedImage(np.ascontiguousarray(arr), notes, hashlib.sha256(raw).hexdigest())


# ---- a method's output: which rules read it --------------------------------------------------------
OUTPUT_RULES, DATASET_RULES = "output", "dataset"


def output_rules(path: Path, content: Path) -> str:
    """The I/O rules a method's output file is read under: the dataset image rules (`load_dataset_image`)
    when it is the pair's content image itself (the Identity method's "output"), else the protocol's
    output rules (`load_image`: io.format and the rest). Part of a score cache key (`read_as`): bytes a
    run read under one set of rules never stand in for the same bytes read under the other."""
    return DATASET_RULES if os.path.realpath(path) == os.path.realpath(content) else OUTPUT_RULES


def load_output(
    path: Path, rules: str, protocol: PairedProtocol, *, role: str, expected_size: tuple[int, int], allow_resize: bool
) -> LoadedImage:
    """Read a method's output under `rules` (`output_rules`): the dataset image rules, or the output rules
    with the size checked against `expected_size` (the reference's) before any pixel is decoded."""
    if rules == DATASET_RULES:
        return load_dataset_image(path, protocol, role=role)
    return load_image(path, protocol, role=role, expected_size=expected_size, allow_resize=allow_resize)


def check_output_array(arr, pair_id: str):
    """An in-memory output (`pstbench_score`, `api.score` with arrays): a uint8 HxWx3 RGB array, contiguous."""
    a = np.asarray(arr)
    if a.dtype != np.uint8 or a.ndim != 3 or a.shape[2] != 3:
        raise UserError(
            f"<array for {pair_id}>: got dtype {a.dtype} shape {a.shape}; pstbench_score needs a uint8 HxWx3 RGB "
            "array (fix: convert with np.clip(np.rint(x), 0, 255).astype(np.uint8))"
        )
    return np.ascontiguousarray(a)
