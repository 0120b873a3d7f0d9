"""The localizer tests' world: a 5 m room with tags every 1.25 m along its walls, a camera
5 cm ahead of the robot's centre that sights them (or any point) with range and bearing
noise, and the filter's pose and covariance read and set."""

from __future__ import annotations

import math

import numpy as np

from agents.localization import PoseEKF
from agents.observations import TagSighting
from agents.pose_geometry import wrap_angle

CHI2_3DOF_99 = 11.345
ROOM = 5.0
FOV = math.radians(62.0)
MAX_RANGE = 3.0
SIGMA_BEARING = math.radians(1.5)
CAMERA_FORWARD = 0.05


def sigma_range(r: float) -> float:
    return 0.03 + 0.02 * r


def wall_tags() -> tuple[dict[int, tuple[float, float]], dict[int, tuple[float, float]]]:
    """Tags every 1.25 m along the four walls of a 5 m room, with their inward normals."""
    tags: dict[int, tuple[float, float]] = {}
    normals: dict[int, tuple[float, float]] = {}
    k = 0
    for s in (0.625, 1.875, 3.125, 4.375):
        for x, y, n in ((s, 0.0, (0, 1)), (s, ROOM, (0, -1)), (0.0, s, (1, 0)), (ROOM, s, (-1, 0))):
            tags[k], normals[k] = (x, y), (float(n[0]), float(n[1]))
            k += 1
    return tags, normals


TAGS, NORMALS = wall_tags()


def camera(pose: np.ndarray) -> tuple[float, float]:
    return (
        pose[0] + CAMERA_FORWARD * math.cos(pose[2]),
        pose[1] + CAMERA_FORWARD * math.sin(pose[2]),
    )


def true_range_bearing(pose: np.ndarray, point: tuple[float, float]) -> tuple[float, float]:
    cx, cy = camera(pose)
    dx, dy = point[0] - cx, point[1] - cy
    return math.hypot(dx, dy), wrap_angle(math.atan2(dy, dx) - pose[2])


def sight_tags(pose: np.ndarray, rng: np.random.Generator) -> tuple[TagSighting, ...]:
    out = []
    cx, cy = camera(pose)
    for tid, (lx, ly) in TAGS.items():
        r, b = true_range_bearing(pose, (lx, ly))
        n = NORMALS[tid]
        facing = ((cx - lx) * n[0] + (cy - ly) * n[1]) / r
        if r > MAX_RANGE or abs(b) > FOV / 2 or facing < math.cos(math.radians(70)):
            continue
        sr = sigma_range(r)
        out.append(
            TagSighting(
                tid,
                r + float(rng.normal(0, sr)),
                wrap_angle(b + float(rng.normal(0, SIGMA_BEARING))),
                sr,
                SIGMA_BEARING,
            )
        )
    return tuple(out)


def sight_point(
    pose: np.ndarray, point: tuple[float, float], rng: np.random.Generator, tag_id: int = 99
) -> TagSighting | None:
    r, b = true_range_bearing(pose, point)
    if r > MAX_RANGE or abs(b) > FOV / 2:
        return None
    sr = sigma_range(r)
    return TagSighting(
        tag_id,
        r + float(rng.normal(0, sr)),
        wrap_angle(b + float(rng.normal(0, SIGMA_BEARING))),
        sr,
        SIGMA_BEARING,
    )


def est_of(ekf: PoseEKF) -> np.ndarray:
    pose = ekf.pose
    assert pose is not None
    return np.array(pose)


def cov_of(ekf: PoseEKF) -> np.ndarray:
    cov = ekf.cov
    assert cov is not None
    return cov


def put(ekf: PoseEKF, x: np.ndarray, P: np.ndarray) -> None:
    ekf.set_pose(float(x[0]), float(x[1]), float(x[2]), P)
