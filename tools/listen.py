"""Join a swarm read-only: hear every agent's broadcasts, never send one.

:class:`SwarmListener` is sans-IO: it decodes datagrams with the swarm key
(counting what fails) and keeps, per agent, what its broadcasts say — where
it speaks from, its epoch, its HEARTBEAT (mode, pose, counters such as its
peers) and its TRACK. :func:`listen` is its driver: a socket bound to the
swarm port on one interface, beside any agent on the same host, for a few
seconds. ``stigmesh status`` and ``stigmesh view`` are built on it; it works
from any host of the swarm's network.
"""

from __future__ import annotations

import math
import selectors
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agents.drivers.net import Interface, broadcast_socket
from protocol.swarm import Heartbeat, Message, SwarmReceiver, Track, swarm_id_from_name

Address = tuple[str, int]


@dataclass
class Heard:
    """What one agent's broadcasts said, newest first."""

    name: str
    epoch: int
    host: str
    first: float
    last: float
    datagrams: int = 0
    heartbeat: Heartbeat | None = None
    track: Track | None = None
    kinds: dict[str, int] = field(default_factory=dict)

    def summary(self, now: float) -> dict[str, Any]:
        hb, tr = self.heartbeat, self.track
        out: dict[str, Any] = {
            "agent": self.name, "host": self.host, "epoch": self.epoch,
            "silent_s": round(now - self.last, 3), "datagrams": self.datagrams,
            "kinds": dict(sorted(self.kinds.items())),
        }
        if hb is not None:
            counters = hb.counter_map
            out |= {"mode": hb.mode.name, "pose": [hb.x, hb.y, hb.heading],
                    "peers": counters.get("peers"), "distrusted": counters.get("distrusted"),
                    "counters": counters}
        if tr is not None:
            P = tr.cov_matrix
            out["track"] = {"x": list(tr.mean), "uncertainty": float(P.trace() / 4.0),
                            "updates": tr.updates}
        return out


class SwarmListener:
    """Every agent heard on the swarm, from its authenticated broadcasts (sans-IO)."""

    def __init__(self, key: bytes, swarm: str, *, limit: int = 1200) -> None:
        self.receiver = SwarmReceiver(key, swarm_id_from_name(swarm), limit=limit)
        self.agents: dict[str, Heard] = {}

    def receive_datagram(self, data: bytes, src: Address, now: float) -> Message | None:
        message = self.receiver.receive_datagram(data, src, now)
        if message is None:
            return None
        heard = self.agents.get(message.sender)
        if heard is None or message.epoch > heard.epoch:
            heard = self.agents[message.sender] = Heard(
                message.sender, message.epoch, src[0], now, now
            )
        elif message.epoch < heard.epoch:
            return message  # an older incarnation: not what the agent is now
        heard.last, heard.host = now, src[0]
        heard.datagrams += 1
        kind = message.kind.name
        heard.kinds[kind] = heard.kinds.get(kind, 0) + 1
        if isinstance(message.body, Heartbeat):
            heard.heartbeat = message.body
        elif isinstance(message.body, Track):
            heard.track = message.body
        return message

    def summaries(self, now: float) -> list[dict[str, Any]]:
        return [self.agents[n].summary(now) for n in sorted(self.agents)]

    @property
    def rejected(self) -> dict[str, int]:
        return self.receiver.counters.as_dict()


def listen(
    listener: SwarmListener,
    iface: Interface,
    port: int,
    seconds: float,
    *,
    until: Callable[[SwarmListener], bool] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Receive for ``seconds`` (or until ``until(listener)``); this socket never sends."""
    sock = broadcast_socket(iface, port)
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    end = clock() + seconds
    try:
        while (left := end - clock()) > 0:
            if not selector.select(timeout=min(left, 0.2)):
                continue
            while True:
                try:
                    data, src = sock.recvfrom(65536)
                except BlockingIOError:
                    break
                listener.receive_datagram(data, (str(src[0]), int(src[1])), clock())
            if until is not None and until(listener):
                return
    finally:
        selector.close()
        sock.close()


def status_table(rows: list[dict[str, Any]]) -> str:
    """One line per agent heard on the swarm."""
    out = []
    for r in rows:
        pose = r.get("pose")
        where = "pose ?" if pose is None else (
            f"pose ({pose[0]:.2f}, {pose[1]:.2f}, {math.degrees(pose[2]):.0f}°)")
        track = r.get("track")
        seen = "no track" if track is None else (
            f"track ({track['x'][0]:.2f}, {track['x'][1]:.2f}) "
            f"±{math.sqrt(track['uncertainty']):.2f}")
        peers = "peers ?" if r.get("peers") is None else (
            f"peers {r['peers']}" + (f" ({r['distrusted']} distrusted)"
                                     if r.get("distrusted") else ""))
        out.append(f"{r['agent']} on {r['host']} (epoch {r['epoch']:08x}): "
                   f"{str(r.get('mode', '?')).lower()}, {where}, {seen}, {peers}; "
                   f"heard {r['silent_s']:.1f} s ago")
    return "\n".join(out)
