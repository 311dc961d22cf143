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
``[n_buffers, pickle_length, (length, kind) * n_buffers]``, the pickle stream, then the buffers back
to back. The header and the pickle come first so that a reader can create every buffer's destination
object before the buffers arrive: :class:`OobReceiver` then copies each piece of a message that is
still streaming into the ring straight into its final object.

Import-safe: stdlib only.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any, Final

from . import _sys

__all__ = ["OOB_MIN_BYTES", "OobReceiver", "Serialized", "WireError", "serialize"]

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


class WireError(ValueError):
    """The bytes of an out-of-band message contradict its own header (the ring turns this into
    its typed corruption error, which names the segment and the fragment)."""


_COUNTS: Final = struct.Struct("<2Q")
# a buffer's place in a message: (message offset, length, destination address or 0, and a
# writable view of the destination where there is no address)
_Segment = tuple[int, int, int, memoryview | None]
# what a receiver builds once the header is in: (buffers, segments)
_Layout = tuple[list[Any], list[_Segment]]


class OobReceiver:
    """Rebuilds one out-of-band message from its wire bytes, fed in order in pieces of any size.

    The ring streams a large message: its bytes become readable piece by piece while the writer
    is still copying the rest. Collecting them first (in a scratch buffer) and unpickling after
    costs a second full copy; instead, once the header and the pickle are in, this creates every
    buffer's final object (an uninitialised ``bytes`` where CPython allows it, else a
    ``bytearray``) and copies each later piece straight from shared memory into the objects it
    overlaps. Every buffer byte is thus copied once out of the ring. A message that is already
    complete is fed in one piece, which makes this the one decoder of the wire format.

    ``fed`` counts the bytes consumed and advances only after each copy, and every copy lands at
    the position it belongs to: when a call is interrupted half-way (a timed-out wait between
    pieces, a ``KeyboardInterrupt``), feeding again from ``fed`` repeats at most a copy that
    already happened, and never skips or doubles bytes.
    """

    __slots__ = ("_base", "_head", "_layout", "_raw", "_segment", "_shape", "fed", "total")

    def __init__(self, total: int, raw: memoryview, base: int) -> None:
        """Receive a ``total``-byte message whose pieces lie in ``raw`` (a memoryview of the
        segment, which starts at address ``base``)."""
        if total < 16:
            raise WireError(f"is a {total}-byte out-of-band message, shorter than its header")
        self.total = total
        self.fed = 0  # bytes consumed so far
        self._raw = raw
        self._base = base
        self._head = bytearray()  # the header and the pickle, as they arrive
        # (n_buffers, length of header + pickle), once the two counts are in
        self._shape: tuple[int, int] | None = None
        # (buffers, segments), once the header is in
        self._layout: _Layout | None = None
        self._segment = 0  # the segment the next buffer byte belongs to

    def take(self, off: int, n: int) -> None:
        """Consume the message's next ``n`` bytes, found at offset ``off`` of the segment."""
        pos = self.fed
        end = pos + n
        if end > self.total:
            raise WireError(f"runs {end - self.total} bytes past its declared length")
        raw = self._raw
        while pos < end:
            layout = self._layout
            if layout is None:
                shape = self._shape
                head_len = 16 if shape is None else shape[1]
                if pos < head_len:
                    m = min(end, head_len) - pos
                    self._head[pos : pos + m] = raw[off : off + m]
                    pos += m
                    off += m
                    self.fed = pos
                elif shape is None:
                    self._shape = self._read_counts()
                else:
                    self._layout = self._make_layout(shape)
                continue
            start, length, addr, view = layout[1][self._segment]
            into = pos - start
            m = min(end - pos, length - into)
            if addr:
                _sys.memmove(addr + into, self._base + off, m)
            else:
                assert view is not None
                view[into : into + m] = raw[off : off + m]
            pos += m
            off += m
            self.fed = pos
            if into + m == length:
                self._segment += 1

    def _read_counts(self) -> tuple[int, int]:
        """``(n_buffers, header + pickle length)`` from the first 16 bytes, checked."""
        n_buffers, pickle_length = _COUNTS.unpack_from(self._head, 0)
        head_len = 16 + 16 * n_buffers + pickle_length
        if head_len > self.total:
            raise WireError(
                f"declares {n_buffers} buffers and a {pickle_length}-byte pickle in a "
                f"{self.total}-byte message"
            )
        return n_buffers, head_len

    def _make_layout(self, shape: tuple[int, int]) -> _Layout:
        """Check the buffer table against the message, then create every buffer's object."""
        n_buffers, head_len = shape
        table = struct.unpack_from(f"<{2 * n_buffers}Q", self._head, 16)
        lengths = table[0::2]
        declared = head_len + sum(lengths)
        if declared != self.total:  # checked before anything is allocated
            raise WireError(
                f"declares {declared} bytes of header, pickle and buffers in {self.total}"
            )
        buffers: list[Any] = []
        segments: list[_Segment] = []
        at = head_len
        for i, (length, kind) in enumerate(zip(lengths, table[1::2], strict=True)):
            if kind not in (_KIND_BYTES, _KIND_BYTEARRAY):
                raise WireError(f"declares buffer {i} of unknown kind {kind}")
            made = _sys.new_bytes(length) if kind == _KIND_BYTES else None
            buffer: bytes | bytearray
            view: memoryview | None
            if made is not None:
                buffer, addr = made
                view = None
            else:  # where bytes cannot be made uninitialised, _as_bytes converts it on loading
                buffer = bytearray(length)
                addr = 0
                view = memoryview(buffer)
            buffers.append(buffer)
            if length:
                segments.append((at, length, addr, view))
            at += length
        return buffers, segments

    def result(self) -> Any:
        """Unpickle the complete message over its received buffers."""
        if self.fed != self.total:
            raise WireError(f"ended {self.total - self.fed} bytes short of its declared length")
        if self._layout is None:  # the message ended with its pickle: every buffer is empty
            shape = self._shape if self._shape is not None else self._read_counts()
            self._layout = self._make_layout(shape)
        buffers, segments = self._layout
        for _, _, _, view in segments:
            if view is not None:
                view.release()  # the reader's bytearray must stay resizable, even before GC
        start = 16 + 16 * len(buffers)
        with memoryview(self._head) as head, head[start:] as pickled:
            return pickle.loads(pickled, buffers=buffers)
