"""Where to look at a place from when another robot stands in the way.

Two robots that verify the same claim come at it from the same side, and the one behind
looks at its partner's back: its camera covers the place but cannot see it, and the
partner's robot is no evidence of anything. :func:`free_viewpoint` keeps the robot's own
line to the place while no other robot stands on it, and otherwise picks, among the
viewpoints about the place (every ``step`` up to ``max_turn`` off the own line, at the
standoff and at the robot's own distance when that is nearer) from which no robot, wall
or obstacle blocks the view, the one the robot reaches and faces the place from soonest:
the drive at ``speed`` (a robot on the way adds the detour round its disc) and the turns
at ``turn_rate``, to the viewpoint and then to the place. Pure geometry on plain numbers;
deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from agents.belief.occlusion import hidden_by_discs
from agents.pose_geometry import wrap_angle
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
    heading: float,
    speed: float,
    turn_rate: float,
    step: float = math.radians(15.0),
    max_turn: float = math.radians(90.0),
) -> Point | None:
    """A viewpoint to drive to instead of the robot's own line to ``place``, or None: the
    own line is clear (the robot approaches along it), or no viewpoint within ``max_turn``
    of it is (nothing better to do than wait). ``heading``: the robot's, radians."""
    d = math.hypot(robot[0] - place[0], robot[1] - place[1])
    if d <= 1e-9:
        return None
    ux, uy = (robot[0] - place[0]) / d, (robot[1] - place[1]) / d
    r = min(d, standoff)
    own = (place[0] + r * ux, place[1] + r * uy)
    if not any(view_blocked(own, place, [o], body) for o in others):
        return None
    base = math.atan2(uy, ux)
    offsets = [sign * k * step
               for k in range(1, int(max_turn / step + 1e-9) + 1) for sign in (1.0, -1.0)]
    radii = [standoff] if r >= standoff - 1e-9 else [standoff, r]
    views = [(place[0] + radius * math.cos(base + a), place[1] + radius * math.sin(base + a))
             for radius in radii for a in offsets]
    clear = [view for view, blocked in zip(views, _blocked(place, views, others, body).tolist(),
                                           strict=True)
             if not blocked and _clear_of_room(view, place, room, keep_out)]
    if not clear:
        return None
    on_the_way = _blocked(robot, clear, others, body).tolist()
    return min(zip(clear, on_the_way, strict=True),
               key=lambda c: _seconds_to(c[0], c[1], robot, heading, place, speed=speed,
                                         turn_rate=turn_rate, body=body))[0]


def _seconds_to(view: Point, detour: bool, robot: Point, heading: float, place: Point, *,
                speed: float, turn_rate: float, body: float) -> float:
    """Time to drive from ``robot`` (facing ``heading``) to ``view`` and face ``place``:
    the straight line at ``speed`` (round a robot's disc of radius ``body`` on it, a
    half-circle for a diameter, when ``detour``), the turns at ``turn_rate``."""
    length = math.hypot(view[0] - robot[0], view[1] - robot[1])
    facing = math.atan2(place[1] - view[1], place[0] - view[0])
    if length < 1e-6:
        return abs(wrap_angle(facing - heading)) / turn_rate
    travel = math.atan2(view[1] - robot[1], view[0] - robot[0])
    turns = abs(wrap_angle(travel - heading)) + abs(wrap_angle(facing - travel))
    return (length + ((math.pi - 2.0) * body if detour else 0.0)) / speed + turns / turn_rate


__all__ = ["free_viewpoint", "line_clear", "view_blocked"]
