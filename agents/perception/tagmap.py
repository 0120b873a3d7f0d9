"""The tag map: where the wall tags are, how the camera sits on the car, what the lens is.

Frames (all right-handed, metres and radians):

- **world**: the room's floor frame, z up, yaw counter-clockwise from +x;
- **car**: origin on the floor under the rotation centre, x forward, y left, z up;
- **camera**: OpenCV's, at the optical centre: x right, y down, z along the optical axis;
- **tag**: at the centre of the black square: x to the right and y down as a
  viewer facing the tag sees them, z into the tag (away from that viewer).

A :class:`Transform` ``T_a_b`` maps coordinates in frame b to frame a.

**Measured or nothing.** A tag or a camera mount whose entry is not marked
``measured`` yields no transform (``None``), never an identity or a default:
an unsurveyed position used as if it were known is exactly the guess this
project refuses. In an arena file ``measured`` defaults to true (the world's
positions are exact by construction); in a separate map file (a real room) it
defaults to false and must be stated entry by entry.

Sources: :func:`map_from_arena` (anything shaped like ``worlds.arena.Arena``;
agents do not import ``worlds``) and :func:`load_map` / :func:`parse_map` for
a TOML map of a real room::

    calibration = "walnut_camera.toml"   # or an inline [camera] table
    [mount]                  # the camera on the car
    forward = 0.05           # m ahead of the rotation centre
    height = 0.2125          # m above the floor
    yaw_deg = 0.0            # optional; pitch_deg (positive looks down), roll_deg
    measured = true
    [target]
    tag_id = 100
    size = 0.12              # m, black square
    axis_offset = 0.075      # m from the tag's plane to the column's axis
    [[tags]]
    id = 0
    x = 0.625                # m, centre of the black square; may be absent
    y = 0.0                  #   while measured = false
    z = 0.21
    yaw_deg = 90             # the direction the tag faces
    size = 0.2
    measured = true
    [[robot_tags]]           # tags carried by robots (pose chaining)
    robot = "walnut"
    tag_id = 200
    size = 0.08
    forward = -0.06          # tag centre in the car frame, m
    left = 0.0
    height = 0.12
    yaw_deg = 180            # the direction the tag faces, in the car frame
    measured = true

The calibration file (written by ``stigmesh calibrate``) holds one ``[camera]``
table: ``width, height, fx, fy, cx, cy`` and ``dist = [k1, k2, p1, p2, k3]``.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

MAX_TAG_ID = 586  # tag36h11 has 587 codes


class MapError(ValueError):
    """A map or calibration file was refused; ``reason`` says why and where."""

    def __init__(self, source: str, reason: str) -> None:
        self.source = source
        self.reason = reason
        super().__init__(f"{source}: {reason}")


# --------------------------------------------------------------------------- geometry


def rot_z(a: float) -> FloatArray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def rot_y(a: float) -> FloatArray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def rot_x(a: float) -> FloatArray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


# camera axes (x right, y down, z forward) in a level, forward-looking body frame
# (x forward, y left, z up)
R_BODY_CAMERA = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])


def facing_rotation(yaw: float) -> FloatArray:
    """Tag axes in the parent frame for a vertical tag whose outward normal has ``yaw``.

    x is the viewer's right, y points down, z into the tag (against the normal).
    """
    nx, ny = math.cos(yaw), math.sin(yaw)
    return np.array([[-ny, 0.0, -nx], [nx, 0.0, -ny], [0.0, -1.0, 0.0]])


@dataclass(frozen=True, eq=False)
class Transform:
    """A rigid transform ``p_a = R @ p_b + t`` (frame b expressed in frame a)."""

    R: FloatArray
    t: FloatArray

    def __post_init__(self) -> None:
        R = np.array(self.R, dtype=np.float64).reshape(3, 3)
        t = np.array(self.t, dtype=np.float64).reshape(3)
        R.setflags(write=False)
        t.setflags(write=False)
        object.__setattr__(self, "R", R)
        object.__setattr__(self, "t", t)

    @staticmethod
    def identity() -> Transform:
        return Transform(np.eye(3), np.zeros(3))

    def __matmul__(self, other: Transform) -> Transform:
        return Transform(self.R @ other.R, self.R @ other.t + self.t)

    def inverse(self) -> Transform:
        return Transform(self.R.T, -self.R.T @ self.t)

    def apply(self, points: npt.ArrayLike) -> FloatArray:
        """Points (N x 3, or one 3-vector) from frame b to frame a."""
        p = np.asarray(points, dtype=np.float64)
        return p @ self.R.T + self.t


# --------------------------------------------------------------------------- entries


@dataclass(frozen=True)
class Intrinsics:
    """A pinhole camera with OpenCV distortion ``(k1, k2, p1, p2[, k3])``."""

    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    dist: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0)

    def __post_init__(self) -> None:
        if self.width <= 0 or self.height <= 0:
            raise ValueError("image size must be positive")
        if not (self.fx > 0 and self.fy > 0 and math.isfinite(self.fx) and math.isfinite(self.fy)):
            raise ValueError("focal lengths must be finite and > 0")
        if not (math.isfinite(self.cx) and math.isfinite(self.cy)):
            raise ValueError("principal point must be finite")
        if len(self.dist) not in (4, 5, 8) or not all(math.isfinite(d) for d in self.dist):
            raise ValueError("dist must hold 4, 5 or 8 finite coefficients")

    @property
    def matrix(self) -> FloatArray:
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])

    @property
    def dist_coeffs(self) -> FloatArray:
        return np.array(self.dist, dtype=np.float64)


@dataclass(frozen=True)
class CameraMount:
    """The camera on the car: optical centre ``forward`` m ahead of the rotation
    centre and ``height`` m above the floor, level and looking forward unless
    ``yaw``/``pitch``/``roll`` say otherwise (pitch positive looks down)."""

    forward: float
    height: float
    yaw: float = 0.0
    pitch: float = 0.0
    roll: float = 0.0
    measured: bool = False

    def transform(self) -> Transform | None:
        """``T_car_camera``, or None when the mount was never measured."""
        if not self.measured:
            return None
        R = rot_z(self.yaw) @ rot_y(self.pitch) @ rot_x(self.roll) @ R_BODY_CAMERA
        return Transform(R, np.array([self.forward, 0.0, self.height]))


@dataclass(frozen=True)
class WorldTag:
    """A tag fixed in the room. Positions are None for an unsurveyed entry."""

    id: int
    size: float
    x: float | None = None
    y: float | None = None
    z: float | None = None
    yaw: float | None = None
    measured: bool = False

    def transform(self) -> Transform | None:
        """``T_world_tag``, or None unless the entry is measured and complete."""
        if not self.measured or None in (self.x, self.y, self.z, self.yaw):
            return None
        assert self.x is not None and self.y is not None and self.z is not None
        assert self.yaw is not None
        return Transform(facing_rotation(self.yaw), np.array([self.x, self.y, self.z]))


@dataclass(frozen=True)
class TargetTag:
    """The target's tag (the same on every face of its column)."""

    tag_id: int
    size: float
    axis_offset: float  # from the tag's plane to the column's axis, m


