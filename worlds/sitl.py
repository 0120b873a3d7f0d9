"""The SITL car seen from the world: its link codec, the board's wiring, a mirror of its firmware.

With ``stigmesh world --firmware sitl`` every car runs the ESP32 sketch itself,
built for the host (``make -C firmware sitl``, firmware/README.md "SITL"), as
its own process serving the car's UDP 4210/4211 and TCP 8080. The world and
that process share one ``SOCK_SEQPACKET`` socket pair, one message per
packet, first byte the type (the table is in ``firmware/sitl/src/sitl.h``):
the world sends sensor inputs, camera frames and the link state; the car
sends its PCA9685 outputs, frame requests, a trace of its core's calls, its
socket binds, its Serial lines and its panics. Everything here is sans-IO;
``worlds.sitl_host`` runs the processes.
"""

from __future__ import annotations

import json
import math
import socket
import struct
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.mz01 import (
    Address,
    Command,
    Event,
    EventKind,
    Kind,
    PacketError,
    Reason,
    StepResult,
    decode_command,
)
from worlds.link import spawn_linked

REPO = Path(__file__).resolve().parents[1]
SITL_BINARY = REPO / "firmware" / "build" / "sitl" / "stigmesh_car_sitl"
EXIT_PANIC = 70  # the firmware panicked (task watchdog, fatal error)
RESET_POWERON, RESET_PANIC = 1, 4  # esp_reset_reason_t
MAX_PACKET = 256 * 1024
PWM_PERIOD = 4096  # PCA9685 ticks per PWM period; an output's count is its high time
PWM_FULL = 4095  # the sketch's full-scale count (duty 1.0): duty = count / 4095

# The FNK0053 board: which PCA9685 channels feed each motor's H-bridge inputs
# (IN1, IN2), per side, from Freenove's schematic and sketches. The world reads
# the chip's outputs through this wiring, not through the sketch's
# car_config.h, so a wrong pin in the sketch shows as a wrong wheel here.
FNK0053_MOTORS: Mapping[str, tuple[tuple[int, int], ...]] = {
    "left": ((15, 14), (9, 8)),  # M1, M2
    "right": ((12, 13), (10, 11)),  # M3, M4
}


class SitlError(ValueError):
    """A malformed message from a SITL car."""


# -- messages from the car -------------------------------------------------------


@dataclass(frozen=True)
class Motors:
    """The PCA9685's 16 outputs changed: high ticks per 4096-tick period."""

    us: int
    pwm: tuple[int, ...]


@dataclass(frozen=True)
class FrameRequest:
    us: int
    id: int


@dataclass(frozen=True)
class Trace:
    """One core call the car made (``ev``: init, rx, disarm, health, probe, mdns)."""

    ev: str
    fields: dict[str, Any]


@dataclass(frozen=True)
class Bound:
    proto: str
    port: int
    errno: int
    error: str


@dataclass(frozen=True)
class SerialLine:
    line: str


@dataclass(frozen=True)
class Panic:
    why: str


Message = Motors | FrameRequest | Trace | Bound | SerialLine | Panic


