"""Collectives over a MessageQueue: ``barrier()`` and ``all_gather_object()`` across the writer
and every reader, local and remote.

The queue itself only carries messages from the writer to its readers, so a collective needs a
way back. It is a star with the writer at the centre, in two phases:

1. *Gather*: every reader posts its contribution (an empty one for a barrier, the pickle of its
   object for an all-gather) to the writer. A local reader posts into its own up slot in the
   segment's collective region (see ``_layout``), in pieces of at most ``coll_bytes`` that
   the writer acknowledges one by one; a remote reader sends one upstream message on its
   existing CURVE-authenticated ZeroMQ connection (its socket is an XSUB, which may send to the
   writer's XPUB).
2. *Release*: the writer, once it holds every contribution, publishes the result (nothing for a
   barrier; for an all-gather, a table of ranks and lengths followed by every participant's
   pickle, the writer's first, then the readers' in ascending rank order): local readers read it
   from the down slot, in pieces they acknowledge; remote readers get it as one message in the
   writer's sequenced stream, after the messages enqueued before it.

Every word of the collective region has one writing process, as in the ring: the writer owns
the down words, the up acknowledgements and the abort words; reader ``r`` owns its up words, its
down acknowledgement and its parked flag. Counters (up fragments posted / acknowledged, down
fragments published / acknowledged) only grow, so a waiter compares a counter with the number it
needs and parks on that very word, and the kernel's futex compare makes a lost wake-up
impossible there. Each collective is numbered (1, 2, ...) and tagged with its operation; a
fragment carries the tag, which is how a mismatch (a barrier meeting an all-gather, or counts
that drifted apart) is detected. A dead, closed or mismatched participant makes the writer
*abort* the collective: it records who and why in the abort words (and sends it to remote
readers), so every participant raises the same typed error promptly instead of timing out; the
queue's collectives stay broken afterwards (the participants no longer agree on where they are),
while ``enqueue``/``dequeue`` keep working.

A call that times out (``QueueTimeoutError``) or is cancelled leaves its collective pending on
this queue object: calling the same collective again carries on where it stopped (an
all-gather's new ``obj`` is ignored; the first call's object was already sent).

Must never: touch the ring's hot words (``enqueue``/``dequeue`` do not know this module), import
zmq unless the queue has remote readers, or wait without ``timeout=``, ``shutdown()``,
liveness checks and the package's spin-then-yield-then-park.

Split by concept, not by direction: the two directions move pieces and wait in the same way,
so that is written once (``_pieces``, ``_pacer``), and what differs between them, who waits for
whom and what a fault means, stays with the side it belongs to (``_hub``, ``_spoke``):

- ``_protocol``: operations, tags, abort codes and their errors, the all-gather result's
  format, reading the abort words; shared with ``_remote``.
- ``_pieces``: a payload through one slot of the region, piece by piece, in either direction.
- ``_pacer``: the wait of one call (spin, yield, park; timeout, liveness, warnings).
- ``_round``: one collective as one participant sees it, kept across a timed-out call.
- ``_hub``: the writer's side (gather, release, abort); ``_spoke``: a local reader's side (post,
  receive).
- ``_calls``: ``Collectives``, the state of one queue object and the call through the phases.
"""

from __future__ import annotations

from ._calls import Collectives
from ._protocol import (
    _REMOTE,
    ABORT_DIED,
    ABORT_DUPLICATE,
    ABORT_MISMATCH,
    OP_BARRIER,
    OP_GATHER,
    _AbortError,
    describe,
)

# Collectives and the operations for the queue; the rest is what _remote's gather imports.
__all__ = [
    "ABORT_DIED",
    "ABORT_DUPLICATE",
    "ABORT_MISMATCH",
    "OP_BARRIER",
    "OP_GATHER",
    "_REMOTE",
    "Collectives",
    "_AbortError",
    "describe",
]
