"""The attribute names adapters are resolved under, shared by every host's room.

A host resolves the name ``activate()`` returned by itself (SGLang with ``pkgutil.resolve_name``,
vLLM by splitting on the last dot), in every process it starts, and pickle finds an adapter
instance's class the same way. So the name must carry the vendor class's qualname, reversibly,
in characters an attribute name may hold: ``<Class>__Q<encoded qualname>``, where the encoding
writes ``_`` as ``_u``, ``.`` as ``_d`` and ``:`` as ``_c``. The encoding never produces ``__``
(every ``_`` it writes is followed by a code letter), so the last separator is the boundary.
"""

from __future__ import annotations

__all__ = ["SEPARATOR", "attribute_name", "vendor_qualname"]

_ESCAPES = {"_": "_u", ".": "_d", ":": "_c"}
_REVERSE = {code[1]: char for char, code in _ESCAPES.items()}
#: Between the readable class name and the encoded qualname.
SEPARATOR = "__Q"


def _encode(qualname: str) -> str:
    return "".join(_ESCAPES.get(char, char) for char in qualname)


def _decode(text: str) -> str:
    out: list[str] = []
    chars = iter(text)
    for char in chars:
        if char != "_":
            out.append(char)
            continue
        code = next(chars, "")
        if code not in _REVERSE:
            raise ValueError(f"not an adapter name: {text!r}")
        out.append(_REVERSE[code])
    return "".join(out)


def attribute_name(qualname: str) -> str:
    """The adapter's attribute name for the vendor class ``qualname`` (``a.b:C`` or ``a.b.C``)."""
    text = qualname.strip()
    short = text.replace(":", ".").rsplit(".", 1)[-1]
    return f"{short}{SEPARATOR}{_encode(text)}"


def vendor_qualname(attribute: str) -> str:
    """The vendor class's qualname encoded in an adapter's attribute name (the inverse)."""
    _, separator, encoded = attribute.rpartition(SEPARATOR)
    if not separator or not encoded:
        raise ValueError(f"not an adapter name: {attribute!r}")
    return _decode(encoded)
