"""Wheel duty <-> wheel speed for a skid-steer car with a motor deadband.

The model is deliberately simple because the car has no encoders to fit a
better one: below ``deadband`` (as a fraction of full duty) a wheel does not
turn; above it the speed grows linearly to ``max_wheel_speed`` at duty 1.
``track`` is the *effective* track width: on a skid-steer car the wheels slip
when turning, so the value that makes ``omega = (v_r - v_l) / track`` right is
usually larger than the distance between the wheels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from agents.checks import require


@dataclass(frozen=True)
class DriveModel:
    """Deadband-plus-linear duty model; speeds in m/s, duties in [-1, 1]."""

    track: float = 0.13
    """Effective track width in metres (wheel centre to wheel centre on the FNK0053)."""
    max_wheel_speed: float = 0.7
    """Ground speed of a wheel at duty ±1, m/s (65 mm wheels; the simulator's car model)."""
    deadband: float = 0.3907
    """Duty magnitude below which a wheel does not turn, in [0, 1): the FNK0053's minimum
    start duty, 1600/4095 (the simulator's default too; firmware/README.md)."""
    min_speed: float = 0.005
    """A requested wheel speed below this magnitude (m/s) is commanded as exactly 0."""

    def __post_init__(self) -> None:
        require(math.isfinite(self.track) and self.track > 0.0, "track must be > 0")
        require(
            math.isfinite(self.max_wheel_speed) and self.max_wheel_speed > 0.0,
            "max_wheel_speed must be > 0",
        )
        require(
            math.isfinite(self.deadband) and 0.0 <= self.deadband < 1.0,
            "deadband must be in [0, 1)",
        )
        require(
            math.isfinite(self.min_speed) and 0.0 <= self.min_speed < self.max_wheel_speed,
            "min_speed must be in [0, max_wheel_speed)",
        )

    def wheel_speed(self, duty: float) -> float:
        """Ground speed (m/s) of a wheel driven at ``duty`` (clipped to [-1, 1])."""
        require(math.isfinite(duty), f"duty must be finite, got {duty}")
        d = min(1.0, abs(duty))
        if d <= self.deadband:
            return 0.0
        speed = self.max_wheel_speed * (d - self.deadband) / (1.0 - self.deadband)
        return math.copysign(speed, duty)

    def duty_for_speed(self, speed: float) -> float:
        """The duty that makes a wheel turn at ``speed`` m/s, deadband compensated.

        Requests below ``min_speed`` give exactly 0.0; requests beyond
        ``max_wheel_speed`` saturate at ±1.
        """
        require(math.isfinite(speed), f"speed must be finite, got {speed}")
        s = abs(speed)
        if s < self.min_speed:
            return 0.0
        d = self.deadband + (1.0 - self.deadband) * s / self.max_wheel_speed
        return math.copysign(min(1.0, d), speed)

    def body_velocity(self, duty_left: float, duty_right: float) -> tuple[float, float]:
        """(v, omega) of the car body for the given wheel duties."""
        vl = self.wheel_speed(duty_left)
        vr = self.wheel_speed(duty_right)
        return 0.5 * (vl + vr), (vr - vl) / self.track

    def wheel_speeds_for(self, v: float, omega: float) -> tuple[float, float]:
        """(left, right) wheel speeds realising (v, omega), scaled together to fit.

        When one wheel would exceed ``max_wheel_speed``, both are scaled by the
        same factor, so the curvature (the turn) is kept and only speed is lost.
        """
        require(math.isfinite(v) and math.isfinite(omega), "v and omega must be finite")
        half = 0.5 * omega * self.track
        vl, vr = v - half, v + half
        peak = max(abs(vl), abs(vr))
        if peak > self.max_wheel_speed:
            k = self.max_wheel_speed / peak
            vl, vr = vl * k, vr * k
        return vl, vr

    def mix(self, v: float, omega: float) -> tuple[float, float]:
        """(left, right) duties in [-1, 1] for a desired (v m/s, omega rad/s)."""
        vl, vr = self.wheel_speeds_for(v, omega)
        return self.duty_for_speed(vl), self.duty_for_speed(vr)
