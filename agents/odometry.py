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

import numpy as np

from agents.backfill import Backfill
from agents.config import AgentConfig
from agents.gyro_bias import GyroBias
from agents.localization import PoseEKF
from agents.pose_geometry import motion_step


class Odometry:
    """The localizer's inputs and its advance in time; see the module docstring."""

    def __init__(self, config: AgentConfig, localizer: PoseEKF, gyro_bias: GyroBias,
                 backfill: Backfill) -> None:
        """The core's settings and the parts it owns that move with the inputs."""
        self.config = config
        self.localizer = localizer
        self.gyro_bias = gyro_bias
        self.backfill = backfill
        self.duty = (0.0, 0.0)
        self.gyro: float | None = None
        self.gyro_error: float | None = None  # the corrected rate's error σ (None: default)
        self._sampled = False  # car_status brought inputs the localizer has not yet taken
        # The last pose, dead-reckoned from the duties and gyro once the localizer lost it.
        self.reckoned: tuple[float, float, float] | None = None

    def car_status(
        self, now: float, duty_left: float, duty_right: float, gyro_z: float | None
    ) -> None:
        """The duties the car applies now and its gyro rate: the localizer's inputs (the rate
        less the gyro's bias, learnt while the car stands still)."""
        self.advance(now)
        self.duty = (float(duty_left), float(duty_right))
        self.gyro = self.gyro_bias.correct(now, self.duty[0], self.duty[1], gyro_z)
        self.gyro_error = (
            None if self.gyro is None
            else self.gyro_bias.residual_std(self.config.localizer.error_correlation_time))
        self._sampled = True

    def advance(self, t: float) -> None:
        """The localizer (or, without a pose, the dead reckonings) to time ``t`` under the
        inputs held."""
        if t > self.localizer.t:
            t0 = self.localizer.t
            dt = t - t0
            self.localizer.predict_to(t, self.duty[0], self.duty[1], self.gyro,
                                      self.gyro_error, new_sample=self._sampled)
            self._sampled = False
            pose = self.localizer.pose
            if pose is not None:
                self.backfill.clear()
                self.reckoned = pose
                return
            self.backfill.advance(t0, t, self.duty, self.gyro, self.gyro_error,
                                  rate_psd=self.localizer.rate_psd)
            if self.reckoned is not None:  # the navigator's estimate for a lost robot
                v, omega = self.config.drive.body_velocity(*self.duty)
                state, _, _ = motion_step(
                    np.array(self.reckoned), v, omega if self.gyro is None else self.gyro, dt
                )
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
