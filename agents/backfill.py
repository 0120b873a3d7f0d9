"""Backfill: the frames a robot saw while it had no pose, placed once a pose comes.

A robot without a pose turns on the spot (at start-up, or when it lost its pose) until
its camera finds tags; every frame of that turn is a look at the room (or a sighting of
the target), but it has no place in the room yet. This keeps, for the last ``horizon``
seconds without a pose, a *relative* dead reckoning from the duties and the gyro (the
same inputs and error model as the localizer's, :func:`agents.pose_motion.rates`) and
each such frame: its capture time and the target's sighting when it saw the target. A
frame that saw the target is kept as well as those that did not: keeping only the
latter would tell the search map "not here" around the very place the target stood.

When the pose comes, at ``t_a``, each frame's pose is the new pose composed with the
motion from ``t_a`` back to the frame::

    pose_i = pose_a ⊕ (r_a⁻¹ ⊕ r_i)        (r: the relative dead reckoning)

with the covariance of the new pose carried over and the dead reckoning's own error
added, taken as fully correlated over the interval (a bias, the conservative case):
heading σ = ∫σ_ω dt plus the rate's wander (below) plus the gyro's scale error's σ times
the turn (the localizer's estimate of that error is taken off the rate), position σ
along the way ∫σ_v dt plus the path times the heading σ.

The gyro is sampled at the car's rate (10 Hz) while the robot spins up and down. A rate
held until the next sample put the frames of a start-up turn 0.09-0.13 rad off their
true headings, five times their σ (orbit seeds 1 and 9), and the placed sightings'
mean NIS was 14 where 2 is consistent (35-41 sightings, orbit seeds 1-5 and 9). As the
localizer does, a rate is ramped to the next sample once it comes (the steps since are
integrated again), and the true rate's wander about that line adds heading variance
(:func:`agents.pose_motion.wander_var`, at the density the localizer learnt):
the headings are then off by at most 0.08 rad (mostly the new pose's own error) and
the mean NIS is 1.2, on the cautious side. When the car integrates its gyro, the ramp
is lifted to the heading change its angle gives for the interval, as the localizer's is
(and with no wander term: nothing updates the reckoning inside an interval). The
evidence (docs/evidence.md, section 4, "sightings") measures the placed sightings' NIS on
every scene of the suite.

The seeker gates a look like any other (its position σ must stay under
``search.max_pose_std``), so a frame from far back along a drive is dropped, and one
from a turn on the spot is kept. A sighting becomes a detection of its capture time,
with its covariance (:meth:`Placed.detection`): the core gives it to the track before the
frame that brought the pose (the track takes late detections exactly), logged with
``placed_at``, the time it became known; the search map is held where it puts the target.

Sans-IO and deterministic, like the core that owns it: times and inputs come in.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from agents.checks import require
from agents.drive_model import DriveModel
from agents.localizer_params import LocalizerParams
from agents.observations import Detection, TagSighting
from agents.pose_geometry import (
    compose,
    motion_step,
    relative,
    sighting_detection,
    wrap_angle,
)
from agents.pose_motion import HeldInputs, ramped, rates, wander_var

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class _Sample:
    """The relative dead reckoning at time ``t`` and its running error integrals."""

    t: float
    pose: tuple[float, float, float]
    path: float
    """Distance travelled since the reckoning began, m."""
    speed_error: float
    """∫σ_v dt since it began, m."""
    heading_error: float
    """∫σ_ω dt since it began, rad."""
    wander: float = 0.0
    """Heading variance from the rate's wander about its held or ramped line, rad²."""
    v: float = 0.0
    """The speed over the step that ended here, m/s (to integrate it again)."""
    turn: float = 0.0
    """The gyro's turn since it began (signed, unwrapped), rad: what its scale error scales."""


@dataclass(frozen=True)
class _Rate:
    """The gyro sample the reckoning holds: its rate, time and the sample index it began at."""

    omega: float
    t: float
    index: int


@dataclass(frozen=True)
class Placed:
    """A frame seen without a pose, placed: capture time, pose (x, y, θ) and covariance,
    and the target's sighting when the frame saw it."""

    t: float
    pose: FloatArray
    cov: FloatArray
    target: TagSighting | None = None

    def detection(self, camera_forward: float) -> Detection | None:
        """The target where this frame places it, when it saw the target."""
        if self.target is None:
            return None
        return sighting_detection(self.pose, self.cov, self.target, self.t, camera_forward)