@dataclass(frozen=True)
class RobotTag:
    """A tag carried by a robot, for pose chaining. ``yaw`` is its facing in the car frame."""

    robot: str
    tag_id: int
    size: float
    forward: float | None = None
    left: float | None = None
    height: float | None = None
    yaw: float | None = None
    measured: bool = False

    def transform(self) -> Transform | None:
        """``T_car_tag``, or None unless the entry is measured and complete."""
        if not self.measured or None in (self.forward, self.left, self.height, self.yaw):
            return None
        assert self.forward is not None and self.left is not None
        assert self.height is not None and self.yaw is not None
        return Transform(
            facing_rotation(self.yaw), np.array([self.forward, self.left, self.height])
        )


class TagRole(StrEnum):
    WORLD = "world"
    TARGET = "target"
    ROBOT = "robot"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class TagMap:
    """Everything the perception pipeline may assume about the room and its own camera."""

    camera: Intrinsics
    mount: CameraMount
    tags: Mapping[int, WorldTag] = field(default_factory=dict)
    target: TargetTag | None = None
    robot_tags: Mapping[int, RobotTag] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ids = list(self.tags) + list(self.robot_tags)
        if self.target is not None:
            ids.append(self.target.tag_id)
        if len(set(ids)) != len(ids):
            raise ValueError("a tag id is used by more than one of wall, target and robot tags")

    def role(self, tag_id: int) -> TagRole:
        if tag_id in self.tags:
            return TagRole.WORLD
        if self.target is not None and tag_id == self.target.tag_id:
            return TagRole.TARGET
        if tag_id in self.robot_tags:
            return TagRole.ROBOT
        return TagRole.UNKNOWN

    def size(self, tag_id: int) -> float | None:
        if tag_id in self.tags:
            return self.tags[tag_id].size
        if self.target is not None and tag_id == self.target.tag_id:
            return self.target.size
        if tag_id in self.robot_tags:
            return self.robot_tags[tag_id].size
        return None

    def world_transform(self, tag_id: int) -> Transform | None:
        """``T_world_tag`` of a measured wall tag; None for any other id."""
        tag = self.tags.get(tag_id)
        return None if tag is None else tag.transform()

    def landmarks(self) -> dict[int, tuple[float, float]]:
        """Floor positions of the measured wall tags (the EKF's landmark map)."""
        out: dict[int, tuple[float, float]] = {}
        for tag_id, tag in self.tags.items():
            T = tag.transform()
            if T is not None:
                out[tag_id] = (float(T.t[0]), float(T.t[1]))
        return out


