"""The target's motion models: pure functions of time since the world started.

``motion_model(spec).state(t)`` gives the target's pose and velocity at
``t`` seconds; the same ``t`` always gives the same answer (the random walk
draws its legs from its own seed), so a lockstep run and a real-time run of
one arena move the target identically.
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from worlds.arena import Motion, Orbit, RandomWalk, Waypoints


@dataclass(frozen=True)
class TargetState:
    x: float
    y: float
    yaw: float  # heading of travel (kept when the target stops)
    vx: float
    vy: float


class MotionModel(Protocol):
    def state(self, t: float) -> TargetState: ...


class OrbitModel:
    def __init__(self, spec: Orbit) -> None:
        self.spec = spec
        self._omega = (spec.speed / spec.radius) * (1.0 if spec.ccw else -1.0)

    def state(self, t: float) -> TargetState:
        s = self.spec
        theta = s.phase + self._omega * t
        c, n = math.cos(theta), math.sin(theta)
        sign = 1.0 if s.ccw else -1.0
        vx, vy = -sign * s.speed * n, sign * s.speed * c
        return TargetState(
            s.center[0] + s.radius * c, s.center[1] + s.radius * n, math.atan2(vy, vx), vx, vy
        )


class _Polyline:
    """Constant-speed travel along straight legs between points."""

    def __init__(self, points: list[tuple[float, float]], speed: float) -> None:
        self.points = points
        self.speed = speed
        self.starts = [0.0]  # arc length at each point
        for a, b in itertools.pairwise(points):
            self.starts.append(self.starts[-1] + math.dist(a, b))

    @property
    def length(self) -> float:
        return self.starts[-1]

    def at(self, s: float) -> TargetState:
        """The state at arc length ``s`` (clamped to the ends)."""
        s = min(max(s, 0.0), self.length)
        i = min(bisect.bisect_right(self.starts, s) - 1, len(self.points) - 2)
        (x0, y0), (x1, y1) = self.points[i], self.points[i + 1]
        seg = self.starts[i + 1] - self.starts[i]
        f = (s - self.starts[i]) / seg if seg > 0 else 0.0
        yaw = math.atan2(y1 - y0, x1 - x0)
        moving = self.speed > 0 and s < self.length
        vx, vy = (self.speed * math.cos(yaw), self.speed * math.sin(yaw)) if moving else (0.0, 0.0)
        return TargetState(x0 + f * (x1 - x0), y0 + f * (y1 - y0), yaw, vx, vy)


class WaypointModel:
    def __init__(self, spec: Waypoints) -> None:
        points = list(spec.points)
        if spec.loop and points[0] != points[-1]:
            points.append(points[0])
        self.spec = spec
        self.path = _Polyline(points, spec.speed)

    def state(self, t: float) -> TargetState:
        s = self.spec.speed * max(t, 0.0)
        if self.spec.loop and self.path.length > 0:
            s = math.fmod(s, self.path.length)
        return self.path.at(s)


class RandomWalkModel:
    """Straight legs at constant speed to points drawn uniformly inside the bounds."""

    def __init__(self, spec: RandomWalk) -> None:
        self.spec = spec
        self._rng = np.random.default_rng(spec.seed)
        xmin, ymin, xmax, ymax = spec.bounds
        self._points: list[tuple[float, float]] = [((xmin + xmax) / 2, (ymin + ymax) / 2)]
        self._times: list[float] = [0.0]  # arrival time at each point

    def _extend(self, t: float) -> None:
        xmin, ymin, xmax, ymax = self.spec.bounds
        while self._times[-1] <= t:
            x, y = self._rng.uniform(xmin, xmax), self._rng.uniform(ymin, ymax)
            leg = math.dist(self._points[-1], (x, y))
            if leg < 1e-6:
                continue
            self._points.append((float(x), float(y)))
            self._times.append(self._times[-1] + leg / self.spec.speed)

    def state(self, t: float) -> TargetState:
        t = max(t, 0.0)
        self._extend(t)
        i = bisect.bisect_right(self._times, t) - 1
        (x0, y0), (x1, y1) = self._points[i], self._points[i + 1]
        f = (t - self._times[i]) / (self._times[i + 1] - self._times[i])
        yaw = math.atan2(y1 - y0, x1 - x0)
        v = self.spec.speed
        return TargetState(
            x0 + f * (x1 - x0), y0 + f * (y1 - y0), yaw, v * math.cos(yaw), v * math.sin(yaw)
        )


def motion_model(spec: Motion) -> MotionModel:
    if isinstance(spec, Orbit):
        return OrbitModel(spec)
    if isinstance(spec, Waypoints):
        return WaypointModel(spec)
    return RandomWalkModel(spec)
