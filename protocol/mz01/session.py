"""The controller session: the agent's side of the MZ01 car link, sans-IO.

Feed it datagrams from the car (:meth:`ControllerSession.receive_datagram`),
the newest wheel decision (:meth:`set_decision`) and timer expiries
(:meth:`handle_timer` at :meth:`get_timer`); collect the datagrams to send
(:meth:`datagrams_to_send`) and the state changes (:meth:`events`).

Safety rules it enforces (MZ01.md and DESIGN.md "Car link"):

- HELLO until telemetry arrives; the car's clock is mapped through MZC1
  probes, and there is no ARM until that mapping is synchronised.
- ARM only on a transition of the decision from neutral to motion while the
  car can be armed. Every fault consumes that transition: after a fault the
  decision must return to neutral before motion can re-arm the car.
- DRIVE at a fixed rate carries the newest decision while its lease holds,
  zero wheels otherwise. It never sends nonzero wheels on an expired decision.
- No telemetry for ``telemetry_timeout`` ends the session: STOP is sent and
  the session starts over from HELLO.
- STOP and ESTOP at any time.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from enum import StrEnum

from protocol.clock import ClockOffsetEstimator, NoClockSample
from protocol.errors import ProtocolError, RejectCounters
from protocol.mz01.packet import FLAG_RESET_ESTOP, U32_MAX, Command, Kind, encode_command
from protocol.mz01.probe import (
    ProbeReply,
    ProbeRequest,
    decode_probe_reply,
    encode_probe_request,
)
from protocol.mz01.telemetry import Telemetry, parse_telemetry

COMMAND_PORT = 4210
PROBE_PORT = 4211
CAMERA_PORT = 8080

CLOCK_SAMPLES = 32
"""Probes the car clock's estimate keeps (16 s at the default interval): on a link whose
round trips jitter, one that came back fast keeps the mapping synchronised while its bound,
growing 1 ms a second (1000 ppm), is within 25 ms. With the last 8 (4 s), 5-45 ms of jitter
each way (lockstep, waypoints, 12 seeds) refused 49 frames a run as unsynchronised (mean,
two robots, the start included); with 32, 25. Measured once, with a scratch harness that
added the jitter to lockstep's car link (lockstep has no jitter option yet); the mechanism
is what tests/protocol/test_clock.py shows."""
MAX_TELEMETRY_TIMEOUT = 0.35
MAX_DECISION_LEASE = 0.3
DRIVE_HZ_RANGE = (20.0, 50.0)
MIN_DRIVE_GAP = 0.01  # s: a changed decision is sent at once, or 10 ms after the last DRIVE


@dataclass(frozen=True)
class SessionConfig:
    """Controller settings; construction refuses anything looser than the safety defaults."""

    robot_id: int = 0  # 0: whichever car answers; its id is then taken from telemetry
    drive_hz: float = 30.0
    telemetry_timeout: float = MAX_TELEMETRY_TIMEOUT
    decision_lease: float = MAX_DECISION_LEASE
    hello_interval: float = 0.25
    probe_interval: float = 0.5
    arm_timeout: float = 0.3
    estop_repeats: int = 3

    def __post_init__(self) -> None:
        lo, hi = DRIVE_HZ_RANGE
        checks = [
            (0 <= self.robot_id <= 255, f"robot_id must be 0..255, got {self.robot_id}"),
            (lo <= self.drive_hz <= hi, f"drive_hz must be in {lo:g}..{hi:g}, got {self.drive_hz}"),
            (
                0 < self.telemetry_timeout <= MAX_TELEMETRY_TIMEOUT,
                f"telemetry_timeout must be in (0, {MAX_TELEMETRY_TIMEOUT}] s, "
                f"got {self.telemetry_timeout}",
            ),
            (
                0 < self.decision_lease <= MAX_DECISION_LEASE,
                f"decision_lease must be in (0, {MAX_DECISION_LEASE}] s, got {self.decision_lease}",
            ),
            (0 < self.hello_interval <= 2.0, "hello_interval must be in (0, 2] s"),
            (0 < self.probe_interval <= 2.0, "probe_interval must be in (0, 2] s"),
            (0 < self.arm_timeout <= 1.0, "arm_timeout must be in (0, 1] s"),
            (1 <= self.estop_repeats <= 10, "estop_repeats must be 1..10"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)


class SessionState(StrEnum):
    CONNECTING = "connecting"  # sending HELLO, no telemetry yet
    READY = "ready"  # telemetry flows, car disarmed
    ARMING = "arming"  # ARM sent, waiting for telemetry to say armed
    DRIVING = "driving"  # armed, DRIVE flowing
    ESTOPPED = "estopped"  # the car's e-stop is latched
    CLOSED = "closed"


class SessionEvent(StrEnum):
    TELEMETRY = "telemetry"
    TELEMETRY_LOST = "telemetry_lost"
    CAR_REBOOTED = "car_rebooted"
    ARM_SENT = "arm_sent"
    CAR_ARMED = "car_armed"
    CAR_DISARMED = "car_disarmed"
    ARM_TIMEOUT = "arm_timeout"
    ESTOP_SEEN = "estop_seen"
    ESTOP_CLEARED = "estop_cleared"
    STOP_REQUESTED = "stop_requested"
    CLOSE_REQUESTED = "close_requested"


S, E = SessionState, SessionEvent
_CONNECTED = (S.READY, S.ARMING, S.DRIVING, S.ESTOPPED)
_ARMED = (S.ARMING, S.DRIVING)
_ALIVE = (S.CONNECTING, *_CONNECTED)

# Every transition of the session, in one table: (state, event) -> new state.
TRANSITIONS: dict[tuple[SessionState, SessionEvent], SessionState] = {
    (S.CONNECTING, E.TELEMETRY): S.READY,
    (S.READY, E.ARM_SENT): S.ARMING,
    (S.ARMING, E.CAR_ARMED): S.DRIVING,
    (S.ARMING, E.ARM_TIMEOUT): S.READY,
    **{(s, E.CAR_DISARMED): S.READY for s in _ARMED},
    **{(s, E.TELEMETRY_LOST): S.CONNECTING for s in _CONNECTED},
    **{(s, E.CAR_REBOOTED): S.READY for s in _CONNECTED},
    **{(s, E.ESTOP_SEEN): S.ESTOPPED for s in (S.READY, *_ARMED)},
    (S.ESTOPPED, E.ESTOP_CLEARED): S.READY,
    **{(s, E.STOP_REQUESTED): S.READY for s in (S.READY, *_ARMED)},
    **{(s, E.CLOSE_REQUESTED): S.CLOSED for s in _ALIVE},
}

# Events that consume the neutral-to-motion gesture: motion must pass through
# neutral again before the car can be re-armed.
FAULTS = frozenset(
    {
        E.TELEMETRY_LOST,
        E.CAR_REBOOTED,
        E.ARM_TIMEOUT,
        E.CAR_DISARMED,
        E.ESTOP_SEEN,
        E.STOP_REQUESTED,
        E.CLOSE_REQUESTED,
    }
)


@dataclass(frozen=True)
class Transmit:
    """A datagram for the car: ``port`` is 4210 (commands) or 4211 (probes)."""

    port: int
    data: bytes
    kind: str  # "hello", "arm", "drive", "stop", "estop", "probe"


@dataclass(frozen=True)
class StateChange:
    t: float
    old: SessionState
    new: SessionState
    event: SessionEvent
    reason: str


@dataclass(frozen=True)
class Decision:
    left: float
    right: float
    t: float

    @property
    def neutral(self) -> bool:
        return self.left == 0.0 and self.right == 0.0


class ControllerSession:
    """One controller driving one car. All times are the local monotonic clock, seconds."""

    def __init__(self, config: SessionConfig | None = None, first_seq: int = 1) -> None:
        self.config = config or SessionConfig()
        self.state = S.CONNECTING
        self.clock = ClockOffsetEstimator(max_samples=CLOCK_SAMPLES)
        self.rejects = RejectCounters()
        self.telemetry: Telemetry | None = None
        self.telemetry_at: float | None = None
        self._robot_id = self.config.robot_id
        self._seq = first_seq
        self._arm_seq = first_seq
        self._decision: Decision | None = None
        self._neutral_seen = True  # the gesture is available until a fault consumes it
        self._out: deque[Transmit] = deque()
        self._events: deque[StateChange] = deque()
        self._probe_id = 0
        self._probes_sent: dict[int, float] = {}
        self._next_hello = -math.inf
        self._next_probe = -math.inf
        self._next_drive = math.inf
        self._drive_sent = (-math.inf, 0.0, 0.0)  # when, left, right of the last DRIVE
        self._arm_deadline = math.inf
        self.sent = {"hello": 0, "arm": 0, "drive": 0, "stop": 0, "estop": 0, "probe": 0}

    # -- queries ------------------------------------------------------------------

    @property
    def robot_id(self) -> int:
        return self._robot_id

    def synchronized_at_time(self, now: float) -> bool:
        return self.clock.synchronized_at_time(now)

    def car_to_local(self, uptime_s: float, now: float) -> float | None:
        """Map a car uptime (seconds) to the local clock, or None while unsynchronised."""
        if not self.clock.synchronized_at_time(now):
            return None
        return self.clock.remote_to_local(uptime_s, now)

    def armable_at_time(self, now: float) -> bool:
        t = self.telemetry
        return (
            self.state is S.READY
            and t is not None
            and not t.armed  # armed by another controller: not ours to drive
            and not t.estop
            and t.motor_ok
            and t.camera_ok
            and self.clock.synchronized_at_time(now)
        )

    @property
    def gesture_available(self) -> bool:
        """False after a fault, until a neutral decision restores the arming gesture."""
        return self._neutral_seen

    def decision_at_time(self, now: float) -> tuple[float, float]:
        """The wheels a DRIVE sent now carries: the decision while its lease holds, else 0."""
        d = self._decision
        if d is None or now - d.t > self.config.decision_lease or now < d.t:
            return (0.0, 0.0)
        return (d.left, d.right)

    # -- inputs ---------------------------------------------------------------------

    def set_decision(self, left: float, right: float, now: float) -> None:
        """The newest wheel decision, in [-1, 1]. A neutral-to-motion edge may ARM."""
        if not (math.isfinite(left) and math.isfinite(right)):
            raise ValueError("wheel decision must be finite")
        if not (-1.0 <= left <= 1.0 and -1.0 <= right <= 1.0):
            raise ValueError(f"wheel decision out of [-1, 1]: {left}, {right}")
        was_neutral = self.decision_at_time(now) == (0.0, 0.0)
        self._decision = Decision(left, right, now)
        if self.state is S.DRIVING and (left, right) != self._drive_sent[1:]:
            # A new decision goes out now (or 10 ms after the last DRIVE), not at the next slot.
            self._next_drive = min(self._next_drive, max(now, self._drive_sent[0] + MIN_DRIVE_GAP))
        if self._decision.neutral:
            self._neutral_seen = True
            return
        if was_neutral and self._neutral_seen and self.armable_at_time(now):
            self._neutral_seen = False
            self._send_arm(now)

    def receive_datagram(self, data: bytes, port: int, now: float) -> None:
        """A datagram from the car's port ``port`` (4210 telemetry, 4211 probe replies)."""
        if self.state is S.CLOSED:
            return
        try:
            if port == PROBE_PORT:
                self._on_probe_reply(decode_probe_reply(data), now)
            else:
                self._on_telemetry(parse_telemetry(data), now)
        except ProtocolError as exc:
            self.rejects.count(exc.reason)

    def stop(self, now: float) -> None:
        self._send_command(Kind.STOP, now)
        self._fire(E.STOP_REQUESTED, now, "stop requested")

    def estop(self, now: float) -> None:
        for _ in range(self.config.estop_repeats):
            self._send_command(Kind.ESTOP, now)
        self._fire(E.ESTOP_SEEN, now, "e-stop requested")

    def reset_estop(self, now: float) -> None:
        """Ask the car to clear its e-stop latch (HELLO with flag bit 0)."""
        self._send_command(Kind.HELLO, now, flags=FLAG_RESET_ESTOP)

    def close(self, now: float) -> None:
        """End the session: STOP the car and send nothing more."""
        if self.state is S.CLOSED:
            return
        if self._robot_id:
            self._send_command(Kind.STOP, now)
        self._fire(E.CLOSE_REQUESTED, now, "closed")

    # -- timers ---------------------------------------------------------------------

    def get_timer(self) -> float | None:
        if self.state is S.CLOSED:
            return None
        # min() of the deadlines in this order, without building a list (asked at every step).
        if self.state is S.CONNECTING:
            timer = min(self._next_probe, self._next_hello)
        else:
            assert self.telemetry_at is not None
            timer = min(self._next_probe, self.telemetry_at + self.config.telemetry_timeout)
        if self.state in _ARMED:
            timer = min(timer, self._next_drive, self._arm_deadline)
        return timer

    def handle_timer(self, now: float) -> None:
        if self.state is S.CLOSED:
            return
        if (
            self.state is not S.CONNECTING
            and self.telemetry_at is not None
            and now - self.telemetry_at >= self.config.telemetry_timeout
        ):
            if self._robot_id:
                self._send_command(Kind.STOP, now)
            self._fire(E.TELEMETRY_LOST, now, f"no telemetry for {now - self.telemetry_at:.3f} s")
        if self.state is S.ARMING and now >= self._arm_deadline:
            reason = self.telemetry.reason if self.telemetry else ""
            self._fire(E.ARM_TIMEOUT, now, f"car did not arm ({reason or 'no reason given'})")
        if self.state is S.CONNECTING and now >= self._next_hello:
            self._send_command(Kind.HELLO, now)
            self._next_hello = now + self.config.hello_interval
        if now >= self._next_probe:
            self._send_probe(now)
        if self.state in _ARMED and now >= self._next_drive:
            left, right = self.decision_at_time(now)
            self._send_command(Kind.DRIVE, now, left=left, right=right)
            period = 1.0 / self.config.drive_hz
            # Keep the cadence; if we fell behind, restart it from now rather than burst.
            self._next_drive = max(self._next_drive + period, now + 0.5 * period)

    # -- outputs --------------------------------------------------------------------

    def datagrams_to_send(self) -> list[Transmit]:
        out = list(self._out)
        self._out.clear()
        return out

    def events(self) -> list[StateChange]:
        out = list(self._events)
        self._events.clear()
        return out

    # -- internals ------------------------------------------------------------------

    def _fire(self, event: SessionEvent, now: float, reason: str) -> None:
        new = TRANSITIONS.get((self.state, event))
        if event in FAULTS:
            self._neutral_seen = False
        if new is None:
            return
        old, self.state = self.state, new
        if new is S.CONNECTING:
            self._next_hello = now
        if new in _ARMED and old not in _ARMED:
            self._next_drive = now
        if new is not S.ARMING:
            self._arm_deadline = math.inf
        self._events.append(StateChange(now, old, new, event, reason))

    def _on_telemetry(self, t: Telemetry, now: float) -> None:
        if self._robot_id and t.id != self._robot_id:
            self.rejects.count("wrong_robot")
            return
        previous = self.telemetry
        if previous is not None and t.boot == previous.boot and t.uptime_ms < previous.uptime_ms:
            self.rejects.count("reordered_telemetry")
            return
        self.telemetry, self.telemetry_at = t, now
        if not self.config.robot_id:
            self._robot_id = t.id
        if previous is not None and t.boot != previous.boot:
            self.clock.reset()
            self._probes_sent.clear()
            self._fire(E.CAR_REBOOTED, now, f"boot {previous.boot:08x} -> {t.boot:08x}")
        self._fire(E.TELEMETRY, now, "telemetry received")
        if t.estop:
            self._fire(E.ESTOP_SEEN, now, "car e-stop latched")
        elif self.state is S.ESTOPPED:
            self._fire(E.ESTOP_CLEARED, now, "car e-stop cleared")
        if t.armed and self.state is S.ARMING and self._arm_seq <= t.seq < self._seq:
            self._fire(E.CAR_ARMED, now, "car armed")
        elif not t.armed and self.state is S.DRIVING:
            self._fire(E.CAR_DISARMED, now, f"car disarmed ({t.reason or 'no reason given'})")

    def _on_probe_reply(self, reply: ProbeReply, now: float) -> None:
        t1 = self._probes_sent.pop(reply.request_id, None)
        if t1 is None:
            self.rejects.count("unknown_probe")
            return
        uptime = reply.uptime_us / 1e6
        if not self.clock.add_sample(t1, uptime, uptime, now):
            self.rejects.count("clock_sample_rejected")

    def _send_probe(self, now: float) -> None:
        self._probe_id = (self._probe_id + 1) & U32_MAX
        self._probes_sent[self._probe_id] = now
        while len(self._probes_sent) > 8:  # forget probes that were never answered
            del self._probes_sent[next(iter(self._probes_sent))]
        self._out.append(
            Transmit(PROBE_PORT, encode_probe_request(ProbeRequest(self._probe_id)), "probe")
        )
        self.sent["probe"] += 1
        self._next_probe = now + self.config.probe_interval

    def _stamp_ms(self, now: float) -> int:
        try:
            return round(self.clock.local_to_remote(now, now) * 1000.0) & U32_MAX
        except NoClockSample:
            return 0

    def _send_arm(self, now: float) -> None:
        self._arm_seq = self._seq
        self._send_command(Kind.ARM, now)
        self._fire(E.ARM_SENT, now, "neutral-to-motion gesture")
        self._arm_deadline = now + self.config.arm_timeout

    def _send_command(
        self, kind: Kind, now: float, flags: int = 0, left: float = 0.0, right: float = 0.0
    ) -> None:
        t = self.telemetry
        if kind is not Kind.HELLO and not self._robot_id:
            raise RuntimeError(f"cannot send {kind.name}: the car's id is not known yet")
        seq = 0
        if kind in (Kind.ARM, Kind.DRIVE):
            seq, self._seq = self._seq, (self._seq + 1) & U32_MAX
        cmd = Command(
            robot_id=self._robot_id,
            kind=kind,
            flags=flags,
            boot_nonce=t.boot if t else 0,
            session_token=t.token if t else 0,
            seq=seq,
            stamp_ms=self._stamp_ms(now),
            left=left,
            right=right,
        )
        name = kind.name.lower()
        if kind is Kind.DRIVE:
            self._drive_sent = (now, left, right)
        self._out.append(Transmit(COMMAND_PORT, encode_command(cmd), name))
        self.sent[name] += 1