class Backfill:
    """Frames without a pose and the relative dead reckoning to place them; see the module
    docstring. ``horizon`` 0 keeps nothing."""

    def __init__(self, horizon: float, drive: DriveModel, params: LocalizerParams) -> None:
        require(math.isfinite(horizon) and horizon >= 0.0, "horizon must be finite and >= 0")
        self.horizon = horizon
        self.drive = drive
        self.params = params
        self._samples: list[_Sample] = []
        self._frames: list[tuple[float, TagSighting | None]] = []
        self._rate: _Rate | None = None
        self._psd = 0.0  # the rate's wander density, rad²/s³: the localizer's
        self._scale = (0.0, 0.0)  # the gyro's scale error and its σ: the localizer's

    def __len__(self) -> int:
        """Frames waiting for a pose."""
        return len(self._frames)

    def clear(self) -> None:
        """A pose is held (or the frames were placed): nothing to keep."""
        self._samples.clear()
        self._frames.clear()
        self._rate = None

    def advance(self, t0: float, t1: float, duty: tuple[float, float], gyro_z: float | None,
                gyro_error: float | None = None, *, rate_psd: float = 0.0,
                new_sample: bool = False, interval: tuple[float, float] | None = None,
                scale: tuple[float, float] = (0.0, 0.0)) -> None:
        """Dead-reckon over [t0, t1] without a pose, under the inputs the localizer used
        (the wheel duties, the gyro rate less its bias and that rate's error σ) and the
        rate's wander density it learnt (``Localizer.rate_psd``, rad²/s³); ``new_sample``
        and ``interval`` as the localizer's (:meth:`PoseEKF.predict_to`): the rate is a
        new sample at ``t0``, and the car's angle gave the interval before it this mean
        rate and timing variance. ``scale``: the gyro's scale error and its variance
        (``PoseEKF.gyro_scale``): the rate is taken less the scale times it, and the σ
        times the turn is heading error."""
        if self.horizon <= 0.0 or not t1 > t0:
            return
        if not self._samples or abs(self._samples[-1].t - t0) > 1e-9:  # a new reckoning
            self._samples = [_Sample(t0, (0.0, 0.0, 0.0), 0.0, 0.0, 0.0)]
            self._rate = None
        self._psd = rate_psd
        self._scale = (scale[0], math.sqrt(max(scale[1], 0.0)))
        if gyro_z is None:
            self._rate = None
        elif new_sample or self._rate is None or gyro_z != self._rate.omega:
            self._new_rate(t0, gyro_z, interval)
        last = self._samples[-1]
        dt = t1 - t0
        v, omega, sigma_v, sigma_omega = rates(
            self.params, self.drive, HeldInputs(duty[0], duty[1], gyro_z, gyro_error=gyro_error))
        wander = 0.0
        if self._rate is not None:
            held = HeldInputs(0.0, 0.0, self._rate.omega, self._rate.t, rate_psd=self._psd)
            wander = wander_var(held, t0, dt)
        if gyro_z is not None:
            omega -= self._scale[0] * omega
        state, _, _ = motion_step(np.array(last.pose), v, omega, dt)
        self._samples.append(_Sample(
            t1, (float(state[0]), float(state[1]), float(state[2])), last.path + abs(v) * dt,
            last.speed_error + sigma_v * dt, last.heading_error + sigma_omega * dt,
            last.wander + wander, v, last.turn + (0.0 if gyro_z is None else omega * dt)))
        self._trim(t1)

    def _new_rate(self, t: float, omega: float,
                  interval: tuple[float, float] | None = None) -> None:
        """A new gyro sample at ``t``: the steps since the last one are integrated again with
        the rate ramped between the two (the localizer's first-order hold), lifted to the
        interval's mean rate when the car's angle gave one (no wander term then: the
        reckoning has no update inside the interval)."""
        old, k0 = self._rate, len(self._samples) - 1
        self._rate = _Rate(omega, t, k0)
        if old is None or not t > old.t or not 0 <= old.index < k0:
            return
        slope = (omega - old.omega) / (t - old.t)
        ramp = ramped(HeldInputs(0.0, 0.0, old.omega, old.t), omega, slope, t, psd=self._psd,
                      interval=interval, partial=False)
        start = ramp.gyro_z
        assert start is not None
        samples = self._samples
        for k in range(old.index + 1, k0 + 1):
            prev, cur = samples[k - 1], samples[k]
            h = cur.t - prev.t
            rate = start + slope * (prev.t + 0.5 * h - old.t)
            rate -= self._scale[0] * rate
            state, _, _ = motion_step(np.array(prev.pose), cur.v, rate, h)
            samples[k] = replace(cur, pose=(float(state[0]), float(state[1]), float(state[2])),
                                 wander=prev.wander + wander_var(ramp, prev.t, h),
                                 turn=prev.turn + rate * h)

    def frame(self, t: float, target: TagSighting | None = None) -> None:
        """A frame captured at ``t`` without a pose; ``target``: its sighting of the target."""
        if self.horizon > 0.0 and (not self._frames or t > self._frames[-1][0]):
            self._frames.append((t, target))

    def place(self, t_a: float, pose_a: npt.ArrayLike,
              cov_a: npt.ArrayLike) -> list[Placed]:
        """The pose came at ``t_a`` (``pose_a``, ``cov_a``): every kept frame captured
        within ``horizon`` before it, placed in time order (then nothing is kept)."""
        frames = [f for f in self._frames if t_a - self.horizon <= f[0] <= t_a]
        at_a = self._at(t_a)
        placed: list[Placed] = []
        if at_a is not None:
            x_a = np.asarray(pose_a, dtype=np.float64)
            P_a = np.asarray(cov_a, dtype=np.float64)
            for t, target in frames:
                at = self._at(t)
                if at is None:
                    continue
                placed.append(replace(self._placed(t, at, at_a, x_a, P_a, scale_std=self._scale[1]),
                                      target=target))
        self.clear()
        return placed

    @staticmethod
    def _placed(t: float, at: _Sample, at_a: _Sample, x_a: FloatArray, P_a: FloatArray, *,
                scale_std: float) -> Placed:
        offset = relative(np.array(at_a.pose), np.array(at.pose))  # r_a⁻¹ ⊕ r_i
        pose, J_state, _ = compose(x_a, offset)
        sigma_th = (at_a.heading_error - at.heading_error
                    + math.sqrt(max(0.0, at_a.wander - at.wander))
                    + scale_std * abs(at_a.turn - at.turn))
        sigma_p = (at_a.speed_error - at.speed_error) + (at_a.path - at.path) * sigma_th
        P = J_state @ P_a @ J_state.T + np.diag([sigma_p**2, sigma_p**2, sigma_th**2])
        return Placed(t, pose, 0.5 * (P + P.T))

    def _at(self, t: float) -> _Sample | None:
        """The dead reckoning at ``t``, between two samples (linear), None outside them."""
        samples = self._samples
        if not samples or not samples[0].t <= t <= samples[-1].t:
            return None
        k = bisect.bisect_left(samples, t, key=lambda s: s.t)
        hi = samples[k]
        if hi.t == t or k == 0:
            return hi
        lo = samples[k - 1]
        f = (t - lo.t) / (hi.t - lo.t)

        def mix(a: float, b: float) -> float:
            return a + f * (b - a)

        th = lo.pose[2] + f * wrap_angle(hi.pose[2] - lo.pose[2])
        return _Sample(t, (mix(lo.pose[0], hi.pose[0]), mix(lo.pose[1], hi.pose[1]), th),
                       mix(lo.path, hi.path), mix(lo.speed_error, hi.speed_error),
                       mix(lo.heading_error, hi.heading_error), mix(lo.wander, hi.wander), hi.v,
                       mix(lo.turn, hi.turn))

    def _trim(self, now: float) -> None:
        cut = now - self.horizon
        k = 0
        while k + 1 < len(self._samples) and self._samples[k + 1].t <= cut:
            k += 1
        if k:
            del self._samples[:k]
            if self._rate is not None:
                self._rate = replace(self._rate, index=max(0, self._rate.index - k))
        self._frames = [f for f in self._frames if f[0] >= cut]


__all__ = ["Backfill", "Placed"]
