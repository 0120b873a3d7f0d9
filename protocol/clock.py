"""Clock offset estimation from NTP-style four-timestamp samples, with a true error bound.

Used for swarm peers (PING/PONG) and for the car (MZC1 probes). All times are
seconds as floats. ``offset`` is remote minus local: ``remote = local + offset``.

A sample (t1 local send, t2 remote receive, t3 remote send, t4 local receive) gives
``offset = ((t2 - t1) + (t3 - t4)) / 2`` and ``round_trip = (t4 - t1) - (t3 - t2)``.
The estimate at local time ``now`` is the kept sample whose error bound is smallest
then (a fast probe's, unless it has aged past a newer one's). That bound is::

    round_trip/2 + 3·r + ρ·(|now - t4| + 1.5·(t4 - t1 + 2·r))

with ρ the allowed drift (remote rate minus local rate, 1000 ppm by default) and r the
largest error of a single timestamp (``resolution``). Derivation: with one-way delays
a, b >= 0 (local seconds), the sample measures the true offset θ averaged over two
instants inside [t1, t4], plus (a - b)/2. The remote hold t3 - t2 is measured on the
remote clock, so the true a + b exceeds the measured round trip by at most ρ times
the hold (<= t4 - t1); hence |(a - b)/2| <= round_trip/2 + ρ·(t4 - t1)/2. θ moves by
at most ρ per second, and the instants lie within |now - t4| + (t4 - t1) of ``now``.
Each timestamp error of up to r adds at most 2r to the offset and r to round_trip/2.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from dataclasses import dataclass
from enum import StrEnum

from protocol.errors import RejectCounters

DEFAULT_MAX_SAMPLES = 8
DEFAULT_MAX_ROUND_TRIP = 0.250
DEFAULT_DRIFT_PPM = 1000.0
DEFAULT_MAX_UNCERTAINTY = 0.025
DEFAULT_RESOLUTION = 1e-6


class ClockReject(StrEnum):
    """Why a clock sample was not kept."""

    NOT_FINITE = "not_finite"
    BAD_ORDER = "bad_order"  # t4 before t1, or t3 before t2
    NEGATIVE_ROUND_TRIP = "negative_round_trip"  # the remote held longer than the exchange took
    ROUND_TRIP_TOO_LONG = "round_trip_too_long"


class NoClockSample(LookupError):
    """No usable sample yet: there is no offset to give (refuse rather than guess)."""


@dataclass(frozen=True)
class ClockSample:
    """NTP's four timestamps: t1, t4 on the local clock; t2, t3 on the remote clock."""

    t1: float
    t2: float
    t3: float
    t4: float

    # Computed once (the estimator asks for them at every query); not fields, so equality
    # and the repr stay those of the four timestamps.
    @functools.cached_property
    def offset(self) -> float:
        """Remote minus local."""
        return ((self.t2 - self.t1) + (self.t3 - self.t4)) / 2.0

    @functools.cached_property
    def round_trip(self) -> float:
        return (self.t4 - self.t1) - (self.t3 - self.t2)


