"""An in-memory datagram network in virtual time.

Modelled on trio's testing helpers: every datagram passes through a
``route_packet`` hook that decides its fate. The hook returns the copies to
deliver, each a delay or a ``(delay, bytes)`` pair (so a hook may corrupt):
``[]`` drops the datagram, ``[d]`` delivers it once after ``d`` seconds,
``[d1, d2]`` duplicates it. Reordering follows from unequal delays.
:class:`SeededFaults` is the project's own fault vocabulary
(:class:`agents.faults.LinkModel`) as such a hook.

Broadcast: a datagram to ``BROADCAST`` host reaches every endpoint bound to
the destination port, the sender included (as on a real loopback broadcast).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agents.faults import LinkFaults, LinkModel
from protocol.eventqueue import EventQueue

Address = tuple[str, int]
BROADCAST = "127.255.255.255"

Copy = float | tuple[float, bytes]
RoutePacket = Callable[[Address, Address, bytes], Sequence[Copy]]


@dataclass(frozen=True)
class Delivery:
    at: float
    src: Address
    dst: Address
    data: bytes


def perfect_link(src: Address, dst: Address, data: bytes) -> list[Copy]:
    """Deliver every datagram once, at once."""
    return [0.0]


class SeededFaults:
    """A ``route_packet`` hook: drop, duplicate, delay and jitter from a seeded RNG,
    through the same :class:`~agents.faults.LinkModel` the agents' transport uses."""

    def __init__(
        self,
        seed: int,
        drop: float = 0.0,
        duplicate: float = 0.0,
        delay: float = 0.0,
        jitter: float = 0.0,
    ) -> None:
        # LinkFaults' jitter is symmetric (±j) around the delay: centre it.
        spec = LinkFaults(drop=drop, duplicate=duplicate, delay=delay + jitter / 2,
                          jitter=jitter / 2)
        self.model = LinkModel(spec, seed)

    def __call__(self, src: Address, dst: Address, data: bytes) -> list[tuple[float, bytes]]:
        return self.model.route(data, src, dst, 0.0)


class FakeNetwork:
    """Endpoints exchange datagrams in virtual time; nothing touches a socket."""

    def __init__(self, route_packet: RoutePacket = perfect_link) -> None:
        self.route_packet = route_packet
        self._queue: EventQueue[Delivery] = EventQueue()
        self._inboxes: dict[Address, list[tuple[bytes, Address, float]]] = {}
        self.sent = 0
        self.delivered = 0

    def bind(self, addr: Address) -> None:
        if addr in self._inboxes:
            raise OSError(f"address already in use: {addr}")
        self._inboxes[addr] = []

    def send(self, src: Address, dst: Address, data: bytes, now: float) -> None:
        self.sent += 1
        targets = (
            [a for a in self._inboxes if a[1] == dst[1]] if dst[0] == BROADCAST else [dst]
        )
        for target in targets:
            for copy in self.route_packet(src, target, data):
                delay, payload = copy if isinstance(copy, tuple) else (copy, data)
                d = Delivery(now + delay, src, target, payload)
                self._queue.push(d.at, d)

    def next_delivery_at(self) -> float | None:
        return self._queue.next_at()

    def run_until(self, now: float) -> list[Delivery]:
        """Deliver everything due by ``now`` into the inboxes; return it in order."""
        out: list[Delivery] = []
        for d in self._queue.due(now):
            inbox = self._inboxes.get(d.dst)
            if inbox is None:
                continue  # nobody bound there: lost, as on a real network
            inbox.append((d.data, d.src, d.at))
            self.delivered += 1
            out.append(d)
        return out

    def receive(self, addr: Address) -> list[tuple[bytes, Address, float]]:
        """Take every datagram waiting at ``addr``: (data, source, arrival time)."""
        inbox = self._inboxes[addr]
        items, inbox[:] = list(inbox), []
        return items
