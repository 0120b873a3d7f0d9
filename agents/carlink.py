"""Between the controller session and the core: telemetry in, decisions out (sans-IO).

- Each new telemetry object becomes a :class:`CarUpdate`: the duties the car
  applies, its gyro rate, when the car sampled them (its uptime through the car
  clock: a Wi-Fi link's delay is not the car's), and, in simulation, the synthetic
  observation as an :class:`~agents.observations.ObservationBatch` stamped the same way.
- Each wheel decision goes to the session under one explicit policy: while
  the car cannot be armed the session is handed neutral; when it can be armed
  and the agent wants motion, the agent performs the gesture itself — neutral,
  then motion. A fault still consumes the gesture (the session's rule), so
  every re-arm is a deliberate new gesture, at most one per ARM attempt; this
  is what lets an autonomous agent re-arm by itself after a refused ARM or a
  car reboot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agents.observations import ObservationBatch, ObservationError, TagSighting
from agents.odometry import GyroAngle
from protocol.errors import RejectCounters
from protocol.mz01.session import ControllerSession, SessionState
from protocol.mz01.simobs import Sighting, SimObsError, SimObservation, parse_sim
from protocol.mz01.telemetry import Telemetry


@dataclass(frozen=True)
class CarUpdate:
    received_at: float
    telemetry: Telemetry
    duty: tuple[float, float]
    gyro_z: float | None
    batch: ObservationBatch | None
    gyro_angle: GyroAngle | None = None
    sampled_at: float | None = None  # local time the car sampled it (None: unsynchronised)


def to_batch(
    obs: SimObservation,
    received_at: float,
    car_to_local: Callable[[float], float] | None,
) -> ObservationBatch:
    """A simulated observation as a batch stamped on the local clock.

    ``car_to_local`` maps car uptime (s) to local time; ``None`` while the car's
    clock is unsynchronised, and the batch falls back to its receipt time,
    flagged ``synchronized=False``.
    """

    def sighting(s: Sighting) -> TagSighting:
        return TagSighting(s[0], s[1], s[2], obs.sigma_range, obs.sigma_bearing)

    if car_to_local is None:
        t, synced = received_at, False
    else:
        t, synced = car_to_local(obs.obs_ms / 1000.0), True
    try:
        return ObservationBatch(
            t_capture=t,
            synchronized=synced,
            tags=tuple(sighting(s) for s in obs.tags),
            target=None if obs.target is None else sighting(obs.target),
        )
    except ObservationError as exc:
        raise SimObsError(exc.reason, str(exc)) from None


class CarAdapter:
    """Wraps one :class:`ControllerSession`; see the module docstring."""

    def __init__(self, session: ControllerSession) -> None:
        self.session = session
        self.rejects = RejectCounters()
        self._seen: Telemetry | None = None
        self._last_obs: tuple[int, int] | None = None  # (boot, obs_ms)

    def receive_datagram(self, data: bytes, port: int, now: float) -> CarUpdate | None:
        """Feed a datagram from the car; return an update when it was new telemetry."""
        self.session.receive_datagram(data, port, now)
        t = self.session.telemetry
        if t is None or t is self._seen:
            return None
        self._seen = t
        angle = None if t.gyro_angle is None else GyroAngle(t.boot, t.uptime_ms, t.gyro_angle)
        return CarUpdate(now, t, t.duty, t.gyro_z, self._observation(t, now), angle,
                         self._sampled_at(t, now))

    def _sampled_at(self, t: Telemetry, now: float) -> float | None:
        """When the car took this telemetry, on the local clock (no later than ``now``);
        None while the car clock is unsynchronised."""
        mapped = self.session.car_to_local(t.uptime_ms / 1000.0, now)
        return None if mapped is None else min(mapped, now)

    def _observation(self, t: Telemetry, now: float) -> ObservationBatch | None:
        if t.sim is None or "obs_ms" not in t.sim:
            return None
        try:
            obs = parse_sim(t.sim)
        except SimObsError as exc:
            self.rejects.count(f"sim_{exc.reason}")
            return None
        key = (t.boot, obs.obs_ms)
        if self._last_obs is not None and self._last_obs[0] == t.boot and key <= self._last_obs:
            return None  # the same observation again (telemetry outpaces the sensor)
        self._last_obs = key
        session = self.session

        def car_to_local(uptime_s: float) -> float:
            mapped = session.car_to_local(uptime_s, now)
            assert mapped is not None
            return mapped

        synced = session.synchronized_at_time(now)
        try:
            return to_batch(obs, now, car_to_local if synced else None)
        except SimObsError as exc:
            self.rejects.count(f"sim_{exc.reason}")
            return None

    def set_decision(self, left: float, right: float, now: float) -> None:
        s = self.session
        if s.state in (SessionState.ARMING, SessionState.DRIVING):
            s.set_decision(left, right, now)
        elif s.armable_at_time(now):
            if (left, right) != (0.0, 0.0) and not s.gesture_available:
                s.set_decision(0.0, 0.0, now)  # the gesture: neutral first
            s.set_decision(left, right, now)
        else:
            s.set_decision(0.0, 0.0, now)
