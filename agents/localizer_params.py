"""The pose filter's settings: its noise model, gates and limits (:class:`LocalizerParams`).

Its own module so that the filter (:mod:`agents.localization`), its motion model
(:mod:`agents.pose_motion`) and the agent's configuration read one definition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from agents.checks import require

CHI2_2DOF_99 = 9.21
"""99 % quantile of χ² with 2 degrees of freedom (range-bearing gate)."""
CHI2_3DOF_99 = 11.34
"""99 % quantile of χ² with 3 degrees of freedom (pose-fix gate)."""


@dataclass(frozen=True)
class LocalizerParams:
    """Noise model, gates and limits of :class:`PoseEKF` (metres, radians, seconds)."""

    speed_error_frac: float = 0.15
    """Duty-to-speed calibration error, as a fraction of the modelled speed (1 sigma)."""
    speed_error_floor: float = 0.01
    """Speed error (m/s) even at rest or near the deadband edge."""
    yaw_error_frac: float = 0.3
    """Error of the wheel-differential yaw rate (skid slip), fraction of it, no gyro."""
    yaw_error_floor: float = 0.05
    """Yaw-rate error floor (rad/s) from the wheels, no gyro."""
    gyro_error: float = 0.02
    """Gyro yaw-rate error (bias plus noise), rad/s, unless a sample comes with its own
    (the rate less a learnt bias, agents.gyro_bias)."""
    gyro_scale_std: float = 0.02
    """The gyro's scale error before any is learnt, a fraction (1 sigma, mean 0): the
    MPU-6050's sensitivity tolerance is ±3 % (its datasheet, 25 °C). The filter learns it
    from tags while the car turns (its state's fifth element); 0: not modelled."""
    gyro_scale_psd: float = 1e-8
    """Random-walk density of the scale error, 1/s (the datasheet's ±2 % over 125 °C: a car
    warming by 10 °C in 10 minutes moves it by about 0.002)."""
    error_correlation_time: float = 0.5
    """τ of the rate errors, seconds."""
    rate_change_window: float = 1.0
    """Time constant (s) of the running estimate of how fast the gyro rate changes between
    samples (its wander's spectral density, from consecutive samples)."""
    position_noise_density: float = 1e-4
    """Isotropic position diffusion, m²/s (bumps, lateral slip)."""
    icr_offset: float = 0.02
    """How far (m, 1 sigma) a skid-steer car's centre of rotation strays from the axle's
    centre while it turns: a velocity error of icr_offset·|omega| on each axis, correlated
    over τ like the rate errors. 0.013-0.026 m fitted on the simulated car's truth (its
    displacement against the duty model's, 0.5 s and 1 s windows, eight_robots seeds 1-3;
    without it the error was 2.5x the claimed sigma while turning); a real car's from its log."""
    camera_forward: float = 0.05
    """Camera optical centre ahead of the rotation centre along the car's axis, m."""
    tag_gate: float = CHI2_2DOF_99
    pose_fix_gate: float = CHI2_3DOF_99
    init_quantile: float = 0.99
    """Residual gate of the initial solve: this quantile of χ²(2n - 3)."""
    init_max_position_trace: float = 0.02
    """An initial solution less certain than this (m², trace of the position block) is refused."""
    max_position_trace: float = 0.1
    """The pose is lost when the position covariance trace exceeds this, m²."""
    max_heading_var: float = math.radians(20.0) ** 2
    """... or when the heading variance exceeds this, rad²."""
    max_consecutive_rejections: int = 10
    """The pose is lost after this many gated tag sightings in a row."""
    max_lag: float = 0.5
    """How far back (s) observations can be applied by rewinding; inputs are kept this long."""
    order_tolerance: float = 0.02
    """Slack (s) on capture order and on capture times slightly ahead of the filter."""
    max_step: float = 0.05
    """Longest integration substep, s."""
    use_unsynchronized: bool = False
    """Apply batches whose capture time is only a receipt time (clock not synchronised)."""

    def __post_init__(self) -> None:
        for name in (
            "speed_error_frac",
            "speed_error_floor",
            "yaw_error_frac",
            "yaw_error_floor",
            "gyro_error",
            "gyro_scale_std",
            "gyro_scale_psd",
            "position_noise_density",
            "icr_offset",
            "order_tolerance",
            "max_lag",
        ):
            value = getattr(self, name)
            require(math.isfinite(value) and value >= 0.0, f"{name} must be finite and >= 0")
        for name in (
            "error_correlation_time",
            "rate_change_window",
            "tag_gate",
            "pose_fix_gate",
            "init_max_position_trace",
            "max_position_trace",
            "max_heading_var",
            "max_step",
        ):
            value = getattr(self, name)
            require(math.isfinite(value) and value > 0.0, f"{name} must be finite and > 0")
        require(math.isfinite(self.camera_forward), "camera_forward must be finite")
        require(0.5 < self.init_quantile < 1.0, "init_quantile must be in (0.5, 1)")
        require(
            isinstance(self.max_consecutive_rejections, int)
            and self.max_consecutive_rejections >= 1,
            "max_consecutive_rejections must be an int >= 1",
        )


__all__ = ["CHI2_2DOF_99", "CHI2_3DOF_99", "LocalizerParams"]
