"""The odometry hands the localizer each telemetry as a sample, even one that repeats, and
the car's integrated angle as each interval's mean rate."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from agents.backfill import Backfill
from agents.config import AgentConfig
from agents.gyro_bias import GyroBias, GyroBiasParams
from agents.localization import PoseEKF
from agents.odometry import MAX_ANGLE_SPAN, GyroAngle, Odometry
from agents.pose_geometry import wrap_angle
from agents.room import Room

CONFIG = AgentConfig(name="walnut", room=Room(5.0, 5.0), landmarks={0: (0.0, 2.5)},
                     target_tag=100)


def test_a_repeated_reading_is_a_new_sample() -> None:
    """Two telemetries 0.1 s apart reading the same rate (a quantized gyro): the second
    is a sample taken at its own time, so the first is ramped to it, not held on."""
    localizer = PoseEKF(CONFIG.landmarks, CONFIG.drive, CONFIG.localizer, t0=0.0)
    localizer.set_pose(2.5, 2.5, 0.0, np.diag([1e-4, 1e-4, 1e-4]))
    odometry = Odometry(CONFIG, localizer, GyroBias(GyroBiasParams(enabled=False)),
                        Backfill(CONFIG.search.backfill, CONFIG.drive, CONFIG.localizer))
    for k, rate in enumerate([0.0, 1.0, 0.5, 0.5, 0.5], start=1):
        odometry.car_status(k * 0.1, 0.5, 0.5, rate)
    odometry.advance(0.55)
    held = localizer.held  # the newest telemetry's, taken at 0.5 s (by value: at 0.3 s)
    assert held is not None and held.gyro_z == 0.5
    assert held.sampled_at == 0.5


def _odometry(bias_learning: bool = False) -> tuple[Odometry, PoseEKF]:
    localizer = PoseEKF(CONFIG.landmarks, CONFIG.drive,
                        replace(CONFIG.localizer, max_heading_var=1e3), t0=0.0)
    odometry = Odometry(CONFIG, localizer, GyroBias(GyroBiasParams(enabled=bias_learning)),
                        Backfill(CONFIG.search.backfill, CONFIG.drive, CONFIG.localizer))
    localizer.set_pose(2.5, 2.5, 0.0, np.diag([1e-4, 1e-4, 1e-6]))
    return odometry, localizer


def test_the_cars_angle_gives_each_interval_its_mean_rate() -> None:
    """Two telemetries 100 ms apart on the car's clock, received 104 ms apart: the
    interval's rate is the angle's change over the car's span (across the ±π wrap), and
    its timing variance (rate x the 4 ms the spans differ)² plus the uptime's rounding."""
    odometry, _ = _odometry()
    odometry.car_status(1.0, 0.5, 0.5, 2.0, GyroAngle(7, 5000, 3.0))
    assert odometry.interval is None  # no angle before
    odometry.car_status(1.104, 0.5, 0.5, 2.2, GyroAngle(7, 5100, 3.2 - 2 * math.pi))
    assert odometry.interval is not None
    rate, var = odometry.interval
    assert rate == pytest.approx(2.0)
    assert var == pytest.approx(2.0**2 * (0.004**2 + 1e-6 / 6))


def test_whole_turns_between_two_angles_are_counted_from_the_rates() -> None:
    """0.4 s between telemetries (three lost) at 9 rad/s: 3.6 rad, more than π; the
    wrapped difference says -2.68, the rates at either end say 3.6."""
    odometry, _ = _odometry()
    odometry.car_status(0.0, -0.8, 0.8, 9.0, GyroAngle(7, 1000, 0.0))
    odometry.car_status(0.4, -0.8, 0.8, 9.0, GyroAngle(7, 1400, wrap_angle(3.6)))
    assert odometry.interval is not None
    assert odometry.interval[0] == pytest.approx(9.0)


