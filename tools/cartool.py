"""A controller session over one UDP socket, for the bring-up tools (``stigmesh car``).

:class:`CarTool` steps a :class:`~protocol.mz01.session.ControllerSession` in a
blocking loop; :class:`TelemetryWatch` warns when the car is not the expected
robot or reboots. ``stigmesh car`` and its ``teleop`` share it and its exit
statuses.
"""

from __future__ import annotations

import math
import select
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from agents.drivers.carlock import CarLockedError
from protocol.mz01.session import (
    COMMAND_PORT,
    PROBE_PORT,
    ControllerSession,
    SessionConfig,
    StateChange,
)
from protocol.mz01.telemetry import Telemetry

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_CAR, EXIT_LOCKED = 0, 1, 2, 3, 4


def warn(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Expected:
    """What the car's telemetry should say (from flags today; a robot config later)."""

    robot_id: int | None = None


class TelemetryWatch:
    """Compares each new telemetry with what is expected and with the session's first boot.

    ``notice`` gets one line per finding: a robot id other than expected (once
    per id), and every change of the boot nonce (the car rebooted).
    """

    def __init__(self, address: str, expected: Expected, notice: Callable[[str], None]) -> None:
        self.address = address
        self.expected = expected
        self.notice = notice
        self.boot: int | None = None
        self._seen: Telemetry | None = None
        self._wrong_ids: set[int] = set()

    def check(self, t: Telemetry | None) -> None:
        if t is None or t is self._seen:
            return
        self._seen = t
        want = self.expected.robot_id
        if want is not None and t.id != want and t.id not in self._wrong_ids:
            self._wrong_ids.add(t.id)
            self.notice(
                f"the car at {self.address} reports robot id {t.id}, but {want} is expected: "
                "wrong address, or the car's id is set wrong"
            )
        if self.boot is not None and t.boot != self.boot:
            self.notice(
                f"the car rebooted: boot {self.boot:08x} -> {t.boot:08x}, up "
                f"{t.uptime_ms / 1000:.1f} s; it came back disarmed, e-stop "
                f"{'latched' if t.estop else 'clear'} (a reset, a brown-out or a crash)"
            )
        self.boot = t.boot


class CarTool:
    """A controller session over one UDP socket, stepped by a blocking loop."""

    def __init__(
        self,
        address: str,
        robot_id: int = 0,
        expected: Expected | None = None,
        notice: Callable[[str], None] = warn,
    ) -> None:
        self.address = address
        self.session = ControllerSession(SessionConfig(robot_id=robot_id))
        self.watch = TelemetryWatch(address, expected or Expected(), notice)
        self.history: list[StateChange] = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("", 0))
        self.sock.setblocking(False)

    def close(self) -> None:
        self.sock.close()

    def service(self, now: float) -> float | None:
        """Run the session's due timers and send; returns its next timer."""
        timer = self.session.get_timer()
        if timer is not None and timer <= now:
            self.session.handle_timer(now)
        self.flush()
        return self.session.get_timer()

    def receive(self) -> None:
        """Feed every waiting datagram from the car to the session."""
        while True:
            try:
                data, (host, port) = self.sock.recvfrom(65536)
            except BlockingIOError:
                break
            if host == self.address and port in (COMMAND_PORT, PROBE_PORT):
                self.session.receive_datagram(data, port, time.monotonic())
                self.watch.check(self.session.telemetry)
        self.flush()

    def pump(self, until: Callable[[float], bool], timeout: float) -> bool:
        """Run the session until ``until(now)`` is true or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        while True:
            now = time.monotonic()
            if until(now):
                return True
            if now >= deadline:
                return False
            timer = self.service(now)
            wait = min(deadline, timer if timer is not None else deadline) - time.monotonic()
            readable, _, _ = select.select([self.sock], [], [], max(0.0, min(wait, 0.05)))
            if readable:
                self.receive()

    def flush(self) -> None:
        for tx in self.session.datagrams_to_send():
            self.sock.sendto(tx.data, (self.address, tx.port))
        self.history.extend(self.session.events())

    def connect(self, timeout: float) -> Telemetry:
        if not self.pump(lambda now: self.session.telemetry is not None, timeout):
            wanted = self.session.config.robot_id
            hint = (f"; or it is not robot {wanted} (a car ignores a HELLO for another id: "
                    "try without --id)") if wanted else ""
            raise TimeoutError(
                f"no telemetry from {self.address} within {timeout:g} s: is the car powered, "
                f"on this network, and listening on UDP {COMMAND_PORT}?{hint}"
            )
        assert self.session.telemetry is not None
        return self.session.telemetry


def describe(t: Telemetry) -> str:
    state = "ESTOP LATCHED" if t.estop else ("armed" if t.armed else "disarmed")
    health = ", ".join(
        f"{name} {'ok' if ok else 'FAULT'}" for name, ok in (("motors", t.motor_ok),
                                                            ("camera", t.camera_ok))
    )
    gyro = "none" if t.gyro_z is None else f"{t.gyro_z:+.3f} rad/s"
    if t.gyro_z is not None:
        gyro += (" (no angle: firmware older than gyro_angle)" if t.gyro_angle is None
                 else f", angle {math.degrees(t.gyro_angle):+.1f} deg")
    return (
        f"car {t.id}: {state}; boot {t.boot:08x}, token {t.token}, "
        f"uptime {t.uptime_ms / 1000:.1f} s\n"
        f"  last reason: {t.reason or '-'}; {health}; rssi {t.rssi} dBm\n"
        f"  duty left {t.duty[0]:+.2f} right {t.duty[1]:+.2f}; gyro {gyro}; last seq {t.seq}"
        + ("\n  simulated car (telemetry carries sim fields)" if t.sim is not None else "")
    )


def refused(exc: TimeoutError | CarLockedError) -> int:
    """Say why the car could not be used: no telemetry, or another program drives it."""
    print(f"stigmesh car: {exc}", file=sys.stderr)
    return EXIT_NO_CAR if isinstance(exc, TimeoutError) else EXIT_LOCKED
