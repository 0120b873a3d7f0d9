"""NO_POSE with an estimate: a full turn on the spot first, then creep legs (never faster than
``creep_speed``, braked like any drive) to the nearest tag viewpoint, each followed by a
full turn; without an estimate, only turns. RELOCALIZE: a robot with a pose near its loss
limits drives to a tag viewpoint at the usual speed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.config import AgentConfig
from agents.core import AgentCore
from agents.navigation import NavDecision, Navigator, NavMode, NavParams, SearchView, TrackView
from agents.room import Room
from tests.agents.navworld import NOMINAL, World, step

ROOM = Room(6.0, 6.0)
# Tags every 1.5 m along the four walls (as a site's wall_tags would place them).
TAGS = [
    *[(s, 0.0) for s in (0.75, 2.25, 3.75, 5.25)],
    *[(6.0, s) for s in (0.75, 2.25, 3.75, 5.25)],
    *[(s, 6.0) for s in (5.25, 3.75, 2.25, 0.75)],
    *[(0.0, s) for s in (5.25, 3.75, 2.25, 0.75)],
]
PARAMS = NavParams(creep_speed=0.12)
FULL_TURN = math.tau / PARAMS.search_turn_rate + PARAMS.relocate_turn_margin
WORLD = World()


def lost(
    nav: Navigator,
    now: float,
    estimate: tuple[float, float, float] | None,
    others: tuple[tuple[float, float], ...] = (),
) -> NavDecision:
    x, y = (3.0, 3.0) if estimate is None else estimate[:2]
    return nav.decide(now, pose=None, belief=WORLD.window(x, y), track=None, others=others,
                      room=ROOM, estimate=estimate)


def viewpoint(tag: tuple[float, float]) -> tuple[float, float]:
    cx, cy = 3.0, 3.0
    d = math.hypot(cx - tag[0], cy - tag[1])
    s = PARAMS.relocate_view_distance / d
    return tag[0] + s * (cx - tag[0]), tag[1] + s * (cy - tag[1])


def body_speed(d: NavDecision) -> float:
    return NOMINAL.body_velocity(d.duty_left, d.duty_right)[0]


def test_a_lost_robot_turns_a_full_turn_then_creeps_to_the_nearest_tag_viewpoint() -> None:
    nav = Navigator(params=PARAMS, tags=TAGS)
    # Lost at (3.2, 2.6) facing north: the nearest tag is (3.75, 0) on the south wall.
    pose = (3.2, 2.6, math.pi / 2)
    nearest = min(TAGS, key=lambda t: math.hypot(t[0] - pose[0], t[1] - pose[1]))
    assert nearest == (3.75, 0.0)
    goal = viewpoint(nearest)
    decisions = []
    t0 = 100.0
    for k in range(400):
        now = t0 + 0.1 * k
        d = lost(nav, now, pose)  # the estimate is the truth here: dead reckoning is perfect
        decisions.append(d)
        assert d.mode is NavMode.NO_POSE
        assert d.v <= PARAMS.creep_speed and body_speed(d) <= PARAMS.creep_speed + 1e-9
        pose = step(pose, d)
    first_creep = next(d for d in decisions if d.v > 0.0)
    for d in decisions:
        if d.t < t0 + FULL_TURN - 1e-9:  # the full turn on the spot, never a translation
            assert d.v == 0.0 and d.omega == PARAMS.search_turn_rate and d.goal is None
            assert d.duty_left == -d.duty_right != 0.0
    assert t0 + FULL_TURN - 1e-9 <= first_creep.t <= t0 + FULL_TURN + 2.0  # after turning
    assert first_creep.goal == goal
    # The leg ends at the viewpoint, and a full turn follows.
    arrived = next(d for d in decisions if d.t > first_creep.t and d.goal is None)
    assert math.hypot(goal[0] - pose[0], goal[1] - pose[1]) > 0.0
    turn = [d for d in decisions if arrived.t <= d.t < arrived.t + FULL_TURN - 1e-9]
    assert all(d.v == 0.0 and d.omega == PARAMS.search_turn_rate for d in turn)
    legs = [d for d in decisions if first_creep.t <= d.t < arrived.t]
    assert max(d.v for d in legs) > 0.5 * PARAMS.creep_speed
    assert arrived.t - first_creep.t <= PARAMS.creep_time + 1e-9


def test_a_creep_leg_stops_after_creep_time_and_turns_again() -> None:
    params = NavParams(creep_speed=0.12, creep_time=3.0)
    nav = Navigator(params=params, tags=TAGS)
    pose = (3.0, 3.3, -math.pi / 2)  # facing the south wall, 1.5 m short of its viewpoint
    start = pose
    decisions = []
    for k in range(200):
        d = lost(nav, 0.1 * k, pose)
        decisions.append(d)
        pose = step(pose, d)
    creeping = [d for d in decisions if d.v > 0.0]
    first = creeping[0].t
    leg = [d for d in creeping if d.t < first + FULL_TURN]
    assert leg[-1].t - first <= params.creep_time + 1e-9
    after = [d for d in decisions if leg[-1].t < d.t < leg[-1].t + FULL_TURN - 0.1]
    assert after and all(d.v == 0.0 and d.omega == params.search_turn_rate for d in after)
    # A second leg, to the same viewpoint (not reached), once the turn is over.
    second = [d for d in creeping if d.t >= leg[-1].t + FULL_TURN - 0.1]
    assert second and second[0].goal == leg[0].goal
    travelled = math.hypot(pose[0] - start[0], pose[1] - start[1])
    print(f"\ntwo legs of {params.creep_time} s: travelled {travelled:.2f} m")
    assert travelled <= 2 * params.creep_time * params.creep_speed * 1.01


def test_a_creeping_robot_brakes_for_another_robot_on_its_way() -> None:
    start = (3.0, 2.7, -math.pi / 2)
    goal = viewpoint((2.25, 0.0))  # the nearest tag's (tied with (3.75, 0), listed first)
    length = math.hypot(goal[0] - start[0], goal[1] - start[1])
    ux, uy = (goal[0] - start[0]) / length, (goal[1] - start[1]) / length
    other = (start[0] + 0.5 * ux, start[1] + 0.5 * uy)  # on its way there

    def run(others: tuple[tuple[float, float], ...]) -> tuple[float, float]:
        """(smallest gap to ``other``, smallest distance to the goal) over 30 s lost."""
        nav = Navigator(params=PARAMS, tags=TAGS)
        pose, gap, near = start, math.inf, math.inf
        for k in range(300):
            d = lost(nav, 0.1 * k, pose, others=others)
            assert d.v <= PARAMS.creep_speed
            pose = step(pose, d)
            gap = min(gap, math.hypot(pose[0] - other[0], pose[1] - other[1])
                      - 2 * PARAMS.robot_radius)
            near = min(near, math.hypot(goal[0] - pose[0], goal[1] - pose[1]))
        return gap, near

    gap, near = run((other,))
    alone_gap, alone_near = run(())
    print(f"\ngap to the other robot: smallest {gap:.3f} m (without it: {alone_gap:.3f} m); "
          f"nearest the viewpoint {near:.2f} m")
    assert alone_near <= PARAMS.relocate_arrive_radius and alone_gap < 0.0  # drives through
    assert gap > 0.0  # braked and bent around it


def test_without_an_estimate_or_a_creep_speed_a_lost_robot_only_turns() -> None:
    no_estimate = Navigator(params=PARAMS, tags=TAGS)
    no_creep = Navigator(params=NavParams(creep_speed=0.0), tags=TAGS)
    for k in range(300):
        for d in (lost(no_estimate, 0.1 * k, None), lost(no_creep, 0.1 * k, (3.0, 3.0, 0.0))):
            assert d.v == 0.0 and d.omega == PARAMS.search_turn_rate and d.goal is None


def test_a_pose_regained_and_lost_again_turns_a_full_turn_first() -> None:
    nav = Navigator(params=PARAMS, tags=TAGS)
    pose = (3.0, 3.0, 0.0)
    assert lost(nav, 0.0, pose).goal is None
    assert lost(nav, FULL_TURN + 0.1, pose).goal is not None  # heading for a viewpoint
    nav.decide(6.2, pose=pose, belief=WORLD.window(3.0, 3.0), track=None, others=[], room=ROOM)
    for k in range(int(FULL_TURN / 0.1) - 1):
        d = lost(nav, 6.3 + 0.1 * k, pose)
        assert d.v == 0.0 and d.omega == PARAMS.search_turn_rate


def test_relocation_is_deterministic() -> None:
    runs = []
    for _ in range(2):
        nav = Navigator(params=PARAMS, tags=TAGS)
        pose = (1.0, 4.0, 0.3)
        out = []
        for k in range(250):
            d = lost(nav, 0.1 * k, pose, others=((1.5, 3.0),))
            out.append((d.v, d.omega, d.duty_left, d.duty_right, d.goal))
            pose = step(pose, d)
        runs.append(out)
    assert runs[0] == runs[1]


def test_the_core_creeps_on_the_pose_it_dead_reckons_since_the_loss() -> None:
    # Tags mid-way up the west and east walls of a 5 m room. Lost at (2.0, 2.5) (west tag
    # nearer), then the car reports 3 s straight east at 0.3 m/s: (2.9, 2.5), east nearer.
    tags = {0: (0.0, 2.5), 1: (5.0, 2.5)}
    cfg = AgentConfig(name="walnut", room=Room(5.0, 5.0), landmarks=tags, target_tag=100,
                      nav=PARAMS)
    core = AgentCore(cfg, t0=0.0)
    core.localizer.set_pose(2.0, 2.5, 0.0, [[1e-3, 0, 0], [0, 1e-3, 0], [0, 0, 1e-3]])
    core.tick(0.1)
    core.localizer.lose_pose("test")
    duty = cfg.drive.duty_for_speed(0.3)
    t, decisions = 0.1, []
    while t < 3.1 + FULL_TURN + 0.5:
        t = round(t + 0.1, 9)
        if t <= 3.1:
            core.on_car_status(t, duty, duty, 0.0)
        else:  # then on the spot (what the car reports: no translation)
            core.on_car_status(t, -0.6, 0.6, PARAMS.search_turn_rate)
        core.tick(t)
        decision = core.take_outputs().decision
        assert decision is not None and decision.mode is NavMode.NO_POSE
        decisions.append(decision)
    turning = [d for d in decisions if d.t < 0.1 + FULL_TURN - 1e-9]
    assert all(d.v == 0.0 and d.goal is None for d in turning)
    creeping = [d for d in decisions if d.goal is not None]
    assert creeping and all(d.v <= PARAMS.creep_speed for d in creeping)
    east = (5.0 - PARAMS.relocate_view_distance, 2.5)
    assert creeping[0].goal == pytest.approx(east)


def test_a_robot_lost_out_of_sight_of_every_tag_creeps_at_once() -> None:
    """In the middle of a 12 m room no tag is within sight of the estimate (the camera's 3 m
    range and the 0.3 m ``relocate_sight_margin``): a turn on the spot could see none, so
    the robot creeps at once towards the nearest viewpoint, and keeps creeping, leg after
    leg, until a tag is in sight; then it turns as anywhere else."""
    room = Room(12.0, 12.0)
    tags = [*[(s, 0.0) for s in (1.5, 4.5, 7.5, 10.5)], *[(0.0, s) for s in (1.5, 4.5)]]
    params = NavParams(creep_speed=0.12, creep_time=4.0)
    nav = Navigator(params=params, tags=tags)
    pose = (6.0, 6.0, -math.pi / 2)
    decisions = []
    for k in range(900):
        d = nav.decide(0.1 * k, pose=None, belief=WORLD.window(pose[0], pose[1]), track=None,
                       others=(), room=room, estimate=pose)
        decisions.append((d, pose))
        pose = step(pose, d)
    assert decisions[0][0].v > 0.0 and decisions[0][0].goal is not None  # no turn first
    for d, at in decisions:
        if not nav.relocation.tag_in_sight(at[0], at[1]):
            assert d.v > 0.0 or d.omega != params.search_turn_rate  # creeping, not turning
    turns = [d.t for d, at in decisions if d.v == 0.0 and d.omega == params.search_turn_rate]
    assert turns, "a full turn once a tag is in sight"
    first_turn = next(at for d, at in decisions if d.t == turns[0])
    assert nav.relocation.tag_in_sight(first_turn[0], first_turn[1])
    assert nav.relocation.sight == pytest.approx(3.3)
    # A camera that sees 7 m has every tag of that room in sight: a full turn first.
    far_sighted = Navigator(params=params, tags=tags, camera_range=7.0)
    d = far_sighted.decide(0.0, pose=None, belief=WORLD.window(6.0, 6.0), track=None,
                           others=(), room=room, estimate=(6.0, 6.0, 0.0))
    assert d.v == 0.0 and d.omega == params.search_turn_rate
    # In sight of a tag the same robot turns first, as before.
    near = Navigator(params=params, tags=tags)
    d = near.decide(0.0, pose=None, belief=WORLD.window(3.0, 2.0), track=None, others=(),
                    room=room, estimate=(3.0, 2.0, 0.0))
    assert d.v == 0.0 and d.omega == params.search_turn_rate


def test_a_pursuer_whose_pose_nears_its_loss_drives_to_a_tag_while_it_still_has_one() -> None:
    """Past ``relocalize_at`` of the localizer's loss limits the robot leaves its target for
    the nearest tag viewpoint, at the usual speed (a lost robot only creeps), faces the tag
    there, and goes back to its target once its pose is back under ``relocalized_at``."""
    nav = Navigator(params=PARAMS, tags=TAGS)
    pose = (3.2, 2.6, math.pi / 2)
    track = TrackView(3.2, 4.6, 0.0, 0.0, 0.0, True)  # ahead, at the standoff

    def decide(now: float, used: float | None) -> NavDecision:
        return nav.decide(now, pose=pose, belief=WORLD.window(pose[0], pose[1]), track=track,
                          others=(), room=ROOM, pose_used=used)

    assert decide(100.0, None).mode is NavMode.PURSUE
    assert decide(100.1, 0.49).mode is NavMode.PURSUE
    points = nav.relocation.viewpoints(ROOM)
    k = min(range(len(points)), key=lambda i: math.hypot(points[i][0] - pose[0],
                                                         points[i][1] - pose[1]))
    tag, view = TAGS[k], points[k]
    assert tag == (3.75, 0.0) and view == pytest.approx(viewpoint(tag))
    decisions = []
    for i in range(150):
        d = decide(100.2 + 0.1 * i, 0.3 if i >= 100 else 0.5)  # 0.3: not yet back under 0.25
        decisions.append(d)
        assert d.mode is NavMode.RELOCALIZE and d.goal == view
        pose = step(pose, d)
    assert max(body_speed(d) for d in decisions) > 2.0 * PARAMS.creep_speed
    assert math.hypot(view[0] - pose[0], view[1] - pose[1]) <= PARAMS.relocate_arrive_radius
    facing = math.atan2(tag[1] - pose[1], tag[0] - pose[0])
    assert abs(math.remainder(pose[2] - facing, math.tau)) < 0.2  # it looks at the tag
    assert decisions[-1].v == 0.0
    assert decide(115.2, 0.25).mode is NavMode.PURSUE
    assert decide(115.3, 0.49).mode is NavMode.PURSUE  # not again until relocalize_at


def test_relocalizing_ends_before_it_begins() -> None:
    with pytest.raises(ValueError, match="relocalized_at"):
        NavParams(relocalize_at=0.3, relocalized_at=0.3)


def test_the_core_tells_the_navigator_how_much_of_its_pose_it_has_used() -> None:
    """Half the localizer's position-trace limit: the core's next decision is RELOCALIZE."""
    tags = {i: t for i, t in enumerate(TAGS)}
    cfg = AgentConfig(name="walnut", room=ROOM, landmarks=tags, target_tag=100, nav=PARAMS)
    core = AgentCore(cfg, t0=0.0)
    limit = cfg.localizer.max_position_trace
    core.localizer.set_pose(3.0, 3.0, 0.0, [[0.2 * limit, 0, 0], [0, 0.2 * limit, 0],
                                            [0, 0, 1e-4]])
    core.tick(0.1)
    first = core.take_outputs().decision
    assert first is not None and first.mode is not NavMode.RELOCALIZE
    core.localizer.set_pose(3.0, 3.0, 0.0, [[0.3 * limit, 0, 0], [0, 0.2 * limit, 0],
                                            [0, 0, 1e-4]])
    core.tick(0.2)
    then = core.take_outputs().decision
    assert then is not None and then.mode is NavMode.RELOCALIZE


def test_a_searcher_relocalizes_at_the_tag_viewpoint_on_its_way() -> None:
    """A searcher past ``relocalize_at`` heads for the tag viewpoint of least detour on the way
    to its search goal, not the nearest one behind it (sent back there each time, a robot
    drove back and forth between it and a goal whose way lost its pose); it searches again
    once its pose is back under ``relocalized_at``."""
    nav = Navigator(params=PARAMS, tags=TAGS)
    pose = (3.2, 2.6, math.pi / 2)
    goal = (3.0, 5.0)  # north; the nearest tag, (3.75, 0), is on the south wall
    x, y = np.array([goal[0]]), np.array([goal[1]])
    search = SearchView(x, y, np.array([math.pi / 2]), np.array([0.5]),
                        np.hypot(x - pose[0], y - pose[1]))

    def decide(now: float, used: float | None) -> NavDecision:
        return nav.decide(now, pose=pose, belief=WORLD.window(pose[0], pose[1]), track=None,
                          others=(), room=ROOM, search=search, pose_used=used)

    first = decide(100.0, 0.3)
    assert first.mode is NavMode.SEARCH and first.goal == goal
    points = nav.relocation.viewpoints(ROOM)

    def dist(a: tuple[float, float], b: tuple[float, float]) -> float:
        return math.hypot(a[0] - b[0], a[1] - b[1])

    nearest = min(points, key=lambda v: dist(v, pose[:2]))
    on_the_way = min(points, key=lambda v: dist(v, pose[:2]) + dist(v, goal))
    assert nearest == pytest.approx(viewpoint((3.75, 0.0)))
    assert on_the_way[1] > pose[1] > nearest[1]  # ahead, towards the goal
    d = decide(100.1, 0.5)
    assert d.mode is NavMode.RELOCALIZE and d.goal == on_the_way
    assert decide(100.2, 0.3).goal == on_the_way  # chosen once, kept until back under
    assert decide(100.3, 0.25).mode is NavMode.SEARCH
