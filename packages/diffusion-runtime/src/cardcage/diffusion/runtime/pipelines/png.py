"""A dependency-free PNG writer for 8-bit RGB images (stdlib ``zlib`` and ``struct`` only).

Writes the smallest valid file: signature, ``IHDR`` (8-bit truecolor, no interlace), one ``IDAT``
holding every scanline with filter type 0, and ``IEND``; each chunk carries its CRC-32.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

__all__ = ["PNG_SIGNATURE", "encode_png_rgb", "write_png_rgb"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def encode_png_rgb(pixels: bytes, width: int, height: int, *, level: int = 6) -> bytes:
    """PNG bytes of ``pixels``: row-major ``height x width x 3`` uint8 values."""
    if width <= 0 or height <= 0:
        raise ValueError(f"PNG dimensions must be positive, got {width}x{height}")
    stride = width * 3
    if len(pixels) != stride * height:
        raise ValueError(
            f"expected {stride * height} bytes for a {width}x{height} RGB image, got {len(pixels)}"
        )
    raw = b"".join(b"\x00" + pixels[row * stride : (row + 1) * stride] for row in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        PNG_SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(raw, level))
        + _chunk(b"IEND", b"")
    )


def write_png_rgb(path: str | os.PathLike[str], pixels: bytes, width: int, height: int) -> Path:
    """Write ``encode_png_rgb(...)`` to ``path`` (parent folders created) and return the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(encode_png_rgb(pixels, width, height))
    return target
