"""The localizer against simulated truth: a 60 s loop on a circle with a slower drive than
modelled and a biased gyro (accuracy, NEES, detection coverage); a detection's covariance
carries the pose's uncertainty (Monte Carlo), and no detection is made without a pose."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from agents.drive_model import DriveModel
from agents.localization import PoseEKF
from agents.localizer_params import LocalizerParams
from agents.observations import ObservationBatch, TagSighting
from agents.pose_geometry import target_position, wrap_angle
from tests.agents.tagroom import (
    CAMERA_FORWARD,
    CHI2_3DOF_99,
    FOV,
    SIGMA_BEARING,
    TAGS,
    camera,
    cov_of,
    est_of,
    put,
    sight_point,
    sight_tags,
    sigma_range,
)

CHI2_2DOF_95 = 5.991


# --------------------------------------------------------------------------- a simulated run


@dataclass
class RunStats:
    init_time: float
    position_rmse: float
    heading_rmse_deg: float
    worst_position: float
    nees_mean: float
    nees_over_99: float
    detections: int
    coverage_95: float
    accepted: int
    gated: int
    counters: dict[str, int]


def simulate_loop(seed: int, duration: float = 60.0, latency: float = 0.08) -> RunStats:
    """A robot driven along a circle for ``duration`` s in the 5 m room.

    Truth: wheels 10 % slower than the agent's duty model, 10 % skid loss in
    yaw, a gyro with 0.01 rad/s bias and 0.005 rad/s noise. The agent predicts
    at 10 Hz with the duties it sent and the gyro reading; each 10 Hz camera
    batch arrives ``latency`` s after capture. A target moves on a wider circle.
    """
    rng = np.random.default_rng(seed)
    nominal = DriveModel()
    truth = DriveModel(max_wheel_speed=0.9 * nominal.max_wheel_speed, deadband=nominal.deadband)
    ekf = PoseEKF(TAGS, nominal, LocalizerParams(camera_forward=CAMERA_FORWARD))
    pose = np.array([3.8, 2.5, math.pi / 2])
    duties = (0.0, 0.0)
    h, tick = 0.01, 0.1
    per_tick = round(tick / h)
    pending: list[tuple[float, ObservationBatch, tuple[float, float]]] = []
    errors, nees = [], []
    coverage: list[bool] = []
    init_time = math.nan
    accepted = gated = 0
    for i in range(1, round(duration / h) + 1):
        v, w = truth.body_velocity(*duties)
        w *= 0.9
        thm = pose[2] + 0.5 * w * h
        pose = np.array(
            [
                pose[0] + v * h * math.cos(thm),
                pose[1] + v * h * math.sin(thm),
                wrap_angle(pose[2] + w * h),
            ]
        )
        t = i * h
        if i % per_tick:
            continue
        ekf.predict_to(t, *duties, gyro_z=w + 0.01 + float(rng.normal(0, 0.005)))
        target = (2.5 + 2.0 * math.cos(0.05 * t + 2.0), 2.5 + 2.0 * math.sin(0.05 * t + 2.0))
        batch = ObservationBatch(
            t, True, sight_tags(pose, rng), target=sight_point(pose, target, rng)
        )
        pending.append((t + latency, batch, target))
        for due, b, tgt in [p for p in pending if p[0] <= t + 1e-9]:
            pending.remove((due, b, tgt))
            result = ekf.update_batch(b)
            if result.initialized and math.isnan(init_time):
                init_time = b.t_capture
            accepted += sum(r.accepted for _, r in result.tag_results)
            gated += sum(not r.accepted for _, r in result.tag_results)
            if result.detection is not None and not result.initialized:
                e = np.array([tgt[0] - result.detection.x, tgt[1] - result.detection.y])
                coverage.append(float(e @ np.linalg.solve(result.detection.cov, e)) <= CHI2_2DOF_95)
        if ekf.has_pose:
            est = est_of(ekf)
            e3 = np.array([pose[0] - est[0], pose[1] - est[1], wrap_angle(pose[2] - est[2])])
            errors.append(e3)
            nees.append(float(e3 @ np.linalg.solve(cov_of(ekf), e3)))
        cx, cy, radius = 2.5, 2.5, 1.3
        tangent = math.atan2(pose[1] - cy, pose[0] - cx) + math.pi / 2
        v_cmd = 0.25
        w_cmd = (
            v_cmd / radius
            + 1.5 * wrap_angle(tangent - pose[2])
            + 1.0 * (math.hypot(pose[0] - cx, pose[1] - cy) - radius)
        )
        duties = nominal.mix(v_cmd, w_cmd)
    E = np.array(errors)
    return RunStats(
        init_time=init_time,
        position_rmse=math.sqrt(float(np.mean(E[:, 0] ** 2 + E[:, 1] ** 2))),
        heading_rmse_deg=math.degrees(math.sqrt(float(np.mean(E[:, 2] ** 2)))),
        worst_position=float(np.max(np.hypot(E[:, 0], E[:, 1]))),
        nees_mean=float(np.mean(nees)),
        nees_over_99=float(np.mean(np.array(nees) > CHI2_3DOF_99)),
        detections=len(coverage),
        coverage_95=float(np.mean(coverage)),
        accepted=accepted,
        gated=gated,
        counters=ekf.counters.as_dict(),
    )


@pytest.fixture(scope="module")
def loop_run() -> RunStats:
    stats = simulate_loop(seed=7)
    print(
        f"\nEKF 60 s loop: init at {stats.init_time:.1f} s, position RMSE "
        f"{stats.position_rmse * 100:.2f} cm (worst {stats.worst_position * 100:.1f} cm), "
        f"heading RMSE {stats.heading_rmse_deg:.2f} deg, NEES mean {stats.nees_mean:.2f} "
        f"({stats.nees_over_99 * 100:.1f} % above chi2(3) 99 %), tags accepted {stats.accepted} "
        f"gated {stats.gated}, target detections {stats.detections} with "
        f"{stats.coverage_95 * 100:.1f} % inside their 95 % ellipse; counters {stats.counters}"
    )
    return stats


def test_simulated_loop_accuracy(loop_run: RunStats) -> None:
    assert loop_run.init_time < 5.0
    assert loop_run.position_rmse < 0.10
    assert loop_run.heading_rmse_deg < 3.0


def test_simulated_loop_nees_is_consistent(loop_run: RunStats) -> None:
    # Band: mean NEES within [0.8, 4.5] around the 3-dof expectation of 3. The process
    # noise deliberately over-covers a duty-calibration bias over short horizons, so
    # the filter sits on the conservative side; overconfidence would push the mean
    # above 3 and the tail above 1 %.
    assert 0.8 <= loop_run.nees_mean <= 4.5
    assert loop_run.nees_over_99 <= 0.03
    # The 99 % gate rejects about 1 % of honest sightings, not more than 3 %.
    assert loop_run.gated <= 0.03 * (loop_run.accepted + loop_run.gated)


def test_simulated_loop_detection_coverage(loop_run: RunStats) -> None:
    # Nominal 95 %; the conservative pose covariance may raise it, never lower it much.
    assert loop_run.detections >= 50
    assert 0.92 <= loop_run.coverage_95 <= 1.0


# --------------------------------------------------------------------------- detections


def test_detection_refused_without_pose() -> None:
    ekf = PoseEKF(TAGS)
    s = TagSighting(99, 1.0, 0.0, 0.05, 0.02)
    assert ekf.detection_from_sighting(s, 0.0) is None
    assert ekf.counters["detection_no_pose"] == 1


def test_detection_covariance_includes_pose_uncertainty_at_the_expected_rate() -> None:
    """Monte Carlo: true pose drawn from N(estimate, P), target sighted with noise."""
    rng = np.random.default_rng(21)
    P = np.diag([0.05**2, 0.04**2, math.radians(3.0) ** 2])
    P[0, 1] = P[1, 0] = 0.3 * 0.05 * 0.04
    est = np.array([1.0, 1.0, 0.3])
    ekf = PoseEKF(TAGS, params=LocalizerParams(camera_forward=CAMERA_FORWARD))
    put(ekf, est, P)
    L = np.linalg.cholesky(P)
    inside = inside_sensor_only = 0
    n = 2000
    for _ in range(n):
        truth = est + L @ rng.standard_normal(3)
        target = camera(truth)
        r = float(rng.uniform(0.5, 3.0))
        b = float(rng.uniform(-FOV / 2, FOV / 2))
        target = (
            target[0] + r * math.cos(truth[2] + b),
            target[1] + r * math.sin(truth[2] + b),
        )
        sr = sigma_range(r)
        s = TagSighting(
            99,
            r + float(rng.normal(0, sr)),
            wrap_angle(b + float(rng.normal(0, SIGMA_BEARING))),
            sr,
            SIGMA_BEARING,
        )
        det = ekf.detection_from_sighting(s, ekf.t)
        assert det is not None
        e = np.array([target[0] - det.x, target[1] - det.y])
        inside += float(e @ np.linalg.solve(det.cov, e)) <= CHI2_2DOF_95
        _, _, G = target_position(est, s, CAMERA_FORWARD)
        sensor_only = G @ s.noise_cov @ G.T
        # The pose's part is kept apart (the track's consider term): the rest is the sensor's.
        assert det.pose_cov is not None and np.allclose(det.cov - det.pose_cov, sensor_only)
        inside_sensor_only += float(e @ np.linalg.solve(sensor_only, e)) <= CHI2_2DOF_95
    rate = inside / n
    print(
        f"\ndetection 95 % ellipse coverage: {rate * 100:.1f} % with pose uncertainty, "
        f"{inside_sensor_only / n * 100:.1f} % with sensor noise only"
    )
    # Binomial sd at n = 2000 is 0.5 %; the band is about +-4 sd.
    assert 0.93 <= rate <= 0.97
    assert inside_sensor_only / n < 0.85
