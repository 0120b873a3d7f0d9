"""A robot at its standoff: holding still with hysteresis, and a glance at a tag when its
heading has grown uncertain (agents.standoff), alone and inside the navigator."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.navigation import BeliefView, NavDecision, Navigator, NavMode, TrackView
from agents.room import Room
from agents.standoff import Glance, Hold

ROOM = Room(8.0, 6.0)
DEG = math.radians(1.0)


def test_hold_enters_tight_and_leaves_loose() -> None:
    hold = Hold(tolerance=0.05, slack=0.2, aligned=2 * DEG, bearing=10 * DEG)
    assert hold.update(0.1, 5 * DEG) == (False, False)  # not yet there
    assert hold.update(0.04, 1 * DEG) == (True, True)  # arrived and aligned
    assert hold.update(0.15, 8 * DEG) == (True, True)  # the estimate wanders: stay
    assert hold.update(0.25, 8 * DEG) == (False, True)  # past the slack: close in again
    assert hold.update(0.1, 12 * DEG) == (False, False)  # past the bearing: turn again
    assert hold.update(0.1, 5 * DEG) == (False, False)  # ... down to the aligned bearing
    hold.update(0.0, 0.0)
    hold.release()
    assert hold.update(0.1, 5 * DEG) == (False, False)  # a released hold starts tight


def _glance() -> Glance:
    tags = [(4.0, 0.0), (8.0, 3.0), (0.0, 3.0)]
    return Glance(tags, heading_std=3 * DEG, tag_distance=2.8, duration=3.0, interval=5.0)


def _seen(tag: tuple[float, float]) -> bool:
    return True


def test_a_glance_turns_to_the_nearest_tag_in_angle_and_ends_when_the_heading_is_known() -> None:
    g = _glance()
    pose = (4.0, 1.8, math.pi / 2)  # facing north; tags south (1.8 m) and east (4.5 m, too far)
    assert g.heading(0.0, pose, 2 * DEG, _seen) is None  # heading known well enough
    look = g.heading(0.1, pose, 4 * DEG, _seen)
    assert look == pytest.approx(-math.pi / 2) and g.active and g.glances == 1
    assert g.heading(0.5, pose, 2 * DEG, _seen) == pytest.approx(-math.pi / 2)  # not yet half
    assert g.heading(0.6, pose, 1.4 * DEG, _seen) is None and not g.active  # known again
    assert g.heading(5.5, pose, 9 * DEG, _seen) is None  # the interval after the glance
    assert g.heading(5.7, pose, 9 * DEG, _seen) is not None


def test_a_glance_ends_after_its_time_and_skips_hidden_or_far_tags() -> None:
    g = _glance()
    pose = (4.0, 1.8, math.pi / 2)
    assert g.heading(0.0, pose, 9 * DEG, lambda tag: tag != (4.0, 0.0)) is None  # no other tag
    assert g.heading(0.1, pose, 9 * DEG, _seen) is not None
    assert g.heading(3.2, pose, 9 * DEG, _seen) is None  # 3 s: given up
    assert g.heading(10.0, pose, None, _seen) is None  # no pose: nothing to glance with


def _belief() -> BeliefView:
    xs = np.arange(64, dtype=np.float64) * 0.1 + 0.05
    return BeliefView(np.zeros((64, 64)), np.ones((64, 64)), xs, xs, 1.0)


def _decide(nav: Navigator, t: float, pose: tuple[float, float, float], target_speed: float,
            heading_std: float) -> NavDecision:
    track = TrackView(4.0, 3.78, target_speed, 0.0, t, True)
    return nav.decide(t, pose=pose, belief=_belief(), track=track, others=[], room=ROOM,
                      heading_std=heading_std)


def test_a_pursuer_at_its_standoff_glances_only_from_a_slow_target() -> None:
    tags = [(4.0, 0.0)]
    pose = (4.0, 1.8, math.pi / 2)  # 1.98 m south of the target, facing it
    d = _decide(Navigator(tags=tags), 0.0, pose, 0.0, 5 * DEG)
    assert d.mode is NavMode.GLANCE and d.v == 0.0 and d.omega != 0.0
    d = _decide(Navigator(tags=tags), 0.0, pose, 0.5, 5 * DEG)  # a walking target
    assert d.mode is NavMode.PURSUE
    d = _decide(Navigator(tags=tags), 0.0, pose, 0.0, 1 * DEG)  # a well-known heading
    assert d.mode is NavMode.PURSUE


def test_a_pursuer_at_its_standoff_holds_still_while_the_estimate_wanders() -> None:
    nav = Navigator()
    pose = (4.0, 1.8, math.pi / 2)
    d = _decide(nav, 0.0, pose, 0.0, 0.0)
    assert (d.duty_left, d.duty_right) == (0.0, 0.0)
    # The target's estimate moves 0.12 m sideways and 0.1 m away: 3.5 degrees, still held.
    track = TrackView(4.12, 3.88, 0.0, 0.0, 0.1, True)
    d = nav.decide(0.1, pose=pose, belief=_belief(), track=track, others=[], room=ROOM)
    assert (d.duty_left, d.duty_right) == (0.0, 0.0)
    track = TrackView(4.5, 3.78, 0.0, 0.0, 0.2, True)  # 14 degrees: turn to it again
    d = nav.decide(0.2, pose=pose, belief=_belief(), track=track, others=[], room=ROOM)
    assert d.omega < 0.0 and d.duty_left != 0.0
