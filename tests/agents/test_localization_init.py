"""How the localizer gets and loses its pose: a gross outlier gated, repeated rejections
losing the pose; initialisation from two tags, refused from one, from contradicting or
unknown tags; one tag at a time while turning on the spot; pose fixes; the pose lost when
no tag is seen for long."""

from __future__ import annotations

import math

import numpy as np

from agents.localization import PoseEKF
from agents.localizer_params import CHI2_2DOF_99, LocalizerParams
from agents.observations import ObservationBatch, PoseFix, TagSighting
from agents.pose_geometry import Offset, compose, solve_pose_from_tags, wrap_angle
from tests.agents.tagroom import (
    CAMERA_FORWARD,
    CHI2_3DOF_99,
    SIGMA_BEARING,
    TAGS,
    cov_of,
    est_of,
    put,
    sight_point,
    sight_tags,
    sigma_range,
    true_range_bearing,
)


def tracked_filter(seed: int = 3) -> tuple[PoseEKF, np.ndarray, np.random.Generator]:
    rng = np.random.default_rng(seed)
    ekf = PoseEKF(TAGS, params=LocalizerParams(camera_forward=CAMERA_FORWARD))
    pose = np.array([2.5, 3.0, math.pi / 2])
    put(ekf, pose, np.diag([1e-3, 1e-3, 1e-4]))
    for _ in range(10):
        ekf.update_batch(ObservationBatch(ekf.t, True, sight_tags(pose, rng)))
    return ekf, pose, rng


def test_gross_outlier_is_rejected_by_the_gate() -> None:
    ekf, pose, rng = tracked_filter()
    before = ekf.pose
    gated_before = ekf.counters["gated"]
    tid = sight_tags(pose, rng)[0].tag_id
    lx, ly = TAGS[tid]
    # The tag is reported as if it were 1 m further along the wall.
    r, b = true_range_bearing(pose, (lx + 1.0, ly))
    result = ekf.update_tag(TAGS[tid], TagSighting(tid, r, b, sigma_range(r), SIGMA_BEARING))
    assert not result.accepted
    assert result.reason == "gated"
    assert result.nis is not None and result.nis > CHI2_2DOF_99
    assert ekf.pose == before
    assert ekf.counters["gated"] == gated_before + 1


def test_repeated_rejections_lose_the_pose() -> None:
    ekf, pose, rng = tracked_filter()
    tid = sight_tags(pose, rng)[0].tag_id
    r, b = true_range_bearing(pose, (TAGS[tid][0] + 1.0, TAGS[tid][1]))
    bad = TagSighting(tid, r, b, sigma_range(r), SIGMA_BEARING)
    for _ in range(ekf.params.max_consecutive_rejections - 1):
        ekf.update_tag(TAGS[tid], bad)
    assert ekf.has_pose
    ekf.update_tag(TAGS[tid], bad)
    assert not ekf.has_pose
    assert ekf.lost_reason == "inconsistent_tags"
    assert ekf.counters["pose_lost_inconsistent_tags"] == 1


def test_initialisation_from_two_tags_is_correct_within_noise() -> None:
    rng = np.random.default_rng(11)
    pose = np.array([1.0, 4.0, math.radians(135)])  # two tags, one on each wall of a corner
    errs = []
    for _ in range(30):
        sightings = sight_tags(pose, rng)
        assert len(sightings) >= 2
        two = sightings[:2]
        ekf = PoseEKF(TAGS, params=LocalizerParams(camera_forward=CAMERA_FORWARD))
        result = ekf.update_batch(ObservationBatch(0.0, True, two))
        if not result.initialized:
            continue
        assert ekf.has_pose
        est = est_of(ekf)
        e = np.array([pose[0] - est[0], pose[1] - est[1], wrap_angle(pose[2] - est[2])])
        errs.append(float(e @ np.linalg.solve(cov_of(ekf), e)))
    # Most draws initialise; the solution's own covariance explains the error (3 dof).
    assert len(errs) >= 20
    assert float(np.mean(np.array(errs) <= CHI2_3DOF_99)) >= 0.9


