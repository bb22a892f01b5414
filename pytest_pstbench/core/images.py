"""Image guards both kinds use, before any pixel is decoded (standard library only).

`MAX_PIXELS` and `check_header_size`: the decompression-bomb guard on the size an image's header
announces; `sniff_format`: the container from a file's first bytes (its name does not count).
"""
from __future__ import annotations

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
