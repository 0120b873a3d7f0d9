"""The gyro's residual bias as the pose filter's fourth state: learnt from tags while the
car moves, from still samples while it stands, the same whichever order a late frame and
a still sample arrive in, and handed back to the bias estimate when the pose is lost."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.backfill import Backfill
from agents.config import AgentConfig
from agents.gyro_bias import SAMPLE_PERIOD, GyroBias, GyroBiasParams
from agents.localization import PoseEKF
from agents.localizer_params import LocalizerParams
from agents.observations import ObservationBatch, TagSighting
from agents.odometry import Odometry
from agents.pose_geometry import range_bearing
from agents.room import Room
from tests.agents.turning import turn_with_fixes

DT = 0.1  # telemetry at 10 Hz
NOISE = 0.02  # rad/s, one gyro sample
WHITE = NOISE * math.sqrt(SAMPLE_PERIOD / (2.0 * LocalizerParams().error_correlation_time))
TAGS = {0: (0.0, 2.5)}


def _turning_with_fixes(bias_state: bool, seed: int = 3) -> tuple[list[float], list[float],
                                                                  PoseEKF]:
    """A car turning on the spot at 0.5 rad/s for 40 s, its gyro biased by 0.015 rad/s,
    a pose fix (heading σ 0.2°) every 2 s. With ``bias_state`` the filter holds the
    residual (prior σ 0.02) and is given the white noise as the rate's error; without, it
    is given the bias's σ too, as a rate error correlated over τ. Returns the heading
    errors and σs just before each fix after the first 10 s, and the filter. The gyro has
    no scale error and the filter models none: at one constant rate a bias and a scale
    error turn the heading alike (tests/agents/test_gyro_scale.py separates them)."""
    rng = np.random.default_rng(seed)
    ekf = PoseEKF(TAGS, params=LocalizerParams(gyro_scale_std=0.0), t0=0.0,
                  bias_psd=1e-6 if bias_state else 0.0)
    ekf.bias_prior_var = NOISE**2 if bias_state else 0.0
    gyro_error = WHITE if bias_state else math.hypot(NOISE, WHITE)
    fix_cov = np.diag([1e-4, 1e-4, math.radians(0.2) ** 2])
    ekf.set_pose(2.5, 2.5, 0.0, fix_cov)
    fixes = turn_with_fixes(
        ekf, rng, turned=lambda t0, t1: 0.5 * (t1 - t0),
        reading=lambda t: 0.5 + 0.015 + float(rng.normal(0.0, NOISE)),
        gyro_error=gyro_error, fix_cov=fix_cov)
    assert not fixes.refused
    return fixes.errors, fixes.sigmas, ekf


def test_a_turning_car_learns_its_bias_from_the_tags() -> None:
    """Between fixes 2 s apart, a bias of 0.015 rad/s turns the heading by 1.7°; the filter
    that holds the residual learns it from the fixes and its heading error before each fix
    is a fraction of the other's, with a σ that still covers it."""
    held, held_sigma, ekf = _turning_with_fixes(True)
    plain, _, _ = _turning_with_fixes(False)
    residual = ekf.bias_residual
    assert residual is not None
    estimate, variance = residual
    assert abs(estimate - 0.015) < 3.0 * math.sqrt(variance)
    assert math.sqrt(variance) < 0.003
    rms_held = math.sqrt(float(np.mean(np.square(held))))
    rms_plain = math.sqrt(float(np.mean(np.square(plain))))
    assert rms_held < 0.5 * rms_plain, (math.degrees(rms_held), math.degrees(rms_plain))
    nees = np.square(held) / np.square(held_sigma)
    assert float(np.mean(nees)) < 2.0  # not overconfident (ideal 1)


def _filter_at_rest() -> PoseEKF:
    ekf = PoseEKF(TAGS, params=LocalizerParams(), t0=0.0, bias_psd=1e-6)
    ekf.bias_prior_var = NOISE**2
    ekf.set_pose(2.5, 2.5, math.pi, np.diag([1e-3, 1e-3, 1e-3]))
    ekf.sample_at(0.0, 0.0, 0.0, 0.01, gyro_error=WHITE, still=(0.01, NOISE**2))
    ekf.predict_to(0.9, 0.0, 0.0, 0.01, WHITE)
    return ekf


def _tag_batch(ekf: PoseEKF, t: float) -> ObservationBatch:
    pose = ekf.pose
    assert pose is not None
    z, _ = range_bearing(np.array(pose), TAGS[0], LocalizerParams().camera_forward)
    seen = TagSighting(0, float(z[0]) + 0.02, float(z[1]) + 0.01, 0.05, 0.02)
    return ObservationBatch(t, True, tags=(seen,))


def test_a_still_sample_is_applied_again_after_a_late_frame_rewinds_past_it() -> None:
    """A still sample at 1.0 s, then a frame captured at 0.98 s arriving late, gives the
    state that the frame first, then the sample, gives: the rewind to 0.98 s replays the
    still update at 1.0 s instead of losing it (and a tag is no limit on it)."""
    late, in_order = _filter_at_rest(), _filter_at_rest()
    batch = _tag_batch(late, 0.98)
    for ekf in (late, in_order):
        ekf.predict_to(1.05, 0.0, 0.0, 0.01, WHITE)
    late.sample_at(1.0, 0.0, 0.0, 0.012, gyro_error=WHITE, still=(0.012, NOISE**2))
    assert late.update_batch(batch).tag_results[0][1].accepted
    assert in_order.update_batch(batch).tag_results[0][1].accepted
    in_order.sample_at(1.0, 0.0, 0.0, 0.012, gyro_error=WHITE, still=(0.012, NOISE**2))
    a, b = late.bias_residual, in_order.bias_residual
    assert a is not None and b is not None
    assert a == pytest.approx(b, rel=1e-9, abs=1e-15)
    assert late.cov == pytest.approx(in_order.cov, rel=1e-9, abs=1e-15)
    assert b[1] < NOISE**2 / 2  # both still samples counted


def test_a_lost_pose_hands_what_it_learnt_of_the_bias_back() -> None:
    """With a pose, still samples teach the filter's residual (0.05 rad/s) and the bias
    estimate stays; the pose lost, the next telemetry moves the estimate by the residual
    and takes its variance, and the still samples teach the estimate again."""
    config = AgentConfig(name="walnut", room=Room(5.0, 5.0), landmarks=TAGS, target_tag=100)
    localizer = PoseEKF(config.landmarks, config.drive, config.localizer, t0=0.0,
                        bias_psd=config.gyro_bias.drift_psd)
    gyro_bias = GyroBias(GyroBiasParams())
    odometry = Odometry(config, localizer, gyro_bias,
                        Backfill(config.search.backfill, config.drive, config.localizer))
    localizer.set_pose(2.5, 2.5, 0.0, np.diag([1e-4, 1e-4, 1e-4]))
    for k in range(40):
        odometry.car_status(k * DT, 0.0, 0.0, 0.05)
    residual = localizer.bias_residual
    assert residual is not None and residual[0] == pytest.approx(0.05, abs=0.005)
    assert gyro_bias.bias == 0.0 and gyro_bias.updates > 30
    localizer.lose_pose("test")
    odometry.car_status(4.0, 0.0, 0.0, 0.05)
    assert gyro_bias.bias == pytest.approx(residual[0], abs=0.002)
    taken = residual[1] + gyro_bias.params.drift_psd * DT  # then one still sample on it
    assert gyro_bias.variance == pytest.approx(taken * NOISE**2 / (taken + NOISE**2),
                                               rel=1e-6)
    assert localizer.take_lost_bias() is None  # handed back once
