"""What ``stigmesh view`` shows, made from what it hears: sans-IO, then a Foxglove server.

:class:`SwarmScene` turns the swarm's authenticated broadcasts (each agent's
HEARTBEAT: pose and covariance; TRACK: the published track; PATCH: the cells it
shares, mirrored into a grid), the world's truth where a world runs, and, on
this host, the agents' control sockets (per-peer reputation and whether each
peer is fused) into messages on the channels of protocol/scene.py — the ones
every run log writes, so the live view and a finished run look the same.
:class:`ViewServer` publishes them over a Foxglove WebSocket (``foxglove-sdk``).
The view only listens on the swarm: the socket it receives on never sends.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from protocol import scene
from protocol.mcapfile import ChannelSpec
from protocol.scenelog import GRID_CELL, ScenePainter
from protocol.swarm import Heartbeat, Message, Patch, Track, from_upper_triangle

Out = list[tuple[ChannelSpec, bytes]]
WINDOW = 64  # cells: the agents' default window (GridParams), mirrored from their patches


@dataclass
class AgentMirror:
    """One agent as heard: its newest pose, track and the cells it shared."""

    name: str
    index: int
    cells: dict[tuple[int, int], tuple[float, float]] = field(default_factory=dict)
    origin: tuple[int, int] | None = None
    mode: str = "-"
    track: Track | None = None
    uncertainty: float | None = None
    peers: dict[str, dict[str, Any]] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)

    def grid(self, t: float) -> bytes | None:
        if self.origin is None:
            return None
        ox, oy = self.origin
        mu = np.zeros((WINDOW, WINDOW))
        var = np.ones((WINDOW, WINDOW))
        for (ix, iy), (m, v) in self.cells.items():
            c, r = ix - ox, iy - oy
            if 0 <= c < WINDOW and 0 <= r < WINDOW:
                mu[r, c], var[r, c] = m, v
        return scene.grid_message(t, (ox, oy), scene.quantize(mu), scene.quantize(var), GRID_CELL)


class SwarmScene:
    """The scene of a swarm from its messages (sans-IO; ``publish`` is called with each
    message made)."""

    def __init__(self, publish: Callable[[ChannelSpec, bytes, float], None],
                 *, reach: float = 3.0, hfov_deg: float = 62.0) -> None:
        self.publish = publish
        self.reach = reach
        self.hfov = math.radians(hfov_deg)
        self.agents: dict[str, AgentMirror] = {}
        self.truth_t: list[float] = []
        self.truth_xy: list[tuple[float, float]] = []
        self._painter = ScenePainter("world")  # the world's truth, drawn as the log draws it

    def _agent(self, name: str) -> AgentMirror:
        if name not in self.agents:
            self.agents[name] = AgentMirror(name, scene_index(name))
        return self.agents[name]

    def _emit(self, out: Out, t: float) -> None:
        for spec, data in out:
            self.publish(spec, data, t)

    def on_message(self, message: Message, t: float) -> None:
        """A swarm message the listener accepted, at ``t`` (this host's monotonic clock)."""
        a = self._agent(message.sender)
        body = message.body
        if isinstance(body, Heartbeat):
            a.origin = (body.origin_ix, body.origin_iy)
            a.mode = body.mode.name.lower()
            a.counters = dict(body.counter_map)
            out: Out = []
            if body.cov[0] < 1e5:  # LOST_POSE sends a huge covariance and no pose
                pose = (body.x, body.y, body.heading)
                out.append((scene.scene_channel(a.name), scene.scene_update([
                    scene.pose_entity(a.name, a.index, t, pose, from_upper_triangle(body.cov, 3)),
                    scene.camera_entity(a.name, a.index, t, pose, self.reach, self.hfov)])))
            grid = a.grid(t)
            if grid is not None:
                out.append((scene.grid_channel(a.name), grid))
            out.append((scene.stats_channel(a.name), scene.stats_message(
                t, uncertainty=a.uncertainty, mode=a.mode, error=self.error(a, t),
                grid_mean_var=self._mean_var(a))))
            if not a.peers:  # no control socket to ask: what the heartbeat counts
                out.append((scene.peers_channel(a.name), scene.peers_message(t, {})))
            self._emit(out, t)
        elif isinstance(body, Track):
            a.track = body
            a.uncertainty = float(body.cov_matrix.trace() / 4.0)
            self._emit([(scene.scene_channel(a.name), scene.scene_update([
                scene.track_entity(a.name, a.index, t, body.mean, body.cov_matrix)]))], t)
        elif isinstance(body, Patch):
            c = body.cells
            for ix, iy, m, v in zip(c.ix.tolist(), c.iy.tolist(), c.mu.tolist(), c.var.tolist(),
                                    strict=True):
                a.cells[(ix, iy)] = (m, v)
            if a.origin is not None and len(a.cells) > 4 * WINDOW * WINDOW:
                ox, oy = a.origin
                a.cells = {k: v for k, v in a.cells.items()
                           if 0 <= k[0] - ox < WINDOW and 0 <= k[1] - oy < WINDOW}

    def _mean_var(self, a: AgentMirror) -> float | None:
        return float(np.mean([v for _, v in a.cells.values()])) if a.cells else None

    def on_status(self, name: str, status: dict[str, Any], t: float) -> None:
        """An agent's answer to ``status`` on its control socket: its peers' reputation."""
        a = self._agent(name)
        peers = status.get("peers")
        if isinstance(peers, dict):
            a.peers = {n: p for n, p in peers.items() if isinstance(p, dict)}
            self._emit([(scene.peers_channel(a.name), scene.peers_message(t, a.peers))], t)

    def on_world(self, events: Iterable[dict[str, Any]]) -> None:
        """Events of the world's log: its start (car names) and truth."""
        for event in events:
            if event.get("event") == "truth" and isinstance(event.get("target"), dict):
                self.truth_t.append(float(event["t"]))
                self.truth_xy.append((float(event["target"]["x"]), float(event["target"]["y"])))
                if len(self.truth_t) > 2000:
                    del self.truth_t[:1000], self.truth_xy[:1000]
            self._emit(self._painter.paint(dict(event)), float(event["t"]))

    def error(self, a: AgentMirror, t: float) -> float | None:
        """Distance from the agent's published track, predicted to the truth's time, to it."""
        if a.track is None or not self.truth_t:
            return None
        tt, (x, y) = self.truth_t[-1], self.truth_xy[-1]
        mx, my, vx, vy = a.track.mean
        dt = tt - a.track.t_ref
        if abs(dt) > 2.0:
            return None
        return math.hypot(mx + vx * dt - x, my + vy * dt - y)


def scene_index(name: str) -> int:
    """The colour an agent has in the view and in its log (protocol.scenelog's painter)."""
    return ScenePainter(name).index


class ViewServer:
    """A Foxglove WebSocket server with one channel per scene topic, made as topics appear."""

    def __init__(self, host: str, port: int, name: str = "stigmesh") -> None:
        import foxglove

        self._foxglove = foxglove
        self.context = foxglove.Context()
        self.channels: dict[str, Any] = {}
        self.server = foxglove.start_server(name=name, host=host, port=port,
                                            context=self.context)
        self.port = int(self.server.port)
        self.host = host

    @property
    def url(self) -> str:
        return (f"https://app.foxglove.dev/?ds=foxglove-websocket&ds.url=ws://{self.host}:"
                f"{self.port}")

    def publish(self, spec: ChannelSpec, data: bytes, t: float) -> None:
        channel = self.channels.get(spec.topic)
        if channel is None:
            fg = self._foxglove
            channel = self.channels[spec.topic] = fg.Channel(
                spec.topic, message_encoding=spec.message_encoding, context=self.context,
                schema=fg.Schema(name=spec.schema_name, encoding=spec.schema_encoding,
                                 data=spec.schema_data))
        channel.log(data, log_time=scene.nanoseconds(t))

    def close(self) -> None:
        self.server.stop()
