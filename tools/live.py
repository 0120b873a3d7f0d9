"""A running swarm seen through its logs as they are written: the live views of demo and run.

:class:`LogFollower` yields the events a log completed since the last call;
:class:`AgentView` is what one agent's log says of it so far
(:func:`absorb` reads on); :class:`Truth` is the target's ground truth from the
world log, which no agent ever reads.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.runlog import LogReader, datagram_size

LogFollower = LogReader  # read() returns the events a log completed since the last call


@dataclass
class AgentView:
    name: str
    follower: LogFollower
    pose: list[float] | None = None
    track: dict[str, Any] | None = None
    mode: str = "-"
    peers: dict[str, Any] = field(default_factory=dict)
    tx_bytes: int = 0
    rx_bytes: int = 0
    rejected: int = 0
    started: float | None = None
    last_t: float | None = None


class Truth:
    """The target's ground truth, from the world log (which no agent ever reads)."""

    def __init__(self, path: Path) -> None:
        self.follower = LogFollower(path)
        self.t: list[float] = []
        self.xy: list[tuple[float, float]] = []

    def update(self) -> None:
        for line in self.follower.read():
            if line.get("event") == "truth" and isinstance(line.get("target"), dict):
                self.t.append(float(line["t"]))
                self.xy.append((float(line["target"]["x"]), float(line["target"]["y"])))

    def at(self, t: float) -> tuple[float, float] | None:
        if not self.t:
            return None
        i = min(bisect.bisect_left(self.t, t), len(self.t) - 1)
        if abs(self.t[i] - t) > 0.2:
            return None
        return self.xy[i]


def absorb(view: AgentView) -> None:
    for line in view.follower.read():
        event = line.get("event")
        t = line.get("t")
        if isinstance(t, float | int):
            view.last_t = float(t)
        if event == "start":
            view.started = float(line["t"])
        elif event == "belief":
            view.pose = line.get("pose")
            view.track = line.get("track")
            view.peers = line.get("peers") or {}
        elif event == "decision":
            view.mode = str(line.get("mode", "-"))
        elif event == "tx":
            view.tx_bytes += datagram_size(line)
        elif event == "rx":
            view.rx_bytes += datagram_size(line)
            if not line.get("ok"):
                view.rejected += 1
