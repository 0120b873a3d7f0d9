"""The car's inputs held for the localizer, and a lost robot's dead reckoning.

:class:`Odometry` keeps what the car last said it applies: its wheel duties, the gyro's
rate less the bias learnt while the car stands still (:mod:`agents.gyro_bias`) and that
rate's error σ. It advances the localizer under them, and while there is no pose the
relative dead reckoning of the frames seen meanwhile (:mod:`agents.backfill`) and the
last pose, dead-reckoned: the navigator's estimate for a lost robot. It also tells the
navigator how uncertain the pose is (:meth:`Odometry.heading_std`,
:meth:`Odometry.pose_used`). Sans-IO and deterministic, like the core that owns it.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from agents.backfill import Backfill
from agents.config import AgentConfig
from agents.gyro_bias import GyroBias
from agents.localization import PoseEKF
from agents.pose_geometry import motion_step, wrap_angle

MAX_ANGLE_SPAN = 0.5
"""s: the longest car-clock span two angles are differenced over (a longer one, after lost
telemetry, falls back to the rate samples)."""
UPTIME_RESOLUTION = 1e-3  # s: telemetry's uptime_ms


class GyroAngle(NamedTuple):
    """The car's integrated gyro angle (telemetry's ``gyro_angle``) and when it was taken."""

    boot: int  # the car's boot nonce: angles of two boots do not compare
    uptime_ms: int
    angle: float  # rad, wrapped to (-pi, pi]


class Odometry:
    """The localizer's inputs and its advance in time; see the module docstring."""

    def __init__(self, config: AgentConfig, localizer: PoseEKF, gyro_bias: GyroBias,
                 backfill: Backfill) -> None:
        """The core's settings and the parts it owns that move with the inputs."""
        self.config = config
        self.localizer = localizer
        self.gyro_bias = gyro_bias
        self.backfill = backfill
        if gyro_bias.params.enabled:  # a pose set before the first telemetry starts with it
            localizer.bias_prior_var = gyro_bias.variance
        self.duty = (0.0, 0.0)
        self.gyro: float | None = None
        self.gyro_error: float | None = None  # the corrected rate's error σ (None: default)
        # The mean corrected rate since the previous telemetry, from the car's integrated
        # angle, and its timing variance (None: the rate samples are all there is).
        self.interval: tuple[float, float] | None = None
        self._angle: tuple[float, GyroAngle] | None = None  # (agent time, the last angle)
        self._sampled = False  # car_status brought inputs the dead reckoning has not taken
        # The last pose, dead-reckoned from the duties and gyro once the localizer lost it.
        self.reckoned: tuple[float, float, float] | None = None

    def car_status(
        self, now: float, duty_left: float, duty_right: float, gyro_z: float | None,
        angle: GyroAngle | None = None, *, sampled_at: float | None = None,
    ) -> None:
        """The duties the car applies, its gyro rate and integrated angle, sampled by the
        car at ``sampled_at`` (None: ``now``): the localizer's inputs from then on (the
        rate less the gyro's bias, learnt while the car stands still)."""
        self.advance(now)
        at = now if sampled_at is None else self.localizer.sample_time(sampled_at)
        self.duty = (float(duty_left), float(duty_right))
        previous = self.gyro
        lost = self.localizer.take_lost_bias()
        if lost is not None:
            self.gyro_bias.absorb(*lost)
        # While there is a pose the filter holds what is left of the bias as a state.
        residual = self.localizer.bias_residual if self.gyro_bias.params.enabled else None
        self.gyro = self.gyro_bias.correct(now, self.duty[0], self.duty[1], gyro_z, residual)
        self.gyro_error = (
            None if self.gyro is None
            else self.gyro_bias.residual_std(self.config.localizer.error_correlation_time,
                                             held=residual is not None))
        self.localizer.bias_prior_var = (
            self.gyro_bias.variance if self.gyro is not None and self.gyro_bias.params.enabled
            else 0.0)
        self.interval = None
        if angle is not None and self.gyro is not None:
            if self._angle is not None and previous is not None:
                self.interval = self._mean_rate(at, angle, previous)
            self._angle = (at, angle)
        else:
            self._angle = None
        self.localizer.sample_at(at, self.duty[0], self.duty[1], self.gyro,
                                 gyro_error=self.gyro_error, interval=self.interval,
                                 still=self.gyro_bias.still)
        self._sampled = True

    def _mean_rate(self, now: float, angle: GyroAngle,
                   previous: float) -> tuple[float, float] | None:
        """The mean corrected rate over the car's span since the last angle, and the variance
        its attribution to the agent's span adds: (rate x the spans' difference)², the
        difference being what the clock mapping (or, unsynchronised, the two telemetries'
        delays) got wrong, plus the uptime's millisecond rounding. ``now``: when this angle
        was sampled. None across a reboot or a span over MAX_ANGLE_SPAN."""
        assert self._angle is not None and self.gyro is not None
        then, last = self._angle
        span = (angle.uptime_ms - last.uptime_ms) / 1000.0
        if angle.boot != last.boot or not 0.0 < span <= MAX_ANGLE_SPAN:
            return None
        turned = wrap_angle(angle.angle - last.angle)
        # The whole turns a wrapped difference hides, from the rate samples at either end.
        expected = 0.5 * (previous + self.gyro + 2.0 * self.gyro_bias.bias) * span
        turned += 2.0 * math.pi * round((expected - turned) / (2.0 * math.pi))
        rate = turned / span - self.gyro_bias.bias
        mismatch = (now - then) - span
        var = rate * rate * (mismatch * mismatch + UPTIME_RESOLUTION**2 / 6.0)
        return rate, var

    def advance(self, t: float) -> None:
        """The localizer (or, without a pose, the dead reckonings) to time ``t`` under the
        inputs held."""
        if t > self.localizer.t:
            t0 = self.localizer.t
            dt = t - t0
            sampled, self._sampled = self._sampled, False
            interval = self.interval if sampled else None
            self.localizer.predict_to(t, self.duty[0], self.duty[1], self.gyro,
                                      self.gyro_error)  # sampled: car_status gave it them
            pose = self.localizer.pose
            if pose is not None:
                self.backfill.clear()
                self.reckoned = pose
                return
            self.backfill.advance(t0, t, self.duty, self.gyro, self.gyro_error,
                                  rate_psd=self.localizer.rate_psd, new_sample=sampled,
                                  interval=interval, scale=self.localizer.gyro_scale)
            if self.reckoned is not None:  # the navigator's estimate for a lost robot
                v, omega = self.config.drive.body_velocity(*self.duty)
                if self.gyro is not None:  # less the gyro's scale error, as the localizer's
                    omega = self.gyro - self.localizer.gyro_scale[0] * self.gyro
                state, _, _ = motion_step(np.array(self.reckoned), v, omega, dt)
                self.reckoned = (float(state[0]), float(state[1]), float(state[2]))

    def heading_std(self) -> float | None:
        """The pose's heading standard deviation, rad (None without a pose)."""
        P = self.localizer.cov
        return None if P is None else math.sqrt(max(float(P[2, 2]), 0.0))

    def pose_used(self) -> float | None:
        """The share of the localizer's loss limits the pose's covariance has reached."""
        P, lp = self.localizer.cov, self.config.localizer
        if P is None:
            return None
        return max(float(P[0, 0] + P[1, 1]) / lp.max_position_trace,
                   float(P[2, 2]) / lp.max_heading_var)
