"""The sending side: one (sender, epoch) numbering its datagrams and signing them."""

from __future__ import annotations

import secrets

import numpy.typing as npt

from protocol.swarm.cells import Cells
from protocol.swarm.chunking import patch_messages, snapshot_messages
from protocol.swarm.codec import MacKey, check_key, encode_checked
from protocol.swarm.messages import (
    DEFAULT_DATAGRAM_LIMIT,
    U32_MAX,
    Body,
    Message,
    check_datagram_limit,
    validate_header,
)


def random_epoch() -> int:
    """A random u32 (tests and tools that need an arbitrary epoch)."""
    return secrets.randbits(32)


def next_epoch(previous: int | None, wall_seconds: float) -> int:
    """The epoch of a sender's new start: above every earlier one (SWARM.md §4).

    The wall clock in whole seconds, or the previous epoch plus one when that is
    larger (a restart within the same second, or a wall clock set back).
    """
    wall = min(max(int(wall_seconds), 1), U32_MAX)
    nxt = wall if previous is None else max(wall, previous + 1)
    if nxt > U32_MAX:
        raise ValueError("no epoch is left above the previous one (u32 exhausted)")
    return nxt


class SwarmSender:
    """Numbers, encodes and signs this agent's datagrams (sans-IO: ``now`` is passed in).

    Sequence numbers start at ``first_seq`` and grow by one per datagram; when the u32
    space is spent the sender refuses to go on (start a new epoch instead).
    """

    def __init__(
        self,
        key: bytes,
        swarm_id: int,
        sender: str,
        epoch: int,
        *,
        limit: int = DEFAULT_DATAGRAM_LIMIT,
        first_seq: int = 0,
    ) -> None:
        self._key = MacKey(check_key(key))  # the HMAC key's padded blocks hashed once
        self.swarm_id, self.sender, self.epoch, first_seq, _ = validate_header(
            swarm_id, sender, epoch, first_seq, 0.0
        )
        self._limit = check_datagram_limit(limit)
        self._next_seq = first_seq
        self.sent = 0

    @property
    def limit(self) -> int:
        """The datagram size limit (read-only: encoding trusts it, checked once)."""
        return self._limit

    @property
    def next_seq(self) -> int:
        return self._next_seq

    def _seq(self) -> int:
        if self._next_seq > U32_MAX:
            raise OverflowError("sequence numbers exhausted for this epoch; start a new epoch")
        return self._next_seq

    def _take(self, n: int) -> None:
        self._next_seq += n
        self.sent += n

    def message(self, body: Body, now: float) -> Message:
        """The next message with this body (consumes a sequence number)."""
        message = Message(self.swarm_id, self.sender, self.epoch, self._seq(), now, body)
        self._take(1)
        return message

    def seal(self, body: Body, now: float) -> bytes:
        """Encode and sign the next datagram; ``ValueError`` if it exceeds the limit."""
        message = Message(self.swarm_id, self.sender, self.epoch, self._seq(), now, body)
        data = encode_checked(message, self._key, self.limit)
        self._take(1)
        return data

    def patch_datagrams(
        self,
        ix: npt.ArrayLike,
        iy: npt.ArrayLike,
        mu: npt.ArrayLike,
        var: npt.ArrayLike,
        *,
        cell_size_mm: int,
        t_ref: float,
        now: float,
    ) -> list[bytes]:
        """PATCH datagrams carrying every given cell; ``ValueError`` on unsendable values."""
        messages = patch_messages(
            Cells.from_arrays(ix, iy, mu, var), cell_size_mm=cell_size_mm, t_ref=t_ref,
            swarm_id=self.swarm_id, sender=self.sender, epoch=self.epoch,
            first_seq=self._seq(), t_sent=now, limit=self.limit,
        )
        return self._encode_all(messages)

    def snapshot_datagrams(
        self,
        ix: npt.ArrayLike,
        iy: npt.ArrayLike,
        mu: npt.ArrayLike,
        var: npt.ArrayLike,
        *,
        snapshot_id: int,
        origin_ix: int,
        origin_iy: int,
        width: int,
        height: int,
        cell_size_mm: int,
        t_ref: float,
        now: float,
    ) -> list[bytes]:
        """All SNAPSHOT chunks of a window; every cell must lie inside it."""
        messages = snapshot_messages(
            Cells.from_arrays(ix, iy, mu, var), snapshot_id=snapshot_id, origin_ix=origin_ix,
            origin_iy=origin_iy, width=width, height=height, cell_size_mm=cell_size_mm,
            t_ref=t_ref, swarm_id=self.swarm_id, sender=self.sender, epoch=self.epoch,
            first_seq=self._seq(), t_sent=now, limit=self.limit,
        )
        return self._encode_all(messages)

    def _encode_all(self, messages: list[Message]) -> list[bytes]:
        # key and limit were validated once, at construction
        out = [encode_checked(m, self._key, self.limit) for m in messages]
        self._take(len(out))
        return out