@pytest.mark.parametrize(("second", "why"), [
    (GyroAngle(8, 5100, 0.1), "a reboot: another boot's angle"),
    (GyroAngle(7, 5000 + round(MAX_ANGLE_SPAN * 1000) + 1, 0.1), "too long a span"),
    (GyroAngle(7, 5000, 0.1), "no span"),
    (None, "no angle"),
])
def test_no_mean_rate_without_two_comparable_angles(second: GyroAngle | None,
                                                     why: str) -> None:
    odometry, _ = _odometry()
    odometry.car_status(1.0, 0.5, 0.5, 1.0, GyroAngle(7, 5000, 0.0))
    odometry.car_status(1.1, 0.5, 0.5, 1.0, second)
    assert odometry.interval is None, why


def test_the_mean_rate_is_less_the_learnt_bias() -> None:
    """A still car teaches the bias (0.05 rad/s in rate and angle), with a pose to the pose
    filter, which holds what is left of it as a state; turning then, the interval's rate
    less that residual is the angle's less the whole bias."""
    odometry, localizer = _odometry(bias_learning=True)
    angle = 0.0
    for k in range(60):  # 6 s still
        odometry.car_status(k * 0.1, 0.0, 0.0, 0.05, GyroAngle(7, k * 100, wrap_angle(angle)))
        angle += 0.05 * 0.1
    residual = localizer.bias_residual
    assert residual is not None
    bias = odometry.gyro_bias.bias + residual[0]
    assert bias == pytest.approx(0.05, abs=0.01)
    odometry.car_status(6.0, -0.5, 0.5, 1.05, GyroAngle(7, 6000, wrap_angle(angle)))
    odometry.car_status(6.1, -0.5, 0.5, 1.05, GyroAngle(7, 6100, wrap_angle(angle + 0.105)))
    assert odometry.interval is not None
    assert odometry.interval[0] - residual[0] == pytest.approx(1.05 - bias)


def test_a_rate_that_jumps_between_samples_is_integrated_by_the_car() -> None:
    """The yaw rate jumps (a command changing it) at uniformly random times, three times a
    second; the car integrates it exactly and its telemetry says the angle every 100 ms.
    The heading at each sample is then exact but for the gyro's modelled error, where the
    rate samples alone (the same runs without the angle) leave the ramp's error; the
    variance the filter claims covers what is left."""
    rng = np.random.default_rng(3)
    err_angle: list[float] = []
    err_ramp: list[float] = []
    var_angle: list[float] = []
    for _ in range(40):
        runs = {True: _odometry(), False: _odometry()}
        omega = theta = 0.0
        for odometry, _ in runs.values():
            odometry.car_status(0.0, 0.0, 0.0, 0.0, GyroAngle(7, 0, 0.0))
        for k in range(1, 31):
            t = 0.0
            for _ in range(int(rng.poisson(0.3))):
                at = float(rng.uniform(0.0, 0.1))
                theta += omega * (at - t)
                t = at
                omega += float(rng.normal(0.0, 1.5))
            theta += omega * (0.1 - t)
            for with_angle, (odometry, _) in runs.items():
                angle = GyroAngle(7, k * 100, wrap_angle(theta)) if with_angle else None
                odometry.car_status(k * 0.1, 0.0, 0.0, omega, angle)
        for with_angle, (odometry, localizer) in runs.items():
            odometry.advance(3.0 + 1e-3)  # the last sample taken: its interval integrated
            pose = localizer.pose_at(3.0)
            assert pose is not None
            error = wrap_angle(float(pose[0][2]) - theta)
            (err_angle if with_angle else err_ramp).append(error)
            if with_angle:
                var_angle.append(float(pose[1][2, 2]) - 1e-6)
    mse_angle, mse_ramp = float(np.mean(np.square(err_angle))), float(np.mean(np.square(err_ramp)))
    print(f"heading error² after 3 s: angle {mse_angle:.2e}, ramp {mse_ramp:.2e}; "
          f"claimed with the angle {np.mean(var_angle):.2e}")
    assert mse_angle < 1e-10 and mse_ramp > 1e-4
    assert float(np.mean(var_angle)) > mse_angle
