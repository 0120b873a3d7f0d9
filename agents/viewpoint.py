"""Where to look at a place from when another robot stands in the way.

Two robots that verify the same claim come at it from the same side, and the one behind
looks at its partner's back: its camera covers the place but cannot see it, and the
partner's robot is no evidence of anything. :func:`free_viewpoint` keeps the robot's own
line to the place while no other robot stands on it, and otherwise turns about the place,
in steps of ``step``, to the nearest viewpoint at the standoff from which no robot, wall or
obstacle blocks the view. Pure geometry on plain numbers; deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from agents.belief.occlusion import hidden_by_discs
from agents.room import Room

Point = tuple[float, float]


def view_blocked(view: Point, place: Point, others: Sequence[Point], body: float) -> bool:
    """Whether another robot stands within ``body`` of the line of sight from ``view`` to
    ``place`` (or on ``view`` itself)."""
    return bool(_blocked(view, [place], others, body)[0])


def _blocked(camera: Point, points: Sequence[Point], others: Sequence[Point],
             body: float) -> npt.NDArray[np.bool_]:
    """:func:`view_blocked` of each of ``points`` seen from ``camera`` (the test is
    symmetric: a place seen from many viewpoints is many viewpoints seen from the place)."""
    px = np.array([q[0] for q in points], dtype=np.float64)
    py = np.array([q[1] for q in points], dtype=np.float64)
    return hidden_by_discs(camera[0], camera[1], px, py, others, radius=body)


def _clear_of_room(view: Point, place: Point, room: Room, keep_out: float) -> bool:
    """``view`` keeps ``keep_out`` from walls and obstacles and sees ``place`` past them."""
    if float(room.surface_distance(np.array([view[0]]), np.array([view[1]]))[0]) < keep_out:
        return False
    return line_clear(view, place, room)


def line_clear(view: Point, place: Point, room: Room) -> bool:
    """No wall or obstacle on the line from ``view`` to within 5 cm of ``place``."""
    d = math.hypot(place[0] - view[0], place[1] - view[1])
    s = np.arange(0.05, d - 0.05, 0.05) / max(d, 1e-9)
    if s.size == 0:
        return True
    xs = view[0] + s * (place[0] - view[0])
    ys = view[1] + s * (place[1] - view[1])
    return bool(np.all(room.surface_distance(xs, ys) > 0.0))


def free_viewpoint(
    place: Point,
    robot: Point,
    others: Sequence[Point],
    room: Room,
    *,
    standoff: float,
    body: float,
    keep_out: float,
    step: float = math.radians(15.0),
    max_turn: float = math.radians(90.0),
) -> Point | None:
    """A viewpoint ``standoff`` from ``place`` to drive to instead of the robot's own line,
    or None: the own line is clear (the robot approaches along it), or no viewpoint within
    ``max_turn`` of it is (nothing better to do than wait)."""
    d = math.hypot(robot[0] - place[0], robot[1] - place[1])
    if d <= 1e-9:
        return None
    ux, uy = (robot[0] - place[0]) / d, (robot[1] - place[1]) / d
    r = min(d, standoff)
    own = (place[0] + r * ux, place[1] + r * uy)
    in_the_way = [o for o in others if view_blocked(own, place, [o], body)]
    if not in_the_way:
        return None
    base = math.atan2(uy, ux)
    # Turn away from the side the robots in the way stand on (anticlockwise on a tie).
    lean = sum(ux * (o[1] - place[1]) - uy * (o[0] - place[0]) for o in in_the_way)
    signs = (-1.0, 1.0) if lean > 0.0 else (1.0, -1.0)
    angles = [base + sign * k * step
              for k in range(1, int(max_turn / step + 1e-9) + 1) for sign in signs]
    views = [(place[0] + standoff * math.cos(a), place[1] + standoff * math.sin(a))
             for a in angles]
    for view, blocked in zip(views, _blocked(place, views, others, body).tolist(), strict=True):
        if not blocked and _clear_of_room(view, place, room, keep_out):
            return view
    return None


__all__ = ["free_viewpoint", "line_clear", "view_blocked"]
