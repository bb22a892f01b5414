"""PNG files written byte by byte, of any declared size (decompression bombs included)."""

from __future__ import annotations

import struct
import zlib


def write_png(path, width, height, *, valid=True, ctype=2):
    """A PNG of zeros; `valid=False` writes only a token IDAT (enough for a header check)."""

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, ctype, 0, 0, 0)
    if valid:
        comp = zlib.compressobj(9)
        row = b"\x00" * (1 + width * (3 if ctype == 2 else 1))
        parts = [comp.compress(row) for _ in range(height)]
        idat = b"".join(parts) + comp.flush()
    else:
        idat = zlib.compress(b"\x00" * 64)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b""))
    return path