def _check_range(name: str, value: float, lo: float, hi: float, *, lo_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number")
    v = float(value)
    if not math.isfinite(v) or v > hi or v < lo or (lo_open and v == lo):
        bracket = "(" if lo_open else "["
        raise ValueError(f"{name} must be within {bracket}{lo}, {hi}], got {value}")
    return v


class ClockOffsetEstimator:
    """Offset of a remote clock against the local one, with an uncertainty that is a bound.

    Sans-IO: samples and query times are passed in. Queries only use samples that
    had arrived by ``now`` (t4 <= now), so a replay in virtual time sees what the
    live run saw. A sample whose bound contradicts the current estimate's bound
    (the remote clock jumped, e.g. the car rebooted, or drifted faster than allowed)
    replaces every older sample; ``jumps`` counts those events.
    """

    def __init__(
        self,
        *,
        max_samples: int = DEFAULT_MAX_SAMPLES,
        max_round_trip: float = DEFAULT_MAX_ROUND_TRIP,
        drift_ppm: float = DEFAULT_DRIFT_PPM,
        max_uncertainty: float = DEFAULT_MAX_UNCERTAINTY,
        resolution: float = DEFAULT_RESOLUTION,
    ) -> None:
        if isinstance(max_samples, bool) or not isinstance(max_samples, int):
            raise TypeError("max_samples must be an int")
        if not 1 <= max_samples <= 64:
            raise ValueError(f"max_samples must be within 1..64, got {max_samples}")
        self.max_samples = max_samples
        self.max_round_trip = _check_range("max_round_trip", max_round_trip, 0.0, 10.0,
                                           lo_open=True)
        self.drift_ppm = _check_range("drift_ppm", drift_ppm, 0.0, 100_000.0)
        self.max_uncertainty = _check_range("max_uncertainty", max_uncertainty, 0.0, 60.0,
                                            lo_open=True)
        self.resolution = _check_range("resolution", resolution, 0.0, 0.01)
        self._drift = self.drift_ppm * 1e-6
        self._samples: deque[ClockSample] = deque(maxlen=max_samples)
        self._best_at: tuple[float, ClockSample | None] | None = None  # the last _best()
        self.rejects = RejectCounters()
        self.accepted = 0
        self.jumps = 0

    @property
    def samples(self) -> tuple[ClockSample, ...]:
        """The kept samples, oldest first."""
        return tuple(self._samples)

    def reset(self) -> None:
        """Forget every sample (e.g. when the remote's boot nonce or epoch changed)."""
        self._samples.clear()
        self._best_at = None

    def _reject(self, reason: ClockReject) -> bool:
        self.rejects.count(reason)
        return False

    def add_sample(self, t1: float, t2: float, t3: float, t4: float) -> bool:
        """Keep the sample if it is usable; otherwise count why and return False."""
        if not all(math.isfinite(t) for t in (t1, t2, t3, t4)):
            return self._reject(ClockReject.NOT_FINITE)
        if t4 < t1 or t3 < t2:
            return self._reject(ClockReject.BAD_ORDER)
        sample = ClockSample(float(t1), float(t2), float(t3), float(t4))
        if sample.round_trip < 0:
            return self._reject(ClockReject.NEGATIVE_ROUND_TRIP)
        if sample.round_trip > self.max_round_trip:
            return self._reject(ClockReject.ROUND_TRIP_TOO_LONG)
        best = self._best(t4)
        if best is not None and abs(sample.offset - best.offset) > (
            self._bound(sample, t4) + self._bound(best, t4)
        ):
            self._samples.clear()
            self.jumps += 1
        self._samples.append(sample)
        self._best_at = None
        self.accepted += 1
        return True

    def _bound(self, s: ClockSample, now: float) -> float:
        r = self.resolution
        span = s.t4 - s.t1 + 2.0 * r
        return s.round_trip / 2.0 + 3.0 * r + self._drift * (abs(now - s.t4) + 1.5 * span)

    def _best(self, now: float) -> ClockSample | None:
        memo = self._best_at  # one message asks up to three times at the same now
        if memo is not None and memo[0] == now:
            return memo[1]
        best: ClockSample | None = None
        bound = math.inf
        for s in self._samples:  # oldest first, so ties go to the newest
            if s.t4 <= now and (b := self._bound(s, now)) <= bound:
                best, bound = s, b
        self._best_at = (now, best)
        return best

    def best_sample_at_time(self, now: float) -> ClockSample | None:
        """The sample the estimate at ``now`` rests on (the smallest bound then), if any."""
        return self._best(now)

    def fastest_round_trip_at_time(self, now: float) -> float | None:
        """The shortest round trip among the kept samples arrived by ``now`` (what a link
        gives at best; the estimate may rest on a fresher one), or None."""
        return min((s.round_trip for s in self._samples if s.t4 <= now), default=None)

    def offset_at_time(self, now: float) -> float:
        """Remote minus local at ``now``; :class:`NoClockSample` if there is none yet."""
        best = self._best(now)
        if best is None:
            raise NoClockSample("no clock sample has arrived by this time")
        return best.offset

    def uncertainty_at_time(self, now: float) -> float:
        """A bound on |offset_at_time(now) - true offset at now|; inf without a sample."""
        best = self._best(now)
        return math.inf if best is None else self._bound(best, now)

    def round_trip_limit(self) -> float:
        """The longest round trip whose sample can make the estimate synchronised: a fresh
        sample's bound is half its round trip plus the resolution's share (the drift's
        grows with its age)."""
        return max(0.0, 2.0 * (self.max_uncertainty - 3.0 * self.resolution))

    def synchronized_at_time(self, now: float) -> bool:
        """True while the uncertainty is at most ``max_uncertainty``."""
        return self.uncertainty_at_time(now) <= self.max_uncertainty

    def remote_to_local(self, t_remote: float, now: float) -> float:
        """A remote timestamp on the local clock.

        For an event at local time ``t_e`` the error is at most
        ``uncertainty_at_time(now) + drift·|now - t_e|``.
        """
        return t_remote - self.offset_at_time(now)

    def local_to_remote(self, t_local: float, now: float) -> float:
        """A local timestamp on the remote clock (same error bound as remote_to_local)."""
        return t_local + self.offset_at_time(now)
