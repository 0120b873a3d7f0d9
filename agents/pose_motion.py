"""The pose's motion model: how (x, y, theta) and its covariance move over held inputs.

The wheel duties give (v, omega) through the :class:`~agents.drive_model.DriveModel`;
when a gyro yaw rate is given it replaces the wheels' differential. Motion uses the
midpoint heading (:func:`~agents.pose_geometry.motion_step`), in substeps of at most
``max_step``. The rate errors (duty-to-speed calibration, skid slip, gyro bias and
noise) are correlated over ``error_correlation_time`` τ; they are modelled as white
noise with the low-frequency spectral density of a first-order Gauss-Markov process,
``2·σ²·τ``, which bounds the error of a bias over horizons longer than τ and over-covers
shorter ones. A skid-steer car's centre of rotation strays while it turns
(``icr_offset``), and bumps and lateral slip diffuse the position.

The gyro rate over an interval (:class:`HeldInputs`) is a sample held, or, once the
next sample is known, a ramp to it (:func:`ramped`); the rate's wander about that line
is heading noise (:func:`wander_var`). When to hold, ramp and integrate again is the
filter's (:mod:`agents.localization`). Pure functions of plain numbers and the settings.

The gyro is a sample (10 Hz in telemetry) of a rate that moves between
samples (by 1-5 rad/s within 50 ms in the simulated skid-steer car's turns).
It is held until the next sample arrives; then the interval since the previous
one is integrated again with the rate ramped between the two (first-order
hold), back to the last update at most. The rate's wander about that line is
heading noise: q·Δ³/12 per interval between samples Δ apart (a Brownian
bridge's integral), q·a³/3 for a sample held for age a; q, the wander's
spectral density, is estimated from consecutive samples (E[(Δω)²]/Δ = q). The
same holds for a rate that jumps (a command changing it) at a uniformly random time
within the interval, as on a real car whose commands and telemetry run on two clocks;
jumps at one fixed phase s of the interval leave 12·(1/2 - s/Δ)² of the claimed
variance (tests/agents/test_localization.py). In lockstep, where a car's commands follow
its telemetry, the simulated cars' jumps fall mid-interval more often than uniformly, and
the filter claimed 1.9-2.8x the ramp's actual error² per interval (measured once, on
2026-12-05, as the test's docstring says; no test reruns it).
What the samples cannot see (a rotation between two samples that alias it,
a collision) stays unmodelled.

A car that integrates its gyro (telemetry's ``gyro_angle``, :mod:`agents.odometry`)
also says how far it turned between two samples: the interval's mean rate. The ramp is
then lifted to integrate to it, and the interval's end carries no wander term, only the
timing of the two angles (when they were taken on the car's clock against when they
arrived); an update inside the interval leaves only the part after it to integrate
again, and that part keeps the wander term, whether the update came before the sample
that closed the interval or after it (:func:`split`).

The gyro's scale error s (the state's fifth element) turns the heading by s times the
rate: a rate ω given is a true rate ω - b - s·ω to first order. Tags teach it while the
car turns, as they teach b while it drives.

A car that stands still (zero duty for the gyro bias's ``settle_time``, and a gyro that
reads no more than its bias and noise, :mod:`agents.gyro_bias`) does not turn: its samples
are then the bias's, which the pose filter learns from them (its state's fourth
element), and the heading is held, not moved by their noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from agents.checks import require
from agents.drive_model import DriveModel
from agents.localizer_params import LocalizerParams
from agents.pose_geometry import motion_step

FloatArray = npt.NDArray[np.float64]

STATE_SIZE = 5
"""The pose filter's state: (x, y, theta, b, s)."""
BIAS, SCALE = 3, 4


@dataclass(frozen=True)
class HeldInputs:
    """Wheel duties and the gyro rate over an interval.

    The gyro rate at time τ is ``gyro_z + gyro_slope·(τ - sampled_at)``: held (slope 0,
    ``next_sample`` None) until the next sample arrives, then a ramp to it (first-order
    hold, ``next_sample`` its time). ``rate_psd`` is the spectral density (rad²/s³) of
    the true rate's wander about that line, which the filter adds as heading noise.
    """

    duty_left: float
    duty_right: float
    gyro_z: float | None
    sampled_at: float = 0.0
    gyro_slope: float = 0.0
    next_sample: float | None = None
    rate_psd: float = 0.0
    gyro_error: float | None = None  # the rate's error σ (None: LocalizerParams.gyro_error)
    angle_var: float = 0.0  # rad² over [sampled_at, next_sample]: the car's angle's timing
    lifted_psd: float = 0.0  # the wander density a lift to the car's angle dropped (split)
    still: bool = False  # the car stands still: a still sample held, or two still ends ramped

    def sample(self) -> tuple[float, float, float | None, float | None]:
        return self.duty_left, self.duty_right, self.gyro_z, self.gyro_error


