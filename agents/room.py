"""The room as the agent knows it: walls along its edges and box obstacles, and the distance
from any point to their nearest surface (navigation keeps clear of them)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from agents.checks import finite, require

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Box:
    """An axis-aligned obstacle: centre (cx, cy) and full side lengths (sx, sy), metres."""

    cx: float
    cy: float
    sx: float
    sy: float

    def __post_init__(self) -> None:
        require(finite(self.cx, self.cy, self.sx, self.sy), "box values must be finite")
        require(self.sx > 0.0 and self.sy > 0.0, "box sides must be > 0")

    def closest_point(self, x: float, y: float) -> tuple[float, float]:
        """The point of the box nearest to (x, y) ((x, y) itself when inside)."""
        hx, hy = 0.5 * self.sx, 0.5 * self.sy
        return (
            min(max(x, self.cx - hx), self.cx + hx),
            min(max(y, self.cy - hy), self.cy + hy),
        )


@dataclass(frozen=True)
class Room:
    """The arena: walls along x = 0, x = width, y = 0, y = height, and box obstacles."""

    width: float
    height: float
    obstacles: tuple[Box, ...] = ()

    def __post_init__(self) -> None:
        require(finite(self.width, self.height), "room size must be finite")
        require(self.width > 0.0 and self.height > 0.0, "room size must be > 0")
        object.__setattr__(self, "obstacles", tuple(self.obstacles))
        require(all(isinstance(b, Box) for b in self.obstacles), "obstacles must be Boxes")

    def surface_distance(self, x: FloatArray, y: FloatArray) -> FloatArray:
        """Distance from each point to the nearest wall or obstacle surface (0 inside one)."""
        d = np.minimum(np.minimum(x, self.width - x), np.minimum(y, self.height - y))
        d = np.maximum(d, 0.0)
        for b in self.obstacles:
            dx = np.maximum(np.abs(x - b.cx) - 0.5 * b.sx, 0.0)
            dy = np.maximum(np.abs(y - b.cy) - 0.5 * b.sy, 0.0)
            d = np.minimum(d, np.hypot(dx, dy))
        return d

    def nearby_surfaces(self, x: float, y: float, within: float) -> list[tuple[float, float]]:
        """Nearest points of the walls and obstacles closer than ``within`` to (x, y)."""
        points = [(0.0, y), (self.width, y), (x, 0.0), (x, self.height)]
        points.extend(b.closest_point(x, y) for b in self.obstacles)
        return [p for p in points if math.hypot(p[0] - x, p[1] - y) < within]
