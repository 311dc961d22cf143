"""``DiffusionImage``: an image ``DiffGenerator.generate()`` returns, as plain RGB bytes.

The launcher process never needs torch or numpy for it: rank 0 sends row-major uint8 RGB bytes
over its pipe. Files are written by Pillow (``encode_rgb``), which the HTTP child uses too, so
every image this runtime hands out is encoded the same way; Pillow is imported on first use.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["IMAGE_FORMATS", "DiffusionImage", "ImageFormat", "encode_rgb"]

ImageFormat = Literal["png", "jpeg", "webp"]

IMAGE_FORMATS: dict[str, str] = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}
"""The formats ``encode_rgb`` writes, with their media types."""

_SUFFIXES = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".webp": "webp"}


def encode_rgb(
    rgb: bytes, width: int, height: int, *, fmt: str = "png", quality: int | None = None
) -> bytes:
    """``rgb`` (row-major ``height x width x 3`` uint8) as a ``fmt`` file.

    ``quality`` (0-100, default 100) applies to JPEG and WebP; PNG is lossless and ignores it.
    Raises ``ValueError`` for a size that does not match the bytes or an unknown format.
    """
    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"unknown image format {fmt!r}; use one of {sorted(IMAGE_FORMATS)}")
    if width <= 0 or height <= 0:
        raise ValueError(f"image dimensions must be positive, got {width}x{height}")
    if len(rgb) != width * height * 3:
        raise ValueError(
            f"expected {width * height * 3} bytes for a {width}x{height} RGB image, got {len(rgb)}"
        )
    from PIL import Image

    image = Image.frombytes("RGB", (width, height), rgb)
    buffer = io.BytesIO()
    if fmt == "png":
        image.save(buffer, format="PNG")
    else:
        image.save(buffer, format=fmt.upper(), quality=100 if quality is None else quality)
    return buffer.getvalue()


def _format_of(path: Path) -> str:
    return _SUFFIXES.get(path.suffix.lower(), "png")


@dataclass(frozen=True, slots=True)
class DiffusionImage:
    """One generated image: ``rgb`` holds ``height * width * 3`` bytes, row-major RGB."""

    prompt: str
    seed: int
    width: int
    height: int
    rgb: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.rgb) != self.width * self.height * 3:
            raise ValueError(
                f"a {self.width}x{self.height} RGB image needs {self.width * self.height * 3} "
                f"bytes, got {len(self.rgb)}"
            )

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> DiffusionImage:
        """Build from one entry of rank 0's ``generate`` answer."""
        return cls(
            prompt=str(data["prompt"]),
            seed=int(data["seed"]),
            width=int(data["width"]),
            height=int(data["height"]),
            rgb=bytes(data["rgb"]),
        )

    @property
    def size(self) -> tuple[int, int]:
        """``(width, height)``."""
        return (self.width, self.height)

    def pixel(self, x: int, y: int) -> tuple[int, int, int]:
        """The ``(r, g, b)`` value at column ``x``, row ``y``."""
        if not (0 <= x < self.width and 0 <= y < self.height):
            raise IndexError(f"pixel ({x}, {y}) is outside a {self.width}x{self.height} image")
        offset = (y * self.width + x) * 3
        r, g, b = self.rgb[offset : offset + 3]
        return (r, g, b)

    def encode(self, fmt: str = "png", *, quality: int | None = None) -> bytes:
        """The image as ``fmt`` file bytes (``png``, ``jpeg`` or ``webp``)."""
        return encode_rgb(self.rgb, self.width, self.height, fmt=fmt, quality=quality)

    def to_png(self) -> bytes:
        """The image as PNG file bytes."""
        return self.encode("png")

    def save_png(self, path: str | os.PathLike[str]) -> Path:
        """Write the image as a PNG file (parent folders created); returns the path."""
        return _write(Path(path), self.to_png())

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the image in the format its suffix names (``.png``, ``.jpg``/``.jpeg``,
        ``.webp``; anything else is PNG), parent folders created; returns the path."""
        target = Path(path)
        return _write(target, self.encode(_format_of(target)))


def _write(target: Path, data: bytes) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target
