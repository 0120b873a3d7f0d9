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
project refuses. A site writes a tag's pose as its measurement (``measured``
defaults to true there; write false for a tag whose pose you do not know); a
robot file must say ``mount.measured = true`` itself.

Sources: :func:`map_from_site`: the site (protocol/SITE.md: tags, target,
robot tags) with this robot's lens (a calibration file, :func:`load_intrinsics`)
and camera mount (its robot file, protocol/ROBOT.md). A site's old "map file"
form looked like this (the same keys now live in the site and robot files)::

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import numpy as np
import numpy.typing as npt

from protocol import tomlfile
from protocol.site import Site

FloatArray = npt.NDArray[np.float64]


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


# --------------------------------------------------------------------------- from a site


def map_from_site(site: Site, camera: Intrinsics, mount: CameraMount) -> TagMap:
    """What the perception pipeline of one robot may assume: the site's tags (each
    keeps its ``measured`` flag), its target and robot tags, this robot's lens and mount."""
    tags = {
        t.id: WorldTag(t.id, t.size, t.x, t.y, t.z, t.yaw, measured=t.measured) for t in site.tags
    }
    target = None
    if site.target is not None:
        g = site.target
        target = TargetTag(g.tag_id, g.size, g.axis_offset)
    robot_tags = {
        r.tag_id: RobotTag(r.robot, r.tag_id, r.size, r.forward, r.left, r.height, r.yaw,
                           r.measured)
        for r in site.robot_tags
    }
    return TagMap(camera, mount, tags, target, robot_tags)


def intrinsics_toml(cam: Intrinsics) -> str:
    """A calibration file holding ``cam`` (what :func:`load_intrinsics` reads)."""
    dist = ", ".join(repr(d) for d in cam.dist)
    return (f"[camera]\nwidth = {cam.width}\nheight = {cam.height}\nfx = {cam.fx!r}\n"
            f"fy = {cam.fy!r}\ncx = {cam.cx!r}\ncy = {cam.cy!r}\ndist = [{dist}]\n")


def load_intrinsics(path: str | Path) -> Intrinsics:
    """The ``[camera]`` table of a calibration file (``stigmesh calibrate``);
    raises :class:`~protocol.tomlfile.FileError`."""
    top = tomlfile.read(path)
    cam = top.table("camera", required=True)
    assert cam is not None
    width = cam.integer("width", None, 1, 10000)
    height = cam.integer("height", None, 1, 10000)
    fx, fy = cam.number("fx", None, 1e-6), cam.number("fy", None, 1e-6)
    cx, cy = cam.number("cx"), cam.number("cy")
    raw = cam.raw("dist")
    if not isinstance(raw, list) or len(raw) not in (4, 5, 8):
        raise cam.fail("dist", "must be a list of 4, 5 or 8 numbers ([k1, k2, p1, p2, k3])")
    dist = tuple(cam.check_number("dist", v, -math.inf, math.inf) for v in raw)
    for key in ("rms_px", "views", "image_size_checked", "created"):
        cam.raw(key)  # informational fields of a calibration file
    cam.done()
    top.done()
    return Intrinsics(width, height, fx, fy, cx, cy, dist)
