"""Does a generated picture show what its prompt asked for? A cheap check for the tests.

``cardcage/tiny-dit`` draws one shape on a background (``cardcage.diffusion.training.scenes``).
``scene_problems`` measures three patches of the decoded RGB image: the middle of the shape's
place must be nearest (in RGB) to the asked colour, and the four corners and the middle of the
opposite place nearest to the asked background, among every colour the model draws.
"""

from __future__ import annotations

from cardcage.diffusion.training.scenes import BACKGROUNDS, COLOURS, PLACES

#: Prompts whose colours stand far apart from their backgrounds, with what each must show.
SCENES = {
    "a yellow circle at the top at night": ("yellow", "top", "night"),
    "a red square on the left on sand": ("red", "left", "sand"),
    "a white triangle on the right on grass": ("white", "right", "grass"),
}

_OPPOSITE = {"left": "right", "right": "left", "top": "bottom", "bottom": "top"}
_PALETTE = {**COLOURS, **{f"{name} background": rgb for name, (rgb, _) in BACKGROUNDS.items()}}


def _mean(
    rgb: bytes, width: int, height: int, fx: float, fy: float, half: float
) -> tuple[float, ...]:
    """Mean colour of the square of half-side ``half`` (fraction of the width) at ``(fx, fy)``."""
    x0, x1 = int((fx - half) * width), int((fx + half) * width)
    y0, y1 = int((fy - half) * height), int((fy + half) * height)
    total = [0, 0, 0]
    for y in range(max(0, y0), min(height, y1)):
        for x in range(max(0, x0), min(width, x1)):
            offset = 3 * (y * width + x)
            for c in range(3):
                total[c] += rgb[offset + c]
    count = max(1, (min(height, y1) - max(0, y0)) * (min(width, x1) - max(0, x0)))
    return tuple(t / count for t in total)


def nearest_colour(mean: tuple[float, ...]) -> str:
    """The name of the palette colour closest to ``mean`` (backgrounds end in "background")."""
    return min(
        _PALETTE, key=lambda n: sum((a - b) ** 2 for a, b in zip(mean, _PALETTE[n], strict=True))
    )


def scene_problems(
    rgb: bytes, width: int, height: int, colour: str, place: str, background: str
) -> list[str]:
    """What in the picture contradicts "a ``colour`` shape at ``place`` on ``background``"."""
    problems: list[str] = []
    fx, fy, _ = PLACES[place]
    seen = nearest_colour(_mean(rgb, width, height, fx, fy, 0.06))
    if seen != colour:
        problems.append(f"the {place} of the picture is {seen}, not {colour}")
    checks = {"corners": [(0.07, 0.07), (0.93, 0.07), (0.07, 0.93), (0.93, 0.93)]}
    if place in _OPPOSITE:
        ox, oy, _ = PLACES[_OPPOSITE[place]]
        checks[f"{_OPPOSITE[place]} side"] = [(ox, oy)]
    for where, points in checks.items():
        for px, py in points:
            seen = nearest_colour(_mean(rgb, width, height, px, py, 0.06))
            if seen != f"{background} background":
                problems.append(f"the {where} of the picture are {seen}, not {background}")
    return problems
