"""The peer table: who speaks in the swarm, under which epoch, from where (sans-IO).

Rules (SWARM.md §10), each one against a way to flap or flood an agent:

- A peer exists only once a datagram that passed the MAC named it; discovery
  (mDNS, a static list) only adds an address to PING, never a peer.
- A peer is *confirmed* at an address when a PONG from there answered one of
  our PINGs to that address (the same ping id and our own ``t1`` echoed). Only
  a confirmed address receives unicast SNAPSHOTs, so a forged source address
  earns nothing.
- Per name, the table keeps the highest epoch seen. A lower epoch is refused
  (``stale_epoch``). A higher one is a *candidate*: the current peer stays until
  the candidate is confirmed, then the candidate replaces it. A replayed datagram
  of a dead incarnation never confirms, so it cannot reset a live peer.
- At most ``max_peers`` names; a full table makes room by forgetting the peer
  silent the longest among the lost ones, else refuses (``peer_table_full``).
  Peers lost for ``forget_after`` are forgotten, epoch included.
- SNAPSHOTs: at most one per name per ``snapshot_interval`` whatever the churn,
  and a table-wide budget (``snapshot_burst`` at once, ``snapshot_rate`` per second).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from protocol.clock import ClockOffsetEstimator
from protocol.swarm import Patch, Snapshot

Address = tuple[str, int]
MAX_PINGS = 256  # outstanding PINGs remembered, table-wide
MAX_TO_TRY = 64  # discovered addresses waiting for a PONG


@dataclass(frozen=True)
class PeerLimits:
    """Bounds of the table (validated)."""

    max_peers: int = 64
    lost_after: float = 3.0
    forget_after: float = 30.0
    snapshot_interval: float = 5.0
    snapshot_burst: int = 8
    snapshot_rate: float = 2.0

    def __post_init__(self) -> None:
        if not 1 <= self.max_peers <= 4096:
            raise ValueError("max_peers must be in 1..4096")
        if not 0.5 <= self.lost_after <= 60.0:
            raise ValueError("peer_lost_after must be in 0.5..60 s")
        if not self.lost_after <= self.forget_after <= 3600.0:
            raise ValueError("forget_after must be in peer_lost_after..3600 s")
        if not (0.0 <= self.snapshot_interval <= 3600.0 and self.snapshot_burst >= 1
                and self.snapshot_rate > 0.0):
            raise ValueError("snapshot limits: interval 0..3600 s, burst >= 1, rate > 0")


@dataclass
class Peer:
    """One incarnation (name, epoch) of another agent."""

    name: str
    epoch: int
    addr: Address  # source of its newest datagram: PINGs go here
    first_heard: float
    last_heard: float
    confirmed_addr: Address | None = None  # answered our PING from here: unicast goes here
    clock: ClockOffsetEstimator = field(default_factory=ClockOffsetEstimator)
    lost: bool = False
    position: tuple[float, float] | None = None
    position_at: float = -math.inf
    track: tuple[np.ndarray, np.ndarray, float] | None = None  # x, P, t on our clock
    pending: list[tuple[float, Patch | Snapshot]] = field(default_factory=list)
    updates_fused: int = -1  # the peer track's update count when we last fused it
    next_ping: float = -math.inf

    @property
    def confirmed(self) -> bool:
        return self.confirmed_addr is not None


@dataclass(frozen=True)
class SentPing:
    addr: Address
    t1: float


Event = tuple[str, dict[str, Any]]


class PeerTable:
    """Current peers by name, their pending higher epochs, PINGs and addresses to try."""

    def __init__(self, limits: PeerLimits | None = None) -> None:
        self.limits = limits or PeerLimits()
        self.current: dict[str, Peer] = {}
        self.candidates: dict[str, Peer] = {}
        self.pings: OrderedDict[int, SentPing] = OrderedDict()
        self.to_try: OrderedDict[Address, tuple[str, float]] = OrderedDict()  # -> name, next
        self.events: list[Event] = []
        self._next_ping_id = 1
        self._snapshot_at: dict[str, float] = {}
        self._tokens = float(self.limits.snapshot_burst)
        self._tokens_at = -math.inf

    # ------------------------------------------------------------------ lookups

    def __contains__(self, name: object) -> bool:
        return name in self.current

    def __getitem__(self, name: str) -> Peer:
        return self.current[name]

    def get(self, name: str) -> Peer | None:
        return self.current.get(name)

    def items(self) -> list[tuple[str, Peer]]:
        return sorted(self.current.items())

    def values(self) -> list[Peer]:
        return [p for _, p in self.items()]

    def active(self) -> Iterator[Peer]:
        """Current peers not lost, by name."""
        return (p for _, p in self.items() if not p.lost)

    def name_at(self, addr: Address) -> str | None:
        for name, peer in self.current.items():
            if peer.addr == addr:
                return name
        return None

    # ------------------------------------------------------------------ routing

    def route(self, name: str, epoch: int, src: Address, now: float) -> Peer | str:
        """The incarnation an authenticated datagram belongs to, or why it is refused."""
        peer = self.current.get(name)
        if peer is None:
            if not self._make_room(now):
                return "peer_table_full"
            peer = self.current[name] = Peer(name, epoch, src, now, now)
            self.events.append(("peer_joined", {"peer": name, "epoch": epoch, "addr": src,
                                                "why": "new_peer"}))
            self._hear(peer, src, now)
            return peer
        cand = self.candidates.get(name)
        if epoch == peer.epoch:
            self._hear(peer, src, now)
            return peer
        if epoch < peer.epoch or (cand is not None and epoch < cand.epoch):
            return "stale_epoch"
        if cand is None or epoch > cand.epoch:
            cand = self.candidates[name] = Peer(name, epoch, src, now, now)
            self.events.append(("peer_epoch_seen", {"peer": name, "epoch": epoch, "addr": src}))
        cand.last_heard, cand.addr = now, src
        return cand

    def _hear(self, peer: Peer, src: Address, now: float) -> None:
        if peer.lost:
            self.events.append(("peer_returned", {"peer": peer.name,
                                                   "silent": now - peer.last_heard}))
        peer.lost = False
        peer.last_heard = now
        peer.addr = src

    def _make_room(self, now: float) -> bool:
        if len(self.current) < self.limits.max_peers:
            return True
        lost = [p for p in self.current.values() if p.lost]
        if not lost:
            return False
        oldest = min(lost, key=lambda p: (p.last_heard, p.name))
        self._forget(oldest.name, now)
        return True

    def _forget(self, name: str, now: float) -> None:
        peer = self.current.pop(name)
        self.candidates.pop(name, None)
        self.events.append(("peer_forgotten", {"peer": name, "epoch": peer.epoch,
                                               "silent": now - peer.last_heard}))

    # ------------------------------------------------------------------ PING / PONG

    def ping(self, addr: Address, now: float) -> int:
        """Note a PING we send to ``addr`` now; returns its id."""
        ping_id = self._next_ping_id
        self._next_ping_id = (ping_id % 0xFFFF_FFFF) + 1
        self.pings[ping_id] = SentPing(addr, now)
        while len(self.pings) > MAX_PINGS:
            self.pings.popitem(last=False)
        return ping_id

    def answered(self, ping_id: int, t1: float, src: Address) -> SentPing | None:
        """The PING a PONG answers (same id, our t1 echoed, from where we sent it)."""
        sent = self.pings.get(ping_id)
        if sent is None or sent.t1 != t1 or sent.addr != src:
            return None
        del self.pings[ping_id]
        return sent

    def confirm(self, peer: Peer, src: Address, now: float) -> bool:
        """``peer`` answered our PING from ``src``; True on its first confirmation."""
        first = peer.confirmed_addr is None
        peer.confirmed_addr = src
        peer.addr = src
        self.to_try.pop(src, None)
        if self.candidates.get(peer.name) is peer:
            old = self.current[peer.name]
            del self.candidates[peer.name]
            peer.updates_fused = -1
            self.current[peer.name] = peer
            self.events.append(("peer_joined", {"peer": peer.name, "epoch": peer.epoch,
                                                "addr": src, "why": "new_epoch",
                                                "replaces": old.epoch}))
        if first:
            self.events.append(("peer_confirmed", {"peer": peer.name, "epoch": peer.epoch,
                                                   "addr": src}))
        return first

    def discovered(self, name: str, addr: Address, now: float) -> None:
        """Discovery named ``addr``: PING it until someone answers from there."""
        peer = self.current.get(name)
        if peer is not None and peer.confirmed_addr == addr:
            return
        if addr not in self.to_try:
            self.to_try[addr] = (name, now)
            while len(self.to_try) > MAX_TO_TRY:
                self.to_try.popitem(last=False)

    def pings_due(self, now: float, period: float) -> list[Address]:
        """Addresses to PING now (each at most once a ``period``), in a fixed order."""
        due: list[Address] = []
        for peer in [*self.active(), *(c for _, c in sorted(self.candidates.items()))]:
            if now >= peer.next_ping:
                peer.next_ping = max(peer.next_ping + period, now)
                if peer.addr not in due:
                    due.append(peer.addr)
        for addr, (name, next_at) in list(self.to_try.items()):
            if now >= next_at:
                self.to_try[addr] = (name, max(next_at + period, now))
                if addr not in due:
                    due.append(addr)
        return due

    # ------------------------------------------------------------------ SNAPSHOTs

    def snapshot_allowed(self, name: str, now: float) -> bool:
        """Whether a SNAPSHOT may go to ``name`` now; if so, it is counted as sent."""
        lim = self.limits
        if now - self._snapshot_at.get(name, -math.inf) < lim.snapshot_interval:
            return False
        if math.isfinite(self._tokens_at):
            self._tokens = min(float(lim.snapshot_burst),
                               self._tokens + (now - self._tokens_at) * lim.snapshot_rate)
        self._tokens_at = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        self._snapshot_at[name] = now
        return True

    # ------------------------------------------------------------------ liveness

    def check(self, now: float) -> None:
        """Mark silent peers lost, forget long-lost ones and unconfirmed candidates."""
        lim = self.limits
        for name in sorted(self.current):
            peer = self.current[name]
            silent = now - peer.last_heard
            if not peer.lost and silent > lim.lost_after:
                peer.lost = True
                self.events.append(("peer_lost", {"peer": name, "silent": silent}))
            elif peer.lost and silent > lim.forget_after:
                self._forget(name, now)
        for name in sorted(self.candidates):
            if now - self.candidates[name].last_heard > lim.lost_after:
                del self.candidates[name]
        for name in [n for n, t in self._snapshot_at.items()
                     if now - t > lim.snapshot_interval and n not in self.current]:
            del self._snapshot_at[name]

    def take_events(self) -> list[Event]:
        out, self.events = self.events, []
        return out
