"""Frames seen without a pose become looks once a pose comes, placed by dead reckoning back
from it: exact for a turn on the spot, less certain the farther back along a drive."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np

from agents.backfill import Backfill
from agents.belief.search import SearchMap, SearchParams, rounded_look
from agents.config import AgentConfig
from agents.core import AgentCore
from agents.drive_model import DriveModel
from agents.faults import ByzantineSpec, Stage
from agents.localizer_params import LocalizerParams
from agents.observations import ObservationBatch, PoseFix, TagSighting
from agents.pose_geometry import compose, relative, wrap_angle
from agents.room import Room

DRIVE = DriveModel()
PARAMS = LocalizerParams()
P_A = np.diag([1e-4, 1e-4, 1e-4])


def spun(horizon: float, rate: float, until: float, step: float = 0.05) -> Backfill:
    """Turning on the spot at ``rate`` (the gyro's), a frame every 0.1 s, from t = 0."""
    b = Backfill(horizon, DRIVE, PARAMS)
    t = 0.0
    while t < until - 1e-9:
        if round(t / 0.1, 6).is_integer():
            b.frame(t)
        t1 = round(t + step, 9)
        b.advance(t, t1, (-0.5, 0.5), rate, 0.0)
        t = t1
    return b


def test_a_turn_on_the_spot_is_placed_at_the_headings_it_looked() -> None:
    b = spun(horizon=4.0, rate=2.0, until=1.5)
    placed = b.place(1.5, np.array([1.0, 2.0, 0.3]), P_A)
    assert [round(p.t, 6) for p in placed] == [round(0.1 * k, 6) for k in range(15)]
    for p in placed:
        assert np.allclose(p.pose[:2], [1.0, 2.0], atol=1e-12)  # v = 0: it stayed put
        assert abs(wrap_angle(float(p.pose[2]) - (0.3 - 2.0 * (1.5 - p.t)))) < 1e-9
        # A perfect gyro (σ 0); the speed's error floor, even at rest, over the time back.
        drift = (PARAMS.speed_error_floor * (1.5 - p.t)) ** 2
        assert np.allclose(p.cov, P_A + np.diag([drift, drift, 0.0]), atol=1e-12)
    assert len(b) == 0  # placed once, then nothing kept


def test_a_turn_is_placed_less_the_gyros_scale_error_and_as_uncertain_as_it() -> None:
    """The gyro reads 3 % more than the car turns; the localizer's estimate of that scale
    error (0.03, σ 0.01) is taken off the rate, and its σ times the turn is heading σ."""
    b = Backfill(4.0, DRIVE, PARAMS)
    true_rate = 2.0
    for k in range(15):  # turning on the spot for 1.5 s, a frame every 0.1 s
        b.frame(0.1 * k)
        b.advance(0.1 * k, 0.1 * (k + 1), (-0.5, 0.5), 1.03 * true_rate, 0.0,
                  scale=(0.03, 0.01**2))
    placed = b.place(1.5, np.array([1.0, 2.0, 0.3]), P_A)
    assert len(placed) == 15
    for p in placed:
        back = 1.5 - p.t
        error = wrap_angle(float(p.pose[2]) - (0.3 - true_rate * back))
        assert abs(error) < 0.001 * back * true_rate  # 1.03·(1 - 0.03) = 0.9991 of the turn
        sigma = 0.01 * 1.03 * (1 - 0.03) * true_rate * back
        assert math.isclose(float(p.cov[2, 2]), 1e-4 + sigma**2, rel_tol=1e-9)


def test_the_error_of_the_dead_reckoning_grows_with_the_time_back() -> None:
    b = Backfill(4.0, DRIVE, PARAMS)
    for k in range(20):  # driving straight for 2 s, a frame every 0.1 s
        b.frame(0.1 * k)
        b.advance(0.1 * k, 0.1 * (k + 1), (0.6, 0.6), 0.0)
    v, _ = DRIVE.body_velocity(0.6, 0.6)
    placed = b.place(2.0, np.array([3.0, 1.0, 0.0]), P_A)
    assert len(placed) == 20
    for p in placed:  # heading 0: it stood v·(2 - t) behind, along x
        assert math.isclose(float(p.pose[0]), 3.0 - v * (2.0 - p.t), abs_tol=1e-9)
        assert math.isclose(float(p.pose[1]), 1.0, abs_tol=1e-9)
    xx = [float(p.cov[0, 0]) for p in placed]
    assert all(a > b for a, b in itertools.pairwise(xx))  # the older, the less certain
    sigma_v = PARAMS.speed_error_frac * v + PARAMS.speed_error_floor
    assert math.isclose(xx[0], 1e-4 + (sigma_v * 2.0 + v * 2.0 * PARAMS.gyro_error * 2.0) ** 2,
                        rel_tol=1e-6)


def test_a_spin_up_is_placed_on_the_rate_ramped_between_gyro_samples() -> None:
    """The rate grows by 3 rad/s² and the gyro is sampled every 0.1 s: held until the next
    sample, the headings of a start-up turn came out up to 0.15 rad off (the true heading
    is 1.5 t²); ramped between samples they are exact up to the last sample, whose held
    rate leaves one tail error that their σ covers."""
    b = Backfill(4.0, DRIVE, PARAMS)
    t, step = 0.0, 0.05
    while t < 1.0 - 1e-9:
        if round(t / 0.1, 6).is_integer():
            b.frame(t)
        gyro = 3.0 * round(math.floor(round(t / 0.1, 6)) * 0.1, 6)  # the last sample's rate
        t1 = round(t + step, 9)
        b.advance(t, t1, (-0.5, 0.5), gyro, 0.0, rate_psd=0.9)  # 3² (rad/s²)² · 0.1 s
        t = t1
    placed = b.place(1.0, np.array([1.0, 2.0, 0.0]), P_A)
    assert len(placed) == 10
    tail = 1.5 * 1.0**2 - 1.5 * 0.9**2 - 2.7 * 0.1  # the last 0.1 s at the held 2.7 rad/s
    for p in placed:
        true = -(1.5 - 1.5 * p.t**2)  # the heading at t, 0 at t_a = 1 s
        err = wrap_angle(float(p.pose[2]) - true)
        assert math.isclose(err, tail, abs_tol=1e-9)  # all but the held tail is exact
        assert abs(err) <= 2.0 * math.sqrt(float(p.cov[2, 2]))
        assert math.sqrt(float(p.cov[2, 2])) < 0.05  # and not blown up to say so


def test_a_rate_that_jumps_is_placed_on_the_cars_angle() -> None:
    """The rate jumps from 0 to 3 rad/s at 0.42 s, between two samples 0.1 s apart: ramped
    between the samples, that interval turns 0.15 rad where the car turned 0.24, and every
    frame before it is placed 0.09 rad off; with the car's angle (the interval's mean rate)
    each is placed exactly, and with no more variance than the ramp claims."""
    def theta(t: float) -> float:
        return 3.0 * max(0.0, t - 0.42)

    def run(with_angle: bool) -> list:
        b = Backfill(4.0, DRIVE, PARAMS)
        t, step = 0.0, 0.05
        while t < 1.0 - 1e-9:
            sample = round(t / 0.1, 6).is_integer()
            if sample:
                b.frame(t)
            k = math.floor(round(t / 0.1, 6))
            gyro = 3.0 if k * 0.1 >= 0.42 else 0.0
            mean = (theta(k * 0.1) - theta(k * 0.1 - 0.1)) / 0.1
            t1 = round(t + step, 9)
            b.advance(t, t1, (-0.5, 0.5), gyro, 0.0, rate_psd=9.0, new_sample=sample,
                      interval=(mean, 0.0) if with_angle and sample and k > 0 else None)
            t = t1
        return b.place(1.0, np.array([1.0, 2.0, 0.0]), P_A)

    for with_angle, off in ((True, 0.0), (False, 0.09)):
        placed = run(with_angle)
        assert len(placed) == 10
        for p in placed:
            err = wrap_angle(float(p.pose[2]) - (theta(p.t) - theta(1.0)))
            assert math.isclose(abs(err), off if p.t < 0.42 else 0.0, abs_tol=1e-9), (
                with_angle, p.t, err)
    by_t = {p.t: float(p.cov[2, 2]) for p in run(False)}
    assert all(float(p.cov[2, 2]) <= by_t[p.t] for p in run(True))


def test_only_frames_within_the_horizon_are_kept() -> None:
    b = spun(horizon=1.0, rate=1.0, until=3.0)
    placed = b.place(3.0, np.array([1.0, 1.0, 0.0]), P_A)
    assert placed and min(p.t for p in placed) >= 2.0 - 1e-9
    assert Backfill(0.0, DRIVE, PARAMS).place(3.0, np.zeros(3), P_A) == []


ROOM = Room(5.0, 5.0)
STILL = SearchParams(target_speed=0.0)
CONFIG = AgentConfig(name="walnut", room=ROOM, landmarks={0: (0.0, 2.5)}, target_tag=100,
                     search=STILL)


def turned_without_a_pose(until: float, theta_a: float, target_at: float | None = None,
                          sensor: ByzantineSpec | None = None,
                          config: AgentConfig = CONFIG) -> tuple[AgentCore, list[float]]:
    """A core turning on the spot at 1 rad/s without a pose, a frame every 0.1 s until
    ``until`` (seeing the target 1.5 m dead ahead at ``target_at``), then a pose fix at
    (2, 2, ``theta_a``); ``sensor``: its camera's fault. Returns the core and the frames'
    times."""
    core = AgentCore(config, t0=0.0)
    core.set_sensor_fault(sensor, seed=1)
    t = 0.0
    frames: list[float] = []
    while t < until - 1e-9:
        core.on_car_status(t, -0.5, 0.5, 1.0)
        seen = TagSighting(100, 1.5, 0.0, 0.02, 0.01) if t == target_at else None
        core.on_observations(ObservationBatch(t, True, target=seen), t)
        frames.append(t)
        t = round(t + 0.1, 9)
    assert core.seeker.stats["looks_made"] == 0  # no pose, no look yet
    core.on_car_status(t, -0.5, 0.5, 1.0)
    core.on_observations(ObservationBatch(t, True, pose_fix=PoseFix(2.0, 2.0, theta_a, P_A)), t)
    return core, frames


def test_the_core_makes_looks_of_a_turn_without_a_pose_once_a_pose_fix_comes() -> None:
    theta_a = 1.0
    core, frames = turned_without_a_pose(2.0, theta_a)
    t = 2.0
    made = core.seeker.stats["looks_backfilled"]
    assert made == 7  # one look per 0.25 s at most: 0, 0.3, ..., 1.8 (2.0 is too soon after)
    # The map is what the same looks, at the headings the car turned through, give.
    expect = SearchMap(ROOM, STILL, CONFIG.nav.robot_radius)
    gyro = core.odometry.gyro  # the rate the core integrated (less the gyro's learnt bias)
    last = -math.inf
    cf = CONFIG.localizer.camera_forward
    for tf in frames:
        if tf - last < STILL.look_interval - 1e-6:
            continue
        last = tf
        assert gyro is not None
        th = theta_a - gyro * (t - tf)
        look = rounded_look(tf, (2.0 + cf * math.cos(th), 2.0 + cf * math.sin(th), th),
                            CONFIG.sensing.range, CONFIG.sensing.fov)
        expect.apply_look(look)
    assert core.seeker.map is not None
    assert np.allclose(core.seeker.map.p, expect.p, atol=1e-12)


def test_a_sighting_without_a_pose_starts_the_track_where_the_pose_places_it() -> None:
    core, _ = turned_without_a_pose(1.0, 0.5, target_at=0.5)
    t = 1.0
    assert core.seeker.stats["sightings_backfilled"] == 1
    gyro = core.odometry.gyro
    assert gyro is not None
    th = 0.5 - gyro * (t - 0.5)  # the heading it faced when it saw the target
    cf = CONFIG.localizer.camera_forward
    x = 2.0 + (cf + 1.5) * math.cos(th)
    y = 2.0 + (cf + 1.5) * math.sin(th)
    assert core.track.initialised and core.stats["detections"] == 1
    assert np.allclose(core.track.state[:2], [x, y], atol=1e-9)
    # Logged as a detection of its capture time, known when the pose came.
    [det] = [r.fields for r in core.take_outputs().records if r.event == "detection"]
    assert (det["t_det"], det["placed_at"], det["reason"]) == (0.5, 1.0, "initialised")
    # The map is held on it, not told "not there"; with a track, no look is made.
    assert core.seeker.map is not None
    assert core.seeker.map.probability_within(x, y, 0.3) > 0.9
    assert core.seeker.stats["looks_backfilled"] == 0


def test_a_sighting_without_a_pose_starts_the_track_without_a_search_map_too() -> None:
    """The frames of the turn are kept for the track whether or not the agent searches."""
    no_search = replace(CONFIG, search=replace(STILL, enabled=False))
    core, _ = turned_without_a_pose(1.0, 0.5, target_at=0.5, config=no_search)
    with_map, _ = turned_without_a_pose(1.0, 0.5, target_at=0.5)
    assert core.seeker.map is None
    assert core.track.initialised and core.stats["detections"] == 1
    assert np.array_equal(core.track.state, with_map.track.state)


def test_the_backfill_takes_the_localizers_wander_density() -> None:
    """One estimate of the gyro rate's wander, the localizer's, serves both."""
    core = AgentCore(CONFIG, t0=0.0)
    t = 0.0
    for k in range(12):  # spinning up without a pose, a gyro sample every 0.1 s
        core.on_car_status(t, -0.5, 0.5, 0.3 * k)
        core.on_observations(ObservationBatch(t, True), t)
        t = round(t + 0.1, 9)
    core.odometry.advance(t)  # the backfill takes the density as it reckons on
    assert core.localizer.pose is None and len(core.backfill) > 0
    assert core.localizer.rate_psd > 0.0
    assert core.backfill._psd == core.localizer.rate_psd


def test_a_broken_sensor_distorts_a_placed_sighting_as_a_live_one() -> None:
    """A placed sighting goes through the same path as a live detection: a sensor fault
    (Byzantine at=sense, bias 1 m along x) moves it too."""
    honest, _ = turned_without_a_pose(1.0, 0.5, target_at=0.5)
    broken, _ = turned_without_a_pose(1.0, 0.5, target_at=0.5,
                                      sensor=ByzantineSpec(bias=(1.0, 0.0), at=Stage.SENSE))
    assert broken.track.initialised and honest.track.initialised
    moved = broken.track.state[:2] - honest.track.state[:2]
    assert np.allclose(moved, [1.0, 0.0], atol=1e-9)


def test_relative_undoes_compose() -> None:
    origin = np.array([1.0, -2.0, 2.9])
    offset = np.array([0.4, -1.3, -2.8])
    pose, _, _ = compose(origin, offset)
    assert np.allclose(relative(origin, pose), offset, atol=1e-12)
