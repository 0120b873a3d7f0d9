"""The reference MZ01 firmware model: the car's safety state machine, sans-IO.

One :class:`FirmwareModel` is one car from boot. Feed it datagrams, probe
requests and ticks with the car's uptime ``now_us`` (integer µs); it returns
what it accepted, the datagrams to send and events to log. It never raises on
any datagram bytes. All time arithmetic is integer, as on the car.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, NamedTuple

from protocol.mz01.packet import (
    FLAG_RESET_ESTOP,
    U32_MAX,
    BytesLike,
    Command,
    Kind,
    PacketError,
    Reason,
    decode_command,
)
from protocol.mz01.probe import (
    ProbeError,
    ProbeReply,
    decode_probe_request,
    encode_probe_reply,
)
from protocol.mz01.telemetry import Telemetry, encode_telemetry

Address = tuple[str, int]

WATCHDOG_US = 300_000
TELEMETRY_PERIOD_US = 100_000
TICK_PERIOD_US = 5_000
STAMP_WINDOW_MS = (-100, 30)  # d = stamp − uptime_ms; derivation in MZ01.md "Stamp window"
U64_MAX = 0xFFFF_FFFF_FFFF_FFFF


class Outgoing(NamedTuple):
    """A datagram the car sends: ``(destination, bytes)``."""

    dst: Address
    data: bytes


class EventKind(StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    ARMED = "armed"
    DISARMED = "disarmed"
    ESTOP_LATCHED = "estop_latched"
    ESTOP_CLEARED = "estop_cleared"
    TELEMETRY_TO = "telemetry_to"


@dataclass(frozen=True)
class Event:
    """Something worth a log line; ``token`` is the token after the event."""

    kind: EventKind
    now_us: int
    reason: str = ""
    command: Kind | None = None
    src: Address | None = None
    token: int | None = None


@dataclass(frozen=True)
class StepResult:
    """The outcome of one datagram or tick.

    ``reason`` is the rejection reason ("" when accepted). A tick is always
    ``accepted``; a watchdog disarm shows as a ``DISARMED`` event.
    """

    accepted: bool
    reason: str = ""
    command: Command | None = None
    outgoing: tuple[Outgoing, ...] = ()
    events: tuple[Event, ...] = ()


@dataclass(frozen=True)
class CarState:
    """Everything in MZ01.md's "Car state" table, as one immutable value."""

    robot_id: int
    boot_nonce: int
    token: int
    motor_ok: bool
    camera_ok: bool
    armed: bool = False
    estop: bool = False
    bound: Address | None = None
    telemetry_to: Address | None = None
    last_seq: int = 0
    left: float = 0.0
    right: float = 0.0
    last_feed_us: int = 0
    last_telemetry_us: int = 0
    reason: str = ""

    @property
    def wheels(self) -> tuple[float, float]:
        return (self.left, self.right)


def _int32(x: int) -> int:
    return ((x + 0x8000_0000) & 0xFFFF_FFFF) - 0x8000_0000


def _elapsed_us(now_us: int, since_us: int) -> int:
    """``now − since`` as u64 arithmetic: a clock that ran backwards counts as long ago."""
    return (now_us - since_us) & U64_MAX


