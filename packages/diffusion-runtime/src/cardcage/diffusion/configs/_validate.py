"""Field checks shared by the config dataclasses: each raises the caller's typed error."""

from __future__ import annotations

import math

TYPE_CHECKING = False
if TYPE_CHECKING:
    from cardcage.diffusion.errors import InvalidArgumentError

__all__ = ["check_float", "check_int", "check_choice"]


def check_int(
    error: type[InvalidArgumentError],
    name: str,
    value: object,
    *,
    low: int,
    high: int | None = None,
    multiple_of: int = 1,
) -> int:
    """``value`` as an int in ``[low, high]`` (bools rejected), a multiple of ``multiple_of``."""
    ok = isinstance(value, int) and not isinstance(value, bool)
    if ok and (value < low or (high is not None and value > high) or value % multiple_of):  # type: ignore[operator]
        ok = False
    if not ok:
        bound = f"<= {high}" if high is not None else "with no upper bound"
        multiple = f", a multiple of {multiple_of}" if multiple_of > 1 else ""
        raise error(name, value, f"an int >= {low} and {bound}{multiple}")
    assert isinstance(value, int)
    return value


def check_float(
    error: type[InvalidArgumentError],
    name: str,
    value: object,
    *,
    low: float,
    high: float | None = None,
    low_inclusive: bool = True,
) -> float:
    """``value`` as a finite float in the range (ints accepted, bools rejected)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok:
        number = float(value)  # type: ignore[arg-type]
        ok = math.isfinite(number) and (number >= low if low_inclusive else number > low)
        ok = ok and (high is None or number <= high)
    if not ok:
        op = ">=" if low_inclusive else ">"
        upper = f" and <= {high}" if high is not None else ""
        raise error(name, value, f"a finite number {op} {low}{upper}")
    return float(value)  # type: ignore[arg-type]


def check_choice(
    error: type[InvalidArgumentError], name: str, value: object, choices: tuple[str, ...]
) -> str:
    if not isinstance(value, str) or value not in choices:
        raise error(name, value, "one of " + ", ".join(repr(c) for c in choices))
    return value
