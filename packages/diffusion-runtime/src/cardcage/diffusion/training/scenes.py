"""Procedurally drawn scenes and their captions: the training data of ``cardcage/tiny-dit``.

A scene is one flat-coloured shape on a flat background, chosen from a vocabulary a person reads
at a glance: ``COLOURS`` x ``SHAPES`` x ``PLACES`` x ``BACKGROUNDS``. Each slot has its own
words (no word names two things), so a prompt means the same whatever order its words come in.
Scenes are drawn with Pillow at four times their size and downsampled, so edges are smooth.
Nothing is downloaded: ``Scene.draw`` is the whole data set, and ``random_scene`` samples it.

Import-safe for the runtime: the runtime never imports this package.
"""

from __future__ import annotations

import dataclasses
import random

from PIL import Image, ImageDraw

__all__ = [
    "BACKGROUNDS",
    "COLOURS",
    "PLACES",
    "SHAPES",
    "STOPWORDS",
    "Scene",
    "random_scene",
    "vocabulary",
]

#: Shape colours (sRGB).
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (40, 185, 70),
    "blue": (45, 90, 235),
    "yellow": (245, 215, 40),
    "white": (245, 245, 245),
    "purple": (150, 60, 210),
}
SHAPES = ("circle", "square", "triangle")
#: Where the shape's centre sits, as fractions of the width and height, and the caption phrase.
PLACES: dict[str, tuple[float, float, str]] = {
    "left": (0.27, 0.5, "on the left"),
    "right": (0.73, 0.5, "on the right"),
    "top": (0.5, 0.27, "at the top"),
    "bottom": (0.5, 0.73, "at the bottom"),
    "center": (0.5, 0.5, "in the center"),
}
#: Background colours and their caption phrase.
BACKGROUNDS: dict[str, tuple[tuple[int, int, int], str]] = {
    "night": ((15, 20, 50), "at night"),
    "day": ((140, 195, 240), "by day"),
    "grass": ((60, 120, 50), "on grass"),
    "sand": ((215, 185, 125), "on sand"),
}
#: Words of the captions that carry no meaning of their own.
STOPWORDS = ("a", "an", "the", "on", "in", "at", "by", "of", "with", "and")

_SUPERSAMPLE = 4


def vocabulary() -> tuple[str, ...]:
    """Every word a prompt can use to mean something, in a fixed order (the token ids)."""
    return (*COLOURS, *SHAPES, *PLACES, *BACKGROUNDS)


@dataclasses.dataclass(frozen=True)
class Scene:
    """One picture: what it shows, and jitter (fractions of the side) that keeps data varied."""

    colour: str
    shape: str
    place: str
    background: str
    radius: float = 0.19
    dx: float = 0.0
    dy: float = 0.0

    def caption(self, *, place: bool = True, background: bool = True) -> str:
        """``"a red circle on the left at night"``; either phrase may be left out."""
        words = [f"a {self.colour} {self.shape}"]
        if place:
            words.append(PLACES[self.place][2])
        if background:
            words.append(BACKGROUNDS[self.background][1])
        return " ".join(words)

    def centre(self) -> tuple[float, float]:
        """The shape's centre as fractions of width and height."""
        x, y, _ = PLACES[self.place]
        return x + self.dx, y + self.dy

    def draw(self, size: int = 64) -> Image.Image:
        """The scene as a ``size`` x ``size`` RGB image."""
        big = size * _SUPERSAMPLE
        image = Image.new("RGB", (big, big), BACKGROUNDS[self.background][0])
        pen = ImageDraw.Draw(image)
        fx, fy = self.centre()
        cx, cy, r = fx * big, fy * big, self.radius * big
        fill = COLOURS[self.colour]
        if self.shape == "circle":
            pen.ellipse((cx - r, cy - r, cx + r, cy + r), fill=fill)
        elif self.shape == "square":
            side = r * 0.9  # a square looks bigger than a circle of the same radius
            pen.rectangle((cx - side, cy - side, cx + side, cy + side), fill=fill)
        else:
            h = r * 1.1
            pen.polygon([(cx, cy - h), (cx + h, cy + 0.8 * h), (cx - h, cy + 0.8 * h)], fill=fill)
        return image.resize((size, size), Image.Resampling.BOX)


def random_scene(rng: random.Random) -> Scene:
    """A uniformly chosen scene with a little jitter in size and position."""
    return Scene(
        colour=rng.choice(list(COLOURS)),
        shape=rng.choice(SHAPES),
        place=rng.choice(list(PLACES)),
        background=rng.choice(list(BACKGROUNDS)),
        radius=rng.uniform(0.16, 0.21),
        dx=rng.uniform(-0.03, 0.03),
        dy=rng.uniform(-0.03, 0.03),
    )
