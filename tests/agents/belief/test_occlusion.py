"""What a camera cannot see past: boxes (a slab test) and other robots (discs)."""

from __future__ import annotations

import numpy as np

from agents.belief.occlusion import hidden, hidden_by_boxes, hidden_by_discs
from agents.room import Box, Room

# Points along and beside the +x axis, seen from a camera at the origin.
PX = np.array([0.5, 1.5, 2.5, 2.5, 2.5, 1.0])
PY = np.array([0.0, 0.0, 0.0, 0.3, 0.6, -1.0])


def test_a_disc_hides_the_points_whose_line_of_sight_passes_within_its_radius() -> None:
    # A robot at (1, 0.1), radius 0.13: the lines to (1.5, 0) and (2.5, 0) pass 0.1 m and
    # 0.1 m from it; to (2.5, 0.3) at |0.3·1 − 0.1·2.5| / 2.52 = 0.02 m; to (2.5, 0.6) at
    # 0.14 m; (0.5, 0) lies before it; (1, −1) is elsewhere.
    out = hidden_by_discs(0.0, 0.0, PX, PY, [(1.0, 0.1)], radius=0.13)
    assert out.tolist() == [False, True, True, True, False, False]
    assert not hidden_by_discs(0.0, 0.0, PX, PY, [(1.0, 0.1)], radius=0.0).any()
    # A camera inside a disc (its position or the robot's is wrong) sees nothing.
    assert hidden_by_discs(0.0, 0.0, PX, PY, [(0.05, 0.0)], radius=0.13).all()


def test_a_box_hides_the_points_whose_line_of_sight_crosses_it() -> None:
    crate = Box(2.0, 0.0, 0.4, 0.4)  # x 1.8-2.2, y -0.2-0.2
    out = hidden_by_boxes(0.0, 0.0, PX, PY, [crate])
    # (2.5, 0.3): the line crosses y = 0.216 at x = 1.8, just outside; (2.5, 0) behind it.
    assert out.tolist() == [False, False, True, False, False, False]


def test_hidden_is_either() -> None:
    room = Room(4.0, 3.0, (Box(2.0, 0.0, 0.4, 0.4),))
    both = hidden(0.0, 0.0, PX, PY, room, robots=[(2.3, 0.5)], robot_radius=0.13)
    assert both.tolist() == [False, False, True, False, True, False]
    assert hidden(0.0, 0.0, PX, PY, None).sum() == 0
