"""The navigator tests' world: a 5 m room empty or with boxes, a belief over the lattice
around it with windows cut from it and a camera that searches it, and the true car (10 %
slower than modelled) that drives a decision's duties."""

from __future__ import annotations

import math

import numpy as np

from agents.drive_model import DriveModel
from agents.navigation import BeliefView, NavDecision
from agents.room import Box, Room

CELL = 0.1
EMPTY_ROOM = Room(5.0, 5.0)
BOX_ROOM = Room(
    5.0, 5.0, (Box(1.5, 3.5, 0.6, 0.4), Box(3.5, 1.5, 0.5, 0.8), Box(2.6, 2.6, 0.3, 0.3))
)
NOMINAL = DriveModel()
TRUTH = DriveModel(max_wheel_speed=0.9 * NOMINAL.max_wheel_speed, deadband=NOMINAL.deadband)


class World:
    """A global belief over the lattice around a 5 m room, and windows cut from it."""

    OFFSET = 40  # global index of lattice cell 0 in the arrays

    def __init__(self, mu: float = 0.0, var: float = 1.0) -> None:
        n = 150
        self.centres: np.ndarray = (np.arange(n) - self.OFFSET + 0.5) * CELL
        self.gx, self.gy = np.meshgrid(self.centres, self.centres)
        self.mu = np.full((n, n), mu)
        self.var = np.full((n, n), var)

    def window(self, x: float, y: float, size: int = 64) -> BeliefView:
        ix = math.floor(x / CELL) - size // 2 + self.OFFSET
        iy = math.floor(y / CELL) - size // 2 + self.OFFSET
        return BeliefView(
            self.mu[iy : iy + size, ix : ix + size].copy(),
            self.var[iy : iy + size, ix : ix + size].copy(),
            self.centres[ix : ix + size].copy(),
            self.centres[iy : iy + size].copy(),
            1.0,
        )

    def observe(self, x: float, y: float, th: float) -> None:
        """The camera's sector (62 degrees, 2 m) is searched: var falls there, rises elsewhere."""
        d = np.hypot(self.gx - x, self.gy - y)
        b = np.abs(
            np.remainder(np.arctan2(self.gy - y, self.gx - x) - th + np.pi, 2 * np.pi) - np.pi
        )
        seen = (d < 2.0) & (b < math.radians(31))
        self.var[seen] *= 0.7
        np.minimum(self.var + 0.002, 1.0, out=self.var)
        self.mu *= 0.99


def step(
    pose: tuple[float, float, float], d: NavDecision, dt: float = 0.1
) -> tuple[float, float, float]:
    """Drive the duties for ``dt`` on the (10 % slower than modelled) true car."""
    x, y, th = pose
    v, w = TRUTH.body_velocity(d.duty_left, d.duty_right)
    n = 5
    h = dt / n
    for _ in range(n):
        thm = th + 0.5 * w * h
        x, y, th = (
            x + v * h * math.cos(thm),
            y + v * h * math.sin(thm),
            math.remainder(th + w * h, math.tau),
        )
    return x, y, th


def clearance(room: Room, x: float, y: float, radius: float) -> float:
    return float(room.surface_distance(np.array(x), np.array(y))) - radius
