"""A peer's clock on ours, and the cells it sent before that clock was mapped.

A peer stamps what it sends on its own clock; its stamps count only once the offset to
ours is mapped (PING/PONG samples, :class:`~protocol.clock.ClockOffsetEstimator`, SWARM.md's
time rules). Until then its PATCH and SNAPSHOT chunks wait on the peer, at most
:data:`MAX_PENDING_CHUNKS` of them (a late joiner's snapshot usually arrives before the
first PONG, and must not be lost); once the clock is mapped they go to fusion, those held
no longer than ``PENDING_TIMEOUT``.
"""

from __future__ import annotations

from collections.abc import Callable

from agents.config import PENDING_TIMEOUT
from agents.peers import Peer
from protocol.clock import NoClockSample
from protocol.swarm import Patch, Snapshot

MAX_PENDING_CHUNKS = 64  # cell messages held per peer while its clock is not yet mapped


def peer_time(peer: Peer, t_remote: float, now: float) -> tuple[float, float] | None:
    """A peer-clock time on our clock, with the mapping's uncertainty; None unsynced."""
    if not peer.clock.synchronized_at_time(now):
        return None
    try:
        return peer.clock.remote_to_local(t_remote, now), peer.clock.uncertainty_at_time(now)
    except NoClockSample:
        return None


def to_local(peer: Peer, now: float) -> Callable[[float], float] | None:
    """The peer's clock to ours, when mapped (SWARM.md's time rules need it)."""
    if not peer.clock.synchronized_at_time(now):
        return None
    clock = peer.clock
    return lambda t: clock.remote_to_local(t, now)


def hold(peer: Peer, body: Patch | Snapshot, now: float) -> bool:
    """Keep cells received at ``now`` until the peer's clock is mapped; False: the peer
    already holds :data:`MAX_PENDING_CHUNKS`, and they are dropped."""
    if len(peer.pending) < MAX_PENDING_CHUNKS:
        peer.pending.append((now, body))
        return True
    return False


def release(peer: Peer, now: float) -> list[tuple[Patch | Snapshot, bool]]:
    """Once the peer's clock is mapped, the cells it held, in order, each with whether it is
    still fresh (held no longer than ``PENDING_TIMEOUT``); none before."""
    if not (peer.pending and peer.clock.synchronized_at_time(now)):
        return []
    held, peer.pending = peer.pending, []
    return [(body, now - received <= PENDING_TIMEOUT) for received, body in held]
