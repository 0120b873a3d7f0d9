"""What one observation deposits in the grid: the camera's footprint (the cells it saw) and
the target's detections (where it was seen, with their covariance)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from agents.belief.lattice import FloatArray

CAMERA_RANGE = 3.0  # m: the default camera's range (agents.config.Sensing) ...
CAMERA_FOV = math.radians(62.0)  # ... and its horizontal field of view


def inscribed_distance(range_: float, fov: float) -> float:
    """How far along a view sector's axis the largest disc inside it has its centre (m):
    the circle inscribed in the sector touches both edges and the far arc, at
    ``range / (1 + sin(fov / 2))`` (1.98 m for 3 m and 62°). A sector of 180° or more is
    taken as 180° (half the range): a camera's is narrower."""
    return range_ / (1.0 + math.sin(min(0.5 * fov, 0.5 * math.pi)))


@dataclass(frozen=True)
class Footprint:
    """A camera's field of view on the floor: a sector seen from (x, y) looking along heading.

    Cells whose centres lie within ``min_range <= r <= range`` and within ``fov / 2``
    of the heading are observed.
    """

    x: float
    y: float
    heading: float
    range: float
    fov: float
    min_range: float = 0.0

    def __post_init__(self) -> None:
        values = (self.x, self.y, self.heading, self.range, self.fov, self.min_range)
        if not all(math.isfinite(v) for v in values):
            raise ValueError("footprint values must be finite")
        if not (self.range > 0.0 and 0.0 <= self.min_range < self.range):
            raise ValueError("footprint needs 0 <= min_range < range")
        if not 0.0 < self.fov <= 2.0 * math.pi:
            raise ValueError("footprint fov must be in (0, 2π]")

    def bounds(self) -> tuple[float, float, float, float]:
        """Axis-aligned bounding box (xmin, xmax, ymin, ymax) of the sector."""
        x, y, r = self.x, self.y, self.range
        if self.fov >= math.pi:
            # A wide sector: the whole disc's box is tight enough.
            return x - r, x + r, y - r, y + r
        half = 0.5 * self.fov
        a1, a2 = self.heading - half, self.heading + half
        x1, y1 = x + r * math.cos(a1), y + r * math.sin(a1)
        x2, y2 = x + r * math.cos(a2), y + r * math.sin(a2)
        xmin, xmax = min(x, x1, x2), max(x, x1, x2)
        ymin, ymax = min(y, y1, y2), max(y, y1, y2)
        # The arc reaches the disc's extreme along an axis if that direction is inside.
        two_pi = 2.0 * math.pi
        if abs(math.remainder(self.heading, two_pi)) <= half:
            xmax = x + r
        if abs(math.remainder(self.heading - math.pi, two_pi)) <= half:
            xmin = x - r
        if abs(math.remainder(self.heading - 0.5 * math.pi, two_pi)) <= half:
            ymax = y + r
        if abs(math.remainder(self.heading + 0.5 * math.pi, two_pi)) <= half:
            ymin = y - r
        return xmin, xmax, ymin, ymax

    def sees(self, xs: FloatArray, ys: FloatArray) -> npt.NDArray[np.bool_]:
        """Mask, shaped (len(ys), len(xs)), of the cell centres (xs[c], ys[r]) this footprint sees.

        The sector is the disc ``r <= range`` (minus ``r < min_range``) intersected with
        the wedge between the edge directions ``e1 = heading - fov/2`` and
        ``e2 = heading + fov/2``: ``e1 × d >= 0`` and ``d × e2 >= 0`` for a wedge of at
        most π; a wider one is the disc minus the complementary wedge.
        """
        dx = xs - self.x
        dy = ys - self.y
        r = self.range
        seen = np.less_equal.outer(dy * dy, r * r - dx * dx)
        if self.min_range > 0.0:
            m = self.min_range
            seen &= np.greater_equal.outer(dy * dy, m * m - dx * dx)
        fov = self.fov
        if fov >= 2.0 * math.pi:
            return seen
        half = 0.5 * fov
        if fov <= math.pi:
            a1, a2 = self.heading - half, self.heading + half
        else:
            # the complementary wedge, excluded below
            a1, a2 = self.heading + half, self.heading - half + 2.0 * math.pi
        wedge = np.greater_equal.outer(dy * math.cos(a1), dx * math.sin(a1))
        wedge &= np.less_equal.outer(dy * math.cos(a2), dx * math.sin(a2))
        if fov <= math.pi:
            seen &= wedge
        else:
            seen &= ~wedge
        return seen


@dataclass(frozen=True, eq=False)
class Detection:
    """A target detection in the world frame: position and its 2×2 covariance (m²)."""

    x: float
    y: float
    cov: FloatArray
    cov_xx: float = field(init=False, repr=False)
    cov_xy: float = field(init=False, repr=False)
    cov_yy: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        given = np.asarray(self.cov, dtype=np.float64)
        if given.shape != (2, 2):
            raise ValueError("detection covariance must be a 2×2 matrix")
        (sxx, sxy), (syx, syy) = given.tolist()
        sxy = 0.5 * (sxy + syx)
        finite = all(math.isfinite(v) for v in (self.x, self.y, sxx, sxy, syy))
        if not finite:
            raise ValueError("detection position and covariance must be finite")
        if not (sxx > 0.0 and sxx * syy - sxy * sxy > 0.0):
            raise ValueError("detection covariance must be positive definite")
        cov = np.array([[sxx, sxy], [sxy, syy]])
        cov.flags.writeable = False
        object.__setattr__(self, "cov", cov)
        object.__setattr__(self, "cov_xx", sxx)
        object.__setattr__(self, "cov_xy", sxy)
        object.__setattr__(self, "cov_yy", syy)