def stamp_offset_ms(stamp_ms: int, now_us: int) -> int:
    """``int32(stamp_ms − uptime_ms)`` with ``uptime_ms = now_us / 1000`` modulo 2^32."""
    return _int32(stamp_ms - (now_us // 1000))


def stamp_fresh(stamp_ms: int, now_us: int) -> bool:
    """The stamp offset lies in the window of MZ01.md, edges included."""
    low, high = STAMP_WINDOW_MS
    return low <= stamp_offset_ms(stamp_ms, now_us) <= high


def lease_start_us(stamp_ms: int, now_us: int) -> int:
    """Where an accepted ARM's or DRIVE's lease starts: its stamp if in the past, else now."""
    lag_us = 1000 * max(0, -stamp_offset_ms(stamp_ms, now_us))
    return max(0, now_us - lag_us)


def check_command(state: CarState, cmd: Command, src: Address, now_us: int) -> Reason | None:
    """The first failing state check for a decoded command, or None when accepted."""
    any_car = cmd.robot_id == 0 and cmd.kind in (Kind.HELLO, Kind.STOP, Kind.ESTOP)
    if cmd.robot_id != state.robot_id and not any_car:
        return Reason.WRONG_ROBOT
    session_checked = cmd.kind in (Kind.ARM, Kind.DRIVE) or (
        cmd.kind is Kind.HELLO and cmd.flags & FLAG_RESET_ESTOP
    )
    if session_checked:
        if cmd.boot_nonce != state.boot_nonce:
            return Reason.BAD_NONCE
        if cmd.session_token != state.token:
            return Reason.BAD_TOKEN
    if cmd.kind is Kind.ARM:
        if state.estop:
            return Reason.ESTOP_LATCHED
        if not (state.motor_ok and state.camera_ok):
            return Reason.UNHEALTHY
        if cmd.left != 0.0 or cmd.right != 0.0:
            return Reason.NONZERO_WHEELS
        if not stamp_fresh(cmd.stamp_ms, now_us):
            return Reason.STALE_STAMP
        if state.armed and src != state.bound:
            return Reason.NOT_BOUND
        if state.armed and cmd.seq <= state.last_seq:
            return Reason.STALE_SEQ
    elif cmd.kind is Kind.DRIVE:
        if not state.armed:
            return Reason.NOT_ARMED
        if not stamp_fresh(cmd.stamp_ms, now_us):
            return Reason.STALE_STAMP
        if src != state.bound:
            return Reason.NOT_BOUND
        if cmd.seq <= state.last_seq:
            return Reason.STALE_SEQ
    return None


def _check_time(now_us: int) -> None:
    if isinstance(now_us, bool) or not isinstance(now_us, int) or not 0 <= now_us <= U64_MAX:
        raise ValueError(f"now_us must be an integer count of µs in u64, got {now_us!r}")


def _check_u32(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= U32_MAX:
        raise ValueError(f"{name} must be a u32, got {value!r}")


def _address(src: Address) -> Address:
    host, port = src
    return (str(host), int(port))


class FirmwareModel:
    """One car's firmware from boot: commands, ticks, probes and telemetry."""

    def __init__(
        self,
        robot_id: int,
        boot_nonce: int,
        token: int,
        motor_ok: bool = True,
        camera_ok: bool = True,
    ) -> None:
        if isinstance(robot_id, bool) or not isinstance(robot_id, int) or not 1 <= robot_id <= 255:
            raise ValueError(f"robot_id must be in 1..255, got {robot_id!r}")
        _check_u32("boot_nonce", boot_nonce)
        _check_u32("token", token)
        self._state = CarState(robot_id, boot_nonce, token, bool(motor_ok), bool(camera_ok))
        self._rssi = 0
        self._gyro_z: float | None = None
        self._gyro_angle: float | None = None
        self._sim: Mapping[str, Any] | None = None

    # -- read-only state -------------------------------------------------

    @property
    def state(self) -> CarState:
        return self._state

    @property
    def robot_id(self) -> int:
        return self._state.robot_id

    @property
    def boot_nonce(self) -> int:
        return self._state.boot_nonce

    @property
    def token(self) -> int:
        return self._state.token

    @property
    def armed(self) -> bool:
        return self._state.armed

    @property
    def estop(self) -> bool:
        return self._state.estop

    @property
    def wheels(self) -> tuple[float, float]:
        return self._state.wheels

    @property
    def reason(self) -> str:
        return self._state.reason

    @property
    def last_seq(self) -> int:
        return self._state.last_seq

    @property
    def bound(self) -> Address | None:
        return self._state.bound

    @property
    def telemetry_to(self) -> Address | None:
        return self._state.telemetry_to

    @property
    def motor_ok(self) -> bool:
        return self._state.motor_ok

    @property
    def camera_ok(self) -> bool:
        return self._state.camera_ok

    # -- inputs from the board -------------------------------------------

    def set_health(self, motor_ok: bool, camera_ok: bool) -> None:
        """Hardware health: it gates ARM, and the next tick disarms an unhealthy armed car."""
        self._state = replace(self._state, motor_ok=bool(motor_ok), camera_ok=bool(camera_ok))

    def set_sensors(
        self, rssi: int = 0, gyro_z: float | None = None, sim: Mapping[str, Any] | None = None,
        gyro_angle: float | None = None,
    ) -> None:
        """Values carried by every telemetry object sent from now on.

        Raises ValueError at once if they could not be encoded, so that
        sending telemetry later never fails.
        """
        encode_telemetry(
            self.telemetry(0, rssi=rssi, gyro_z=gyro_z, sim=sim, gyro_angle=gyro_angle))
        self._rssi, self._gyro_z, self._sim = rssi, gyro_z, sim
        self._gyro_angle = gyro_angle

    # -- the protocol ----------------------------------------------------

    def telemetry(
        self,
        now_us: int,
        rssi: int = 0,
        gyro_z: float | None = None,
        sim: Mapping[str, Any] | None = None,
        gyro_angle: float | None = None,
    ) -> Telemetry:
        """The telemetry object describing the car at ``now_us``."""
        _check_time(now_us)
        s = self._state
        return Telemetry(
            id=s.robot_id,
            boot=s.boot_nonce,
            token=s.token,
            uptime_ms=now_us // 1000,
            armed=s.armed,
            estop=s.estop,
            reason=str(s.reason),
            rssi=rssi,
            camera_ok=s.camera_ok,
            motor_ok=s.motor_ok,
            seq=s.last_seq,
            duty=(s.left, s.right),
            gyro_z=gyro_z,
            gyro_angle=gyro_angle,
            sim=sim,
        )

    def _telemetry_bytes(self, now_us: int) -> bytes:
        return encode_telemetry(
            self.telemetry(now_us, rssi=self._rssi, gyro_z=self._gyro_z, sim=self._sim,
                           gyro_angle=self._gyro_angle)
        )

    def _disarm(self, reason: Reason, now_us: int, src: Address | None) -> Event:
        """Disarm with ``reason``; callers take :meth:`_notify` first, while ``bound`` is set."""
        s = self._state
        self._state = replace(
            s,
            armed=False,
            bound=None,
            left=0.0,
            right=0.0,
            token=(s.token + 1) & U32_MAX,
            reason=reason,
        )
        return Event(EventKind.DISARMED, now_us, reason=reason, src=src, token=self._state.token)

    def _notify(self) -> list[Address]:
        """Who a disarm informs at once: ``telemetry_to``, then the bound sender, each once."""
        s = self._state
        return list(dict.fromkeys(d for d in (s.telemetry_to, s.bound) if d is not None))

    def _send(self, destinations: list[Address], now_us: int) -> tuple[Outgoing, ...]:
        if not destinations:
            return ()
        data = self._telemetry_bytes(now_us)
        return tuple(Outgoing(d, data) for d in destinations)

    def receive_datagram(self, data: BytesLike, src: Address, now_us: int) -> StepResult:
        """One datagram on UDP 4210 from ``src`` at ``now_us``."""
        _check_time(now_us)
        sender = _address(src)
        try:
            cmd = decode_command(data)
        except PacketError as exc:
            return self._reject(Reason(exc.reason), None, sender, now_us)
        failed = check_command(self._state, cmd, sender, now_us)
        if failed is not None:
            return self._reject(failed, cmd, sender, now_us)

        events = [Event(EventKind.ACCEPTED, now_us, command=cmd.kind, src=sender)]
        outgoing: list[Outgoing] = []
        if cmd.kind is Kind.HELLO:
            if cmd.flags & FLAG_RESET_ESTOP and self._state.estop:
                self._state = replace(self._state, estop=False)
                events.append(Event(EventKind.ESTOP_CLEARED, now_us, src=sender))
            if self._state.telemetry_to != sender:
                events.append(Event(EventKind.TELEMETRY_TO, now_us, src=sender))
            self._state = replace(self._state, telemetry_to=sender)
            outgoing.append(Outgoing(sender, self._telemetry_bytes(now_us)))
        elif cmd.kind is Kind.ARM:
            self._state = replace(
                self._state,
                armed=True,
                bound=sender,
                last_seq=cmd.seq,
                left=0.0,
                right=0.0,
                last_feed_us=lease_start_us(cmd.stamp_ms, now_us),
                reason="",
            )
            events.append(Event(EventKind.ARMED, now_us, src=sender, token=self._state.token))
        elif cmd.kind is Kind.DRIVE:
            lease = lease_start_us(cmd.stamp_ms, now_us)
            self._state = replace(
                self._state, left=cmd.left, right=cmd.right, last_seq=cmd.seq, last_feed_us=lease
            )
        else:
            latch = cmd.kind is Kind.ESTOP
            notify = self._notify()
            events.append(self._disarm(Reason.ESTOP if latch else Reason.STOP, now_us, sender))
            if latch:
                self._state = replace(self._state, estop=True)
                events.append(Event(EventKind.ESTOP_LATCHED, now_us, src=sender))
            outgoing.extend(self._send(notify, now_us))
        return StepResult(True, "", cmd, tuple(outgoing), tuple(events))

    def _reject(self, reason: Reason, cmd: Command | None, src: Address, now_us: int) -> StepResult:
        self._state = replace(self._state, reason=reason)
        kind = cmd.kind if cmd is not None else None
        event = Event(EventKind.REJECTED, now_us, reason=reason, command=kind, src=src)
        return StepResult(False, reason, cmd, (), (event,))

    def tick(self, now_us: int) -> StepResult:
        """The 5 ms motor-task tick: watchdog, health, then periodic telemetry."""
        _check_time(now_us)
        events: list[Event] = []
        destinations: list[Address] = []
        s = self._state
        if s.armed and _elapsed_us(now_us, s.last_feed_us) >= WATCHDOG_US:
            destinations += self._notify()
            events.append(self._disarm(Reason.WATCHDOG, now_us, None))
        s = self._state
        if s.armed and not (s.motor_ok and s.camera_ok):
            destinations += self._notify()
            events.append(self._disarm(Reason.UNHEALTHY, now_us, None))
        s = self._state
        if _elapsed_us(now_us, s.last_telemetry_us) >= TELEMETRY_PERIOD_US:
            destinations += [s.telemetry_to] if s.telemetry_to is not None else []
            destinations += [s.bound] if s.armed and s.bound is not None else []
            self._state = replace(s, last_telemetry_us=now_us)
        unique = list(dict.fromkeys(destinations))  # each once, in first-seen order
        return StepResult(True, "", None, self._send(unique, now_us), tuple(events))

    def receive_probe(self, data: BytesLike, src: Address, now_us: int) -> Outgoing | None:
        """A datagram on UDP 4211: the reply to a valid probe request, else None."""
        _check_time(now_us)
        try:
            request = decode_probe_request(data)
        except ProbeError:
            return None
        reply = ProbeReply(request.request_id, now_us)
        return Outgoing(_address(src), encode_probe_reply(reply))
