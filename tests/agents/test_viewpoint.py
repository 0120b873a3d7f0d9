from __future__ import annotations

import math

import pytest

from agents.room import Box, Room
from agents.viewpoint import free_viewpoint, view_blocked

ROOM = Room(6.0, 5.0)
PLACE = (3.0, 1.0)
BODY = 0.26
MOTION = {"heading": -math.pi / 2, "speed": 0.5, "turn_rate": 2.0}  # facing the place (south)


def test_a_robot_on_the_line_of_sight_blocks_it_one_beside_it_does_not() -> None:
    assert view_blocked((3.0, 3.0), PLACE, [(3.05, 2.0)], BODY)
    assert not view_blocked((3.0, 3.0), PLACE, [(3.4, 2.0)], BODY)
    assert not view_blocked((3.0, 3.0), PLACE, [(3.0, 3.5)], BODY)  # behind the viewpoint


def test_a_clear_own_line_keeps_the_robot_on_it() -> None:
    assert free_viewpoint(PLACE, (3.0, 3.4), [], ROOM, standoff=2.0, body=BODY,
                          keep_out=0.18, **MOTION) is None
    # The partner behind, not between: still clear.
    assert free_viewpoint(PLACE, (3.0, 2.8), [(3.05, 3.4)], ROOM, standoff=2.0, body=BODY,
                          keep_out=0.18, **MOTION) is None


def test_a_clear_viewpoint_near_the_own_line_sees_past_the_robot_in_the_way() -> None:
    partner = (3.1, 2.8)  # a little east of the line
    view = free_viewpoint(PLACE, (3.05, 3.4), [partner], ROOM, standoff=2.0, body=BODY,
                          keep_out=0.18, **MOTION)
    assert view is not None
    assert math.dist(view, PLACE) == pytest.approx(2.0)
    assert not view_blocked(view, PLACE, [partner], BODY)
    turn = math.degrees(abs(math.atan2(view[1] - 1.0, view[0] - 3.0) - math.pi / 2))
    assert turn <= 30.0 + 1e-6


def test_walls_and_obstacles_rule_viewpoints_out() -> None:
    # A wall west of the place (x = 2.4 to 2.5) hides it from the west side.
    room = Room(6.0, 5.0, (Box(2.45, 1.5, 0.1, 3.0),))
    partner = (3.1, 2.8)
    view = free_viewpoint(PLACE, (3.05, 3.4), [partner], room, standoff=2.0, body=BODY,
                          keep_out=0.18, **MOTION)
    assert view is not None and view[0] > 3.0  # east, away from the wall
    # Nothing clear within the allowed turn: None (wait on the own line).
    crowd = [(3.0 + 1.2 * math.cos(a), 1.0 + 1.2 * math.sin(a))
             for a in [math.radians(d) for d in range(0, 181, 10)]]
    assert free_viewpoint(PLACE, (3.05, 3.4), crowd, ROOM, standoff=2.0, body=BODY,
                          keep_out=0.18, **MOTION) is None


def test_the_viewpoint_is_the_quickest_to_reach_and_face_the_place_from() -> None:
    """The robot, 1.2 m from the place and facing it, has its partner just ahead on the
    line. At the standoff (2 m) the first clear viewpoint lies behind it: a turn about,
    a drive and a turn back. At its own distance one 30 degrees aside is reached with a
    short drive and little turning. Both are clear; the quicker wins, and it is
    quicker by the formula."""
    robot, partner = (3.0, 2.2), (3.0, 1.75)
    view = free_viewpoint(PLACE, robot, [partner], ROOM, standoff=2.0, body=BODY,
                          keep_out=0.18, **MOTION)
    assert view is not None and not view_blocked(view, PLACE, [partner], BODY)
    assert math.dist(view, PLACE) == pytest.approx(1.2)
    far = free_viewpoint(PLACE, (3.0, 3.2), [partner], ROOM, standoff=2.0, body=BODY,
                         keep_out=0.18, **MOTION)  # from 2.2 m: only the standoff ring
    assert far is not None and math.dist(far, PLACE) == pytest.approx(2.0)

    def seconds(v: tuple[float, float]) -> float:
        travel = math.atan2(v[1] - robot[1], v[0] - robot[0])
        facing = math.atan2(PLACE[1] - v[1], PLACE[0] - v[0])
        turns = abs(math.remainder(travel + math.pi / 2, math.tau)) + abs(
            math.remainder(facing - travel, math.tau))
        return math.dist(v, robot) / 0.5 + turns / 2.0

    offsets = [math.radians(k * sign) for k in range(15, 91, 15) for sign in (1, -1)]
    ring = [(3.0 + r * math.cos(math.pi / 2 + a), 1.0 + r * math.sin(math.pi / 2 + a))
            for r in (2.0, 1.2) for a in offsets]
    clear = [v for v in ring if not view_blocked(v, PLACE, [partner], BODY)]
    assert any(math.dist(v, PLACE) == pytest.approx(2.0) for v in clear)
    assert seconds(view) == pytest.approx(min(seconds(v) for v in clear))
