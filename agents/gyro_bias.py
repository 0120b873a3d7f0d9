"""The gyro's bias, learnt while the car stands still (a zero-rate update).

A MEMS yaw-rate gyro reads the true rate plus a bias that is nearly constant
over a run (it changes with temperature and at each boot) plus white noise. The
pose filter integrates the rate, so an uncorrected bias of 0.01 rad/s turns the
heading by 0.6 rad a minute between tag sightings. A car whose wheels have had
zero duty for ``settle_time`` stands still, so what its gyro reads then is the
bias and noise: each such sample is a scalar Kalman update of the bias, which
otherwise wanders as a random walk of density ``drift_psd``. A still car whose
gyro reads more than ``max_still_rate`` from the estimate (or four σ of a noisier
gyro's spread) is being turned by something else (another robot, a hand) and teaches
nothing.

The same still samples show the gyro's noise: each innovation's square less the
estimate's variance is one draw of the noise variance. The noise used is the larger of
that learnt value and the configured ``sample_noise`` (the simulated gyro's): a real
car's gyro that is noisier than assumed widens the heading as it should, and one that
is quieter is never trusted below the configuration.

What is left after the correction is the estimate's error and each sample's noise,
far less than the 0.02 rad/s the pose filter assumes for a gyro whose bias it does not
know: :meth:`GyroBias.residual_std` is the rate-error σ the filter is given with each
corrected sample (0.021 rad/s before any still sample; 0.0068 after 30 s still, where the
drift holds the estimate's σ near 0.0025), so a robot holding still keeps its heading σ
under 3° for ~60 s instead of ~7 s. What 10 Hz samples miss of a turning skid-steer's rate
(jumps of 1-5 rad/s within 50 ms) is the filter's wander model's, not this σ's: measured on
waypoints and random_walk seeds 1-4 (16 car-runs in lockstep; the filter's heading and its
variance every 0.1 s against the world log's truth), the heading's NEES stayed consistent,
95 % bounds held 93-97 % of the time (91-98 % with the 0.02), mean 1.23 / 0.87 (1.43 /
1.08), and the heading errors fell on random_walk (p95 6-10° against 7-22°).
``stigmesh replay RUN --set gyro_bias.enabled=false`` re-runs a run's agents both ways on
the same inputs and reports each one's heading error and NEES (tools/replay/metrics/pose.py).

While the robot has a pose, the pose filter holds what is left of the bias as a state
of its own and learns it from tags too (:mod:`agents.localization`): the estimate here
then stays, a still sample is handed to the filter (:attr:`GyroBias.still`), and the
filter's estimate comes back when the pose is lost (:meth:`GyroBias.absorb`).

Sans-IO: :meth:`GyroBias.correct` takes the sample's time and returns the
corrected rate; the caller feeds every telemetry sample in order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from agents.checks import require
from protocol.mz01.firmware import TELEMETRY_PERIOD_US

SAMPLE_PERIOD = TELEMETRY_PERIOD_US * 1e-6
"""s between two gyro samples: the car's telemetry period, each sample held over it."""
STILL_GATE_SIGMAS = 4.0
"""A still sample counts within this many σ of the estimate, or ``max_still_rate`` if more
(so that a noisy gyro's own spread is not cut off and read as a quiet one)."""


@dataclass(frozen=True)
class GyroBiasParams:
    """How the bias is learnt (rad/s, seconds); ``enabled`` false passes the gyro through."""

    enabled: bool = True
    settle_time: float = 0.2
    """s of zero duty on both wheels before the car counts as still. The simulated car's
    gyro reads its bias alone from the first zero-duty sample on (hidden_search places 16
    and 22: the mean of rate − bias within ±0.003 rad/s in each 0.1 s step 0.0-0.3 s after
    a stop, 17-100 samples each, against the noise's 0.02 rms); a geared DC-motor car at
    the 0.4 start duty is assumed to stop within it. A real car's log (duty and gyro in
    each ``car`` record) can check that."""
    sample_noise: float = 0.02
    """White noise of one gyro sample, rad/s (1 sigma): the simulated gyro's, and the least
    ever assumed; the still samples may show more (:meth:`GyroBias.noise_std`)."""
    noise_prior_samples: float = 20.0
    """How many still samples the configured ``sample_noise`` weighs as, against those
    that show the noise (2 s standing still at 10 Hz)."""
    initial_std: float = 0.02
    """The bias before any still sample, rad/s (1 sigma, mean 0)."""
    drift_psd: float = 1e-6
    """Random-walk density of the bias, rad²/s³ (temperature drift)."""
    max_still_rate: float = 0.1
    """rad/s: a still car's sample this far from the estimate is not used (nor beyond
    ``STILL_GATE_SIGMAS`` of the sample's spread, when that is wider)."""

    def __post_init__(self) -> None:
        require(isinstance(self.enabled, bool), "enabled must be true or false")
        for name in ("settle_time", "drift_psd"):
            value = getattr(self, name)
            require(math.isfinite(value) and value >= 0.0, f"{name} must be finite and >= 0")
        for name in ("sample_noise", "initial_std", "max_still_rate", "noise_prior_samples"):
            value = getattr(self, name)
            require(math.isfinite(value) and value > 0.0, f"{name} must be finite and > 0")