def _json(body: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SitlError(f"bad JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise SitlError("not a JSON object")
    return obj


def decode(packet: bytes) -> Message:
    """One packet from a car; :class:`SitlError` when it is not a message."""
    if not packet:
        raise SitlError("empty packet")
    kind, body = chr(packet[0]), packet[1:]
    try:
        if kind == "P":
            return SerialLine(body.decode("utf-8", "replace"))
        if kind == "X":
            return Panic(body.decode("utf-8", "replace"))
        obj = _json(body)
        if kind == "M":
            pwm = tuple(int(c) for c in obj["pwm"])
            if len(pwm) != 16 or not all(0 <= c <= PWM_PERIOD for c in pwm):
                raise SitlError(f"bad PCA9685 outputs {pwm}")
            return Motors(int(obj["us"]), pwm)
        if kind == "R":
            return FrameRequest(int(obj["us"]), int(obj["id"]))
        if kind == "T":
            return Trace(str(obj["ev"]), obj)
        if kind == "B":
            return Bound(str(obj["proto"]), int(obj["port"]), int(obj["errno"]), str(obj["error"]))
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, SitlError):
            raise
        raise SitlError(f"bad {kind!r} message: {exc}") from exc
    raise SitlError(f"unknown message type {kind!r}")


# -- messages to the car -----------------------------------------------------------


def encode_sensors(gyro_z: float | None, sim: Mapping[str, Any] | None) -> bytes:
    """The board's inputs: the gyro reading (or none) and the telemetry ``sim`` object."""
    has = gyro_z is not None and math.isfinite(gyro_z)
    text = b"" if sim is None else json.dumps(sim, separators=(",", ":")).encode()
    return b"S" + struct.pack("<Bf", has, gyro_z if has and gyro_z is not None else 0.0) + text


def encode_frame(request_id: int, capture_us: int, jpeg: bytes) -> bytes:
    return b"F" + struct.pack("<IQ", request_id, capture_us) + jpeg


def encode_no_frame(request_id: int) -> bytes:
    return b"f" + struct.pack("<I", request_id)


def encode_link(down_until_us: int) -> bytes:
    """The Wi-Fi link is down until this car uptime (0: up)."""
    return b"L" + struct.pack("<Q", max(0, down_until_us))


# -- the board -----------------------------------------------------------------------


def _motor_duty(pwm: Sequence[int], in1: int, in2: int) -> float:
    """An H-bridge: IN1 driven forward, IN2 backward, both alike brake (0)."""
    return (min(pwm[in1], PWM_FULL) - min(pwm[in2], PWM_FULL)) / PWM_FULL


def wheel_duties(pwm: Sequence[int]) -> tuple[float, float]:
    """Left and right wheel duties from the PCA9685 outputs, in the sketch's count / 4095."""
    left, right = (
        sum(_motor_duty(pwm, a, b) for a, b in FNK0053_MOTORS[side]) / len(FNK0053_MOTORS[side])
        for side in ("left", "right")
    )
    return (left, right)


# -- the firmware mirror -----------------------------------------------------------------


def _endpoint(text: str) -> Address | None:
    if not text:
        return None
    host, _, port = text.rpartition(":")
    return (host, int(port))


@dataclass
class SitlFirmware:
    """The world's view of one SITL car's firmware, from its trace and its motor outputs.

    It answers what the world reads of the Python model (nonce, token,
    armed, e-stop, reason, wheels) and turns each traced core call into the
    model's :class:`StepResult`, so the world logs both alike.
    """

    robot_id: int
    boot_nonce: int
    token: int
    armed: bool = False
    estop: bool = False
    reason: str = ""
    last_seq: int = 0
    motor_ok: bool = True
    camera_ok: bool = True
    wheels: tuple[float, float] = (0.0, 0.0)
    started: bool = False  # its init() was seen
    ticked: bool = False  # a tick's health was seen

    def apply(self, trace: Trace) -> StepResult | None:
        """Update from one trace message; the model's step for it, or None."""
        f = trace.fields
        if trace.ev == "init":
            self.boot_nonce, self.token = int(f["boot"]), int(f["token"])
            self.motor_ok, self.camera_ok = bool(f["motor_ok"]), bool(f["camera_ok"])
            self.started = True
            return None
        if trace.ev == "health":
            self.motor_ok, self.camera_ok = bool(f["motor_ok"]), bool(f["camera_ok"])
            self.ticked = True
            return None
        if trace.ev == "disarm":
            self.armed, self.token, self.reason = False, int(f["token"]), str(f["reason"])
            event = Event(EventKind.DISARMED, int(f["us"]), reason=self.reason, token=self.token)
            return StepResult(True, "", None, (), (event,))
        if trace.ev == "rx":
            return self._rx(f)
        return None

    def _rx(self, f: Mapping[str, Any]) -> StepResult:
        us, src = int(f["us"]), _endpoint(str(f["src"]))
        cmd: Command | None = None
        try:
            cmd = decode_command(bytes.fromhex(str(f["hex"])))
        except (PacketError, ValueError):
            cmd = None
        self.armed, self.estop, self.token = bool(f["armed"]), bool(f["estop"]), int(f["token"])
        kind = cmd.kind if cmd is not None else None
        if not f["ok"]:
            self.reason = str(f["reason"])
            rejected = Event(EventKind.REJECTED, us, reason=self.reason, command=kind, src=src)
            return StepResult(False, self.reason, cmd, (), (rejected,))
        events = [Event(EventKind.ACCEPTED, us, command=kind, src=src)]
        if kind is Kind.HELLO:
            if f["was_estop"] and not self.estop:
                events.append(Event(EventKind.ESTOP_CLEARED, us, src=src))
            if f["tel"] != f["was_tel"]:
                events.append(Event(EventKind.TELEMETRY_TO, us, src=src))
        if kind in (Kind.ARM, Kind.DRIVE) and cmd is not None:
            self.last_seq = cmd.seq
        if kind is Kind.ARM:
            self.reason = ""
            events.append(Event(EventKind.ARMED, us, src=src, token=self.token))
        elif kind in (Kind.STOP, Kind.ESTOP):
            self.reason = Reason.ESTOP if kind is Kind.ESTOP else Reason.STOP
            events.append(
                Event(EventKind.DISARMED, us, reason=self.reason, src=src, token=self.token)
            )
            if kind is Kind.ESTOP:
                events.append(Event(EventKind.ESTOP_LATCHED, us, src=src))
        return StepResult(True, "", cmd, (), tuple(events))


# -- the process -------------------------------------------------------------------------


@dataclass(frozen=True)
class Boot:
    """One boot of a SITL car: its address, id, clock, first random draws and reset reason."""

    address: str
    robot_id: int
    boot_time: float  # CLOCK_MONOTONIC s (the world's time.monotonic()) at boot
    drift: float = 0.0  # crystal error: its uptime runs (1 + drift) fast
    randoms: tuple[int, ...] = ()  # esp_random()'s first values: the boot nonce, the token
    reset_reason: int = RESET_POWERON
    imu: bool = False  # an MPU-6050 on its I2C bus, reading the world's gyro (the kit: none)


def command(binary: Path, boot: Boot, world_fd: int) -> list[str]:
    """The SITL car's command line (firmware/sitl/src/main.cpp)."""
    args = [
        str(binary), "--address", boot.address, "--robot-id", str(boot.robot_id),
        "--world-fd", str(world_fd), "--boot-time", repr(boot.boot_time),
        "--drift", repr(boot.drift), "--reset-reason", str(boot.reset_reason),
        "--imu", "1" if boot.imu else "0",
    ]  # fmt: skip
    for value in boot.randoms:
        args += ["--random", str(value)]
    return args


def spawn(binary: Path, boot: Boot) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """Start one SITL car; returns it and the world's end of its link (non-blocking).

    The car exits when that end closes, and is killed if its parent dies.
    """
    return spawn_linked(lambda fd: command(binary, boot, fd), MAX_PACKET)
