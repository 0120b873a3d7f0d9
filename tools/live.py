"""A running swarm seen through its logs as they are written: the live views of demo and run.

:class:`LogFollower` yields the lines appended to a log file since the last
call; :class:`AgentView` is what one agent's log says of it so far
(:func:`absorb` reads on); :class:`Truth` is the target's ground truth from the
world log, which no agent ever reads.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class LogFollower:
    """Yields the complete JSON lines appended to a file since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def read(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()  # an unfinished last line waits for its end
        out = []
        for line in lines:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
        return out


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
            view.tx_bytes += (len(line.get("raw", "")) * 3) // 4
        elif event == "rx":
            view.rx_bytes += (len(line.get("raw", "")) * 3) // 4
            if not line.get("ok"):
                view.rejected += 1
