"""Per-tag PnP, the poses tags imply, the joint planar fit and range-bearing, on exact corners."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from agents.perception.detect import TagDetection, mean_edge
from agents.perception.pose import (
    REPROJECTION,
    PoseFailure,
    PoseParams,
    TagCorners,
    car_pose_from_tag,
    object_points,
    refine_planar,
    relative_car_pose,
    sighting_from_corners,
    solve_tag,
    world_corners,
)
from agents.perception.tagmap import (
    CameraMount,
    Intrinsics,
    Transform,
    WorldTag,
    facing_rotation,
    rot_z,
)

CAMERA = Intrinsics(320, 240, 250.0, 250.0, 160.0, 120.0, (-0.12, 0.02, 0.0, 0.0))
MOUNT = CameraMount(0.05, 0.2125, measured=True)
PARAMS = PoseParams()


def _car(x: float, y: float, theta: float) -> Transform:
    return Transform(rot_z(theta), np.array([x, y, 0.0]))


def _project(T_world_car: Transform, T_world_tag: Transform, size: float) -> np.ndarray:
    """Exact pixel corners (IPPE order) of a tag seen from a car pose."""
    T_car_cam = MOUNT.transform()
    assert T_car_cam is not None
    T_cam_world = (T_world_car @ T_car_cam).inverse()
    pts = T_cam_world.apply(world_corners(T_world_tag, size))
    px, _ = cv2.projectPoints(pts, np.zeros(3), np.zeros(3), CAMERA.matrix, CAMERA.dist_coeffs)
    return px.reshape(4, 2)


def _detection(tag_id: int, corners: np.ndarray, margin: float = 80.0) -> TagDetection:
    return TagDetection(tag_id, corners, 0, margin, mean_edge(corners))


def _wall_tag(x: float, y: float, yaw: float, size: float = 0.2) -> Transform:
    T = WorldTag(0, size, x, y, 0.21, yaw, measured=True).transform()
    assert T is not None
    return T


def test_ippe_recovers_the_pose_of_exact_corners():
    T_world_tag = _wall_tag(1.0, 0.0, math.pi / 2)
    truth = (1.3, 1.1, -math.pi / 2 + 0.3)
    corners = _project(_car(*truth), T_world_tag, 0.2)
    solved = solve_tag(_detection(3, corners), 0.2, CAMERA, PARAMS)
    assert not isinstance(solved, PoseFailure)
    assert solved.best.reproj_px < 1e-3 and len(solved.solutions) == 2
    T_car_cam = MOUNT.transform()
    assert T_car_cam is not None
    car = car_pose_from_tag(solved.best, solved.pose_cov, T_world_tag, T_car_cam)
    np.testing.assert_allclose(car.pose, truth, atol=1e-4)
    assert abs(car.floor_offset) < 1e-4 and car.tilt < 1e-4
    assert np.all(np.linalg.eigvalsh(car.cov) > 0)


def test_ambiguity_flag_fronto_parallel_far_but_not_oblique_near():
    T_world_tag = _wall_tag(1.0, 0.0, math.pi / 2)
    rng = np.random.default_rng(5)
    far = _project(_car(1.0, 2.4, -math.pi / 2), T_world_tag, 0.2)  # square on, 2.35 m
    far = far + rng.normal(0.0, 0.3, far.shape)
    solved = solve_tag(_detection(3, far), 0.2, CAMERA, PARAMS)
    assert not isinstance(solved, PoseFailure)
    assert solved.ambiguous and solved.rotation_gap > math.radians(10)
    near = _project(_car(1.6, 0.8, -math.pi / 2 - 0.6), T_world_tag, 0.2)  # 0.9 m, 35° aslant
    near = near + rng.normal(0.0, 0.3, near.shape)
    solved = solve_tag(_detection(3, near), 0.2, CAMERA, PARAMS)
    assert not isinstance(solved, PoseFailure)
    assert not solved.ambiguous


def test_the_ten_percent_rule_alone():
    """With the noise test off, only "second within 10 % and > 10° away" flags a tag."""
    strict = PoseParams(ambiguity_quantile=0.0)
    T_world_tag = _wall_tag(1.0, 0.0, math.pi / 2)
    rng = np.random.default_rng(8)
    corners = _project(_car(1.0, 2.4, -math.pi / 2), T_world_tag, 0.2)
    corners = corners + rng.normal(0.0, 0.3, corners.shape)
    solved = solve_tag(_detection(3, corners), 0.2, CAMERA, strict)
    assert not isinstance(solved, PoseFailure)
    second = solved.solutions[1]
    ratio_ok = second.reproj_px <= 1.1 * solved.best.reproj_px
    assert solved.ambiguous == (ratio_ok and solved.rotation_gap > math.radians(10))


def test_bad_corners_fail_the_reprojection_gate():
    T_world_tag = _wall_tag(1.0, 0.0, math.pi / 2)
    corners = _project(_car(1.2, 1.0, -math.pi / 2), T_world_tag, 0.2)
    corners[2] += [12.0, -9.0]
    solved = solve_tag(_detection(3, corners), 0.2, CAMERA, PARAMS)
    assert isinstance(solved, PoseFailure) and solved.reason == REPROJECTION
    assert solved.value > PARAMS.max_reprojection_px


def test_joint_planar_fit_converges_on_two_tags():
    tags = {1: _wall_tag(0.8, 0.0, math.pi / 2), 2: _wall_tag(1.6, 0.0, math.pi / 2)}
    truth = np.array([1.25, 1.4, -math.pi / 2 + 0.1])
    rng = np.random.default_rng(3)
    observed = [
        TagCorners(k, world_corners(T, 0.2), _project(_car(*truth), T, 0.2)
                   + rng.normal(0, 0.2, (4, 2)), 0.3)
        for k, T in tags.items()
    ]  # fmt: skip
    T_car_cam = MOUNT.transform()
    assert T_car_cam is not None
    fit = refine_planar(truth + np.array([0.1, -0.08, 0.06]), observed, CAMERA, T_car_cam)
    assert fit is not None
    err = fit.pose - truth
    assert math.hypot(err[0], err[1]) < 0.02 and abs(err[2]) < math.radians(1)
    nees = float(err @ np.linalg.solve(fit.cov, err))
    assert nees < 16.3  # χ²(3) at 99.9 %
    assert fit.dof == 13 and set(fit.rms_px) == {1, 2} and max(fit.rms_px.values()) < 1.0


def test_range_and_bearing_from_the_vertical_edges():
    T_car_cam = MOUNT.transform()
    assert T_car_cam is not None
    T_world_tag = _wall_tag(1.0, 0.0, math.pi / 2)
    car = _car(1.5, 1.3, -math.pi / 2 + 0.25)
    corners = _project(car, T_world_tag, 0.2)
    for offset in (0.0, 0.075):
        got = sighting_from_corners(
            corners, 0.2, CAMERA, T_car_cam, offset=offset, sigma_px=0.5, params=PARAMS
        )
        assert got is not None
        point = T_world_tag.apply([0.0, 0.0, offset])  # behind the tag's face
        in_car = (car @ T_car_cam).inverse().apply(point)  # in the camera frame
        d = T_car_cam.R @ in_car
        assert got[0] == pytest.approx(math.hypot(d[0], d[1]), abs=1e-6)
        assert got[1] == pytest.approx(math.atan2(d[1], d[0]), abs=1e-6)
        assert got[2] >= PARAMS.range_floor and got[3] >= PARAMS.bearing_floor


def test_relative_pose_of_another_car_through_its_tag():
    T_car_cam = MOUNT.transform()
    assert T_car_cam is not None
    other_tag = Transform(facing_rotation(math.pi), np.array([-0.06, 0.0, 0.12]))  # on its back
    me, other = _car(1.0, 1.0, 0.2), _car(2.1, 1.3, 0.5)  # the other car drives away from me
    corners = _project(me, other @ other_tag, 0.08)
    solved = solve_tag(_detection(200, corners), 0.08, CAMERA, PARAMS)
    assert not isinstance(solved, PoseFailure)
    rel = relative_car_pose(solved.best, solved.pose_cov, T_car_cam, other_tag, PARAMS)
    assert rel is not None
    expected = me.inverse() @ other
    np.testing.assert_allclose(rel[0][:2], expected.t[:2], atol=1e-5)
    assert rel[0][2] == pytest.approx(0.3, abs=1e-5)


def test_object_points_follow_the_ippe_square_order():
    np.testing.assert_allclose(object_points(2.0), [[-1, 1, 0], [1, 1, 0], [1, -1, 0], [-1, -1, 0]])
