"""How objects become ring bytes: pickle protocol 5 with large buffers kept out of band.

A pickled message that carries big binary buffers would otherwise copy each buffer into the
pickle stream (a fresh allocation the size of the payload, with its page faults), then into the
ring, then out again. Out-of-band, the pickle stream holds only the small skeleton and every
large buffer is copied once, straight from the caller's memory into shared memory, and once out
of shared memory into the object the reader receives.

What goes out of band:

- anything whose protocol-5 reduction yields a ``pickle.PickleBuffer`` (numpy arrays and other
  buffer-exporting types that implement it), at any depth and any size;
- buffers of at least ``OOB_MIN_BYTES``: a top-level ``bytearray``, ``memoryview`` or
  ``PickleBuffer``, and ``bytes`` / ``bytearray`` items of a top-level ``tuple`` or ``list`` or
  values of a top-level ``dict`` (the pickler never offers exact ``bytes``/``bytearray`` to a
  reducer, so they are wrapped one level deep; deeper ones travel in band).

What the reader gets: ``bytes`` stay ``bytes``; a ``bytearray``, ``memoryview`` or
``PickleBuffer`` arrives as a new writable ``bytearray``; an out-of-band buffer of any other type
is rebuilt by its own reducer over a new writable ``bytearray`` the reader owns (never a view of
a ring slot, which the writer reuses).

Wire format of an out-of-band message (flag ``OOB``): a header of little-endian u64 words
``[n_buffers, pickle_length, (length, kind) * n_buffers]``, the pickle stream, then the buffers
back to back.

Import-safe: stdlib only.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any, Final

__all__ = ["OOB_MIN_BYTES", "Serialized", "loads_oob", "serialize"]

#: buffers smaller than this stay inside the pickle stream (bookkeeping would cost more)
OOB_MIN_BYTES: Final = 64 << 10

_KIND_BYTEARRAY: Final = 0
_KIND_BYTES: Final = 1
_PROTOCOL: Final = pickle.HIGHEST_PROTOCOL
assert _PROTOCOL >= 5, "out-of-band buffers need pickle protocol 5 (Python >= 3.8)"


def _as_bytes(buf: Any) -> bytes:
    """Rebuild a ``bytes`` member: the reader already made it a ``bytes`` (no second copy)."""
    return buf if type(buf) is bytes else bytes(buf)


def _as_bytearray(buf: Any) -> bytearray:
    """Rebuild a ``bytearray`` (or a top-level buffer): the reader made a fresh one."""
    return buf if type(buf) is bytearray else bytearray(buf)


class _Oob:
    """Stands in for one large buffer while pickling; reduces to a ``PickleBuffer``."""

    __slots__ = ("buffer", "rebuild")

    def __init__(self, buffer: pickle.PickleBuffer, rebuild: Any) -> None:
        self.buffer = buffer
        self.rebuild = rebuild

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return (self.rebuild, (self.buffer,))


def _wrap_member(value: Any, seen: dict[int, Any], bytes_ids: set[int]) -> Any:
    t = type(value)
    if (t is bytes or t is bytearray) and len(value) >= OOB_MIN_BYTES:
        wrapper = seen.get(id(value))
        if wrapper is None:
            buf = pickle.PickleBuffer(value)
            if t is bytes:
                bytes_ids.add(id(buf))
            wrapper = seen[id(value)] = _Oob(buf, _as_bytes if t is bytes else _as_bytearray)
        return wrapper
    return value


def _top_level_buffer(obj: Any) -> Any:
    """A contiguous top-level buffer as a bytearray-rebuilt stand-in (None if not applicable)."""
    try:
        view = memoryview(obj)
    except TypeError:
        return None
    if not view.c_contiguous:
        return bytearray(view.tobytes())
    if view.nbytes < OOB_MIN_BYTES:
        return bytearray(view)
    return _Oob(pickle.PickleBuffer(view), _as_bytearray)


_NO_IDS: Final[set[int]] = set()  # shared, never mutated: no bytes members were wrapped


class Serialized:
    """A message with out-of-band buffers: ``parts`` to copy back to back, ``nbytes`` in total."""

    __slots__ = ("nbytes", "parts")

    def __init__(self, parts: list[Any], nbytes: int) -> None:
        self.parts = parts
        self.nbytes = nbytes


def serialize(obj: Any) -> bytes | Serialized:
    """Pickle ``obj`` (protocol 5): the pickle itself when every buffer stayed in band,
    otherwise a :class:`Serialized` whose large buffers are separate parts."""
    t = type(obj)
    bytes_ids: set[int] = _NO_IDS
    target = obj
    # Inline checks, no generator or helper call: this runs for every small message too.
    if t is tuple or t is list:
        for v in obj:
            tv = type(v)
            if (tv is bytes or tv is bytearray) and len(v) >= OOB_MIN_BYTES:
                seen: dict[int, Any] = {}
                bytes_ids = set()
                wrapped = [_wrap_member(m, seen, bytes_ids) for m in obj]
                target = tuple(wrapped) if t is tuple else wrapped
                break
    elif t is dict:
        for v in obj.values():
            tv = type(v)
            if (tv is bytes or tv is bytearray) and len(v) >= OOB_MIN_BYTES:
                seen = {}
                bytes_ids = set()
                target = {k: _wrap_member(m, seen, bytes_ids) for k, m in obj.items()}
                break
    elif t is bytearray or t is memoryview or t is pickle.PickleBuffer:
        target = _top_level_buffer(obj)
    buffers: list[pickle.PickleBuffer] = []
    # Every PickleBuffer goes out of band (list.append returns None: "not in band"); only our
    # own wrappers above apply the size threshold. Cheaper than a filtering callback.
    data = pickle.dumps(target, _PROTOCOL, buffer_callback=buffers.append)
    if not buffers:
        return data
    views = [b.raw() for b in buffers]
    words = [len(views), len(data)]
    for b, v in zip(buffers, views, strict=True):
        words += (v.nbytes, _KIND_BYTES if id(b) in bytes_ids else _KIND_BYTEARRAY)
    header = struct.pack(f"<{len(words)}Q", *words)
    total = len(header) + len(data) + sum(v.nbytes for v in views)
    return Serialized([header, data, *views], total)


def loads_oob(view: memoryview) -> Any:
    """Unpickle one out-of-band message; every buffer is copied out of ``view`` once."""
    n, plen = struct.unpack_from("<2Q", view, 0)
    table = struct.unpack_from(f"<{2 * n}Q", view, 16)
    pos = 16 + 16 * n
    pickled = view[pos : pos + plen]
    pos += plen
    buffers: list[Any] = []
    for i in range(n):
        length, kind = table[2 * i], table[2 * i + 1]
        with view[pos : pos + length] as part:
            buffers.append(part.tobytes() if kind == _KIND_BYTES else bytearray(part))
        pos += length
    with pickled:
        return pickle.loads(pickled, buffers=buffers)