class GyroBias:
    """The bias estimate and its variance, updated from the samples of a still car."""

    def __init__(self, params: GyroBiasParams | None = None) -> None:
        self.params = params if params is not None else GyroBiasParams()
        self.bias = 0.0
        self.variance = self.params.initial_std**2
        self.updates = 0
        """Still samples used."""
        self.refused = 0
        """Still samples refused (the car was being turned)."""
        self._t: float | None = None
        self._still_since: float | None = None
        self._noise_sum = 0.0  # Σ (innovation² − the estimate's variance) over used samples
        self.still: tuple[float, float] | None = None
        """The last sample's (rate less the bias, its noise variance) when the car stood
        still and the pose filter holds the residual (:meth:`correct`), else None."""

    @property
    def std(self) -> float:
        return math.sqrt(self.variance)

    @property
    def noise_std(self) -> float:
        """rad/s: one sample's white noise: ``sample_noise``, or what the still samples show
        when that is more (their mean of innovation² less the estimate's variance, with
        ``sample_noise²`` weighing as ``noise_prior_samples`` samples)."""
        p = self.params
        prior = p.sample_noise**2
        learnt = (p.noise_prior_samples * prior + self._noise_sum) / (
            p.noise_prior_samples + self.updates)
        return math.sqrt(max(prior, learnt))

    def residual_std(self, correlation_time: float, *, held: bool = False) -> float | None:
        """rad/s: the error of a corrected rate as the localizer's rate-error σ correlated
        over ``correlation_time`` τ (a white-noise density of 2σ²τ): the estimate's own σ
        (unless ``held``: the pose filter holds what is left of the bias as a state), plus
        each sample's white noise held for one telemetry period T, whose density is
        ``noise_std²·T``. None when the bias is not learnt (``enabled`` false): the
        localizer keeps its own model."""
        if not self.params.enabled:
            return None
        white = self.noise_std**2 * SAMPLE_PERIOD / (2.0 * correlation_time)
        return math.sqrt((0.0 if held else self.variance) + white)

    def absorb(self, residual: float, variance: float) -> None:
        """Take back what the pose filter learnt of the bias while it held it: the estimate
        moves by ``residual``, and its variance is the filter's."""
        self.bias += residual
        self.variance = variance

    def correct(self, now: float, duty_left: float, duty_right: float,
                gyro_z: float | None,
                residual: tuple[float, float] | None = None) -> float | None:
        """The sample ``gyro_z`` taken at ``now`` less the bias (None stays None).

        The duties are those the car applies at ``now``; a still car's sample first
        updates the bias, so it is corrected by the estimate it helped make. With
        ``residual`` (the pose filter's estimate and variance of what is left of the bias
        in the corrected rates) the estimate stays as it is, and a still sample that passes
        the gate is left for the filter in :attr:`still`.
        """
        p = self.params
        self.still = None
        if self._t is not None and now > self._t:
            self.variance += p.drift_psd * (now - self._t)
        self._t = now if self._t is None else max(self._t, now)
        if duty_left != 0.0 or duty_right != 0.0:
            self._still_since = None
        elif self._still_since is None:
            self._still_since = now
        if gyro_z is None or not p.enabled:
            return gyro_z
        if self._still_since is not None and now - self._still_since >= p.settle_time:
            mean, variance = (0.0, self.variance) if residual is None else residual
            innovation = gyro_z - self.bias - mean
            spread = variance + self.noise_std**2
            if abs(innovation) <= max(p.max_still_rate, STILL_GATE_SIGMAS * math.sqrt(spread)):
                self._noise_sum += innovation**2 - variance
                self.updates += 1
                if residual is not None:
                    self.still = (gyro_z - self.bias, self.noise_std**2)
                else:
                    gain = variance / spread
                    self.bias += gain * innovation
                    self.variance *= 1.0 - gain
            else:
                self.refused += 1
        return gyro_z - self.bias


__all__ = ["SAMPLE_PERIOD", "STILL_GATE_SIGMAS", "GyroBias", "GyroBiasParams"]
