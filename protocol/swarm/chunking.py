"""Split a cell set into self-contained PATCH or SNAPSHOT messages that fit a datagram.

The number of cells per datagram comes from the real encoded size of the same
message without cells, with the sequence number (and, for snapshots, the chunk
index and count) at their widest msgpack form, so every chunk fits whatever
number it ends up carrying.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

from protocol.swarm.cells import Cells, cells_that_fit, split_cells
from protocol.swarm.codec import encoded_size
from protocol.swarm.messages import (
    DEFAULT_DATAGRAM_LIMIT,
    U16_MAX,
    U32_MAX,
    Body,
    Message,
    Patch,
    Snapshot,
    check_datagram_limit,
    validate_header,
)

_EMPTY_BIN_HEADER = 2


def _capacity(template: Message, limit: int) -> int:
    n = cells_that_fit(limit, encoded_size(template) - _EMPTY_BIN_HEADER)
    if n < 1:
        raise ValueError(f"not even one cell fits a {limit}-byte datagram")
    return n


def patch_capacity(
    *, cell_size_mm: int, t_ref: float, swarm_id: int, sender: str, epoch: int, t_sent: float,
    limit: int = DEFAULT_DATAGRAM_LIMIT,
) -> int:
    """Most cells one PATCH datagram with these header fields can carry."""
    check_datagram_limit(limit)
    # Times are always float 64 on the wire (9 bytes): they never change the size.
    return _patch_capacity(cell_size_mm, swarm_id, sender, epoch, limit)


@functools.lru_cache(maxsize=64)
def _patch_capacity(cell_size_mm: int, swarm_id: int, sender: str, epoch: int, limit: int) -> int:
    template = Message(
        swarm_id, sender, epoch, U32_MAX, 0.0, Patch(cell_size_mm, 0.0, Cells.empty())
    )
    return _capacity(template, limit)


def patch_messages(
    cells: Cells, *, cell_size_mm: int, t_ref: float, swarm_id: int, sender: str, epoch: int,
    first_seq: int, t_sent: float, limit: int = DEFAULT_DATAGRAM_LIMIT,
) -> list[Message]:
    """PATCH messages with consecutive sequence numbers from ``first_seq``; none if no cells.

    Build ``cells`` with :meth:`Cells.from_arrays`, which refuses indices outside int16
    and values outside float16 with a ``ValueError``.
    """
    if not len(cells):
        return []
    check_datagram_limit(limit)  # patch_capacity() without its keyword call
    per_chunk = _patch_capacity(cell_size_mm, swarm_id, sender, epoch, limit)
    chunks = split_cells(cells, per_chunk)
    if first_seq + len(chunks) - 1 > U32_MAX:
        raise ValueError("the sequence numbers of this epoch are exhausted")
    # encode() refuses any datagram over the limit, so a capacity bug cannot go unseen.
    return _numbered(chunks, lambda _, chunk: Patch(cell_size_mm, t_ref, chunk),
                     swarm_id=swarm_id, sender=sender, epoch=epoch, first_seq=first_seq,
                     t_sent=t_sent)


def _numbered(
    chunks: list[Cells], body: Callable[[int, Cells], Body], *,
    swarm_id: int, sender: str, epoch: int, first_seq: int, t_sent: float,
) -> list[Message]:
    """One message per chunk, seq counting up from ``first_seq``: the checks of
    ``Message(..., body(i, chunk))`` in the same order, without the dataclass's."""
    out: list[Message] = []
    for i, chunk in enumerate(chunks):
        b = body(i, chunk)
        header = validate_header(swarm_id, sender, epoch, first_seq + i, t_sent)
        out.append(Message.from_checked(header, b))
    return out


def snapshot_messages(
    cells: Cells, *, snapshot_id: int, origin_ix: int, origin_iy: int, width: int, height: int,
    cell_size_mm: int, t_ref: float, swarm_id: int, sender: str, epoch: int, first_seq: int,
    t_sent: float, limit: int = DEFAULT_DATAGRAM_LIMIT,
) -> list[Message]:
    """All chunks of one snapshot (at least one, even for an empty window)."""
    check_datagram_limit(limit)

    def body(index: int, count: int, chunk: Cells) -> Snapshot:
        return Snapshot(
            snapshot_id, index, count, origin_ix, origin_iy, width, height, cell_size_mm,
            t_ref, chunk,
        )

    count = 1
    while True:  # widen the chunk fields until the count they imply stops growing
        template = Message(
            swarm_id, sender, epoch, U32_MAX, t_sent, body(count - 1, count, Cells.empty())
        )
        per_chunk = _capacity(template, limit)
        needed = max(1, math.ceil(len(cells) / per_chunk))
        if needed <= count:
            break
        if needed > U16_MAX:
            raise ValueError(f"a snapshot of {len(cells)} cells needs over {U16_MAX} chunks")
        count = needed
    chunks = split_cells(cells, per_chunk) or [cells]
    if first_seq + len(chunks) - 1 > U32_MAX:
        raise ValueError("the sequence numbers of this epoch are exhausted")
    return _numbered(chunks, lambda i, chunk: body(i, len(chunks), chunk),
                     swarm_id=swarm_id, sender=sender, epoch=epoch, first_seq=first_seq,
                     t_sent=t_sent)
