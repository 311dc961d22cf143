"""``DiffusionImage``: an image ``DiffGenerator.generate()`` returns, as plain RGB bytes.

The launcher process never needs torch or numpy for it: rank 0 sends row-major uint8 RGB bytes
over its pipe, and PNG encoding uses the stdlib writer of ``runtime.pipelines.png``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cardcage.diffusion.runtime.pipelines.png import encode_png_rgb, write_png_rgb

__all__ = ["DiffusionImage"]


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

    def to_png(self) -> bytes:
        """The image as PNG file bytes."""
        return encode_png_rgb(self.rgb, self.width, self.height)

    def save_png(self, path: str | os.PathLike[str]) -> Path:
        """Write the image as a PNG file (parent folders created); returns the path."""
        return write_png_rgb(path, self.rgb, self.width, self.height)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Same as ``save_png`` (PNG is the one format written)."""
        return self.save_png(path)