# --------------------------------------------------------------------------- from an arena


class _CarModelLike(Protocol):
    @property
    def camera_forward(self) -> float: ...
    @property
    def camera_height(self) -> float: ...


class _CameraLike(Protocol):
    @property
    def width(self) -> int: ...
    @property
    def height(self) -> int: ...
    @property
    def fx(self) -> float: ...
    @property
    def fy(self) -> float: ...
    @property
    def cx(self) -> float: ...
    @property
    def cy(self) -> float: ...
    @property
    def k1(self) -> float: ...
    @property
    def k2(self) -> float: ...


class _TagLike(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def x(self) -> float: ...
    @property
    def y(self) -> float: ...
    @property
    def z(self) -> float: ...
    @property
    def yaw(self) -> float: ...
    @property
    def size(self) -> float: ...
    @property
    def measured(self) -> bool: ...


class _TargetLike(Protocol):
    @property
    def tag_id(self) -> int: ...
    @property
    def size(self) -> float: ...
    @property
    def body_side(self) -> float: ...


class ArenaLike(Protocol):
    """The parts of ``worlds.arena.Arena`` a map is made from."""

    @property
    def car_model(self) -> _CarModelLike: ...
    @property
    def camera(self) -> _CameraLike: ...
    @property
    def tags(self) -> Sequence[_TagLike]: ...
    @property
    def target(self) -> _TargetLike | None: ...


def map_from_arena(arena: ArenaLike) -> TagMap:
    """The map an agent in a simulated arena may use.

    In simulation the camera mount and the lens are exact, so they are
    measured; each wall tag keeps its own ``measured`` flag.
    """
    cam, model = arena.camera, arena.car_model
    intrinsics = Intrinsics(
        cam.width, cam.height, cam.fx, cam.fy, cam.cx, cam.cy, (cam.k1, cam.k2, 0.0, 0.0)
    )
    mount = CameraMount(model.camera_forward, model.camera_height, measured=True)
    tags = {
        t.id: WorldTag(t.id, t.size, t.x, t.y, t.z, t.yaw, measured=t.measured) for t in arena.tags
    }
    target = None
    if arena.target is not None:
        tgt = arena.target
        target = TargetTag(tgt.tag_id, tgt.size, tgt.body_side / 2.0)
    return TagMap(intrinsics, mount, tags, target)


# --------------------------------------------------------------------------- TOML files


class _Reader:
    """Typed access to one TOML table, with errors naming the file and key path."""

    def __init__(self, source: str, path: str, data: object) -> None:
        if not isinstance(data, dict):
            raise MapError(source, f"{path or 'file'} must be a table")
        self.source, self.path, self.data = source, path, data
        self.used: set[str] = set()

    def _where(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def _raw(self, key: str) -> Any:
        self.used.add(key)
        return self.data.get(key)

    def number(
        self, key: str, required: bool = True, low: float = -math.inf, high: float = math.inf
    ) -> float | None:
        value = self._raw(key)
        if value is None:
            if required:
                raise MapError(self.source, f"{self._where(key)} is required")
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise MapError(self.source, f"{self._where(key)} must be a number")
        f = float(value)
        if not math.isfinite(f) or not low <= f <= high:
            raise MapError(self.source, f"{self._where(key)} = {value} is outside [{low}, {high}]")
        return f

    def req(self, key: str, low: float = -math.inf, high: float = math.inf) -> float:
        value = self.number(key, True, low, high)
        assert value is not None
        return value

    def integer(self, key: str, low: int, high: int) -> int:
        value = self._raw(key)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise MapError(self.source, f"{self._where(key)} must be an integer in [{low}, {high}]")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self._raw(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise MapError(self.source, f"{self._where(key)} must be true or false")
        return value

    def string(self, key: str) -> str:
        value = self._raw(key)
        if not isinstance(value, str) or not value:
            raise MapError(self.source, f"{self._where(key)} must be a non-empty string")
        return value

    def angle(self, key: str, required: bool) -> float | None:
        deg = self.number(key, required, -360.0, 360.0)
        return None if deg is None else math.radians(deg)

    def tables(self, key: str) -> list[_Reader]:
        value = self._raw(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise MapError(self.source, f"{self._where(key)} must be an array of tables")
        return [_Reader(self.source, f"{self._where(key)}[{i}]", v) for i, v in enumerate(value)]

    def table(self, key: str) -> _Reader | None:
        value = self._raw(key)
        return None if value is None else _Reader(self.source, self._where(key), value)

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            raise MapError(self.source, f"unknown key {self._where(unknown[0])}")


def _intrinsics(r: _Reader) -> Intrinsics:
    width = r.integer("width", 1, 10000)
    height = r.integer("height", 1, 10000)
    fx, fy = r.req("fx", 1e-6), r.req("fy", 1e-6)
    cx, cy = r.req("cx"), r.req("cy")
    raw = r._raw("dist")
    if raw is None:
        raise MapError(r.source, f"{r._where('dist')} is required ([k1, k2, p1, p2, k3])")
    if not isinstance(raw, list) or len(raw) not in (4, 5, 8):
        raise MapError(r.source, f"{r._where('dist')} must be a list of 4, 5 or 8 numbers")
    dist: list[float] = []
    for v in raw:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise MapError(r.source, f"{r._where('dist')} must hold finite numbers")
        dist.append(float(v))
    for key in ("rms_px", "views", "image_size_checked", "created"):
        r._raw(key)  # informational fields of a calibration file
    r.done()
    return Intrinsics(width, height, fx, fy, cx, cy, tuple(dist))


def _read_toml(path: Path) -> tuple[str, dict[str, Any]]:
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MapError(source, f"cannot read: {exc}") from None
    try:
        return source, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MapError(source, f"TOML syntax: {exc}") from None


def load_intrinsics(path: str | Path) -> Intrinsics:
    """The ``[camera]`` table of a calibration file; raises :class:`MapError`."""
    source, data = _read_toml(Path(path))
    top = _Reader(source, "", data)
    cam = top.table("camera")
    if cam is None:
        raise MapError(source, "no [camera] table")
    intrinsics = _intrinsics(cam)
    top.done()
    return intrinsics


def _world_tag(r: _Reader) -> WorldTag:
    measured = r.boolean("measured", False)
    tag = WorldTag(
        id=r.integer("id", 0, MAX_TAG_ID),
        size=r.req("size", 0.005, 5.0),
        x=r.number("x", measured),
        y=r.number("y", measured),
        z=r.number("z", measured, -1.0, 20.0),
        yaw=r.angle("yaw_deg", measured),
        measured=measured,
    )
    r.done()
    return tag


def _robot_tag(r: _Reader) -> RobotTag:
    measured = r.boolean("measured", False)
    tag = RobotTag(
        robot=r.string("robot"),
        tag_id=r.integer("tag_id", 0, MAX_TAG_ID),
        size=r.req("size", 0.005, 5.0),
        forward=r.number("forward", measured, -2.0, 2.0),
        left=r.number("left", measured, -2.0, 2.0),
        height=r.number("height", measured, 0.0, 3.0),
        yaw=r.angle("yaw_deg", measured),
        measured=measured,
    )
    r.done()
    return tag


def _unique(source: str, what: str, ids: Iterable[int]) -> None:
    seen: set[int] = set()
    for i in ids:
        if i in seen:
            raise MapError(source, f"{what} id {i} appears twice")
        seen.add(i)


def parse_map(data: Mapping[str, Any], source: str = "<map>", base: Path | None = None) -> TagMap:
    """A :class:`TagMap` from parsed TOML; ``base`` resolves a relative ``calibration``."""
    top = _Reader(source, "", dict(data))
    cam_table = top.table("camera")
    calibration = top._raw("calibration")
    if (cam_table is None) == (calibration is None):
        raise MapError(source, "give exactly one of [camera] or calibration = FILE")
    if cam_table is not None:
        camera = _intrinsics(cam_table)
    else:
        if not isinstance(calibration, str) or not calibration:
            raise MapError(source, "calibration must be a file name")
        path = Path(calibration)
        if not path.is_absolute() and base is not None:
            path = base / path
        camera = load_intrinsics(path)
    m = top.table("mount")
    if m is None:
        raise MapError(source, "no [mount] table (the camera on the car)")
    mount = CameraMount(
        forward=m.req("forward", -2.0, 2.0),
        height=m.req("height", 0.0, 3.0),
        yaw=m.angle("yaw_deg", False) or 0.0,
        pitch=m.angle("pitch_deg", False) or 0.0,
        roll=m.angle("roll_deg", False) or 0.0,
        measured=m.boolean("measured", False),
    )
    m.done()
    target = None
    t = top.table("target")
    if t is not None:
        target = TargetTag(
            t.integer("tag_id", 0, MAX_TAG_ID), t.req("size", 0.005, 5.0), t.req("axis_offset", 0.0)
        )
        t.done()
    tags = [_world_tag(r) for r in top.tables("tags")]
    robot_tags = [_robot_tag(r) for r in top.tables("robot_tags")]
    top.done()
    _unique(source, "tag", (tag.id for tag in tags))
    _unique(source, "robot tag", (tag.tag_id for tag in robot_tags))
    try:
        return TagMap(
            camera,
            mount,
            {tag.id: tag for tag in tags},
            target,
            {tag.tag_id: tag for tag in robot_tags},
        )
    except ValueError as exc:
        raise MapError(source, str(exc)) from None


def load_map(path: str | Path) -> TagMap:
    """Read and validate a map file; raises :class:`MapError`."""
    p = Path(path)
    source, data = _read_toml(p)
    return parse_map(data, source, p.parent)
