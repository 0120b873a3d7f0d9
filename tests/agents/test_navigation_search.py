"""SEARCH on the search map: the viewpoint of most probability per second of travel, kept
until another scores ``switch_ratio`` times more; at the viewpoint, the camera turned to
its heading; a closed loop that drives there."""

from __future__ import annotations

import math

import numpy as np

from agents.navigation import NavDecision, Navigator, NavMode, NavParams, SearchView
from tests.agents.navworld import EMPTY_ROOM, World, step

PARAMS = NavParams()


def view(xs: list[float], ys: list[float], headings: list[float], gains: list[float],
         **pricing: float) -> SearchView:
    """Viewpoints whose coarse distance is the straight line from (1, 1) (the window's
    planner wins wherever the viewpoint lies on it)."""
    x, y = np.array(xs), np.array(ys)
    return SearchView(x, y, np.array(headings), np.array(gains), np.hypot(x - 1.0, y - 1.0),
                      **pricing)


def decide(nav: Navigator, now: float, pose: tuple[float, float, float],
           search: SearchView) -> NavDecision:
    world = World()
    return nav.decide(now, pose=pose, belief=world.window(pose[0], pose[1]), track=None,
                      others=[], room=EMPTY_ROOM, search=search)


def seconds(d: float, turn: float, look_time: float = 1.0, turn_rate: float = 1.5) -> float:
    return d / PARAMS.v_max + turn / turn_rate + look_time


def test_the_goal_is_the_most_probability_per_second_not_the_most_probability() -> None:
    # Far: 0.5 of the probability, 3 m away; near: 0.2, 0.5 m away, both straight ahead.
    far, near = (4.0, 1.0), (1.5, 1.0)
    assert 0.5 / seconds(3.0, 0.0) < 0.2 / seconds(0.5, 0.0)  # the near one is worth more
    d = decide(Navigator(params=PARAMS), 0.0, (1.0, 1.0, 0.0),
               view([far[0], near[0]], [far[1], near[1]], [0.0, 0.0], [0.5, 0.2]))
    assert d.mode is NavMode.SEARCH and d.goal == near and d.goal_heading == 0.0
    # Four times the probability far away outweighs the travel.
    d = decide(Navigator(params=PARAMS), 0.0, (1.0, 1.0, 0.0),
               view([far[0], near[0]], [far[1], near[1]], [0.0, 0.0], [0.8, 0.2]))
    assert d.goal == far


def test_turning_is_priced() -> None:
    # Two viewpoints at the same place and gain: the one already faced wins.
    d = decide(Navigator(params=PARAMS), 0.0, (1.0, 1.0, 0.0),
               view([2.0, 2.0], [1.0, 1.0], [math.pi, 0.0], [0.3, 0.3]))
    assert d.goal_heading == 0.0


def test_a_goal_is_kept_until_another_scores_switch_ratio_times_more() -> None:
    nav = Navigator(params=PARAMS)
    pose = (1.0, 1.0, 0.0)
    a, b = (2.0, 1.0), (1.0, 2.0)  # b: a quarter turn there and a quarter turn back
    first = decide(nav, 0.0, pose, view([a[0], b[0]], [a[1], b[1]], [0.0, 0.0], [0.3, 0.1]))
    assert first.goal == a
    score_a = 0.3 / seconds(1.0, 0.0)
    gain_b = 1.15 * score_a * seconds(1.0, math.pi)  # b now scores 1.15 x a: not enough
    kept = decide(nav, 0.1, pose, view([a[0], b[0]], [a[1], b[1]], [0.0, 0.0], [0.3, gain_b]))
    assert kept.goal == a
    gain_b = 1.35 * score_a * seconds(1.0, math.pi)  # 1.35 x a: more than 1.25
    switched = decide(nav, 0.2, pose,
                      view([a[0], b[0]], [a[1], b[1]], [0.0, 0.0], [0.3, gain_b]))
    assert switched.goal == b


def test_at_the_viewpoint_the_robot_stops_and_turns_to_its_heading() -> None:
    d = decide(Navigator(params=PARAMS), 0.0, (2.0, 2.0, 0.0),
               view([2.1], [2.0], [math.pi / 2], [0.4]))
    assert d.v == 0.0 and d.omega > 0.0 and d.goal_heading == math.pi / 2


def test_nothing_to_see_anywhere_turns_on_the_spot() -> None:
    d = decide(Navigator(params=PARAMS), 0.0, (2.0, 2.0, 0.0),
               view([3.0, 1.0], [2.0, 3.0], [0.0, 0.0], [0.0, 0.0]))
    assert d.goal is None and d.v == 0.0 and d.omega == PARAMS.search_turn_rate


def test_the_robot_drives_to_the_viewpoint_and_faces_its_heading() -> None:
    nav = Navigator(params=PARAMS)
    pose = (1.0, 1.0, 0.0)
    target = view([3.5], [3.0], [math.pi / 2], [0.5])
    for k in range(300):  # 30 s: there in about 8, then it stays (arrived is not stuck)
        d = decide(nav, 0.1 * k, pose, target)
        assert d.goal == (3.5, 3.0)
        pose = step(pose, d)
    assert math.hypot(pose[0] - 3.5, pose[1] - 3.0) <= target.arrive_radius
    assert abs(math.remainder(pose[2] - math.pi / 2, math.tau)) < 0.1
