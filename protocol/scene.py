"""The scene of a swarm, as a Foxglove view shows it: topics, schemas and messages in one place.

``stigmesh view`` (tools/view) publishes these channels live over a Foxglove
WebSocket from what it hears on the swarm; every run log (protocol/runlog.py)
writes the same channels (protocol/scenelog.py), with the same schemas and the same message
builders, into its MCAP file from what the process itself logged. So a
finished run opened in Foxglove plays back on the layout of the live view
(tools/view/stigmesh.layout.json).

Per agent NAME (frame ``world``, metres, the room's corner at the origin):

- ``/NAME/grid`` (foxglove.Grid): the belief grid, ``mean`` and ``variance`` as
  uint8 fields, value = round(255·x) (both lie in [0, 1]);
- ``/NAME/scene`` (foxglove.SceneUpdate): entities ``NAME/pose`` (the car, an
  arrow, its 2σ position ellipse), ``NAME/track`` (the published track: 2σ
  ellipse, velocity arrow) and ``NAME/camera`` (what the camera covers);
- ``/NAME/peers`` (JSON): each peer's reputation ``score``, ``fused`` (its track
  is fused, not refused) and ``lost``;
- ``/NAME/stats`` (JSON): numbers to plot: the track's ``uncertainty``
  (trace(P)/4), ``grid_mean_var``, ``mode`` and, where the truth is known (the
  live view), ``error`` (m).

And the world: ``/world/room`` (SceneUpdate: walls, tags, obstacles, once) and
``/world/truth`` (SceneUpdate: the target and every car where they truly are).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from foxglove import messages as fm

from protocol.mcapfile import ChannelSpec

FRAME = "world"
GRID_LEVELS = 255  # a grid value x in [0, 1] is stored as round(255·x)
SIGMAS = 2.0  # ellipses are drawn at 2σ (~86 % of a 2-D Gaussian's mass)


def _protobuf(topic: str, message: Any) -> ChannelSpec:
    schema = message.get_schema()
    return ChannelSpec(topic, "protobuf", schema.name, schema.encoding, bytes(schema.data))


def _json(topic: str, name: str, properties: Mapping[str, Any]) -> ChannelSpec:
    schema = {"title": name, "type": "object", "properties": dict(properties)}
    return ChannelSpec(topic, "json", name, "jsonschema", json.dumps(schema).encode())


_NUMBER = {"type": "number"}
PEERS_SCHEMA = {
    "t": _NUMBER,
    "peers": {"type": "array", "items": {"type": "object", "properties": {
        "name": {"type": "string"}, "score": _NUMBER, "fused": {"type": "boolean"},
        "lost": {"type": "boolean"}}}},
}
STATS_SCHEMA = {"t": _NUMBER, "uncertainty": _NUMBER, "grid_mean_var": _NUMBER,
                "error": _NUMBER, "mode": {"type": "string"}}


def grid_channel(name: str) -> ChannelSpec:
    return _protobuf(f"/{name}/grid", fm.Grid)


def scene_channel(name: str) -> ChannelSpec:
    return _protobuf(f"/{name}/scene", fm.SceneUpdate)


def peers_channel(name: str) -> ChannelSpec:
    return _json(f"/{name}/peers", "stigmesh.Peers", PEERS_SCHEMA)


def stats_channel(name: str) -> ChannelSpec:
    return _json(f"/{name}/stats", "stigmesh.AgentStats", STATS_SCHEMA)


def agent_channels(name: str) -> list[ChannelSpec]:
    return [grid_channel(name), scene_channel(name), peers_channel(name), stats_channel(name)]


ROOM = _protobuf("/world/room", fm.SceneUpdate)
TRUTH = _protobuf("/world/truth", fm.SceneUpdate)


def stamp(t: float) -> fm.Timestamp:
    sec = math.floor(t)
    return fm.Timestamp(sec=int(sec), nsec=min(int((t - sec) * 1e9), 999_999_999))


def nanoseconds(t: float) -> int:
    """A log time in nanoseconds (MCAP and Foxglove), from seconds; never negative."""
    return max(0, round(t * 1e9))


def colour(index: int, alpha: float = 1.0) -> fm.Color:
    """The agent colours of the layout (matplotlib's first ten, as the report's figures)."""
    palette = ("1f77b4", "ff7f0e", "2ca02c", "d62728", "9467bd", "8c564b", "e377c2",
               "7f7f7f", "bcbd22", "17becf")
    h = palette[index % len(palette)]
    r, g, b = (int(h[k:k + 2], 16) / 255 for k in (0, 2, 4))
    return fm.Color(r=r, g=g, b=b, a=alpha)


def _pose(x: float, y: float, yaw: float = 0.0, z: float = 0.0) -> fm.Pose:
    turn = fm.Quaternion(x=0.0, y=0.0, z=math.sin(yaw / 2), w=math.cos(yaw / 2))
    return fm.Pose(position=fm.Vector3(x=x, y=y, z=z), orientation=turn)


def ellipse(x: float, y: float, cov: npt.ArrayLike, rgba: fm.Color) -> fm.CylinderPrimitive | None:
    """A flat cylinder covering the 2σ ellipse of a 2×2 position covariance (None if not one)."""
    c = np.asarray(cov, dtype=np.float64)
    if c.shape != (2, 2) or not np.isfinite(c).all():
        return None
    vals, vecs = np.linalg.eigh((c + c.T) / 2)
    vals = np.clip(vals, 0.0, None)
    yaw = math.atan2(vecs[1, 1], vecs[0, 1])  # the major axis (largest eigenvalue last)
    major, minor = (2 * SIGMAS * math.sqrt(v) for v in (vals[1], vals[0]))
    return fm.CylinderPrimitive(pose=_pose(x, y, yaw, 0.005),
                                size=fm.Vector3(x=max(major, 0.01), y=max(minor, 0.01), z=0.01),
                                color=rgba)


def _entity(t: float, ident: str, **primitives: Any) -> fm.SceneEntity:
    return fm.SceneEntity(timestamp=stamp(t), frame_id=FRAME, id=ident, **primitives)


def pose_entity(name: str, index: int, t: float, pose: Sequence[float],
                cov: npt.ArrayLike | None) -> fm.SceneEntity:
    """The car where its agent believes it is: an arrow, a disc and the 2σ position ellipse."""
    x, y, yaw = (float(v) for v in pose[:3])
    cylinders = [fm.CylinderPrimitive(pose=_pose(x, y, 0.0, 0.02),
                                      size=fm.Vector3(x=0.14, y=0.14, z=0.04),
                                      color=colour(index, 0.9))]
    if cov is not None:
        shape = ellipse(x, y, np.asarray(cov, dtype=np.float64)[:2, :2], colour(index, 0.3))
        if shape is not None:
            cylinders.append(shape)
    arrow = fm.ArrowPrimitive(pose=_pose(x, y, yaw, 0.05), shaft_length=0.15,
                              shaft_diameter=0.025, head_length=0.06, head_diameter=0.06,
                              color=colour(index))
    label = fm.TextPrimitive(pose=_pose(x, y, 0.0, 0.25), billboard=True, font_size=14.0,
                             scale_invariant=True, color=colour(index), text=name)
    return _entity(t, f"{name}/pose", cylinders=cylinders, arrows=[arrow], texts=[label])


def track_entity(name: str, index: int, t: float, mean: Sequence[float],
                 cov: npt.ArrayLike) -> fm.SceneEntity:
    """A track: its 2σ position ellipse, a dot, and its velocity as an arrow (length = 1 s)."""
    x, y, vx, vy = (float(v) for v in mean[:4])
    P = np.asarray(cov, dtype=np.float64)
    dot = fm.Vector3(x=0.06, y=0.06, z=0.06)
    spheres = [fm.SpherePrimitive(pose=_pose(x, y, 0.0, 0.03), size=dot, color=colour(index))]
    cylinders = [c for c in [ellipse(x, y, P[:2, :2], colour(index, 0.25))] if c is not None]
    speed = math.hypot(vx, vy)
    arrows = [fm.ArrowPrimitive(pose=_pose(x, y, math.atan2(vy, vx), 0.04), shaft_length=speed,
                                shaft_diameter=0.02, head_length=0.05, head_diameter=0.05,
                                color=colour(index))] if speed > 1e-3 else []
    return _entity(t, f"{name}/track", spheres=spheres, cylinders=cylinders, arrows=arrows)


def camera_entity(name: str, index: int, t: float, pose: Sequence[float],  # noqa: PLR0917
                  reach: float, hfov: float, forward: float = 0.0) -> fm.SceneEntity:
    """What the camera covers: the sector of ``reach`` metres and ``hfov`` radians ahead."""
    x, y, yaw = (float(v) for v in pose[:3])
    cx, cy = x + forward * math.cos(yaw), y + forward * math.sin(yaw)
    arc = [yaw + a for a in np.linspace(-hfov / 2, hfov / 2, 9)]
    points = [fm.Point3(x=cx, y=cy, z=0.01)] + [
        fm.Point3(x=cx + reach * math.cos(a), y=cy + reach * math.sin(a), z=0.01) for a in arc]
    line = fm.LinePrimitive(type=fm.LinePrimitiveLineType.LineLoop, thickness=0.015,
                            points=points, color=colour(index, 0.6))
    return _entity(t, f"{name}/camera", lines=[line])


def scene_update(entities: Iterable[fm.SceneEntity]) -> bytes:
    return fm.SceneUpdate(entities=list(entities)).encode()


def quantize(values: npt.ArrayLike) -> npt.NDArray[np.uint8]:
    v = np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0)
    return np.round(np.clip(v, 0.0, 1.0) * GRID_LEVELS).astype(np.uint8)


def grid_message(t: float, origin: Sequence[int], mean_u8: npt.ArrayLike, var_u8: npt.ArrayLike,
                 cell: float) -> bytes:
    """The belief grid (row = y) as a foxglove.Grid of two uint8 fields, cell (0, 0) at
    ``origin`` × ``cell`` in the world frame."""
    mu = np.asarray(mean_u8, dtype=np.uint8)
    var = np.asarray(var_u8, dtype=np.uint8)
    w = mu.shape[1]
    data = np.stack([mu, var], axis=-1).tobytes()
    u8 = fm.PackedElementFieldNumericType.Uint8
    return fm.Grid(
        timestamp=stamp(t), frame_id=FRAME, pose=_pose(origin[0] * cell, origin[1] * cell),
        column_count=w, cell_size=fm.Vector2(x=cell, y=cell), row_stride=2 * w, cell_stride=2,
        fields=[fm.PackedElementField(name="mean", offset=0, type=u8),
                fm.PackedElementField(name="variance", offset=1, type=u8)],
        data=data,
    ).encode()


def json_message(obj: Mapping[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False, default=float).encode()


def peers_message(t: float, peers: Mapping[str, Mapping[str, Any]]) -> bytes:
    rows = []
    for name in sorted(peers):
        p = peers[name]
        score = p.get("score")
        rows.append({"name": name,
                     "score": float(score) if isinstance(score, int | float) else -1.0,
                     "fused": bool(p.get("fused", False)), "lost": bool(p.get("lost", False))})
    return json_message({"t": t, "peers": rows})


def stats_message(t: float, **values: float | str | None) -> bytes:
    out: dict[str, Any] = {"t": t}
    for k, v in values.items():
        if isinstance(v, float) and not math.isfinite(v):
            continue
        if v is not None:
            out[k] = v
    return json_message(out)


# ---------------------------------------------------------------- the world


def room_update(t: float, size: tuple[float, float], wall_height: float,
                tags: Iterable[tuple[int, float, float, float, float]],
                boxes: Iterable[tuple[float, float, float, float]] = ()) -> bytes:
    """Walls (a thin box per side), tags (id, x, y, z, yaw: a square facing ``yaw``, with its id)
    and box obstacles (centre x, y, size x, y)."""
    sx, sy = size
    grey = fm.Color(r=0.55, g=0.55, b=0.6, a=0.6)
    walls = [fm.CubePrimitive(pose=_pose(cx, cy, 0.0, wall_height / 2),
                              size=fm.Vector3(x=lx, y=ly, z=wall_height), color=grey)
             for cx, cy, lx, ly in ((sx / 2, -0.01, sx, 0.02), (sx / 2, sy + 0.01, sx, 0.02),
                                    (-0.01, sy / 2, 0.02, sy), (sx + 0.01, sy / 2, 0.02, sy))]
    floor = fm.LinePrimitive(type=fm.LinePrimitiveLineType.LineLoop, thickness=0.02,
                             points=[fm.Point3(x=a, y=b, z=0.0) for a, b in
                                     ((0, 0), (sx, 0), (sx, sy), (0, sy))],
                             color=fm.Color(r=0.3, g=0.3, b=0.3, a=1.0))
    cubes = list(walls)
    texts = []
    for ident, x, y, z, yaw in tags:
        cubes.append(fm.CubePrimitive(pose=_pose(x, y, yaw, z),
                                      size=fm.Vector3(x=0.01, y=0.2, z=0.2),
                                      color=fm.Color(r=0.05, g=0.05, b=0.05, a=1.0)))
        texts.append(fm.TextPrimitive(pose=_pose(x, y, 0.0, z + 0.18), billboard=True,
                                      font_size=11.0, scale_invariant=True,
                                      color=fm.Color(r=0.2, g=0.2, b=0.2, a=1.0),
                                      text=f"tag {ident}"))
    for cx, cy, lx, ly in boxes:
        cubes.append(fm.CubePrimitive(pose=_pose(cx, cy, 0.0, wall_height / 2),
                                      size=fm.Vector3(x=lx, y=ly, z=wall_height),
                                      color=fm.Color(r=0.5, g=0.35, b=0.2, a=0.8)))
    return scene_update([_entity(t, "room", cubes=cubes, lines=[floor], texts=texts)])


def truth_update(t: float, target: tuple[float, float] | None,
                 cars: Iterable[tuple[str, float, float, float]]) -> bytes:
    """The target (a green sphere) and each car (name, x, y, yaw: a hollow ring) as they are."""
    entities = []
    if target is not None:
        entities.append(_entity(t, "truth/target", spheres=[fm.SpherePrimitive(
            pose=_pose(target[0], target[1], 0.0, 0.06), size=fm.Vector3(x=0.12, y=0.12, z=0.12),
            color=fm.Color(r=0.1, g=0.85, b=0.1, a=1.0))]))
    for name, x, y, yaw in cars:
        ring = fm.LinePrimitive(type=fm.LinePrimitiveLineType.LineLoop, thickness=0.01, points=[
            fm.Point3(x=x + 0.1 * math.cos(a), y=y + 0.1 * math.sin(a), z=0.0)
            for a in np.linspace(0, 2 * math.pi, 13)[:-1]], color=fm.Color(r=0, g=0, b=0, a=0.8))
        nose = fm.LinePrimitive(type=fm.LinePrimitiveLineType.LineStrip, thickness=0.01, points=[
            fm.Point3(x=x, y=y, z=0.0),
            fm.Point3(x=x + 0.15 * math.cos(yaw), y=y + 0.15 * math.sin(yaw), z=0.0)],
            color=fm.Color(r=0, g=0, b=0, a=0.8))
        entities.append(_entity(t, f"truth/{name}", lines=[ring, nose]))
    return scene_update(entities)
