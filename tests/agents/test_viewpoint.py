from __future__ import annotations

import math

import pytest

from agents.room import Box, Room
from agents.viewpoint import free_viewpoint, view_blocked

ROOM = Room(6.0, 5.0)
PLACE = (3.0, 1.0)
BODY = 0.26


def test_a_robot_on_the_line_of_sight_blocks_it_one_beside_it_does_not() -> None:
    assert view_blocked((3.0, 3.0), PLACE, [(3.05, 2.0)], BODY)
    assert not view_blocked((3.0, 3.0), PLACE, [(3.4, 2.0)], BODY)
    assert not view_blocked((3.0, 3.0), PLACE, [(3.0, 3.5)], BODY)  # behind the viewpoint


def test_a_clear_own_line_keeps_the_robot_on_it() -> None:
    assert free_viewpoint(PLACE, (3.0, 3.4), [], ROOM, standoff=2.0, body=BODY,
                          keep_out=0.18) is None
    # The partner behind, not between: still clear.
    assert free_viewpoint(PLACE, (3.0, 2.8), [(3.05, 3.4)], ROOM, standoff=2.0, body=BODY,
                          keep_out=0.18) is None


def test_the_nearest_clear_viewpoint_turns_away_from_the_robot_in_the_way() -> None:
    partner = (3.1, 2.8)  # a little east of the line: the view turns west
    view = free_viewpoint(PLACE, (3.05, 3.4), [partner], ROOM, standoff=2.0, body=BODY,
                          keep_out=0.18)
    assert view is not None
    assert math.dist(view, PLACE) == pytest.approx(2.0)
    assert view[0] < 3.0 and not view_blocked(view, PLACE, [partner], BODY)
    turn = math.degrees(abs(math.atan2(view[1] - 1.0, view[0] - 3.0) - math.pi / 2))
    assert turn <= 30.0 + 1e-6


def test_walls_and_obstacles_rule_viewpoints_out() -> None:
    # A wall west of the place (x = 2.4 to 2.5) hides it from the west side.
    room = Room(6.0, 5.0, (Box(2.45, 1.5, 0.1, 3.0),))
    partner = (3.1, 2.8)
    view = free_viewpoint(PLACE, (3.05, 3.4), [partner], room, standoff=2.0, body=BODY,
                          keep_out=0.18)
    assert view is not None and view[0] > 3.0  # east, away from the wall
    # Nothing clear within the allowed turn: None (wait on the own line).
    crowd = [(3.0 + 1.2 * math.cos(a), 1.0 + 1.2 * math.sin(a))
             for a in [math.radians(d) for d in range(0, 181, 10)]]
    assert free_viewpoint(PLACE, (3.05, 3.4), crowd, ROOM, standoff=2.0, body=BODY,
                          keep_out=0.18) is None
