"""A lost robot's way back to its tags: full turns on the spot and creep legs to tag viewpoints.

The NO_POSE part of the :class:`~agents.navigation.Navigator`'s policy. Without a pose the
robot first turns on the spot at ``search_turn_rate``, so the camera sweeps for tags. A robot
that had a pose and is still lost one full turn (2π / ``search_turn_rate`` +
``relocate_turn_margin``) after it lost it *creeps* (if ``creep_speed`` > 0), and at once
where its estimate is farther than ``sight`` (the camera's range and
``relocate_sight_margin``) from every mapped tag (a turn there cannot see one: the middle of
a large room): at no more than
``creep_speed``, steered and braked by the navigator like any drive (walls, known obstacles,
other robots' last reported positions) but on the estimate the core dead-reckons from the
lost pose, towards a *tag viewpoint*: the point ``relocate_view_distance`` from a mapped tag
towards the room's centre, where the camera can see that tag and its neighbours. The nearest
viewpoint not yet reached in this loss is chosen; a leg ends there (within
``relocate_arrive_radius``) or after ``creep_time``, and a full turn follows (none where no
tag is in sight); then the next leg. Without an estimate (no pose ever) or tags the robot
only turns.

:class:`Relocation` holds one loss's state and decides, at each decision without a pose,
whether to turn on the spot or which viewpoint to creep to; the settings are
:class:`~agents.navigation_io.NavParams`'. Deterministic: no random numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from agents.checks import finite, require
from agents.room import Room


@dataclass
class _Loss:
    """A lost robot's search for tags: a full turn on the spot, then creep legs and turns."""

    phase_start: float
    """When the current turn or creep leg began."""
    creeping: bool = False
    viewpoint: int | None = None
    """The index of the tag whose viewpoint the current leg heads for."""
    reached: set[int] = field(default_factory=set)
    """The viewpoints reached in this loss (all reached: they are all tried again)."""


class Relocation:
    """Turn or creep, and where to, while the robot is lost; see the module docstring."""

    def __init__(
        self,
        tags: Sequence[tuple[float, float]],
        *,
        turn_rate: float,
        turn_margin: float,
        creep_speed: float,
        creep_time: float,
        view_distance: float,
        arrive_radius: float,
        sight: float = math.inf,
    ) -> None:
        """``tags``: where the mapped tags are (x, y); the rest as in ``NavParams``:
        ``search_turn_rate``, ``relocate_turn_margin``, ``creep_speed``, ``creep_time``,
        ``relocate_view_distance``, ``relocate_arrive_radius``; ``sight``: how far from the
        estimate a tag may be seen (the camera's range and ``relocate_sight_margin``)."""
        self.tags = tuple((float(x), float(y)) for x, y in tags)
        require(all(finite(*t) for t in self.tags), "tag positions must be finite")
        self.full_turn = (math.tau / turn_rate if turn_rate > 0.0 else math.inf) + turn_margin
        """Seconds of one full turn on the spot, and the margin beyond it."""
        self.creeps = creep_speed > 0.0 and bool(self.tags)
        self.creep_time = creep_time
        self.view_distance = view_distance
        self.arrive_radius = arrive_radius
        self.sight = sight
        self._loss: _Loss | None = None
        self._viewpoints: dict[Room, tuple[tuple[float, float], ...]] = {}

    def found(self) -> None:
        """A pose again: the next loss starts over with a full turn."""
        self._loss = None

    def goal(self, now: float, x: float, y: float, room: Room) -> tuple[float, float] | None:
        """Lost at ``now``, at (x, y) on the estimate: the viewpoint to creep to, or None to
        turn on the spot."""
        r = self._loss
        if r is None:
            r = self._loss = _Loss(now)
        points = self.viewpoints(room)
        if r.creeping and r.viewpoint is not None:  # the leg ends there, or after creep_time
            if math.hypot(points[r.viewpoint][0] - x, points[r.viewpoint][1] - y) \
                    <= self.arrive_radius:
                r.reached.add(r.viewpoint)
                r.creeping, r.phase_start = False, now
            elif now - r.phase_start >= self.creep_time:
                r.creeping, r.phase_start = False, now
        if not r.creeping:
            if not self.creeps or (now - r.phase_start < self.full_turn
                                   and self.tag_in_sight(x, y)):
                return None
            r.creeping, r.phase_start, r.viewpoint = True, now, None
        if r.viewpoint is None:
            away = [math.hypot(px - x, py - y) for px, py in points]
            for k, d in enumerate(away):
                if d <= self.arrive_radius:
                    r.reached.add(k)
            if len(r.reached) == len(points):
                r.reached.clear()
            r.viewpoint = min(
                (k for k in range(len(points)) if k not in r.reached), key=lambda k: away[k]
            )
        return points[r.viewpoint]

    def tag_in_sight(self, x: float, y: float) -> bool:
        """Whether a mapped tag is within ``sight`` of (x, y): a turn there may see one."""
        return any(math.hypot(tx - x, ty - y) <= self.sight for tx, ty in self.tags)

    def viewpoints(self, room: Room) -> tuple[tuple[float, float], ...]:
        """Each tag's viewpoint: ``view_distance`` from it towards the room's centre
        (computed once per room: they depend on nothing else)."""
        points = self._viewpoints.get(room)
        if points is None:
            cx, cy = 0.5 * room.width, 0.5 * room.height
            found = []
            for tx, ty in self.tags:
                d = math.hypot(cx - tx, cy - ty)
                s = min(self.view_distance, d) / d if d > 1e-9 else 0.0
                found.append((tx + s * (cx - tx), ty + s * (cy - ty)))
            points = self._viewpoints[room] = tuple(found)
        return points