def rates(params: LocalizerParams, drive: DriveModel,
          u: HeldInputs) -> tuple[float, float, float, float]:
    """(v, omega at the sample, sigma_v, sigma_omega) for the given inputs."""
    p = params
    v, omega_wheels = drive.body_velocity(u.duty_left, u.duty_right)
    sigma_v = p.speed_error_frac * abs(v) + p.speed_error_floor
    if u.still:  # its gyro samples are the bias's, and what it learns from them
        return v, 0.0, sigma_v, 0.0
    if u.gyro_z is not None:
        return v, u.gyro_z, sigma_v, p.gyro_error if u.gyro_error is None else u.gyro_error
    return v, omega_wheels, sigma_v, p.yaw_error_frac * abs(omega_wheels) + p.yaw_error_floor

def wander_var(u: HeldInputs, t: float, h: float) -> float:
    """Heading variance (rad²) the rate's wander about its held or ramped line adds over
    [t, t + h]: q·((a+h)³ - a³)/3 for a sample held since age a (integrated random
    walk), q·Δ²·h/12 between two samples Δ apart (the bridge's q·Δ³/12 spread evenly);
    a ramp lifted to the car's integrated angle adds that angle's timing variance
    ``angle_var``, spread evenly too.
    """
    if u.still:
        return 0.0
    if u.next_sample is None:
        if u.rate_psd <= 0.0:
            return 0.0
        a = max(0.0, t - u.sampled_at)
        return u.rate_psd * ((a + h) ** 3 - a**3) / 3.0
    span = u.next_sample - u.sampled_at
    spread = u.angle_var * h / span if span > 0.0 else 0.0
    return u.rate_psd * span * span * h / 12.0 + spread


def ramped(old: HeldInputs, rate: float, slope: float, now: float, *, psd: float,
           interval: tuple[float, float] | None, partial: bool,
           still: bool = False) -> HeldInputs:
    """``old``'s sample ramped at ``slope`` to the next one, ``rate``, taken at ``now``.
    With ``interval`` (the interval's mean rate from the car's angle, and that angle's
    timing variance) the ramp is lifted to integrate to that mean, and keeps the wander
    term (density ``psd``) only when ``partial``: when an update inside the interval left
    only its later part to integrate again, where the wander is an error; at the ends of
    the whole interval it is none. ``still``: the car stood still from one sample to the
    next (it did not turn between)."""
    if interval is None:
        return replace(old, gyro_slope=slope, next_sample=now, rate_psd=psd, still=still)
    assert old.gyro_z is not None
    lift = interval[0] - 0.5 * (old.gyro_z + rate)
    return replace(old, gyro_z=old.gyro_z + lift, gyro_slope=slope, next_sample=now,
                   rate_psd=psd if partial else 0.0, angle_var=interval[1],
                   lifted_psd=0.0 if partial else psd, still=still)


def split(u: HeldInputs, t: float) -> HeldInputs:
    """``u`` on the part after an update at ``t``: a lift to the car's angle that claimed its
    whole interval keeps the wander term there when ``t`` falls inside the interval (as
    :func:`ramped` with ``partial``: the update, not the interval's start, is where that
    part begins, and the car's angle does not say where the heading is in between)."""
    if u.lifted_psd > 0.0 and u.next_sample is not None and u.sampled_at < t < u.next_sample:
        return replace(u, rate_psd=u.lifted_psd, lifted_psd=0.0)
    return u


def check_sample(t: float, duty_left: float, duty_right: float,  # noqa: PLR0917
                  gyro_z: float | None, gyro_error: float | None,
                  interval: tuple[float, float] | None) -> None:
    """Refuse (ValueError) a sample's inputs that are not finite, or out of range."""
    require(math.isfinite(t), "t must be finite")
    require(math.isfinite(duty_left) and math.isfinite(duty_right), "duties must be finite")
    require(gyro_z is None or math.isfinite(gyro_z), "gyro_z must be finite or None")
    require(gyro_error is None or (math.isfinite(gyro_error) and gyro_error > 0.0),
            "gyro_error must be finite and > 0, or None")
    require(interval is None or (math.isfinite(interval[0]) and math.isfinite(interval[1])
                                 and interval[1] >= 0.0),
            "interval must be a finite rate and a variance >= 0, or None")


