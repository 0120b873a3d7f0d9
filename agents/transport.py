"""One agent's transport faults: a link model on the way out, one on the way in (sans-IO).

The real sockets and processes stay in the loop: the runtime (and the lockstep
network) hand every datagram through :meth:`TransportFaults.outgoing` or
:meth:`TransportFaults.incoming` and deliver the copies they return after the
returned delays. Partitions act on the way in, where the sender is known by
name. Every change and every applied fault is returned as a log record.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agents.faults import LinkFaults, LinkModel

Address = tuple[str, int]
BROADCAST = "broadcast"


class Direction(StrEnum):
    IN = "in"
    OUT = "out"
    BOTH = "both"


@dataclass(frozen=True)
class Copy:
    delay: float
    data: bytes


class TransportFaults:
    """``resolve`` names the agent behind a source address (None when unknown)."""

    def __init__(self, name: str, seed: int, resolve: Callable[[Address], str | None]) -> None:
        self.name = name

        def who(endpoint: Hashable) -> str | None:
            if isinstance(endpoint, str):
                return None if endpoint == BROADCAST else endpoint
            if isinstance(endpoint, tuple) and len(endpoint) == 2:
                return resolve((str(endpoint[0]), int(endpoint[1])))
            return None

        self.out = LinkModel(LinkFaults(), seed * 2 + 1, resolve=who)
        self.inn = LinkModel(LinkFaults(), seed * 2 + 2, resolve=who)

    @property
    def active(self) -> bool:
        return not (self.out.spec.is_clear and self.inn.spec.is_clear)

    def set(self, spec: LinkFaults, direction: Direction, now: float) -> dict[str, Any]:
        if direction in (Direction.OUT, Direction.BOTH):
            self.out.set_spec(spec, now)
        if direction in (Direction.IN, Direction.BOTH):
            self.inn.set_spec(spec, now)
        return {"direction": direction.value, "spec": spec.to_mapping()}

    def outgoing(self, data: bytes, dst: Address | None, now: float) -> list[Copy]:
        if self.out.spec.is_clear:
            return [Copy(0.0, data)]
        where: Hashable = BROADCAST if dst is None else dst
        return [Copy(d, b) for d, b in self.out.route(data, self.name, where, now)]

    def incoming(self, data: bytes, src: Address, now: float) -> list[Copy]:
        if self.inn.spec.is_clear:
            return [Copy(0.0, data)]
        return [Copy(d, b) for d, b in self.inn.route(data, src, self.name, now)]

    def records(self) -> list[dict[str, Any]]:
        """Applied faults since the last call, as log records."""
        out = []
        for direction, model in (("out", self.out), ("in", self.inn)):
            for event in model.take_events():
                record = event.as_record()
                record["direction"] = direction
                out.append(record)
        return out

    def status(self) -> dict[str, Any]:
        return {
            "out": self.out.spec.to_mapping(),
            "in": self.inn.spec.to_mapping(),
            "counters_out": dict(self.out.counters),
            "counters_in": dict(self.inn.counters),
        }