def test_initialisation_is_refused_from_one_tag() -> None:
    rng = np.random.default_rng(5)
    pose = np.array([1.0, 4.0, math.radians(135)])
    one = sight_tags(pose, rng)[:1]
    ekf = PoseEKF(TAGS, params=LocalizerParams(camera_forward=CAMERA_FORWARD))
    result = ekf.update_batch(ObservationBatch(0.0, True, one))
    assert not result.initialized
    assert not ekf.has_pose
    assert ekf.pose is None and ekf.cov is None
    assert ekf.counters["init_too_few_tags"] == 1


def test_initialisation_refuses_contradicting_tags() -> None:
    # Two sightings that no pose explains: ranges that add up to less than the tags' spacing
    # cannot both be right, and the bearings say they are 50 degrees apart.
    s1 = TagSighting(0, 0.3, 0.4, 0.03, 0.02)
    s2 = TagSighting(4, 0.3, -0.5, 0.03, 0.02)
    solution = solve_pose_from_tags([(TAGS[0], s1), (TAGS[4], s2)])
    assert not solution.ok
    assert solution.reason == "residual_gate"


def test_initialisation_ignores_unknown_tags() -> None:
    rng = np.random.default_rng(2)
    pose = np.array([1.0, 4.0, math.radians(135)])
    known = sight_tags(pose, rng)[:1]
    unknown = TagSighting(500, 1.0, 0.1, 0.05, 0.02)
    ekf = PoseEKF(TAGS, params=LocalizerParams(camera_forward=CAMERA_FORWARD))
    ekf.update_batch(ObservationBatch(0.0, True, (*known, unknown)))
    assert not ekf.has_pose
    assert ekf.counters["unknown_tag"] == 1


def test_solver_with_offsets_finds_the_pose_from_sightings_taken_at_other_headings() -> None:
    # One tag per frame while turning on the spot: each sighting from pose ⊕ (0, 0, dθ); the
    # camera, 5 cm ahead of the rotation centre, moves with the turn.
    pose = np.array([0.5, 0.5, math.radians(10.0)])
    turns = [0.0, math.radians(70.0), math.radians(140.0)]
    exact, offsets = [], []
    for turn in turns:
        at, _, _ = compose(pose, np.array([0.0, 0.0, turn]))
        rng = np.random.default_rng(0)
        tid = next(t for t in TAGS if sight_point(at, TAGS[t], rng, t) is not None)
        r, b = true_range_bearing(at, TAGS[tid])
        exact.append((TAGS[tid], TagSighting(tid, r, b, 1e-4, 1e-5)))
        offsets.append(Offset(np.array([0.0, 0.0, turn]), np.zeros((3, 3))))
    assert len({s.tag_id for _, s in exact}) >= 2
    solution = solve_pose_from_tags(exact, CAMERA_FORWARD, offsets=offsets)
    assert solution.ok and solution.pose is not None
    assert np.allclose(solution.pose, pose, atol=1e-6)
    # The same sightings taken as simultaneous explain nothing.
    assert not solve_pose_from_tags(exact, CAMERA_FORWARD).ok


def spin_until_posed(seed: int, rate: float = 2.0, gyro_sd: float = 0.01,
                     ) -> tuple[PoseEKF, np.ndarray, float]:
    """A robot turning on the spot near a corner, shown only the first tag of each 10 Hz frame;
    returns the filter, the true pose and the time when it had a pose (or gave up)."""
    rng = np.random.default_rng(seed)
    ekf = PoseEKF(TAGS, params=LocalizerParams(camera_forward=CAMERA_FORWARD))
    truth = np.array([0.6, 0.7, float(rng.uniform(-math.pi, math.pi))])
    t = 0.0
    while not ekf.has_pose and t < 10.0:
        t = round(t + 0.1, 10)
        truth[2] = wrap_angle(truth[2] + rate * 0.1)
        ekf.predict_to(t, -0.8, 0.8, gyro_z=rate + float(rng.normal(0.0, gyro_sd)))
        seen = sight_tags(truth, rng)[:1]
        if seen:
            ekf.update_batch(ObservationBatch(t, True, seen))
        if not ekf.has_pose:  # the local frame is never reported, nor used to place anything
            assert ekf.pose is None and ekf.cov is None
            assert not seen or ekf.detection_from_sighting(seen[0], t) is None
    return ekf, truth, t