def full_state(x: FloatArray, P: FloatArray, *, bias_var: float,
               scale: tuple[float, float]) -> tuple[FloatArray, FloatArray]:
    """The filter's state and covariance from a pose ``x``, ``P`` (3): the residual bias 0
    with ``bias_var``, the scale error and its variance ``scale``, neither correlated with
    the pose."""
    x5, P5 = np.zeros(STATE_SIZE), np.zeros((STATE_SIZE, STATE_SIZE))
    x5[:3], P5[:3, :3], P5[BIAS, BIAS] = x, P, bias_var
    x5[SCALE], P5[SCALE, SCALE] = scale
    return x5, P5


def learn_wander(psd: float | None, slope: float, span: float, window: float) -> float:
    """The running estimate of the rate's wander density (rad²/s³) after a sample ``span``
    seconds after the last, the rate having changed at ``slope`` between them: E[(Δω)²]/Δ
    = q for a random walk, each new value weighed by its span against ``window``."""
    seen = slope * slope * span
    weight = 1.0 - math.exp(-span / window)
    return seen if psd is None else psd + weight * (seen - psd)


def integrate(
    x: FloatArray, P: FloatArray, t0: float, dt: float, u: HeldInputs, *,
    params: LocalizerParams, drive: DriveModel, bias_psd: float = 0.0,
) -> tuple[FloatArray, FloatArray]:
    """The state and covariance at ``t0 + dt`` from those at ``t0`` under inputs ``u``.

    The state is (x, y, theta, b, s): b is what is left of the gyro's bias in the rate
    given, a random walk of density ``bias_psd``, and s the gyro's scale error, a random
    walk of density ``params.gyro_scale_psd`` (none when ``gyro_scale_std`` is 0). The
    true rate is the rate given less b less s times it; b and s turn the heading only when
    there is a gyro rate (the wheels' rate has neither)."""
    if dt <= 0.0:
        return x.copy(), P.copy()
    p = params
    v, omega0, sv, so = rates(params, drive, u)
    gyro = u.gyro_z is not None and not u.still
    slope = 0.0 if u.still else u.gyro_slope
    steps = max(1, math.ceil(dt / p.max_step - 1e-9))
    h = dt / steps
    two_tau = 2.0 * p.error_correlation_time
    scale_psd = p.gyro_scale_psd if p.gyro_scale_std > 0.0 else 0.0  # 0: not modelled
    F5 = np.eye(STATE_SIZE)
    G5 = np.zeros((STATE_SIZE, 2))
    Q = np.zeros((STATE_SIZE, STATE_SIZE))
    for k in range(steps):
        t = t0 + k * h
        given = omega0 + slope * (t + 0.5 * h - u.sampled_at)
        omega = given - float(x[BIAS]) - float(x[SCALE]) * given if gyro else given
        # Diagonal matrices written out (np.diag of a list costs more than the maths).
        r_v = two_tau * sv * sv / h
        r_w = two_tau * so * so / h + wander_var(u, t, h) / h**2
        rate_cov = np.array([[r_v, 0.0], [0.0, r_w]])
        slip = (p.position_noise_density + two_tau * (p.icr_offset * omega) ** 2) * h
        pose, F, G = motion_step(x, v, omega, h)
        x = np.append(pose, x[BIAS:])
        F5[:3, :3] = F
        if gyro:
            F5[:3, BIAS] = -G[:, 1]  # a bias b turns the heading by -b per second
            F5[:3, SCALE] = -G[:, 1] * given  # a scale error s by -s times the rate
        G5[:3] = G
        Q[0, 0] = Q[1, 1] = slip
        Q[BIAS, BIAS] = bias_psd * h
        Q[SCALE, SCALE] = scale_psd * h
        P = F5 @ P @ F5.T + G5 @ rate_cov @ G5.T + Q
    return x, 0.5 * (P + P.T)


__all__ = ["BIAS", "SCALE", "STATE_SIZE", "HeldInputs", "check_sample", "full_state", "integrate",
           "learn_wander", "ramped", "rates", "split", "wander_var"]
