"""Negative evidence: what the agent's own camera looked at recently, and whether it saw the
target there.

:class:`ViewHistory` keeps the last ``horizon`` seconds of the agent's own
views (a :class:`~agents.belief.deposit.Footprint` with its time, a margin
for the robot's pose uncertainty, and where the target was seen in that
frame, if it was). :meth:`ViewHistory.test` confronts a claim — "the target
was at ``p`` (covariance ``P``) at time ``t``" — with them:

- a view *refutes* the claim when the whole disc where the target could have
  been at the view's time lies well inside what the camera saw, in line of
  sight past every known obstacle and every other robot, and the frame held no
  detection inside that disc (nothing at all, or the one target seen elsewhere). The disc's
  radius is ``sqrt(gate · λmax(P) + floor²) + max_speed·|t_view − t| +
  clock_uncertainty·max_speed + pose margin``: where the claim says the target
  is (at the gate's confidence) and how far it could have moved since;
- a view *supports* the claim when it saw the target inside that disc.

A view that only partly covers the disc says nothing (a target at its edge
might simply have been missed), and so does an uncertain claim: its disc
never fits in a view.

Other robots hide what is behind them: a camera behind a partner sees its back, and that
is no evidence that the place beyond is empty (it would refute an honest peer who
stands between this robot and the target it reports). Each view keeps where the other
robots were believed to be at its time, as discs of ``robot_radius``; a disc of the
claim any of them overlaps, as seen from the camera, is not covered. A peer's position is
its own word, so a liar can shield a place by claiming to stand in front of the camera:
it buys itself no refutation by views, not a pass (the witness still judges it).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from agents.belief.constraints import FreeSpace
from agents.belief.deposit import Footprint

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class View:
    """One frame of the own camera: what it covered at ``t`` and what it saw there."""

    t: float
    footprint: Footprint
    margin: float  # m: the footprint's own position uncertainty (the robot's pose error)
    heading_margin: float  # rad: the same for its heading (moves far points more)
    target: tuple[float, float] | None  # where the target was seen in this frame, if it was
    robots: tuple[tuple[float, float], ...] = ()  # where the other robots were believed to be

    def covers(self, x: float, y: float, radius: float, space: FreeSpace | None,
               robot_radius: float = 0.0) -> bool:
        """The disc of ``radius`` around (x, y) lies inside the sector, in line of sight
        past every obstacle and every other robot (discs of ``robot_radius``)."""
        f = self.footprint
        dx, dy = x - f.x, y - f.y
        d = math.hypot(dx, dy)
        r = radius + self.margin + d * self.heading_margin
        if not (d - r >= f.min_range and d + r <= f.range and d > r):
            return False
        bearing = math.atan2(dy, dx)
        half = math.asin(min(1.0, r / d))
        off = abs(math.remainder(bearing - f.heading, 2.0 * math.pi))
        if off + half > 0.5 * f.fov:
            return False
        if robot_radius > 0.0 and _hidden_by_robots((f.x, f.y), bearing, half, d + r,
                                                    self.robots, radius=robot_radius):
            return False
        if space is not None and space.obstacles:
            # The centre and the two sides of the disc as seen from the camera.
            ux, uy = -dy / d * r, dx / d * r
            for px, py in ((x, y), (x + ux, y + uy), (x - ux, y - uy)):
                if not space.line_of_sight(f.x, f.y, px, py):
                    return False
        return True


def _hidden_by_robots(camera: tuple[float, float], bearing: float, half: float, far: float,
                      robots: Sequence[tuple[float, float]], *, radius: float) -> bool:
    """Whether a robot (a disc of ``radius``) nearer than ``far`` overlaps the wedge of
    half-angle ``half`` about ``bearing`` seen from ``camera``."""
    cx, cy = camera
    for ox, oy in robots:
        d = math.hypot(ox - cx, oy - cy)
        if d - radius >= far:
            continue  # beyond the disc's far edge
        if d <= radius:
            return True  # the camera inside a robot's disc: its position is wrong, or ours
        sep = abs(math.remainder(math.atan2(oy - cy, ox - cx) - bearing, 2.0 * math.pi))
        if sep < half + math.asin(radius / d):
            return True
    return False


@dataclass(frozen=True)
class ViewEvidence:
    """What the kept views say of one claim."""

    refuting: int  # views that covered the claim's disc and saw no target in it
    supporting: int  # views that saw the target inside the disc
    looked: int  # views close enough in time to be asked

    def refutes(self, min_views: int) -> bool:
        return self.supporting == 0 and self.refuting >= min_views


class ViewHistory:
    """The last ``horizon`` seconds of own views (at most ``max_views``), oldest first."""

    def __init__(
        self,
        horizon: float,
        max_views: int,
        *,
        max_speed: float,
        space: FreeSpace | None = None,
        robot_radius: float = 0.0,
    ) -> None:
        if not (math.isfinite(horizon) and horizon > 0.0 and max_views >= 1):
            raise ValueError("horizon must be > 0 and max_views >= 1")
        self.horizon = horizon
        self.max_speed = max_speed
        self.space = space
        self.robot_radius = robot_radius
        self._views: deque[View] = deque(maxlen=max_views)

    def __len__(self) -> int:
        return len(self._views)

    def add(self, view: View) -> None:
        """A new frame (frames arrive in capture order; an older one than the newest is kept
        in its place)."""
        if self._views and view.t < self._views[-1].t:
            kept = sorted([*self._views, view], key=lambda v: v.t)
            self._views.clear()
            self._views.extend(kept[-(self._views.maxlen or len(kept)):])
        else:
            self._views.append(view)
        newest = self._views[-1].t
        while self._views and self._views[0].t < newest - self.horizon:
            self._views.popleft()

    def test(
        self,
        p: npt.ArrayLike,
        P: npt.ArrayLike,
        t: float,
        *,
        window: float,
        gate: float,
        floor: float,
        clock_uncertainty: float = 0.0,
        detection_gate: float = 0.0,
    ) -> ViewEvidence:
        """Confront "the target was at ``p`` (2×2 covariance ``P``) at ``t``" with the views
        within ``window`` seconds of ``t`` (see the module docstring).

        ``detection_gate`` widens the disc in which a seen target counts as support.
        """
        px, py = np.asarray(p, dtype=np.float64)[:2].tolist()
        return self.test_points([(px, py)], P, t, window=window, gate=gate, floor=floor,
                                clock_uncertainty=clock_uncertainty,
                                detection_gate=detection_gate)[0]

    def test_points(
        self,
        points: Sequence[tuple[float, float]],
        P: npt.ArrayLike,
        t: float,
        *,
        window: float,
        gate: float,
        floor: float,
        clock_uncertainty: float = 0.0,
        detection_gate: float = 0.0,
    ) -> list[ViewEvidence]:
        """:meth:`test` for several claims that share all but their position: the views in
        the window, and each one's disc radius, are found once for all of them."""
        P_ = np.asarray(P, dtype=np.float64)[:2, :2]
        a, b, d = P_[0, 0], 0.5 * (P_[0, 1] + P_[1, 0]), P_[1, 1]
        lam = 0.5 * (a + d) + math.sqrt(0.25 * (a - d) ** 2 + b * b)
        if not math.isfinite(lam):
            return [ViewEvidence(0, 0, 0) for _ in points]
        spread = math.sqrt(gate * max(lam, 0.0) + floor * floor)
        near: list[tuple[View, float]] = []  # the views asked, with the claim's disc at each
        for v in self._views:
            dt = abs(v.t - t)
            if not dt > window:
                near.append((v, spread + self.max_speed * (dt + clock_uncertainty)))
        out: list[ViewEvidence] = []
        for px, py in points:
            if not (math.isfinite(px) and math.isfinite(py)):
                out.append(ViewEvidence(0, 0, 0))
                continue
            refuting = supporting = 0
            for v, radius in near:
                if v.target is not None and math.hypot(v.target[0] - px, v.target[1] - py) <= (
                    radius + detection_gate
                ):
                    supporting += 1
                elif v.covers(px, py, radius, self.space, self.robot_radius):
                    refuting += 1
            out.append(ViewEvidence(refuting, supporting, len(near)))
        return out

__all__ = ["View", "ViewEvidence", "ViewHistory"]
