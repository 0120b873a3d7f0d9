"""What a prediction of the target may not do: leave the room, enter an obstacle, outrun the
declared maximum speed.

:class:`FreeSpace` is where the target's centre can be: the room shrunk by the
target's half-width, minus every known obstacle grown by it. :func:`constrain`
applies the limits to a predicted estimate ``(x, P)`` (state ``[x, y, vx, vy, ...]``):

- a mean speed above ``max_speed`` is scaled down to it;
- a velocity variance above ``max_speed²`` in any direction is scaled down to
  it (``P ← D P D`` on the velocity rows and columns, which keeps ``P``
  positive semi-definite): a target that cannot move faster than ``v_max``
  has no velocity spread larger than that;
- a mean position outside the free space is moved to its nearest point, and
  the part of the mean velocity that points into the surface it met is
  removed.

Every change ``δ`` of the mean is added to the covariance as ``δ δᵀ`` (the
second moment of the error about the new mean covers the old one): the
estimate stops and widens rather than flies, and it never claims more
certainty than the unconstrained prediction held about where it moved from.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from agents.room import Room

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Rect:
    """An axis-aligned box: ``[x0, x1] × [y0, y1]``."""

    x0: float
    y0: float
    x1: float
    y1: float

    def contains(self, x: float, y: float) -> bool:
        return self.x0 < x < self.x1 and self.y0 < y < self.y1

    def segment_hits(self, ax: float, ay: float, bx: float, by: float) -> bool:
        """Whether the segment from a to b meets the box (slab test)."""
        t0, t1 = 0.0, 1.0
        for a, d, lo, hi in ((ax, bx - ax, self.x0, self.x1), (ay, by - ay, self.y0, self.y1)):
            if abs(d) < 1e-15:
                if a < lo or a > hi:
                    return False
                continue
            u, v = (lo - a) / d, (hi - a) / d
            if u > v:
                u, v = v, u
            t0, t1 = max(t0, u), min(t1, v)
            if t0 > t1:
                return False
        return True


class FreeSpace:
    """The room ``[0, width] × [0, height]`` and its box obstacles, for a target of
    half-width ``margin``: where the target's centre can be."""

    def __init__(
        self,
        width: float,
        height: float,
        boxes: Iterable[tuple[float, float, float, float]] = (),
        margin: float = 0.0,
    ) -> None:
        if not (math.isfinite(width) and math.isfinite(height) and width > 0 and height > 0):
            raise ValueError("room size must be finite and > 0")
        if not (math.isfinite(margin) and 0.0 <= margin < min(width, height) / 2):
            raise ValueError("margin must be in [0, half the room's smaller side)")
        self.width, self.height, self.margin = float(width), float(height), float(margin)
        self.inner = Rect(margin, margin, width - margin, height - margin)
        self.obstacles = tuple(
            Rect(cx - sx / 2, cy - sy / 2, cx + sx / 2, cy + sy / 2) for cx, cy, sx, sy in boxes
        )
        self.grown = tuple(
            Rect(r.x0 - margin, r.y0 - margin, r.x1 + margin, r.y1 + margin)
            for r in self.obstacles
        )

    @classmethod
    def of_room(cls, room: Room, margin: float = 0.0) -> FreeSpace:
        """The room's walls and its box obstacles."""
        boxes = [(b.cx, b.cy, b.sx, b.sy) for b in room.obstacles]
        return cls(room.width, room.height, boxes, margin)

    @property
    def uninformed_spread(self) -> float:
        """m: the standard deviation of a position anywhere across the room's shorter free side
        (uniform: side / √12). A track whose position spread exceeds it says less than the
        room itself does."""
        r = self.inner
        return min(r.x1 - r.x0, r.y1 - r.y0) / math.sqrt(12.0)

    def contains(self, x: float, y: float) -> bool:
        r = self.inner
        if not (r.x0 <= x <= r.x1 and r.y0 <= y <= r.y1):
            return False
        return not any(b.contains(x, y) for b in self.grown)

    def project(self, x: float, y: float) -> tuple[float, float, list[tuple[float, float]]]:
        """The nearest free point (near: a few alternating passes) and the outward normals of
        the surfaces it was pushed off."""
        normals: list[tuple[float, float]] = []
        r = self.inner
        for _ in range(4):
            moved = False
            if x < r.x0:
                x, moved = r.x0, True
                normals.append((1.0, 0.0))
            elif x > r.x1:
                x, moved = r.x1, True
                normals.append((-1.0, 0.0))
            if y < r.y0:
                y, moved = r.y0, True
                normals.append((0.0, 1.0))
            elif y > r.y1:
                y, moved = r.y1, True
                normals.append((0.0, -1.0))
            for b in self.grown:
                if not b.contains(x, y):
                    continue
                # Out through the nearest face.
                faces = ((x - b.x0, b.x0, None, (-1.0, 0.0)), (b.x1 - x, b.x1, None, (1.0, 0.0)),
                         (y - b.y0, None, b.y0, (0.0, -1.0)), (b.y1 - y, None, b.y1, (0.0, 1.0)))
                _, fx, fy, n = min(faces, key=lambda f: f[0])
                if fx is not None:
                    x = fx
                if fy is not None:
                    y = fy
                normals.append(n)
                moved = True
            if not moved:
                break
        return x, y, normals

    def line_of_sight(self, ax: float, ay: float, bx: float, by: float) -> bool:
        """No obstacle (its own box, of any height) crosses the segment from a to b."""
        return not any(o.segment_hits(ax, ay, bx, by) for o in self.obstacles)


def constrain(
    x: FloatArray, P: FloatArray, space: FreeSpace | None, max_speed: float | None
) -> tuple[FloatArray, FloatArray, bool]:
    """The estimate within the limits (see the module docstring); ``changed`` says if it moved."""
    x = np.array(x, dtype=np.float64)
    P = np.array(P, dtype=np.float64)
    delta: FloatArray | None = None  # the change of the mean, made when there is one
    changed = False
    if max_speed is not None:
        speed = math.hypot(x[2], x[3])
        if speed > max_speed:
            delta = np.zeros(x.shape)
            scaled = x[2:4] * (max_speed / speed)
            delta[2:4] += x[2:4] - scaled
            x[2:4] = scaled
            changed = True
    if space is not None:
        px, py, normals = space.project(float(x[0]), float(x[1]))
        if normals:
            if delta is None:
                delta = np.zeros(x.shape)
            delta[0] += x[0] - px
            delta[1] += x[1] - py
            x[0], x[1] = px, py
            for nx, ny in normals:
                into = x[2] * nx + x[3] * ny
                if into < 0.0:  # moving into the surface it stands on
                    delta[2] += into * nx
                    delta[3] += into * ny
                    x[2] -= into * nx
                    x[3] -= into * ny
            changed = True
    if delta is not None and delta.any():
        P = P + delta[:, None] * delta  # the outer product
    if max_speed is not None:
        a, b, d = P[2, 2], P[2, 3], P[3, 3]
        lam = 0.5 * (a + d) + math.sqrt(0.25 * (a - d) ** 2 + b * b)
        if lam > max_speed * max_speed:
            s = max_speed / math.sqrt(lam)
            P[2:4, :] *= s
            P[:, 2:4] *= s
            changed = True
    return x, 0.5 * (P + P.T), changed


__all__ = ["FreeSpace", "Rect", "constrain"]
