"""A process's logged events drawn as the live view's scene (protocol/scene.py).

:class:`ScenePainter` is what puts the live view's channels into every run log
(protocol/runlog.py), so that a finished run opened in Foxglove plays back as
``stigmesh view`` shows a swarm live; :func:`grid_data` is the way back from a
logged ``foxglove.Grid`` to its cells.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from protocol import scene
from protocol.mcapfile import ChannelSpec

GRID_CELL = 0.1  # m: the swarm's lattice pitch (RUNLOG.md), for placing a grid in the world
GRID_DATA_FIELD = 9  # foxglove.Grid's bytes data


def _colour_index(name: str) -> int:
    return zlib.crc32(name.encode()) % 10


class ScenePainter:
    """Turns a process's events into messages on the scene channels (protocol/scene.py).

    An agent's belief loses its grid arrays to ``/NAME/grid`` (uint8, see
    scene.GRID_LEVELS; the reader puts them back), one belief in :attr:`GRID_EVERY`
    (the others keep no grid); its published HEARTBEAT and
    TRACK become the pose, camera and track entities the live view draws from the
    same datagrams; its peers and numbers go to ``/NAME/peers`` and ``/NAME/stats``.
    The world's truth becomes ``/world/truth`` (at most :data:`TRUTH_EVERY`).
    """

    TRACK_EVERY = 0.5  # s between two track entities (the agent sends 5 Hz and more)
    GRID_EVERY = 2  # belief records (1 Hz) per grid: the grids were half of a log's bytes
    TRUTH_EVERY = 0.1  # s between two truth scenes (the world logs 20 Hz)

    def __init__(self, process: str) -> None:
        self.name = process
        self.index = _colour_index(process)
        self.swarm_id: int | None = None
        self.view = (3.0, 1.08, 0.0)  # reach (m), hfov (rad), camera forward (m)
        self.fused: dict[str, bool] = {}
        self.mode = ""
        self.cars: dict[int, str] = {}
        self._last_track = -1e18
        self._last_truth = -1e18
        self._beliefs = 0

    def paint(self, record: dict[str, Any]) -> list[tuple[ChannelSpec, bytes]]:
        event, t = record["event"], float(record["t"])
        try:
            if event == "start":
                self._start(record)
            elif event == "belief":
                return self._belief(t, record)
            elif event == "tx" and record.get("kind") in ("heartbeat", "track"):
                return self._published(t, record)
            elif event == "peer_track" and isinstance(record.get("peer"), str):
                self.fused[record["peer"]] = record.get("outcome") in ("fused",
                                                                        "no_new_information")
            elif event == "decision":
                self.mode = str(record.get("mode", ""))
            elif event == "truth" and t - self._last_truth >= self.TRUTH_EVERY:
                self._last_truth = t
                return self._truth(t, record)
        except (KeyError, TypeError, ValueError, IndexError):
            return []  # a drawing that cannot be made is no reason to lose the event
        return []

    def _start(self, record: dict[str, Any]) -> None:
        if isinstance(record.get("swarm_id"), int):
            self.swarm_id = record["swarm_id"]
        settings = record.get("settings")
        if isinstance(settings, dict):
            reach = float(settings.get("view.range", self.view[0]))
            hfov_deg = settings.get("view.hfov_deg")
            hfov = np.radians(float(hfov_deg)) if hfov_deg is not None else self.view[1]
            self.view = (reach, float(hfov), float(settings.get("mount.forward", 0.0)))
        for car in record.get("cars") or []:
            if isinstance(car, dict) and "id" in car and "name" in car:
                self.cars[int(car["id"])] = str(car["name"])

    def _belief(self, t: float, record: dict[str, Any]) -> list[tuple[ChannelSpec, bytes]]:
        out = []
        shape = record.get("shape")
        mu, var = record.get("mu_f32"), record.get("var_f32")
        with_grid = self._beliefs % self.GRID_EVERY == 0
        self._beliefs += 1
        if not with_grid:
            record.pop("mu_f32", None)
            record.pop("var_f32", None)
        elif isinstance(mu, bytes) and isinstance(var, bytes) and shape is not None:
            h, w = int(shape[0]), int(shape[1])
            mu_u8 = scene.quantize(np.frombuffer(mu, dtype="<f4").reshape(h, w))
            var_u8 = scene.quantize(np.frombuffer(var, dtype="<f4").reshape(h, w))
            origin = [int(v) for v in record["origin"]]
            out.append((scene.grid_channel(self.name),
                        scene.grid_message(t, origin, mu_u8, var_u8, GRID_CELL)))
            del record["mu_f32"], record["var_f32"]
            record["grid"] = "u8"  # the reader takes it back from /NAME/grid
        peers = record.get("peers")
        if isinstance(peers, dict):
            rows = {n: {**p, "fused": self.fused.get(n, False)} for n, p in peers.items()
                    if isinstance(p, dict)}
            out.append((scene.peers_channel(self.name), scene.peers_message(t, rows)))
        track = record.get("track")
        unc = float(track["uncertainty"]) if isinstance(track, dict) else None
        mean_var = record.get("mean_var")
        out.append((scene.stats_channel(self.name), scene.stats_message(
            t, uncertainty=unc, grid_mean_var=float(mean_var) if mean_var is not None else None,
            mode=self.mode or None)))
        return out

    def _published(self, t: float, record: dict[str, Any]) -> list[tuple[ChannelSpec, bytes]]:
        from protocol.swarm import Heartbeat, Track, from_upper_triangle
        from protocol.swarm.codec import decode_payload
        from protocol.swarm.messages import MAC_LEN, MAX_DATAGRAM_LIMIT

        raw = record.get("raw")
        if self.swarm_id is None or not isinstance(raw, bytes):
            return []
        if record["kind"] == "track":
            if t - self._last_track < self.TRACK_EVERY:
                return []
            self._last_track = t
        body = decode_payload(raw[:-MAC_LEN], self.swarm_id, limit=MAX_DATAGRAM_LIMIT).body
        if isinstance(body, Heartbeat):
            if body.cov[0] >= 1e5:  # no pose (LOST_POSE sends a huge covariance)
                return []
            pose = (body.x, body.y, body.heading)
            reach, hfov, forward = self.view
            return [(scene.scene_channel(self.name), scene.scene_update([
                scene.pose_entity(self.name, self.index, t, pose, from_upper_triangle(body.cov, 3)),
                scene.camera_entity(self.name, self.index, t, pose, reach, hfov, forward)]))]
        if isinstance(body, Track):
            return [(scene.scene_channel(self.name), scene.scene_update([
                scene.track_entity(self.name, self.index, t, body.mean, body.cov_matrix)]))]
        return []

    def _truth(self, t: float, record: dict[str, Any]) -> list[tuple[ChannelSpec, bytes]]:
        tg = record.get("target")
        target = (float(tg["x"]), float(tg["y"])) if isinstance(tg, dict) else None
        cars = [(self.cars.get(int(c["id"]), f"car{c['id']}"), float(c["x"]), float(c["y"]),
                 float(c["yaw"])) for c in record.get("cars") or [] if isinstance(c, dict)]
        return [(scene.TRUTH, scene.truth_update(t, target, cars))]


def grid_data(message: bytes) -> bytes | None:
    """The ``data`` field (number 9) of a foxglove.Grid protobuf message."""
    i, n = 0, len(message)
    while i < n:
        key, i = _varint(message, i)
        wire = key & 7
        if wire == 0:
            _, i = _varint(message, i)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire == 2:
            size, i = _varint(message, i)
            if key >> 3 == GRID_DATA_FIELD:
                return message[i:i + size]
            i += size
        else:
            return None
    return None


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7
