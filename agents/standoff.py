"""A robot at its standoff: it holds still while the target stays put, and glances at a tag.

**Holding.** Near the standoff a robot faces its target (or the place it verifies)
and keeps its distance, but the target's estimate moves by its noise (σ 0.05-0.3 m
at 2 m: 1.5-9°) and every correction is a pulse at the wheels' start duty (0.39).
Without a dead band the robot hunted to and fro and left and right (hidden_search
place 16 after 15 s: 70 % of PURSUE decisions a pulse, 22-25 % with the dead bands),
which blurs a real camera and leaves the gyro, sampled at 10 Hz, a jerky rate to
integrate (walnut's heading error there 0.26 rad). :class:`Hold` stops closing in within
``standoff_tolerance`` and moves again only past ``hold_slack``; it stops turning
within ``aligned_bearing`` and turns again only past ``hold_bearing``. A car that
holds still also teaches :mod:`agents.gyro_bias` its gyro's bias.

**Glancing.** A robot holding its standoff from a target faces the target, and in
a corner or before an obstacle no mapped tag may be in its view: its heading then
drifts on the gyro alone and the target's position, measured from the robot,
turns with it (2 m × 0.26 rad = 0.5 m on hidden_search place 16). While the
target is slow, a look away costs little: when the heading's standard deviation
passes ``glance_heading_std`` the robot turns on the spot to the mapped tag within
``glance_tag_distance`` that needs the smallest turn and that nothing known hides
(walls, obstacles, other robots), until the heading is known to half that again
or ``glance_time`` has passed; then it turns back, and it glances again no sooner
than ``glance_interval`` later (:class:`Glance`).

The settings are :class:`~agents.navigation_io.NavParams`'. Deterministic, no IO.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from agents.pose_geometry import wrap_angle


class Hold:
    """Whether a robot near its standoff stays where it is, and stays turned as it is."""

    def __init__(self, *, tolerance: float, slack: float, aligned: float,
                 bearing: float) -> None:
        """As in ``NavParams``: ``standoff_tolerance``, ``hold_slack``, ``aligned_bearing``,
        ``hold_bearing``."""
        self.tolerance, self.slack = tolerance, slack
        self.aligned, self.bearing = aligned, bearing
        self._distance = False
        self._turn = False

    def update(self, err: float, bearing: float) -> tuple[bool, bool]:
        """``(hold the distance, hold the heading)`` for a distance error ``err`` (m) to the
        standoff and the target's ``bearing`` (rad) from the camera's axis."""
        limit = self.slack if self._distance else self.tolerance
        self._distance = abs(err) <= limit
        limit = self.bearing if self._turn else self.aligned
        self._turn = abs(bearing) <= limit
        return self._distance, self._turn

    def release(self) -> None:
        """The robot left its standoff (or turned away): the next hold starts tight."""
        self._distance = self._turn = False


class Glance:
    """When to look away at a tag, and where; see the module docstring."""

    def __init__(self, tags: Sequence[tuple[float, float]], *, heading_std: float,
                 tag_distance: float, duration: float, interval: float) -> None:
        """``tags``: the mapped tags (x, y); the rest as in ``NavParams``:
        ``glance_heading_std``, ``glance_tag_distance``, ``glance_time``,
        ``glance_interval``."""
        self.tags = tuple((float(x), float(y)) for x, y in tags)
        self.heading_std = heading_std
        self.tag_distance = tag_distance
        self.duration = duration
        self.interval = interval
        self._tag: tuple[float, float] | None = None
        self._until = -math.inf
        self._next = -math.inf
        self.glances = 0
        """Glances begun."""

    @property
    def active(self) -> bool:
        return self._tag is not None

    def heading(self, now: float, pose: tuple[float, float, float], heading_std: float | None,
                visible: Callable[[tuple[float, float]], bool]) -> float | None:
        """The heading to turn the camera to now, or None: carry on with the target.

        ``visible(tag)``: whether the robot could see that tag from where it stands."""
        if heading_std is None or not math.isfinite(heading_std):
            self.stop(now)
            return None
        x, y, theta = pose
        if self._tag is not None:
            if heading_std <= 0.5 * self.heading_std or now >= self._until:
                self.stop(now)
                return None
            return math.atan2(self._tag[1] - y, self._tag[0] - x)
        if now < self._next or heading_std <= self.heading_std:
            return None
        best: tuple[float, tuple[float, float]] | None = None
        for tx, ty in self.tags:
            if math.hypot(tx - x, ty - y) > self.tag_distance or not visible((tx, ty)):
                continue
            turn = abs(wrap_angle(math.atan2(ty - y, tx - x) - theta))
            if best is None or turn < best[0]:
                best = (turn, (tx, ty))
        if best is None:
            return None
        self._tag, self._until = best[1], now + self.duration
        self.glances += 1
        return math.atan2(self._tag[1] - y, self._tag[0] - x)

    def stop(self, now: float) -> None:
        """End a glance (if one is on); the next waits ``interval``."""
        if self._tag is not None:
            self._tag = None
            self._next = now + self.interval


__all__ = ["Glance", "Hold"]
