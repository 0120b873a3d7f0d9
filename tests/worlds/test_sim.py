"""The simulation core in virtual time: physics, firmware, sensors, camera and faults."""

from __future__ import annotations

import itertools
import math
import tempfile

import cv2
import numpy as np
import pybullet as p
import pytest

from agents.perception.detect import safe_detector
from protocol.mz01 import (
    Command,
    Kind,
    ProbeRequest,
    decode_probe_reply,
    encode_command,
    encode_probe_request,
    parse_telemetry,
)
from tests.worlds.rawcar import arena_text
from worlds.arena import CarModel, Orbit, RandomWalk, Waypoints, parse_arena
from worlds.bodies import duty_to_speed
from worlds.motion import motion_model
from worlds.sensors import wrap_angle
from worlds.sim import PORT_COMMAND, PORT_PROBE, World, WorldError

SRC = ("127.0.0.1", 40000)


@pytest.fixture
def world():
    w = World(parse_arena(arena_text("127.0.9"), "test.toml"), t0=50.0)
    yield w
    w.close()


def _cmd(world: World, car: int, kind: Kind, t: float, **fields) -> list:
    fw = world.car(car).firmware
    fields.setdefault("stamp_ms", (world.car(car).uptime_us(t) // 1000) & 0xFFFF_FFFF)  # fresh
    cmd = Command(car, kind, boot_nonce=fw.boot_nonce, session_token=fw.token, **fields)
    step = world.deliver(car, PORT_COMMAND, encode_command(cmd), SRC, t)
    return step.events


def _arm(world: World, car: int, t: float) -> None:
    stamp = world.car(car).uptime_us(t) // 1000
    events = _cmd(world, car, Kind.ARM, t, seq=1, stamp_ms=stamp)
    assert "arm" in [e.event for e in events], events


def _drive(
    world: World, car: int, left: float, right: float, *, t0: float, seconds: float
) -> float:
    """DRIVE at 30 Hz from t0 for ``seconds``; returns the time of the last DRIVE."""
    seq = world.car(car).firmware.last_seq
    t = t0
    while t <= t0 + seconds:
        seq += 1
        _cmd(world, car, Kind.DRIVE, t, seq=seq, left=left, right=right)
        last = t
        t += 1 / 30
    return last


def test_car_drives_straight_then_turns_in_place(world: World):
    body = world.scene.cars[1]
    x0, y0, yaw0 = body.pose()
    _arm(world, 1, 50.1)
    _drive(world, 1, 1.0, 1.0, t0=50.1, seconds=1.0)
    x1, y1, yaw1 = body.pose()
    forward = (x1 - x0) * math.cos(yaw0) + (y1 - y0) * math.sin(yaw0)
    lateral = -(x1 - x0) * math.sin(yaw0) + (y1 - y0) * math.cos(yaw0)
    assert 0.45 < forward < 0.75, forward  # 0.7 m/s top speed, less the acceleration
    assert abs(lateral) < 0.02 and abs(wrap_angle(yaw1 - yaw0)) < 0.05
    world.advance_to(51.6)  # watchdog stops it
    xs, ys, yaws = body.pose()
    _arm(world, 1, 51.7)
    _drive(world, 1, -1.0, 1.0, t0=51.7, seconds=1.0)
    x2, y2, yaw2 = body.pose()
    _, rate = body.motion()
    assert rate > 1.0, rate  # counter-clockwise, well under the no-slip 2v/track
    assert math.hypot(x2 - xs, y2 - ys) < 0.1  # in place, give or take the skid
    assert abs(wrap_angle(yaw2 - yaws)) > 1.0
    assert world.scene.cars[2].pose()[:2] == pytest.approx((3.0, 3.0), abs=1e-3)


def test_deadband_and_duty_scaling():
    m = CarModel(max_wheel_speed=0.8, duty_deadband=0.2)
    assert duty_to_speed(0.1, m) == 0.0 and duty_to_speed(-0.19, m) == 0.0
    assert duty_to_speed(1.0, m) == pytest.approx(0.8)
    assert duty_to_speed(-1.0, m) == pytest.approx(-0.8)
    assert duty_to_speed(0.6, m) == pytest.approx(0.4)


def test_deadband_duty_does_not_move_the_car(world: World):
    x0, y0, _ = world.scene.cars[1].pose()
    _arm(world, 1, 50.1)
    _drive(world, 1, 0.15, 0.15, t0=50.1, seconds=0.5)
    x1, y1, _ = world.scene.cars[1].pose()
    assert math.hypot(x1 - x0, y1 - y0) < 0.005


def test_watchdog_zeroes_duty_within_300ms_plus_a_tick(world: World):
    _arm(world, 1, 50.1)
    last = _drive(world, 1, 0.6, 0.6, t0=50.1, seconds=0.3)
    events = world.advance_to(last + 0.5).events
    zero = [e for e in events if e.event == "duty" and e.fields["left"] == 0.0]
    disarm = [e for e in events if e.event == "disarm"]
    assert len(zero) == 1 and len(disarm) == 1
    assert disarm[0].fields["reason"] == "watchdog"
    assert disarm[0].fields["last_feed_t"] == pytest.approx(last)
    assert 0.300 <= zero[0].t - last <= 0.305 + 1e-9


def test_telemetry_carries_gyro_and_synthetic_observations(world: World):
    hello = Command(1, Kind.HELLO)
    step = world.deliver(1, PORT_COMMAND, encode_command(hello), SRC, 50.05)
    first = parse_telemetry(step.sends[0].data)
    assert first.gyro_z is not None and abs(first.gyro_z) < 0.2
    sends = world.advance_to(51.0).sends
    tels = [parse_telemetry(s.data) for s in sends if s.dst == SRC]
    assert 8 <= len(tels) <= 11  # every 100 ms
    sim = tels[-1].sim
    assert sim is not None
    assert set(sim) == {"obs_ms", "tags", "target", "sigma"}
    assert {t[0] for t in sim["tags"]} == {14, 15}
    assert tels[-1].uptime_ms - 100 <= sim["obs_ms"] <= tels[-1].uptime_ms


def _turning_telemetry(world: World) -> list:
    """Telemetry from car 1, still, then turning in place for 1 s, then stopped: [yaw
    before, the telemetries, the true turn (unwrapped)]."""
    world.deliver(1, PORT_COMMAND, encode_command(Command(1, Kind.HELLO)), SRC, 50.05)
    tels = [parse_telemetry(s.data) for s in world.advance_to(50.3).sends if s.dst == SRC]
    yaw0 = world.scene.cars[1].pose()[2]  # still since the first telemetry
    _arm(world, 1, 50.3)
    fw = world.car(1).firmware
    t, seq = 50.3 + 1 / 30, fw.last_seq
    yaw, turned = yaw0, 0.0
    while t < 52.5:
        if t < 51.3:
            seq += 1
            cmd = Command(1, Kind.DRIVE, boot_nonce=fw.boot_nonce, session_token=fw.token,
                          seq=seq, left=-1.0, right=1.0,
                          stamp_ms=(world.car(1).uptime_us(t) // 1000) & 0xFFFF_FFFF)
            step = world.deliver(1, PORT_COMMAND, encode_command(cmd), SRC, t)
        else:
            step = world.advance_to(t)
        tels += [parse_telemetry(s.data) for s in step.sends if s.dst == SRC]
        turned += wrap_angle(world.scene.cars[1].pose()[2] - yaw)  # under 0.2 rad a step
        yaw = world.scene.cars[1].pose()[2]
        t += 1 / 30
    return [yaw0, tels, turned]


def test_telemetry_carries_the_gyros_angle(world: World):
    """Turning more than a radian and stopping: the telemetry's angle changed by the car's
    true turn times (1 + the gyro's scale error) plus its bias times the time, within its
    random walk (σ ~1e-3 rad)."""
    _, tels, true_turn = _turning_telemetry(world)
    assert len(tels) >= 18 and all(t.gyro_angle is not None for t in tels)
    turned = sum(wrap_angle(b.gyro_angle - a.gyro_angle) for a, b in itertools.pairwise(tels))
    assert abs(true_turn) > 1.0  # the car did turn
    gyro = world.car(1).gyro
    assert gyro is not None
    span = (tels[-1].uptime_ms - tels[0].uptime_ms) / 1000
    # Still at both ends: the first telemetry at 50.5 s, the last after the car stopped.
    assert gyro.scale != 0.0  # drawn at boot (the arena's default gyro_scale)
    expected = (1.0 + gyro.scale) * true_turn + gyro.bias * span
    assert wrap_angle(turned - expected) == pytest.approx(0.0, abs=0.01)


def test_a_firmware_without_the_angle_sends_the_rate_alone():
    w = World(parse_arena(arena_text("127.0.9", extra="[car_model]\ngyro_angle = false\n"),
                          "test.toml"), t0=50.0)
    try:
        _, tels, _ = _turning_telemetry(w)
        assert tels and all(t.gyro_angle is None and t.gyro_z is not None for t in tels)
    finally:
        w.close()


def test_probe_reply_is_car_uptime(world: World):
    car = world.car(1)
    step = world.deliver(1, PORT_PROBE, encode_probe_request(ProbeRequest(7)), SRC, 50.5)
    (send,) = step.sends
    assert send.port == PORT_PROBE and send.dst == SRC
    reply = decode_probe_reply(send.data)
    assert reply.request_id == 7 and reply.uptime_us == car.uptime_us(50.5)
    assert car.uptime_us(50.5) > 2e6  # booted before the world started
    assert car.world_time(car.uptime_us(50.5)) == pytest.approx(50.5, abs=1e-5)


def _expected(world: World, car_id: int, x: float, y: float, z: float) -> tuple[float, float]:
    eye, yaw = world.scene.cars[car_id].camera()
    return math.hypot(x - eye[0], y - eye[1]), wrap_angle(math.atan2(y - eye[1], x - eye[0]) - yaw)


def test_synthetic_observations_agree_with_truth(world: World):
    """Residuals against exact geometry: each within 4 sigma, the means near zero."""
    rng = np.random.default_rng(1)
    body = world.scene.cars[1]
    sigma_r, sigma_b = world.arena.sensing.range_noise, world.arena.sensing.bearing_noise
    tags = {t.id: t for t in world.arena.tags}
    res_r, res_b = [], []
    t = 50.0
    for _ in range(300):
        x, y = rng.uniform(0.4, 1.6), rng.uniform(0.4, 3.6)
        yaw = math.pi + rng.uniform(-0.6, 0.6)
        p.resetBasePositionAndOrientation(
            body.body, (x, y, 0.0425), (0, 0, math.sin(yaw / 2), math.cos(yaw / 2)),
            physicsClientId=world.client,
        )  # fmt: skip
        world.car(1).next_obs = t + 0.001  # observe now, before the car moves
        t += 0.002
        world.advance_to(t)
        obs = world.car(1).sim_obs
        assert obs is not None
        for tag_id, rng_m, bearing in obs["tags"]:
            tag = tags[tag_id]
            er, eb = _expected(world, 1, tag.x, tag.y, tag.z)
            res_r.append((rng_m - er) / sigma_r)
            res_b.append(wrap_angle(bearing - eb) / sigma_b)
    assert len(res_r) > 150
    assert max(abs(r) for r in res_r) < 4.5 and max(abs(b) for b in res_b) < 4.5
    assert abs(np.mean(res_r)) < 0.3 and abs(np.mean(res_b)) < 0.3
    assert 0.7 < np.std(res_r) < 1.3 and 0.7 < np.std(res_b) < 1.3


def test_target_observed_with_its_tag_id(world: World):
    body = world.scene.cars[2]
    # car 2 looks at the target's orbit centre from 1.5 m
    p.resetBasePositionAndOrientation(
        body.body, (2.6, 3.4, 0.0425), (0, 0, math.sin(-math.pi / 4), math.cos(-math.pi / 4)),
        physicsClientId=world.client,
    )  # fmt: skip
    hits = []
    for k in range(30):
        world.advance_to(50.0 + 0.1 * (k + 1))
        obs = world.car(2).sim_obs
        if obs and obs["target"] is not None:
            tag_id, rng_m, bearing = obs["target"]
            state = world.target_state
            assert state is not None and tag_id == 100
            er, eb = _expected(world, 2, state.x, state.y, 0.21)
            hits.append((rng_m - er, wrap_angle(bearing - eb)))
    assert len(hits) >= 10
    # the target moves at 0.5 m/s between capture and this check: at most one tick apart
    assert all(abs(dr) < 0.2 and abs(db) < 0.2 for dr, db in hits)


def test_line_of_sight_is_blocked_by_an_obstacle():
    text = arena_text("127.0.9", extra="") + (
        "\n[[obstacles]]\nx = 0.7\ny = 0.9\nsize = [0.1, 0.1]\nheight = 0.4\n"
    )
    w = World(parse_arena(text, "t.toml"), t0=0.0)
    try:
        w.advance_to(0.5)
        obs = w.car(1).sim_obs
        assert obs is not None
        assert {t[0] for t in obs["tags"]} == {14}  # tag 15 is behind the post
    finally:
        w.close()


def test_two_worlds_coexist_in_one_process():
    a = World(parse_arena(arena_text("127.0.9"), "a.toml"), t0=0.0)
    b = World(parse_arena(arena_text("127.0.10"), "b.toml"), t0=0.0)
    try:
        assert a.client != b.client
        _arm(a, 1, 0.1)
        _drive(a, 1, 1.0, 1.0, t0=0.1, seconds=0.5)
        b.advance_to(0.6)
        assert a.scene.cars[1].pose()[0] < 1.2  # car 1 faces -x
        assert b.scene.cars[1].pose()[0] == pytest.approx(1.3, abs=1e-3)
    finally:
        a.close()
        b.close()


def test_reboot_fault(world: World):
    car = world.car(1)
    old = car.nonce
    _arm(world, 1, 50.1)
    _cmd(world, 1, Kind.DRIVE, 50.12, seq=2, left=0.8, right=0.8)
    assert car.duty[0] == pytest.approx(0.8) and car.duty[1] == pytest.approx(0.8)
    events = world.reboot(1, 50.2).events
    assert car.nonce != old and not car.firmware.armed and car.duty == (0.0, 0.0)
    assert car.uptime_us(50.2) == 0
    kinds = [e.event for e in events]
    assert "fault" in kinds and "boot" in kinds and "duty" in kinds
    # packets from the old session are refused
    stale = Command(1, Kind.DRIVE, boot_nonce=old, seq=3, left=0.5, right=0.5)
    events = world.deliver(1, PORT_COMMAND, encode_command(stale), SRC, 50.3).events
    assert [e.fields["reason"] for e in events if e.event == "reject"] == ["bad_nonce"]


def test_reboot_with_down_time(world: World):
    world.reboot(2, 50.0, down=0.5)
    hello = encode_command(Command(2, Kind.HELLO))
    assert world.deliver(2, PORT_COMMAND, hello, SRC, 50.3).sends == []
    assert len(world.deliver(2, PORT_COMMAND, hello, SRC, 50.6).sends) == 1
    assert world.car(2).uptime_us(50.6) == pytest.approx(100_000, abs=200)


def test_drop_link_fault(world: World):
    hello = encode_command(Command(1, Kind.HELLO))
    world.deliver(1, PORT_COMMAND, hello, SRC, 50.01)
    world.drop_link(1, 0.5, 50.1)
    assert world.advance_to(50.55).sends == []  # telemetry lost
    assert world.deliver(1, PORT_COMMAND, hello, SRC, 50.55).sends == []
    assert world.car(1).counters.dropped_in == 1
    assert world.capture_frame(1, 50.56) is None
    assert len(world.advance_to(50.9).sends) >= 3  # back after 0.5 s
    with pytest.raises(WorldError):
        world.drop_link(9, 1.0, 51.0)
    with pytest.raises(WorldError):
        world.drop_link(1, -1.0, 51.0)


def test_freeze_camera_repeats_the_last_frame_and_observation(world: World):
    first = world.capture_frame(1, 50.1)
    assert first is not None and first.seq == 1 and not first.repeated
    world.advance_to(50.3)
    obs = world.car(1).sim_obs
    world.freeze_camera(1, 0.5, 50.3)
    again = world.capture_frame(1, 50.4)
    assert again is not None and again.repeated
    assert (again.seq, again.capture_ms, again.jpeg) == (first.seq, first.capture_ms, first.jpeg)
    world.advance_to(50.7)
    assert world.car(1).sim_obs is obs
    fresh = world.capture_frame(1, 50.9)
    assert fresh is not None and fresh.seq == 2 and fresh.capture_ms > first.capture_ms


def test_truth_log_at_20_hz(world: World):
    events = world.advance_to(51.0).events
    truth = [e for e in events if e.event == "truth"]
    assert len(truth) == 21  # 50.0 .. 51.0 inclusive
    sample = truth[-1].fields
    assert [c["id"] for c in sample["cars"]] == [1, 2]
    assert set(sample["cars"][0]) == {"id", "x", "y", "yaw", "v", "w", "duty"}
    speed = math.hypot(sample["target"]["vx"], sample["target"]["vy"])
    assert speed == pytest.approx(0.5, abs=1e-4)
    assert world.advance_to(51.0).events == []
    with pytest.raises(WorldError):
        world.advance_to(50.0)


def test_camera_frame_decodes_and_gives_the_right_geometry():
    w = World(parse_arena(arena_text("127.0.9", sensing="camera"), "t.toml"), t0=0.0)
    try:
        frame = w.capture_frame(1, 0.1)
        assert frame is not None and frame.boot_id == w.car(1).nonce
        image = cv2.imdecode(np.frombuffer(frame.jpeg, np.uint8), cv2.IMREAD_GRAYSCALE)
        assert image.shape == (240, 320)
        lens = w.renderer.lens
        pinhole = cv2.undistort(image, lens.K, lens.dist)
        detector = safe_detector()
        cam = w.arena.camera
        found = detector.detect(
            pinhole, estimate_tag_pose=True, camera_params=(cam.fx, cam.fy, cam.cx, cam.cy),
            tag_size=0.2,
        )  # fmt: skip
        assert {d.tag_id for d in found} == {14, 15}
        eye, yaw = w.scene.cars[1].camera()
        for det in found:
            assert det.hamming == 0
            tag = next(t for t in w.arena.tags if t.id == det.tag_id)
            # tag centre in the camera frame (x right, y down, z forward)
            dx, dy = tag.x - eye[0], tag.y - eye[1]
            fwd = dx * math.cos(yaw) + dy * math.sin(yaw)
            left = -dx * math.sin(yaw) + dy * math.cos(yaw)
            expected = np.array([-left, eye[2] - tag.z, fwd])
            assert np.linalg.norm(det.pose_t.ravel() - expected) < 0.05, (det.pose_t, expected)
            # the tag's z axis points away from the camera, so it is not mirrored
            assert det.pose_R[2, 2] > 0.8
        assert w.car(1).sim_obs is None  # camera mode sends no synthetic observations
    finally:
        w.close()


def test_motion_models():
    orbit = motion_model(Orbit((2.0, 2.0), 1.0, 1.0, ccw=True))
    s0, s1 = orbit.state(0.0), orbit.state(math.pi / 2)
    assert (s0.x, s0.y) == pytest.approx((3.0, 2.0)) and (s1.x, s1.y) == pytest.approx((2.0, 3.0))
    assert math.hypot(s1.vx, s1.vy) == pytest.approx(1.0)
    cw = motion_model(Orbit((2.0, 2.0), 1.0, 1.0, ccw=False)).state(math.pi / 2)
    assert (cw.x, cw.y) == pytest.approx((2.0, 1.0))
    way = motion_model(Waypoints(((0.0, 0.0), (2.0, 0.0), (2.0, 1.0)), 1.0, loop=True))
    assert (way.state(1.0).x, way.state(2.5).y) == pytest.approx((1.0, 0.5))
    lap = 3.0 + math.sqrt(5.0)
    assert (way.state(lap + 0.1).x, way.state(lap + 0.1).y) == pytest.approx((0.1, 0.0))
    once = motion_model(Waypoints(((0.0, 0.0), (1.0, 0.0)), 1.0, loop=False))
    assert (once.state(9.0).x, once.state(9.0).vx) == (1.0, 0.0)
    walk = RandomWalk((1.0, 1.0, 3.0, 2.0), 1.0, seed=4)
    a, b = motion_model(walk), motion_model(walk)
    times = np.linspace(0, 60, 601)
    pa = [a.state(float(t)) for t in times]
    assert [(s.x, s.y) for s in pa] == [(s.x, s.y) for s in (b.state(float(t)) for t in times)]
    assert all(1.0 <= s.x <= 3.0 and 1.0 <= s.y <= 2.0 for s in pa)
    assert all(math.hypot(s.vx, s.vy) == pytest.approx(1.0) for s in pa)


def test_effective_track_calibration_matches_the_simulated_car(world: World):
    """The agents' calibration constant is what this world's skid-steer really does."""
    body = world.scene.cars[1]
    _arm(world, 1, 50.1)
    rates = []
    t = 50.1
    for k in range(12):
        t = _drive(world, 1, -0.7, 0.7, t0=t + 1 / 30, seconds=0.1)
        if k >= 4:  # after the spin-up
            rates.append(body.motion()[1])
    model = world.arena.car_model
    wheel = duty_to_speed(0.7, model)
    measured = 2 * wheel / (sum(rates) / len(rates))
    print(f"effective track: measured {measured:.3f} m, calibration {model.effective_track} m")
    assert measured == pytest.approx(model.effective_track, rel=0.25)


def test_a_world_keeps_no_temporary_files_a_kill_would_leave_behind(tmp_path, monkeypatch):
    # Tag textures are read by PyBullet as they load; a world killed by SIGKILL runs no
    # close(), so anything it keeps on disk while alive is left in /tmp for good.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    w = World(parse_arena(arena_text("127.0.9"), "test.toml"), t0=50.0)
    try:
        assert w.scene.tags, "the arena has wall tags (their textures are what was kept)"
        assert list(tmp_path.iterdir()) == []
    finally:
        w.close()


def test_the_target_passes_through_a_car_without_moving_it():
    # PyBullet filters collisions by "group of one AND mask of the other" only when told:
    # its default ORs them, and the kinematic target then shoved a parked car away at
    # ~1 m/s (a camera-mode run lost its car's pose this way).
    text = arena_text("127.0.9").replace("center = [2.6, 1.6]", "center = [2.5, 3.0]")
    w = World(parse_arena(text, "t.toml"), t0=0.0)
    try:
        x0, y0, yaw0 = w.scene.cars[2].pose()
        passed = False
        t = 0.0
        while t < 4.0:
            t += 0.05
            w.advance_to(t)
            state = w.target_state
            assert state is not None
            passed |= math.hypot(state.x - x0, state.y - y0) < 0.05
        x, y, yaw = w.scene.cars[2].pose()
        assert passed  # the target's column went through the car's place
        assert math.hypot(x - x0, y - y0) < 0.005 and abs(wrap_angle(yaw - yaw0)) < 0.01
    finally:
        w.close()
