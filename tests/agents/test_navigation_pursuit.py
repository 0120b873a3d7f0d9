"""PURSUE and VERIFY: the robot closes to the standoff facing a target or a place to verify,
straight at it when nothing is in the way, around a box when one is; it turns one way to
a goal behind, brakes without turning the camera near a robot alongside, goes round a
robot that blocks its view, and keeps the standoff from a moving target."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.navigation import Navigator, NavMode, TrackView
from agents.room import Room
from agents.viewpoint import view_blocked
from tests.agents.navworld import BOX_ROOM, EMPTY_ROOM, World, clearance, step


@pytest.mark.parametrize("target", [(3.5, 3.5), (1.0, 4.0)])
def test_pursuit_closes_to_standoff_and_faces_the_target(target: tuple[float, float]) -> None:
    nav = Navigator()
    world = World(mu=0.0, var=0.2)
    pose = (1.0, 1.0, 0.0)
    for k in range(300):
        track = TrackView(target[0], target[1], 0.0, 0.0, 0.1 * k, True)
        d = nav.decide(
            0.1 * k,
            pose=pose,
            belief=world.window(*pose[:2]),
            track=track,
            others=[],
            room=BOX_ROOM,
        )
        assert d.mode is NavMode.PURSUE
        pose = step(pose, d)
        assert clearance(BOX_ROOM, pose[0], pose[1], nav.params.robot_radius) > 0.0
    dist = math.hypot(target[0] - pose[0], target[1] - pose[1])
    facing = math.degrees(
        abs(
            math.remainder(math.atan2(target[1] - pose[1], target[0] - pose[0]) - pose[2], math.tau)
        )
    )
    print(f"\npursuit of {target}: final distance {dist:.3f} m, bearing {facing:.1f} deg")
    assert abs(dist - nav.standoff) <= nav.params.standoff_tolerance + 0.05
    assert facing < 10.0


@pytest.mark.parametrize("others", [[], [(2.5, 2.15)]], ids=["alone", "robot_alongside"])
def test_a_goal_behind_is_turned_to_one_way_not_back_and_forth(
    others: list[tuple[float, float]],
) -> None:
    """The place is right behind the robot and its heading wavers across the line (as a
    car's does when it overshoots at full duty): the turn keeps one way, and a robot
    alongside does not bend a turn on the spot either way."""
    nav = Navigator()
    world = World(mu=0.0, var=0.2)
    turns = []
    for k in range(8):
        th = 0.05 if k % 2 else -0.05
        d = nav.decide(0.1 * k, pose=(2.5, 2.5, th), belief=world.window(2.5, 2.5),
                       track=None, others=others, room=EMPTY_ROOM, verify=(0.5, 2.5))
        assert d.mode is NavMode.VERIFY and d.v == 0.0
        turns.append(math.copysign(1.0, d.omega))
    assert abs(sum(turns)) == len(turns)  # all one sign
    # Once turned, the shorter way is chosen again.
    d = nav.decide(1.0, pose=(2.5, 2.5, math.pi - 0.5), belief=world.window(2.5, 2.5),
                   track=None, others=others, room=EMPTY_ROOM, verify=(0.5, 2.5))
    assert d.omega > 0.0


def test_verify_looks_at_the_place_before_pursuing_a_track() -> None:
    """A place to verify (a disputed claim) comes before a confident track elsewhere: the
    robot approaches it as it would a target, to the standoff, facing it."""
    nav = Navigator()
    world = World(mu=0.0, var=0.2)
    pose, place = (1.0, 1.0, 0.0), (3.5, 3.5)
    track = TrackView(1.0, 4.0, 0.0, 0.0, 0.0, True)
    for k in range(300):
        d = nav.decide(0.1 * k, pose=pose, belief=world.window(*pose[:2]),
                       track=TrackView(1.0, 4.0, 0.0, 0.0, 0.1 * k, True), others=[],
                       room=BOX_ROOM, verify=place)
        assert d.mode is NavMode.VERIFY and d.goal == place
        pose = step(pose, d)
    dist = math.hypot(place[0] - pose[0], place[1] - pose[1])
    bearing = math.atan2(place[1] - pose[1], place[0] - pose[0]) - pose[2]
    assert abs(dist - nav.standoff) <= nav.params.standoff_tolerance + 0.05
    assert abs(math.degrees(math.remainder(bearing, math.tau))) < 10.0
    d = nav.decide(30.0, pose=pose, belief=world.window(*pose[:2]), track=track, others=[],
                   room=BOX_ROOM)
    assert d.mode is NavMode.PURSUE  # nothing to verify: the track again


@pytest.mark.parametrize("mode", [NavMode.VERIFY, NavMode.PURSUE])
def test_in_the_clear_the_place_or_target_stays_ahead_of_the_camera(mode: NavMode) -> None:
    """With nothing on the straight line the robot drives straight at a place to verify or
    a target, facing it all the way (a grid path's waypoint turned the camera, ±31 degrees,
    away from it by up to 45 degrees). With a box on the line it goes around (the test above)."""
    nav, room = Navigator(), EMPTY_ROOM
    world = World(mu=0.0, var=0.2)
    place = (4.2, 2.4)  # 25 degrees off the grid's axes from the start
    pose = (0.6, 0.7, math.atan2(place[1] - 0.7, place[0] - 0.6))
    assert nav.planner.straight_clear(room, pose[:2], place, math.dist(pose[:2], place))
    worst = 0.0
    verify = place if mode is NavMode.VERIFY else None
    for k in range(120):
        track = None if verify else TrackView(*place, 0.0, 0.0, 0.1 * k, True)
        d = nav.decide(0.1 * k, pose=pose, belief=world.window(*pose[:2]), track=track,
                       others=[], room=room, verify=verify)
        assert d.mode is mode
        pose = step(pose, d)
        bearing = math.atan2(place[1] - pose[1], place[0] - pose[0]) - pose[2]
        worst = max(worst, abs(math.degrees(math.remainder(bearing, math.tau))))
    assert worst < 5.0, f"the place was {worst:.1f} degrees off the camera's axis"
    assert abs(math.dist(pose[:2], place) - nav.standoff) < 0.1
    assert not nav.planner.straight_clear(BOX_ROOM, (1.0, 1.0), (3.5, 3.5), 2.7)  # the test above's


@pytest.mark.parametrize("mode", [NavMode.VERIFY, NavMode.PURSUE])
def test_near_the_standoff_a_robot_alongside_brakes_but_does_not_turn_the_camera(
    mode: NavMode,
) -> None:
    """A robot just beyond its standoff with another robot alongside keeps facing the place
    or target (the repulsion that bends a drive turned it away, half a second of looking
    elsewhere); only far from the standoff does repulsion bend the heading."""
    room, world = Room(6.0, 5.0), World(mu=0.0, var=0.2)
    place = (3.0, 1.0)
    for beyond, turned in ((0.1, False), (1.0, True)):
        nav = Navigator()
        pose = (3.0, 1.0 + nav.standoff + beyond, -math.pi / 2)
        alongside = (pose[0] + 0.35, pose[1] - 0.1)
        track = None if mode is NavMode.VERIFY else TrackView(*place, 0.0, 0.0, 0.0, True)
        d = nav.decide(0.0, pose=pose, belief=world.window(*pose[:2]), track=track,
                       others=[alongside], room=room,
                       verify=place if mode is NavMode.VERIFY else None)
        assert d.mode is mode
        assert (abs(d.omega) > 0.2) is turned, (beyond, d.omega)


def test_a_robot_behind_another_goes_round_it_to_see_the_place() -> None:
    """Two robots verify one claim from the same side: the one behind does not stay looking
    at its partner's back, it drives to a viewpoint at the standoff that sees the place past
    it, and faces the place there."""
    nav, room = Navigator(), Room(6.0, 5.0)
    world = World(mu=0.0, var=0.2)
    place, partner = (3.0, 1.0), (3.0, 2.8)  # the partner holds the standoff, north of it
    pose = (3.05, 3.4, -math.pi / 2)  # behind the partner, facing the place past it
    for k in range(150):
        d = nav.decide(0.1 * k, pose=pose, belief=world.window(*pose[:2]), track=None,
                       others=[partner], room=room, verify=place)
        assert d.mode is NavMode.VERIFY and d.goal == place
        pose = step(pose, d)
        assert math.dist(pose[:2], partner) > 2 * nav.params.robot_radius
    bearing = math.atan2(place[1] - pose[1], place[0] - pose[0]) - pose[2]
    seen_from = pose[:2]
    assert abs(math.degrees(math.remainder(bearing, math.tau))) < 10.0
    assert abs(math.dist(seen_from, place) - nav.standoff) < 0.15
    # The partner is no longer on the line of sight.
    assert not view_blocked(seen_from, place, [partner], 2 * nav.params.robot_radius)
    # Without the partner the same start stays on its own line.
    nav2, pose2 = Navigator(), (3.05, 3.4, -math.pi / 2)
    d = nav2.decide(0.0, pose=pose2, belief=world.window(*pose2[:2]), track=None, others=[],
                    room=room, verify=place)
    assert abs(d.omega) < 0.2


def test_pursuit_of_a_moving_target_keeps_the_standoff() -> None:
    nav = Navigator()
    world = World(mu=0.0, var=0.2)
    pose = (0.8, 2.5, 0.0)
    dists = []
    for k in range(400):
        t = 0.1 * k
        # The target walks back and forth along y = 2.5 between x = 2 and 4 at 0.15 m/s.
        phase = (0.15 * t) % 4.0
        tx = 2.0 + (phase if phase < 2.0 else 4.0 - phase)
        vx = 0.15 if phase < 2.0 else -0.15
        track = TrackView(tx, 2.5, vx, 0.0, t, True)
        d = nav.decide(
            t, pose=pose, belief=world.window(*pose[:2]), track=track, others=[], room=EMPTY_ROOM
        )
        pose = step(pose, d)
        if k >= 150:
            dists.append(math.hypot(tx - pose[0], 2.5 - pose[1]))
    print(
        f"\nmoving pursuit: distance mean {np.mean(dists):.2f} m, "
        f"range {min(dists):.2f}-{max(dists):.2f}"
    )
    assert abs(float(np.mean(dists)) - nav.standoff) < 0.25
    assert min(dists) > 0.4
