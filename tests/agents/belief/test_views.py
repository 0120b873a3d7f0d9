"""Negative evidence: a claim about where the target is, against the own camera's recent views."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.belief.constraints import FreeSpace
from agents.belief.deposit import Footprint, inscribed_distance
from agents.belief.views import View, ViewHistory

# A camera at (0, 0) looking along +x: 3 m range, 62° field of view.
EAST = Footprint(0.0, 0.0, 0.0, 3.0, math.radians(62.0), 0.15)
TIGHT = np.eye(2) * 0.0001


def _history(*views: View, space: FreeSpace | None = None,
             robot_radius: float = 0.0) -> ViewHistory:
    h = ViewHistory(2.0, 64, max_speed=1.0, space=space, robot_radius=robot_radius)
    for v in views:
        h.add(v)
    return h


def _view(t: float, target: tuple[float, float] | None = None,
          robots: tuple[tuple[float, float], ...] = ()) -> View:
    return View(t, EAST, 0.02, 0.005, target, robots)


def _test(h: ViewHistory, p: tuple[float, float], t: float, P: np.ndarray = TIGHT):
    return h.test(p, P, t, window=0.5, gate=9.21, floor=0.1, detection_gate=0.3)


def test_a_claim_well_inside_empty_views_is_refuted() -> None:
    h = _history(_view(0.9), _view(1.0), _view(1.1))
    e = _test(h, (1.5, 0.0), 1.0)
    assert (e.refuting, e.supporting, e.looked) == (3, 0, 3)
    assert e.refutes(2)


def test_the_target_seen_elsewhere_refutes_and_seen_there_supports() -> None:
    elsewhere = _history(_view(1.0, (2.0, 0.8)), _view(1.1, (2.0, 0.8)))
    assert _test(elsewhere, (1.5, -0.2), 1.0).refuting == 2
    there = _history(_view(1.0, (1.6, 0.05)), _view(1.1))
    e = _test(there, (1.5, 0.0), 1.0)
    assert e.supporting == 1 and not e.refutes(1)


def test_a_claim_the_view_covers_only_in_part_says_nothing() -> None:
    h = _history(_view(1.0), _view(1.1))
    # Near the edge of the field of view, beyond the range, too close, behind the camera.
    for p in ((1.5, 0.85), (2.95, 0.0), (0.2, 0.0), (-1.0, 0.0)):
        assert _test(h, p, 1.0).refuting == 0, p


def test_an_uncertain_or_old_claim_says_nothing() -> None:
    h = _history(_view(1.0), _view(1.1))
    assert _test(h, (1.5, 0.0), 1.0, np.eye(2) * 0.25).refuting == 0  # 1.5 m 3-sigma disc
    assert _test(h, (1.5, 0.0), 3.0).looked == 0  # no view within the window
    # 0.3 and 0.4 s apart at 1 m/s: the target may have moved 0.4 m; still inside at 1.5 m.
    assert _test(h, (1.5, 0.0), 0.7).refuting == 2
    assert _test(h, (1.5, 0.45), 0.7).refuting == 0  # ... but not near the edge


def test_a_claim_behind_an_obstacle_is_not_refuted() -> None:
    crate = FreeSpace(10.0, 10.0, [(1.0, 0.0, 0.2, 0.6)])
    h = _history(_view(1.0), _view(1.1), space=crate)
    assert _test(h, (2.0, 0.0), 1.0).refuting == 0
    open_room = _history(_view(1.0), _view(1.1), space=FreeSpace(10.0, 10.0))
    assert _test(open_room, (2.0, 0.0), 1.0).refuting == 2


@pytest.mark.parametrize(
    ("robot", "hidden"),
    [
        ((0.6, 0.0), True),    # on the line of sight: the camera sees its back
        ((0.6, 0.15), True),   # its edge (11.5 deg + 0.13 m's 12.4) overlaps the disc's 3.9
        ((0.6, 0.25), False),  # 22.6 deg off, its edge 15.4: the whole disc is seen past it
        ((1.9, 0.0), True),    # inside the disc
        ((2.5, 0.0), False),   # beyond the disc's far edge
        ((0.6, -0.6), False),  # beside the camera
    ],
)
def test_a_claim_behind_another_robot_is_not_refuted(robot: tuple[float, float],
                                                     hidden: bool) -> None:
    # The claim's disc at (2, 0): sqrt(9.21e-4 + 0.1^2) + 0.02 + 2 * 0.005 = 0.135 m, 3.9 deg.
    h = _history(_view(1.0, robots=(robot,)), _view(1.1, robots=(robot,)), robot_radius=0.13)
    assert _test(h, (2.0, 0.0), 1.0).refuting == (0 if hidden else 2)
    # Without a radius (robots unknown to the history), a robot hides nothing.
    free = _history(_view(1.0, robots=(robot,)), _view(1.1, robots=(robot,)))
    assert _test(free, (2.0, 0.0), 1.0).refuting == 2


def test_the_history_keeps_its_horizon_in_time_order() -> None:
    h = _history(*(_view(0.125 * k) for k in range(32)))
    assert len(h) == 17  # 2.0 s back from the newest, 3.875 s
    h.add(_view(3.8))  # a frame that arrives late keeps its place
    assert len(h) == 18


def test_the_largest_disc_a_view_holds_is_centred_at_the_inscribed_distance() -> None:
    """A view with no pose error holds a disc of radius r = d·sin(fov/2) at d =
    range / (1 + sin(fov/2)), touching both edges and the far arc; nearer or farther, or any
    larger, it does not (the navigator holds targets and places to verify at d)."""
    d = inscribed_distance(EAST.range, EAST.fov)
    r = d * math.sin(EAST.fov / 2)
    assert d == pytest.approx(3.0 / (1 + math.sin(math.radians(31.0))))
    assert d + r == pytest.approx(EAST.range)
    exact = View(0.0, EAST, 0.0, 0.0, None)
    assert exact.covers(d, 0.0, 0.999 * r, None)
    assert not exact.covers(d, 0.0, 1.01 * r, None)
    for off in (-0.2, 0.2):
        assert not exact.covers(d + off, 0.0, 0.999 * r, None)
    assert inscribed_distance(3.0, math.pi) == pytest.approx(1.5)
    assert inscribed_distance(3.0, 2 * math.pi) == pytest.approx(1.5)  # taken as 180 degrees
