"""``LinkModel``: applies a :class:`LinkFaults` spec to datagrams, seeded and sans-IO.

``route(data, src, dst, now)`` returns what the network delivers: a list of
``(delay_seconds, bytes)``, empty when the datagram is lost, two entries when it
is duplicated, altered bytes when it is corrupted. ``now`` only stamps the log
events; no clock is read.

Each fault kind draws from its own random stream derived from the seed, and the
per-datagram decisions (partition, burst, drop, duplicate) draw on every datagram
whether or not an earlier stage already lost it. So two runs with the same seed
and different drop rates lose nested sets of datagrams (common random numbers),
which keeps comparisons across fault levels paired.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agents.faults.link_spec import JitterShape, LinkFaults, format_faults

Address = tuple[str, int]
_Link = tuple[Hashable, Hashable]
Resolver = Callable[[Hashable], str | None]
RoutePacket = Callable[[Address, Address, bytes], list[tuple[float, bytes]]]
MAX_EVENTS = 100_000


class FaultKind(StrEnum):
    DROP = "drop"
    BURST = "burst"  # lost by the Gilbert–Elliott model
    PARTITION = "partition"
    DUPLICATE = "duplicate"
    REORDER = "reorder"
    CORRUPT = "corrupt"
    BURST_START = "burst_start"  # a link entered the bad state
    BURST_END = "burst_end"
    SPEC = "spec"  # the spec changed (detail: its text form)


@dataclass(frozen=True)
class FaultEvent:
    """One applied fault, for the run log."""

    kind: FaultKind
    t: float
    size: int  # bytes of the datagram
    src: Hashable
    dst: Hashable
    detail: str = ""

    def as_record(self) -> dict[str, Any]:
        """JSON-friendly fields (addresses become lists)."""
        return {
            "kind": self.kind.value,
            "t": self.t,
            "size": self.size,
            "src": list(self.src) if isinstance(self.src, tuple) else self.src,
            "dst": list(self.dst) if isinstance(self.dst, tuple) else self.dst,
            "detail": self.detail,
        }


def names_resolver(names: Mapping[Any, str]) -> Resolver:
    """A resolver from a fixed table of endpoint (e.g. address) -> agent name."""
    table: dict[Hashable, str] = dict(names)
    return table.get


def _endpoint_is_name(endpoint: Hashable) -> str | None:
    return endpoint if isinstance(endpoint, str) else None


class LinkModel:
    """Seeded, deterministic network faults; see the module docstring.

    ``resolve`` maps an endpoint (an address, or whatever the caller routes by) to
    an agent name for ``partition``; by default a ``str`` endpoint is its own name
    and anything else (an address) belongs to no group.
    """

    def __init__(
        self,
        spec: LinkFaults,
        seed: int,
        *,
        resolve: Resolver | None = None,
        max_events: int = MAX_EVENTS,
    ) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"seed must be an int, got {type(seed).__name__}")
        if not isinstance(spec, LinkFaults):
            raise TypeError("spec must be a LinkFaults")
        self._spec = spec
        self.seed = seed
        self._resolve = resolve or _endpoint_is_name
        streams = ("drop", "burst", "duplicate", "delay", "reorder", "corrupt")
        self._rng = {name: random.Random(f"stigmesh-link/{seed}/{name}") for name in streams}
        self._bad: dict[tuple[Hashable, Hashable], bool] = {}
        self._events: deque[FaultEvent] = deque(maxlen=max_events)
        self._counts: dict[str, int] = dict.fromkeys(
            ["routed", "delivered", "burst_episodes", "events_lost"]
            + [k.value for k in FaultKind if k not in (FaultKind.BURST_START,
                                                      FaultKind.BURST_END, FaultKind.SPEC)],
            0,
        )

    # ------------------------------------------------------------------ state

    @property
    def spec(self) -> LinkFaults:
        return self._spec

    def set_spec(self, spec: LinkFaults, now: float) -> None:
        """Change the faults (``stigmesh faults`` on a running agent); streams continue."""
        if not isinstance(spec, LinkFaults):
            raise TypeError("spec must be a LinkFaults")
        self._spec = spec
        if spec.burst is None:
            self._bad.clear()
        self._event(FaultKind.SPEC, now, 0, (None, None), format_faults(spec))

    @property
    def counters(self) -> dict[str, int]:
        """Datagrams routed and delivered (copies), and how many each fault kind hit."""
        return dict(self._counts)

    def take_events(self) -> list[FaultEvent]:
        """Every event since the last call, oldest first (at most ``max_events`` kept)."""
        out = list(self._events)
        self._events.clear()
        return out

    # ------------------------------------------------------------------ routing

    def route(
        self, data: bytes, src: Hashable, dst: Hashable, now: float
    ) -> list[tuple[float, bytes]]:
        """The copies the network delivers: ``(delay, bytes)`` each; ``[]`` when lost."""
        s = self._spec
        size = len(data)
        self._counts["routed"] += 1
        u_drop = self._rng["drop"].random() if s.drop else 1.0
        burst_lost = self._burst_step(src, dst, now, size) if s.burst is not None else False
        u_dup = self._rng["duplicate"].random() if s.duplicate else 1.0
        if s.partition and self._cut(src, dst):
            self._fault(FaultKind.PARTITION, now, size, (src, dst))
            return []
        if burst_lost:
            self._fault(FaultKind.BURST, now, size, (src, dst))
            return []
        if u_drop < s.drop:
            self._fault(FaultKind.DROP, now, size, (src, dst))
            return []
        copies = 1
        if u_dup < s.duplicate:
            copies = 2
            self._fault(FaultKind.DUPLICATE, now, size, (src, dst))
        self._counts["delivered"] += copies
        return [self._copy(data, src, dst, now) for _ in range(copies)]

    def hook(self, clock: Callable[[], float]) -> RoutePacket:
        """This model as the ``route_packet`` hook of ``tests/support/network.FakeNetwork``."""

        def route_packet(src: Address, dst: Address, data: bytes) -> list[tuple[float, bytes]]:
            return self.route(data, src, dst, clock())

        return route_packet

    # ------------------------------------------------------------------ internals

    def _cut(self, src: Hashable, dst: Hashable) -> bool:
        a = self._spec.group_of(self._resolve(src))
        b = self._spec.group_of(self._resolve(dst))
        return a is not None and b is not None and a != b

    def _burst_step(self, src: Hashable, dst: Hashable, now: float, size: int) -> bool:
        burst = self._spec.burst
        assert burst is not None
        rng = self._rng["burst"]
        link = (src, dst)
        bad = self._bad.get(link, False)
        move = rng.random()
        if bad and move < burst.leave:
            bad = False
            self._event(FaultKind.BURST_END, now, size, (src, dst))
        elif not bad and move < burst.enter:
            bad = True
            self._counts["burst_episodes"] += 1
            self._event(FaultKind.BURST_START, now, size, (src, dst))
        self._bad[link] = bad
        return rng.random() < (burst.loss_bad if bad else burst.loss_good)

    def _copy(self, data: bytes, src: Hashable, dst: Hashable, now: float) -> tuple[float, bytes]:
        s = self._spec
        delay = s.delay
        if s.jitter:
            rng = self._rng["delay"]
            if s.jitter_shape is JitterShape.NORMAL:
                delay += rng.gauss(0.0, s.jitter)
            else:
                delay += rng.uniform(-s.jitter, s.jitter)
            delay = max(0.0, delay)
        if s.reorder and self._rng["reorder"].random() < s.reorder:
            delay += s.reorder_hold
            self._fault(FaultKind.REORDER, now, len(data), (src, dst), f"hold={s.reorder_hold}")
        if s.corrupt and data and self._rng["corrupt"].random() < s.corrupt:
            data, where = self._flip(data, s.corrupt_bytes)
            self._fault(FaultKind.CORRUPT, now, len(data), (src, dst), f"bytes={where}")
        return delay, data

    def _flip(self, data: bytes, k: int) -> tuple[bytes, str]:
        rng = self._rng["corrupt"]
        out = bytearray(data)
        positions = sorted(rng.sample(range(len(out)), min(k, len(out))))
        for i in positions:
            out[i] ^= 1 << rng.randrange(8)
        return bytes(out), ",".join(map(str, positions))

    def _fault(
        self, kind: FaultKind, now: float, size: int, link: _Link, detail: str = ""
    ) -> None:
        self._counts[kind.value] += 1
        self._event(kind, now, size, link, detail)

    def _event(self, kind: FaultKind, now: float, size: int, link: _Link, detail: str = "") -> None:
        if self._events.maxlen is not None and len(self._events) == self._events.maxlen:
            self._counts["events_lost"] += 1
        self._events.append(FaultEvent(kind, float(now), size, link[0], link[1], detail))
