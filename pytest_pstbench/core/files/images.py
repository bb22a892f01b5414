"""Image guards both kinds use, before any pixel is decoded (standard library only).

`MAX_PIXELS` and `check_header_size`: the decompression-bomb guard on the size an image's header
announces; `sniff_format`: the container from a file's first bytes (its name does not count);
`exif_orientation`: an opened image's EXIF Orientation tag, checked; `write_thumbnail`: the one thumbnail
writer of the report pages (Pillow imported when called).
"""

from __future__ import annotations

import struct
from pathlib import Path

from pytest_pstbench.core.errors import UserError

# Decompression-bomb guard: the size in an image's header is checked before any pixel is decoded.
MAX_PIXELS = 64_000_000  # the largest image the kit decodes (a protocol may lower it with io.max_pixels)


def check_header_size(where: str, width: int, height: int, *, max_pixels: int = MAX_PIXELS) -> None:
    """Refuse an image whose header announces more than `max_pixels` pixels (before decoding it)."""
    if width * height > max_pixels:
        raise UserError(
            f"{where}: header says {width}x{height} pixels ({width * height / 1e6:.0f} MP), more than the kit decodes "
            f"({max_pixels / 1e6:.0f} MP); refused before decoding (decompression-bomb guard); fix: use a smaller image"
        )


def sniff_format(path: Path) -> str:
    """The image container from the file's first bytes: PNG, JPEG, WEBP, TIFF, or `other`."""
    with open(path, "rb") as fh:
        head = fh.read(16)
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if head.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "WEBP"
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "TIFF"
    return "other"


EXIF_ORIENTATION = 0x0112


def exif_orientation(img, where: str) -> int:
    """The EXIF Orientation tag of an opened Pillow image: 1 when absent; 0 (unknown) to 8. Unreadable EXIF
    data, or a tag that is not such an integer (text, a fraction, 42), is a UserError naming `where`: the
    kit would otherwise apply no rotation while recording one, or crash."""
    fix = "fix: save the image with an EXIF Orientation of 1 to 8, or without EXIF data"
    try:
        value = img.getexif().get(EXIF_ORIENTATION, 1)
    except (ValueError, TypeError, KeyError, IndexError, SyntaxError, OSError, struct.error) as exc:
        raise UserError(
            f"{where}: its EXIF data cannot be read ({type(exc).__name__}: {' '.join(str(exc).split())}); {fix}"
        ) from None
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 8:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise UserError(f"{where}: EXIF Orientation tag is {shown}, not an orientation (an integer 1 to 8); {fix}")
    return value


def write_thumbnail(src: Path, dest: Path, size: int) -> tuple[int, int]:
    """Write a JPEG thumbnail of `src` (longest side at most `size` pixels, EXIF orientation applied) to
    `dest` and return its width and height. The header's size is checked against `MAX_PIXELS` before any
    pixel is decoded (ValueError). Pillow is imported here; OSError, ValueError and Pillow's errors
    (UnidentifiedImageError, DecompressionBombError) propagate: the caller shows a placeholder with the reason."""
    from PIL import Image as PILImage
    from PIL import ImageOps

    with PILImage.open(src) as im:
        if im.size[0] * im.size[1] > MAX_PIXELS:  # from the header: nothing decoded yet
            raise ValueError(
                f"header says {im.size[0]}x{im.size[1]} pixels, more than the kit decodes "
                f"({MAX_PIXELS / 1e6:.0f} MP; decompression-bomb guard)"
            )
        im.draft("RGB", (size, size))
        im = ImageOps.exif_transpose(im)
        if im.mode in ("I;16", "I;16B", "I;16L", "I"):
            im = im.point(lambda v: v / 257).convert("L")
        im = im.convert("RGB")
        im.thumbnail((size, size), PILImage.Resampling.LANCZOS)
        im.save(dest, "JPEG", quality=88)
        return im.size
