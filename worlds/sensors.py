"""Synthetic sensors: the gyro and range-bearing observations of tags and the target.

Pure geometry and noise; line of sight is asked of a ``RayCaster`` (in the
world, PyBullet's ``rayTestBatch``) so this module needs no simulator.

An observation travels as the telemetry's ``sim`` object,
:class:`protocol.mz01.simobs.SimObservation` (its contract: MZ01.md). Range is
the horizontal distance from the camera's optical centre to the tag centre
(the target: the axis of its column); bearing is measured in the car frame,
counter-clockwise positive from the forward axis.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from protocol.mz01 import simobs
from worlds.arena import Sensing

Point3 = tuple[float, float, float]
# (ray starts, ray ends) -> id of the first body each ray hits, -1 for none
RayCaster = Callable[[Sequence[Point3], Sequence[Point3]], list[int]]

LOS_STANDOFF = 0.01  # wall-tag rays end this far in front of the tag


GYRO_READ_PERIOD = 1.0 / 150  # s: how often the car's firmware reads its gyro


class Gyro:
    """A yaw-rate gyro: truth times (1 + a per-boot scale error) plus a constant per-boot
    bias plus white noise. The scale error is the MPU-6050's sensitivity tolerance (±3 %
    at 25 °C, its datasheet's "initial calibration tolerance"): a turn of 2π reads
    2π (1 + scale).

    Its angle (telemetry's ``gyro_angle``) is what the car's firmware integrates from
    readings every :data:`GYRO_READ_PERIOD`: the true heading change since the first
    angle asked, plus the bias times the time since, plus the white noise's integral (a
    random walk of variance noise²·period per second), wrapped to (-pi, pi]. The
    firmware's own integration error (a straight line between readings) is not modelled:
    the SITL car runs the real integration.
    """

    def __init__(self, noise: float, bias_std: float, rng: np.random.Generator,
                 scale_std: float = 0.0) -> None:
        self.noise = noise
        self.rng = rng
        self.bias = float(rng.normal(0.0, bias_std)) if bias_std > 0 else 0.0
        self.scale = float(rng.normal(0.0, scale_std)) if scale_std > 0 else 0.0
        self._start: tuple[float, float] | None = None  # (true yaw, time) of the first angle
        self._last_yaw = 0.0
        self._turned = 0.0  # the true heading change since the first angle, unwrapped
        self._walk = 0.0
        self._walk_t = 0.0

    def read(self, true_rate: float) -> float:
        white = float(self.rng.normal(0.0, self.noise)) if self.noise > 0 else 0.0
        return (1.0 + self.scale) * true_rate + self.bias + white

    def angle(self, true_yaw: float, t: float) -> float:
        """The integrated angle at time ``t`` (s), the car's true yaw being ``true_yaw``."""
        if self._start is None:
            self._start, self._walk_t, self._last_yaw = (true_yaw, t), t, true_yaw
        # Asked at every telemetry (10 Hz or more): a turn between two asks is under pi.
        self._turned += wrap_angle(true_yaw - self._last_yaw)
        self._last_yaw = true_yaw
        if self.noise > 0 and t > self._walk_t:
            var = self.noise * self.noise * GYRO_READ_PERIOD * (t - self._walk_t)
            self._walk += float(self.rng.normal(0.0, math.sqrt(var)))
        self._walk_t = max(self._walk_t, t)
        yaw0, t0 = self._start
        turned = true_yaw - yaw0 if self.scale == 0.0 else (1.0 + self.scale) * self._turned
        return wrap_angle(turned + self.bias * (t - t0) + self._walk)


@dataclass(frozen=True)
class Landmark:
    """Something a camera can detect: a tag id at a point, facing ``normal_yaw`` (None: any)."""

    tag_id: int
    x: float
    y: float
    z: float
    normal_yaw: float | None
    body: int  # the body a ray may hit at the landmark itself (-1: none)


@dataclass(frozen=True)
class Sighting:
    tag_id: int
    range: float  # true horizontal range, m
    bearing: float  # true bearing, rad


def wrap_angle(a: float) -> float:
    """``a`` wrapped to (-pi, pi]."""
    w = math.fmod(a + math.pi, 2 * math.pi)
    if w <= 0:
        w += 2 * math.pi
    return w - math.pi


def _candidate(eye: Point3, yaw: float, mark: Landmark, sensing: Sensing) -> Sighting | None:
    dx, dy = mark.x - eye[0], mark.y - eye[1]
    rng = math.hypot(dx, dy)
    if rng > sensing.range or rng < 1e-6:
        return None
    bearing = wrap_angle(math.atan2(dy, dx) - yaw)
    if abs(bearing) > math.radians(sensing.hfov_deg) / 2:
        return None
    if mark.normal_yaw is not None:
        # angle between the tag's normal and the direction from the tag to the camera
        incidence = abs(wrap_angle(math.atan2(-dy, -dx) - mark.normal_yaw))
        if incidence > math.radians(sensing.max_incidence_deg):
            return None
    return Sighting(mark.tag_id, rng, bearing)


def visible(
    eye: Point3, yaw: float, marks: Sequence[Landmark], sensing: Sensing, cast: RayCaster
) -> list[Sighting]:
    """The landmarks within range, field of view, incidence and line of sight."""
    chosen: list[tuple[Landmark, Sighting]] = []
    for mark in marks:
        sighting = _candidate(eye, yaw, mark, sensing)
        if sighting is not None:
            chosen.append((mark, sighting))
    if not chosen:
        return []
    ends: list[Point3] = []
    for mark, _ in chosen:
        if mark.normal_yaw is None:
            ends.append((mark.x, mark.y, mark.z))
        else:
            ends.append(
                (
                    mark.x + LOS_STANDOFF * math.cos(mark.normal_yaw),
                    mark.y + LOS_STANDOFF * math.sin(mark.normal_yaw),
                    mark.z,
                )
            )
    hits = cast([eye] * len(ends), ends)
    return [s for (mark, s), hit in zip(chosen, hits, strict=True) if hit in (-1, mark.body)]


def _noisy(s: Sighting, sensing: Sensing, rng: np.random.Generator) -> simobs.Sighting:
    r = s.range + (float(rng.normal(0.0, sensing.range_noise)) if sensing.range_noise else 0.0)
    b = s.bearing + (
        float(rng.normal(0.0, sensing.bearing_noise)) if sensing.bearing_noise else 0.0
    )
    return s.tag_id, round(max(r, 0.0), 5), round(wrap_angle(b), 5)


def observation(
    obs_ms: int,
    eye: Point3,
    yaw: float,
    *,
    tags: Sequence[Landmark],
    target: Landmark | None,
    sensing: Sensing,
    cast: RayCaster,
    rng: np.random.Generator,
) -> dict[str, Any]:
    """One synthetic observation (the telemetry ``sim`` object) from a camera pose."""
    marks = [*tags, target] if target is not None else list(tags)
    seen = visible(eye, yaw, marks, sensing, cast)
    target_id = target.tag_id if target is not None else None
    wall = tuple(_noisy(s, sensing, rng) for s in seen if s.tag_id != target_id)
    hit = [_noisy(s, sensing, rng) for s in seen if s.tag_id == target_id]
    return simobs.SimObservation(
        obs_ms, wall, hit[0] if hit else None, sensing.range_noise, sensing.bearing_noise
    ).to_json()
