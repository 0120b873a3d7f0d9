"""The navigator as a whole: without a pose it only turns; long random runs never touch a
wall or an obstacle; SEARCH drives around an obstacle to the belief and keeps its goal;
other robots matter only within the repulsion radius; the same inputs give the same
decisions, duties stay in range, inputs are validated; the standoff's default."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.navigation import BeliefView, NavDecision, Navigator, NavMode, NavParams, TrackView
from agents.room import Box, Room
from tests.agents.navworld import BOX_ROOM, EMPTY_ROOM, NOMINAL, World, clearance, step


def test_without_pose_it_only_turns() -> None:
    nav = Navigator()
    world = World(mu=0.0, var=1.0)
    world.mu[60:65, 60:65] = 1.0
    track = TrackView(3.0, 3.0, 0.0, 0.0, 0.0, True)
    for k in range(20):
        d = nav.decide(
            0.1 * k,
            pose=None,
            belief=world.window(2.5, 2.5),
            track=track,
            others=[],
            room=EMPTY_ROOM,
        )
        assert d.mode is NavMode.NO_POSE
        assert d.v == 0.0 and d.omega == nav.params.search_turn_rate > 0.0
        assert d.duty_left == -d.duty_right != 0.0  # on the spot
        assert d.goal is None
        v, _ = NOMINAL.body_velocity(d.duty_left, d.duty_right)
        assert v == 0.0


def random_run(seed: int, room: Room, steps: int) -> tuple[float, float, dict[NavMode, int]]:
    """Search, pursue a bouncing target and lose the pose, in a belief that the camera updates."""
    rng = np.random.default_rng(seed)
    nav = Navigator()
    world = World()
    while True:
        x, y = (float(v) for v in rng.uniform(0.3, 4.7, 2))
        if clearance(room, x, y, nav.params.robot_radius) > 0.1:
            break
    pose = (x, y, float(rng.uniform(-math.pi, math.pi)))
    target = rng.uniform(0.5, 4.5, 2)
    tv = rng.normal(0.0, 0.3, 2)
    lowest = clearance(room, x, y, nav.params.robot_radius)
    travelled = 0.0
    modes: dict[NavMode, int] = {}
    for k in range(steps):
        now = 0.1 * k
        world.observe(*pose)
        target = target + 0.1 * tv
        for i in range(2):
            if not 0.3 < target[i] < 4.7:
                tv[i] = -tv[i]
        track = TrackView(
            float(target[0]), float(target[1]), float(tv[0]), float(tv[1]), now, (k // 150) % 3 == 2
        )
        d = nav.decide(
            now,
            pose=pose if k % 250 > 15 else None,
            belief=world.window(pose[0], pose[1]),
            track=track,
            others=[],
            room=room,
        )
        assert -1.0 <= d.duty_left <= 1.0 and -1.0 <= d.duty_right <= 1.0
        modes[d.mode] = modes.get(d.mode, 0) + 1
        new = step(pose, d)
        travelled += math.hypot(new[0] - pose[0], new[1] - pose[1])
        pose = new
        lowest = min(lowest, clearance(room, pose[0], pose[1], nav.params.robot_radius))
    return lowest, travelled, modes


def test_long_random_runs_never_touch_a_wall_or_obstacle() -> None:
    results = [random_run(seed, BOX_ROOM, 900) for seed in range(3)]
    lowest = min(r[0] for r in results)
    print(
        "\nrandom runs: minimum clearance "
        + ", ".join(f"{r[0] * 100:.1f} cm over {r[1]:.1f} m" for r in results)
    )
    assert lowest > 0.0
    for _, travelled, modes in results:
        assert travelled > 10.0  # it does move about
        assert set(modes) == {NavMode.NO_POSE, NavMode.SEARCH, NavMode.PURSUE}


def test_search_drives_around_an_obstacle_to_the_belief() -> None:
    room = Room(5.0, 5.0, (Box(2.5, 2.5, 0.6, 2.0),))
    world = World(mu=0.0, var=0.05)
    blob = (world.gx - 4.0) ** 2 + (world.gy - 2.5) ** 2 < 0.3**2
    world.mu[blob] = 1.0
    nav = Navigator()
    pose = (1.0, 2.5, 0.0)
    closest = math.inf
    for k in range(400):
        d = nav.decide(
            0.1 * k, pose=pose, belief=world.window(*pose[:2]), track=None, others=[], room=room
        )
        assert d.mode is NavMode.SEARCH
        pose = step(pose, d)
        assert clearance(room, pose[0], pose[1], nav.params.robot_radius) > 0.0
        closest = min(closest, math.hypot(pose[0] - 4.0, pose[1] - 2.5))
    assert closest < 0.6


def test_goal_does_not_flicker_between_near_equal_cells() -> None:
    world = World(mu=0.0, var=0.05)
    for cx in (1.5, 3.5):
        world.mu[(world.gx - cx) ** 2 + (world.gy - 4.0) ** 2 < 0.3**2] = 0.8
    nav = Navigator()
    rng = np.random.default_rng(0)
    pose = (2.5, 1.5, math.pi / 2)  # exactly between the two
    goals = []
    for k in range(30):
        jitter = world.window(*pose[:2])
        noisy = BeliefView(
            jitter.mu + rng.normal(0.0, 0.01, jitter.mu.shape),
            jitter.var,
            jitter.xs,
            jitter.ys,
            1.0,
        )
        d = nav.decide(0.1 * k, pose=pose, belief=noisy, track=None, others=[], room=EMPTY_ROOM)
        goals.append(d.goal)
    assert len(set(goals)) == 1


def test_other_robots_matter_only_within_the_repulsion_radius() -> None:
    world = World(mu=0.0, var=1.0)
    world.mu[40:46, 80:86] = 0.6
    rng = np.random.default_rng(3)
    params = NavParams()
    reach = params.repulsion_radius + 2 * params.robot_radius
    for _ in range(40):
        x, y = (float(v) for v in rng.uniform(0.6, 4.4, 2))
        if clearance(BOX_ROOM, x, y, params.robot_radius) < 0.5:
            continue
        pose = (x, y, float(rng.uniform(-math.pi, math.pi)))
        alone = Navigator().decide(
            0.0, pose=pose, belief=world.window(x, y), track=None, others=[], room=BOX_ROOM
        )
        a = float(rng.uniform(-math.pi, math.pi))
        far = [
            (x + (reach + 0.01) * math.cos(a), y + (reach + 0.01) * math.sin(a)),
            (x + 3.0, y - 2.0),
        ]
        with_far = Navigator().decide(
            0.0, pose=pose, belief=world.window(x, y), track=None, others=far, room=BOX_ROOM
        )
        assert with_far == alone  # bit for bit: a robot beyond the radius changes nothing
        ahead = [(x + 0.35 * math.cos(pose[2]), y + 0.35 * math.sin(pose[2]))]
        blocked = Navigator().decide(
            0.0, pose=pose, belief=world.window(x, y), track=None, others=ahead, room=BOX_ROOM
        )
        assert blocked.v <= alone.v
        assert blocked.v <= params.brake_gain * (0.35 - 2 * params.robot_radius) + 1e-12
        assert blocked.goal == alone.goal  # the goal is chosen from the belief, never from peers


def test_two_robots_with_the_same_belief_are_not_pushed_apart() -> None:
    """Same belief, different places: both head for the same best cell; no area rule splits them."""
    world = World(mu=0.0, var=0.05)
    world.mu[(world.gx - 2.5) ** 2 + (world.gy - 4.0) ** 2 < 0.3**2] = 1.0
    room = Room(5.0, 5.0)
    a, b = (1.0, 1.0, 0.5), (4.0, 1.0, 2.5)
    nav_a, nav_b = Navigator(), Navigator()
    solo_a, solo_b = Navigator(), Navigator()
    params = nav_a.params
    min_gap = math.inf
    for k in range(250):
        now = 0.1 * k
        da = nav_a.decide(
            now, pose=a, belief=world.window(*a[:2]), track=None, others=[b[:2]], room=room
        )
        db = nav_b.decide(
            now, pose=b, belief=world.window(*b[:2]), track=None, others=[a[:2]], room=room
        )
        sa = solo_a.decide(
            now, pose=a, belief=world.window(*a[:2]), track=None, others=[], room=room
        )
        sb = solo_b.decide(
            now, pose=b, belief=world.window(*b[:2]), track=None, others=[], room=room
        )
        gap = math.hypot(a[0] - b[0], a[1] - b[1]) - 2 * params.robot_radius
        min_gap = min(min_gap, gap)
        if gap >= params.repulsion_radius:
            assert (da, db) == (sa, sb)
        a, b = step(a, da), step(b, db)
    # Both went to the same place and only the short-range rule kept them from touching.
    assert math.hypot(a[0] - 2.5, a[1] - 4.0) < 1.0 and math.hypot(b[0] - 2.5, b[1] - 4.0) < 1.0
    assert 0.0 < min_gap < params.repulsion_radius
    print(f"\ntwo robots, one belief: closest gap {min_gap:.3f} m")


def test_same_inputs_give_the_same_decisions_bit_for_bit() -> None:
    def run() -> list[NavDecision]:
        world = World()
        nav = Navigator()
        pose = (1.2, 3.0, 0.3)
        out = []
        for k in range(120):
            world.observe(*pose)
            track = TrackView(3.0, 1.0, 0.1, 0.0, 0.1 * k, k > 80)
            d = nav.decide(
                0.1 * k,
                pose=pose,
                belief=world.window(*pose[:2]),
                track=track,
                others=[(3.0, 3.0)],
                room=BOX_ROOM,
            )
            out.append(d)
            pose = step(pose, d)
        return out

    assert run() == run()


@settings(max_examples=40, deadline=None)
@given(
    st.tuples(st.floats(0.05, 4.95), st.floats(0.05, 4.95), st.floats(-math.pi, math.pi)),
    st.integers(0, 2**31 - 1),
    st.booleans(),
    st.lists(st.tuples(st.floats(-1.0, 6.0), st.floats(-1.0, 6.0)), max_size=3),
)
def test_duties_are_always_within_unit_range(
    pose: tuple[float, float, float], seed: int, confident: bool, others: list[tuple[float, float]]
) -> None:
    rng = np.random.default_rng(seed)
    world = World()
    world.mu[:] = rng.uniform(0.0, 1.0, world.mu.shape)
    world.var[:] = rng.uniform(0.0, 1.0, world.var.shape)
    tx, ty = (float(v) for v in rng.uniform(-1.0, 6.0, 2))
    track = TrackView(tx, ty, 0.0, 0.0, 0.0, confident)
    d = Navigator().decide(
        1.0,
        pose=pose,
        belief=world.window(pose[0], pose[1]),
        track=track,
        others=others,
        room=BOX_ROOM,
    )
    assert -1.0 <= d.duty_left <= 1.0 and -1.0 <= d.duty_right <= 1.0
    assert math.isfinite(d.v) and math.isfinite(d.omega)


def test_inputs_are_validated() -> None:
    with pytest.raises(ValueError):
        Box(0.0, 0.0, 0.0, 1.0)
    with pytest.raises(ValueError):
        Room(5.0, -1.0)
    with pytest.raises(ValueError):
        BeliefView(np.zeros((3, 4)), np.zeros((3, 4)), np.arange(3.0), np.arange(3.0), 1.0)
    with pytest.raises(ValueError):
        BeliefView(np.zeros((3, 3)), np.zeros((3, 3)), np.arange(3.0), np.arange(3.0), 0.0)
    with pytest.raises(ValueError):
        TrackView(math.nan, 0.0, 0.0, 0.0, 0.0, True)
    with pytest.raises(ValueError):
        NavParams(brake_gain=20.0)


def test_the_standoff_is_the_cameras_view_distance_unless_set() -> None:
    assert Navigator().standoff == pytest.approx(3.0 / (1 + math.sin(math.radians(31.0))))
    assert Navigator(view_distance=1.5).standoff == 1.5  # the core passes its camera's
    assert Navigator(params=NavParams(standoff=0.8), view_distance=1.5).standoff == 0.8
    with pytest.raises(ValueError):
        NavParams(standoff=-0.8)
    with pytest.raises(ValueError):
        Navigator(view_distance=math.nan)
