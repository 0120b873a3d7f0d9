"""The perception pipeline on frames rendered by the world, against ground truth."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import cv2
import numpy as np
import pybullet as p
import pytest

from agents.drive_model import DriveModel
from agents.localization import PoseEKF
from agents.localizer_params import LocalizerParams
from agents.perception.consensus import CONTRADICTORY
from agents.perception.pipeline import (
    FRAME_SIZE,
    MOUNT_UNMEASURED,
    OUTLIER,
    PREDICTION_MISMATCH,
    UNMEASURED_TAG,
    Pipeline,
    PipelineParams,
    PredictedPose,
)
from agents.perception.pose import AMBIGUOUS
from agents.perception.tagmap import CameraMount, TagMap
from protocol.mz01 import Command, Kind, encode_command
from tests.agents.perception.scenes import Studio, pose_error, two_cars_camera, wall_arena
from tools.agent_config import simulated_tag_map
from worlds.sim import PORT_COMMAND, World

OBLIQUE = (0.8, 1.3, math.radians(139.0))  # sees tags 20, 21, 22 of the wall arena, none ambiguous


@pytest.fixture(scope="module")
def wall():
    studio = Studio(wall_arena())
    yield studio
    studio.close()


@pytest.fixture(scope="module")
def room():
    studio = Studio(two_cars_camera())
    yield studio
    studio.close()


def _shifted(tag_map: TagMap, tag_id: int, dy: float) -> TagMap:
    tags = dict(tag_map.tags)
    y = tags[tag_id].y
    assert y is not None
    tags[tag_id] = replace(tags[tag_id], y=y + dy)
    return replace(tag_map, tags=tags)


def test_localization_error_within_2_m_of_a_tag(room: Studio):
    """Median and 95th percentile of the pose-fix error on frames within 2 m of a tag."""
    tag_map = simulated_tag_map(room.arena)
    pipeline = Pipeline(tag_map)
    rng = np.random.default_rng(2024)
    size = room.arena.room.size_x
    results: dict[str, list[tuple[float, float]]] = {"no prediction": [], "with prediction": []}
    frames = 0
    for _ in range(70):
        wall = int(rng.integers(4))
        d, s = float(rng.uniform(0.4, 1.9)), float(rng.uniform(0.5, size - 0.5))
        x, y = [(s, d), (size - d, s), (s, size - d), (d, s)][wall]
        facing = [-math.pi / 2, 0.0, math.pi / 2, math.pi][wall]
        shot = room.shoot(x, y, facing + float(rng.uniform(-0.7, 0.7)))
        # "within 2 m of a tag": some mapped tag in view whose centre is <= 2 m from the camera
        near = [
            t for t in room.arena.tags
            if math.hypot(t.x - shot.eye[0], t.y - shot.eye[1]) <= 2.0
            and abs(math.remainder(math.atan2(t.y - shot.eye[1], t.x - shot.eye[0])
                                   - shot.truth[2], math.tau)) < math.radians(28)
        ]  # fmt: skip
        if not near:
            continue
        frames += 1
        noisy = PredictedPose(
            shot.truth[0] + float(rng.normal(0, 0.03)),
            shot.truth[1] + float(rng.normal(0, 0.03)),
            shot.truth[2] + float(rng.normal(0, math.radians(2))),
            np.diag([0.03**2, 0.03**2, math.radians(2) ** 2]),
        )
        for label, predicted in (("no prediction", None), ("with prediction", noisy)):
            batch = pipeline.process(shot.gray, shot.t, True, predicted).batch
            assert batch is not None
            if batch.pose_fix is not None:
                f = batch.pose_fix
                results[label].append(pose_error((f.x, f.y, f.theta), shot.truth))
    assert frames >= 40
    for label, errors in results.items():
        pos = np.array([e[0] for e in errors])
        head = np.array([e[1] for e in errors])
        print(
            f"\n{label}: {len(errors)}/{frames} frames gave a pose fix; position error "
            f"median {np.median(pos) * 100:.2f} cm, p95 {np.percentile(pos, 95) * 100:.2f} cm, "
            f"max {pos.max() * 100:.2f} cm; heading error median {np.median(head):.2f} deg, "
            f"p95 {np.percentile(head, 95):.2f} deg, max {head.max():.2f} deg"
        )
        assert len(errors) >= 0.25 * frames, f"{label}: too few fixes"
        assert np.median(pos) < 0.05 and np.percentile(pos, 95) < 0.05
        assert np.median(head) < 3.0 and np.percentile(head, 95) < 3.0
    print("counters:", pipeline.counters.as_dict())


def test_ambiguity_flag_on_a_fronto_parallel_far_tag(room: Studio):
    pipeline = Pipeline(simulated_tag_map(room.arena))
    # square in front of the south wall's tag 1 (x = 1.875), 2.2 m away, facing it
    shot = room.shoot(1.875, 2.2, -math.pi / 2)
    result = pipeline.process(shot.gray, shot.t, True)
    tag = next(t for t in result.record.tags if t.tag_id == 1)
    print(f"\ntag 1 at {tag.range:.2f} m, edge {tag.edge_px:.1f} px, reprojection "
          f"{tag.reproj_px:.3f} px, second solution {tag.reproj2_px:.3f} px and "
          f"{math.degrees(tag.rotation_gap):.0f} deg away: ambiguous={tag.ambiguous}")  # fmt: skip
    assert tag.ambiguous and tag.reason == AMBIGUOUS
    assert result.batch is not None and result.batch.pose_fix is None
    # not used for the pose, but its range and bearing do not depend on the ambiguity
    sighting = next(s for s in result.batch.tags if s.tag_id == 1)
    assert sighting.range == pytest.approx(2.2 - 0.05 - 0.003, abs=3 * sighting.sigma_range)
    assert abs(sighting.bearing) < 3 * sighting.sigma_bearing


def test_ambiguous_tag_resolved_by_the_prediction(room: Studio):
    pipeline = Pipeline(simulated_tag_map(room.arena))
    shot = room.shoot(2.3, 1.3, -math.pi / 2 + 0.1)  # tag 1 nearly square on, tag 2 aslant
    plain = pipeline.process(shot.gray, shot.t, True)
    reasons = {t.tag_id: t.reason for t in plain.record.tags}
    assert reasons == {1: AMBIGUOUS, 2: ""}
    assert plain.batch is not None and plain.batch.pose_fix is None  # tag 2 alone: too uncertain
    predicted = PredictedPose(*shot.truth, cov=np.diag([0.02**2, 0.02**2, 0.03**2]))
    resolved = pipeline.process(shot.gray, shot.t, True, predicted)
    tag = next(t for t in resolved.record.tags if t.tag_id == 1)
    assert tag.resolved_by == "prediction" and tag.reason == ""
    assert resolved.record.members == (1, 2)
    fix = resolved.batch.pose_fix if resolved.batch is not None else None
    assert fix is not None
    err_pos, err_head = pose_error((fix.x, fix.y, fix.theta), shot.truth)
    assert err_pos < 0.05 and err_head < 3.0
    # a prediction that fits neither solution resolves nothing
    wrong = PredictedPose(shot.truth[0] + 0.6, shot.truth[1], shot.truth[2] + 0.5)
    refused = pipeline.process(shot.gray, shot.t, True, wrong)
    assert {t.tag_id: t.reason for t in refused.record.tags}[1] == PREDICTION_MISMATCH


def test_mis_mapped_tag_is_excluded_by_the_clique_consensus(wall: Studio):
    tag_map = _shifted(simulated_tag_map(wall.arena), 22, 0.4)  # the map puts tag 22 0.4 m off
    result = Pipeline(tag_map).process(wall.shoot(*OBLIQUE).gray, wall.t, True)
    outcomes = {t.tag_id: t.reason for t in result.record.tags}
    assert outcomes == {20: "", 21: "", 22: OUTLIER}
    assert result.record.members == (20, 21) and result.record.outliers == (22,)
    fix = result.batch.pose_fix if result.batch is not None else None
    assert fix is not None
    truth = wall.shoot(*OBLIQUE).truth
    err_pos, err_head = pose_error((fix.x, fix.y, fix.theta), truth)
    print(f"\nwith tag 22 mis-mapped by 0.4 m: error {err_pos * 100:.2f} cm, {err_head:.2f} deg")
    assert err_pos < 0.05 and err_head < 3.0


def test_two_contradictory_equal_cliques_give_no_pose(wall: Studio):
    tag_map = _shifted(simulated_tag_map(wall.arena), 22, 0.4)
    tags = dict(tag_map.tags)
    tags[21] = replace(tags[21], measured=False)  # only 20 and 22 vote, and they disagree
    pipeline = Pipeline(replace(tag_map, tags=tags))
    result = pipeline.process(wall.shoot(*OBLIQUE).gray, wall.t, True)
    assert result.record.pose_reason == CONTRADICTORY
    assert result.record.cliques == ((20,), (22,))
    assert result.batch is not None
    assert result.batch.pose_fix is None and result.batch.tags == ()  # nothing, not a guess
    reasons = {t.tag_id: t.reason for t in result.record.tags}
    assert reasons == {20: CONTRADICTORY, 21: UNMEASURED_TAG, 22: CONTRADICTORY}
    assert pipeline.counters[CONTRADICTORY] == 2 and pipeline.counters[UNMEASURED_TAG] == 1


def test_unmeasured_tag_in_the_arena_gives_no_transform_and_no_vote():
    studio = Studio(wall_arena(tag21_measured=False))
    try:
        tag_map = simulated_tag_map(studio.arena)
        assert tag_map.world_transform(21) is None
        assert 21 not in tag_map.landmarks()
        result = Pipeline(tag_map).process(studio.shoot(*OBLIQUE).gray, studio.t, True)
        reasons = {t.tag_id: t.reason for t in result.record.tags}
        assert reasons[21] == UNMEASURED_TAG
        assert 21 not in result.record.members
        assert result.batch is not None and result.batch.pose_fix is not None
    finally:
        studio.close()


def test_unmeasured_camera_mount_yields_nothing(wall: Studio):
    tag_map = simulated_tag_map(wall.arena)
    unmeasured = replace(tag_map, mount=CameraMount(0.05, 0.2125, measured=False))
    result = Pipeline(unmeasured).process(wall.shoot(*OBLIQUE).gray, wall.t, True)
    assert result.batch is not None
    assert result.batch.pose_fix is None and result.batch.tags == () and result.batch.target is None
    assert result.record.pose_reason == MOUNT_UNMEASURED
    assert {t.reason for t in result.record.tags} == {MOUNT_UNMEASURED}


def test_target_range_and_bearing(wall: Studio):
    """The target's column axis, from the camera's optical centre, in the car frame."""
    pipeline = Pipeline(simulated_tag_map(wall.arena))
    state = wall.world.target_state
    assert state is not None
    errors = []
    for dist, off in ((0.8, 0.0), (1.2, 0.25), (1.6, -0.25)):
        heading = -math.pi / 2  # looking south at the target's north face
        x = state.x - dist * math.cos(heading)
        y = state.y - dist * math.sin(heading)
        shot = wall.shoot(x, y, heading + off)
        result = pipeline.process(shot.gray, shot.t, True)
        target = result.batch.target if result.batch is not None else None
        assert target is not None, result.record.as_dict()
        dx, dy = state.x - shot.eye[0], state.y - shot.eye[1]
        true_range = math.hypot(dx, dy)
        true_bearing = math.remainder(math.atan2(dy, dx) - shot.truth[2], math.tau)
        er, eb = target.range - true_range, math.remainder(target.bearing - true_bearing, math.tau)
        errors.append((er, eb))
        print(f"\ntarget at {true_range:.2f} m: range error {er * 100:.1f} cm "
              f"(sigma {target.sigma_range * 100:.1f}), bearing error {math.degrees(eb):.2f} deg "
              f"(sigma {math.degrees(target.sigma_bearing):.2f})")  # fmt: skip
        assert abs(er) < 4 * target.sigma_range and abs(eb) < 4 * target.sigma_bearing
        assert abs(er) < 0.06 and abs(eb) < math.radians(2.0)


def test_frame_of_the_wrong_size_is_refused():
    arena = wall_arena()
    pipeline = Pipeline(simulated_tag_map(arena))
    result = pipeline.process(np.zeros((480, 640), np.uint8), 1.0, True)
    assert result.batch is None and result.record.frame_reason == FRAME_SIZE
    assert pipeline.counters[FRAME_SIZE] == 1


def test_undistorted_detection_agrees(wall: Studio):
    tag_map = simulated_tag_map(wall.arena)
    shot = wall.shoot(*OBLIQUE)
    raw = Pipeline(tag_map).process(shot.gray, shot.t, True).batch
    flat = Pipeline(tag_map, PipelineParams(undistort_image=True)).process(shot.gray, shot.t, True)
    assert raw is not None and raw.pose_fix is not None
    assert flat.batch is not None and flat.batch.pose_fix is not None
    for fix in (raw.pose_fix, flat.batch.pose_fix):
        err_pos, err_head = pose_error((fix.x, fix.y, fix.theta), shot.truth)
        assert err_pos < 0.05 and err_head < 3.0


def test_frames_from_a_driving_car_keep_the_ekf_localized():
    """Camera mode end to end in virtual time: frames at 12 fps -> pipeline -> PoseEKF."""
    arena = two_cars_camera()
    world = World(arena, t0=0.0)
    try:
        tag_map = simulated_tag_map(arena)
        pipeline = Pipeline(tag_map)
        cm = arena.car_model
        drive = DriveModel(cm.effective_track, cm.max_wheel_speed, cm.duty_deadband)
        params = LocalizerParams(camera_forward=cm.camera_forward, gyro_error=0.1)
        ekf = PoseEKF(tag_map.landmarks(), drive, params, t0=0.0)
        body = world.scene.cars[1]
        pos, _ = p.getBasePositionAndOrientation(body.body, physicsClientId=world.client)
        p.resetBasePositionAndOrientation(
            body.body, (2.5, 1.0, pos[2]), (0, 0, 0, 1), physicsClientId=world.client
        )  # a circle of about 1.4 m radius inside the room
        car = world.car(1)

        def send(kind: Kind, t: float, **fields: Any) -> None:
            fw = car.firmware
            command = Command(1, kind, boot_nonce=fw.boot_nonce, session_token=fw.token, **fields)
            world.deliver(1, PORT_COMMAND, encode_command(command), ("127.0.0.1", 40000), t)

        send(Kind.ARM, 0.05, seq=1, stamp_ms=car.uptime_us(0.05) // 1000)
        rng = np.random.default_rng(1)
        # Wheel speeds 0.2625 and 0.3675 m/s (the duties 0.5 and 0.62 of the old 0.2
        # deadband), as duties of this car model's deadband.
        left, right = drive.duty_for_speed(0.2625), drive.duty_for_speed(0.3675)
        t, seq, next_frame = 0.05, 1, 0.1
        errors: list[float] = []
        used = 0
        while t < 12.0:
            t += 1 / 30
            seq += 1
            send(Kind.DRIVE, t, seq=seq, left=left, right=right,
                 stamp_ms=car.uptime_us(t) // 1000)  # a DRIVE must carry a fresh stamp
            _, yaw_rate = body.motion()
            ekf.predict_to(t, left, right, yaw_rate + float(rng.normal(0.0, 0.02)))
            if t < next_frame:
                continue
            next_frame += 1 / 12
            frame = world.capture_frame(1, t)
            assert frame is not None
            gray = cv2.imdecode(np.frombuffer(frame.jpeg, np.uint8), cv2.IMREAD_GRAYSCALE)
            at = ekf.pose_at(t)
            predicted = None if at is None else PredictedPose(*map(float, at[0]), at[1])
            batch = pipeline.process(gray, t, True, predicted).batch
            assert batch is not None
            result = ekf.update_batch(batch)
            used += result.applied
            if ekf.pose is not None:
                x, y, _ = ekf.pose
                tx, ty, _ = body.pose()
                errors.append(math.hypot(x - tx, y - ty))
    finally:
        world.close()
    e = np.array(errors)
    print(f"\n{len(e)} of 144 frames with an EKF pose, {used} batches applied; position error "
          f"median {np.median(e) * 100:.1f} cm, p95 {np.percentile(e, 95) * 100:.1f} cm, "
          f"max {e.max() * 100:.1f} cm; EKF {ekf.counters.as_dict()}")  # fmt: skip
    assert len(e) >= 130 and used >= 80
    assert np.median(e) < 0.05 and e.max() < 0.2
    assert not any(k.startswith("pose_lost") for k in ekf.counters.as_dict())
