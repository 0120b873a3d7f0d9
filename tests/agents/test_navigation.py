from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.drive_model import DriveModel
from agents.navigation import BeliefView, NavDecision, Navigator, NavMode, NavParams, TrackView
from agents.room import Box, Room
from agents.viewpoint import view_blocked

CELL = 0.1
EMPTY_ROOM = Room(5.0, 5.0)
BOX_ROOM = Room(
    5.0, 5.0, (Box(1.5, 3.5, 0.6, 0.4), Box(3.5, 1.5, 0.5, 0.8), Box(2.6, 2.6, 0.3, 0.3))
)
NOMINAL = DriveModel()
TRUTH = DriveModel(max_wheel_speed=0.9 * NOMINAL.max_wheel_speed, deadband=NOMINAL.deadband)


class World:
    """A global belief over the lattice around a 5 m room, and windows cut from it."""

    OFFSET = 40  # global index of lattice cell 0 in the arrays

    def __init__(self, mu: float = 0.0, var: float = 1.0) -> None:
        n = 150
        self.centres: np.ndarray = (np.arange(n) - self.OFFSET + 0.5) * CELL
        self.gx, self.gy = np.meshgrid(self.centres, self.centres)
        self.mu = np.full((n, n), mu)
        self.var = np.full((n, n), var)

    def window(self, x: float, y: float, size: int = 64) -> BeliefView:
        ix = math.floor(x / CELL) - size // 2 + self.OFFSET
        iy = math.floor(y / CELL) - size // 2 + self.OFFSET
        return BeliefView(
            self.mu[iy : iy + size, ix : ix + size].copy(),
            self.var[iy : iy + size, ix : ix + size].copy(),
            self.centres[ix : ix + size].copy(),
            self.centres[iy : iy + size].copy(),
            1.0,
        )

    def observe(self, x: float, y: float, th: float) -> None:
        """The camera's sector (62 degrees, 2 m) is searched: var falls there, rises elsewhere."""
        d = np.hypot(self.gx - x, self.gy - y)
        b = np.abs(
            np.remainder(np.arctan2(self.gy - y, self.gx - x) - th + np.pi, 2 * np.pi) - np.pi
        )
        seen = (d < 2.0) & (b < math.radians(31))
        self.var[seen] *= 0.7
        np.minimum(self.var + 0.002, 1.0, out=self.var)
        self.mu *= 0.99


def step(
    pose: tuple[float, float, float], d: NavDecision, dt: float = 0.1
) -> tuple[float, float, float]:
    """Drive the duties for ``dt`` on the (10 % slower than modelled) true car."""
    x, y, th = pose
    v, w = TRUTH.body_velocity(d.duty_left, d.duty_right)
    n = 5
    h = dt / n
    for _ in range(n):
        thm = th + 0.5 * w * h
        x, y, th = (
            x + v * h * math.cos(thm),
            y + v * h * math.sin(thm),
            math.remainder(th + w * h, math.tau),
        )
    return x, y, th


def clearance(room: Room, x: float, y: float, radius: float) -> float:
    return float(room.surface_distance(np.array(x), np.array(y))) - radius


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


def decisions(
    nav: Navigator,
    world: World,
    poses: Sequence[tuple[float, float, float]],
    others: Sequence[tuple[float, float]],
) -> list[NavDecision]:
    return [
        nav.decide(
            0.1 * k, pose=p, belief=world.window(*p[:2]), track=None, others=others, room=BOX_ROOM
        )
        for k, p in enumerate(poses)
    ]


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