def test_a_robot_turning_on_the_spot_gets_its_pose_from_one_tag_at_a_time() -> None:
    nees, times = [], []
    for seed in range(40):
        ekf, truth, t = spin_until_posed(seed)
        assert ekf.has_pose, f"seed {seed}: no pose after {t:.1f} s"
        times.append(t)
        est = est_of(ekf)
        e = np.array([truth[0] - est[0], truth[1] - est[1], wrap_angle(truth[2] - est[2])])
        nees.append(float(e @ np.linalg.solve(cov_of(ekf), e)))
    # One turn at 2 rad/s takes 3.1 s; the error is explained by the pose's covariance.
    assert max(times) < 3.2
    assert float(np.mean(np.array(nees) <= CHI2_3DOF_99)) >= 0.9


def test_a_turn_frame_that_grows_too_uncertain_is_dropped() -> None:
    ekf = PoseEKF(TAGS, params=LocalizerParams(camera_forward=CAMERA_FORWARD))
    rng = np.random.default_rng(3)
    pose = np.array([1.0, 4.0, math.radians(135)])
    ekf.update_batch(ObservationBatch(0.0, True, sight_tags(pose, rng)[:1]))
    assert not ekf.has_pose
    t = 0.0
    while ekf.counters["turn_frame_expired"] == 0 and t < 60.0:
        t = round(t + 0.1, 10)
        ekf.predict_to(t, 0.6, 0.6, gyro_z=0.0)
    assert ekf.counters["turn_frame_expired"] == 1 and not ekf.has_pose
    # What the dropped frame saw is gone: one more tag starts a new frame, no pose.
    ekf.update_batch(ObservationBatch(t, True, sight_tags(pose, rng)[1:2]))
    assert not ekf.has_pose and ekf.counters["init_too_few_tags"] == 2


def test_pose_fix_initialises_and_is_gated() -> None:
    ekf = PoseEKF(TAGS)
    cov = np.diag([0.003, 0.003, 0.001])
    r = ekf.update_batch(ObservationBatch(0.0, True, pose_fix=PoseFix(1.0, 2.0, 0.5, cov)))
    assert r.initialized and ekf.pose == (1.0, 2.0, 0.5)
    ok = ekf.update_pose_fix(PoseFix(1.02, 2.01, 0.51, cov))
    assert ok.accepted and ok.nis is not None
    bad = ekf.update_pose_fix(PoseFix(2.0, 2.0, 0.5, cov))
    assert not bad.accepted and bad.reason == "gated"
    vague = PoseEKF(TAGS)
    refused = vague.update_pose_fix(PoseFix(1.0, 2.0, 0.5, np.diag([1.0, 1.0, 0.1])))
    assert not refused.accepted and not vague.has_pose


def test_pose_is_lost_when_no_tag_is_seen_for_long() -> None:
    ekf = PoseEKF(TAGS)
    ekf.set_pose(2.5, 2.5, 0.0, np.diag([1e-3, 1e-3, 1e-4]))
    t = 0.0
    while ekf.has_pose and t < 120.0:
        t += 0.1
        ekf.predict_to(t, 0.6, 0.6, gyro_z=0.0)
    assert not ekf.has_pose
    assert ekf.lost_reason == "covariance_exceeded"
    assert 3.0 < t < 60.0
    # Without a pose nothing is claimed: no detection, no update.
    assert ekf.detection_from_sighting(TagSighting(9, 1.0, 0.0, 0.05, 0.02), ekf.t) is None
    assert ekf.update_tag(TAGS[0], TagSighting(0, 1.0, 0.0, 0.05, 0.02)).reason == "no_pose"
