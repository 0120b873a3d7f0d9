"""The receiving side: decode, then the replay window, counting every rejection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from protocol.errors import RejectCounters
from protocol.swarm.codec import MacKey, check_key, decode_checked
from protocol.swarm.errors import RejectReason, SwarmDecodeError
from protocol.swarm.messages import (
    DEFAULT_DATAGRAM_LIMIT,
    U32_MAX,
    Message,
    check_datagram_limit,
)
from protocol.swarm.replay import DEFAULT_MAX_WINDOWS, ReplayGuard

Address = tuple[Any, ...]


@dataclass(frozen=True)
class Rejection:
    """The last datagram refused: why, from where, when (for the driver's log)."""

    reason: RejectReason
    detail: str
    addr: Address | None
    at: float | None


class SwarmReceiver:
    """Holds the swarm key, swarm id, size limit, replay windows and reject counters.

    Sans-IO: the driver hands each datagram in with its source address and arrival
    time. A datagram only advances its replay window after passing every other check.
    """

    def __init__(
        self,
        key: bytes,
        swarm_id: int,
        *,
        limit: int = DEFAULT_DATAGRAM_LIMIT,
        max_windows: int = DEFAULT_MAX_WINDOWS,
    ) -> None:
        self._key = MacKey(check_key(key))  # the HMAC key's padded blocks hashed once
        if isinstance(swarm_id, bool) or not isinstance(swarm_id, int):
            raise TypeError("swarm_id must be an int")
        if not 0 <= swarm_id <= U32_MAX:
            raise ValueError(f"swarm_id must be a u32, got {swarm_id}")
        self.swarm_id = swarm_id
        self._limit = check_datagram_limit(limit)
        self.replay = ReplayGuard(max_windows)
        self.counters = RejectCounters()
        self.accepted = 0
        self.last_rejection: Rejection | None = None

    @property
    def limit(self) -> int:
        """The datagram size limit (read-only: decoding trusts it, checked once)."""
        return self._limit

    def decode(self, data: bytes) -> Message:
        """Every check, replay window last; raises :class:`SwarmDecodeError`.

        On success the datagram is recorded in its replay window.
        """
        message = decode_checked(data, self._key, self.swarm_id, self._limit)
        self.replay.check(message.sender, message.epoch, message.seq)
        self.replay.accept(message.sender, message.epoch, message.seq)
        return message

    def receive_datagram(
        self, data: bytes, addr: Address | None, now: float | None
    ) -> Message | None:
        """The message, or None when rejected (the reason is counted and kept)."""
        try:
            message = self.decode(data)
        except SwarmDecodeError as e:
            self.counters.count(e.reject_reason)
            self.last_rejection = Rejection(e.reject_reason, e.detail, addr, now)
            return None
        self.accepted += 1
        return message
