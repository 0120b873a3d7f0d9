"""``stigmesh car ADDRESS ...``: bring-up and bench tools for one car.

    status        HELLO, then print the car's telemetry
    probe         clock probes: round trips, offset, uncertainty, synchronised?
    stop          STOP (anyone may stop a car)
    estop         ESTOP three times (latches until reset-estop)
    reset-estop   clear a latched e-stop (HELLO with flag bit 0)
    drive         drive --left L --right R --for SECONDS, through the real
                  controller session (clock sync, ARM gesture, 30 Hz DRIVE, STOP)
    teleop        drive from the keyboard with the car's telemetry on screen
                  (arrows/WASD, space STOP, e ESTOP, r reset the e-stop, q quit)

Everything goes through :class:`~protocol.mz01.session.ControllerSession`, in
a plain blocking loop: the same rules the agent obeys.

Every action watches the car's telemetry and says in one line when it does
not match what is expected: another robot id than ``--expect-id``, or a new
boot nonce during the session (the car rebooted).

Note: HELLO makes this tool the car's telemetry destination; an agent that is
connected to the car but not driving it will reconnect by itself within 0.35 s.
"""

from __future__ import annotations

import argparse
import select
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from agents.drivers.carlock import CarLock, CarLockedError
from protocol.mz01.session import (
    COMMAND_PORT,
    PROBE_PORT,
    ControllerSession,
    SessionConfig,
    SessionState,
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
    return (
        f"car {t.id}: {state}; boot {t.boot:08x}, token {t.token}, "
        f"uptime {t.uptime_ms / 1000:.1f} s\n"
        f"  last reason: {t.reason or '-'}; {health}; rssi {t.rssi} dBm\n"
        f"  duty left {t.duty[0]:+.2f} right {t.duty[1]:+.2f}; gyro {gyro}; last seq {t.seq}"
        + ("\n  simulated car (telemetry carries sim fields)" if t.sim is not None else "")
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("address", help="the car's IPv4 address or host name")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--id", type=int, default=0,
                        help="talk only to this robot id; other ids are ignored (default: any)")
    common.add_argument("--expect-id", type=int, default=None, metavar="N",
                        help="warn when the car reports another robot id than N")
    common.add_argument("--timeout", type=float, default=3.0,
                        help="seconds to wait for the car (default 3)")
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    sub.add_parser("status", parents=[common], help="print the car's telemetry")
    probe = sub.add_parser("probe", parents=[common], help="measure the clock mapping")
    probe.add_argument("--count", type=int, default=8, help="probes to send (default 8)")
    sub.add_parser("stop", parents=[common], help="stop and disarm the car")
    sub.add_parser("estop", parents=[common], help="emergency stop: latches until reset-estop")
    sub.add_parser("reset-estop", parents=[common],
                   help="clear a latched e-stop (the car stays disarmed)")
    drive = sub.add_parser("drive", parents=[common],
                           help="drive both wheels for a while, then stop")
    drive.add_argument("--left", type=float, required=True, help="left duty in [-1, 1]")
    drive.add_argument("--right", type=float, required=True, help="right duty in [-1, 1]")
    drive.add_argument("--for", dest="seconds", type=float, required=True,
                       help="seconds to drive (at most 30)")
    teleop = sub.add_parser(
        "teleop", parents=[common],
        help="drive from the keyboard: arrows/WASD, space STOP, e ESTOP, r reset, q quit")
    from tools.car_teleop import add_teleop_arguments  # it imports this module

    add_teleop_arguments(teleop)


def _say(text: str) -> None:
    print(text, flush=True)


def _status(tool: CarTool, args: argparse.Namespace) -> int:
    _say(describe(tool.connect(args.timeout)))
    return EXIT_OK


def _probe(tool: CarTool, args: argparse.Namespace) -> int:
    tool.connect(args.timeout)
    s = tool.session
    target = min(max(args.count, 1), 50)
    sent0 = s.sent["probe"]
    tool.pump(lambda now: s.sent["probe"] - sent0 >= target, target * 0.5 + args.timeout)
    tool.pump(lambda now: False, 0.3)  # the last replies
    now = time.monotonic()
    best = s.clock.best_sample_at_time(now)
    if best is None:
        _say(f"no usable probe replies from {tool.address} (sent {s.sent['probe'] - sent0})")
        return EXIT_FAILED
    _say(
        f"clock probes to {tool.address}:{PROBE_PORT}: sent {s.sent['probe'] - sent0}, "
        f"rejected {s.clock.rejects.total}\n"
        f"  best round trip {best.round_trip * 1000:.2f} ms\n"
        f"  car uptime = local + {s.clock.offset_at_time(now):.6f} s "
        f"(± {s.clock.uncertainty_at_time(now) * 1000:.2f} ms)\n"
        f"  synchronised: {'yes' if s.synchronized_at_time(now) else 'NO'} "
        f"(limit {s.clock.max_uncertainty * 1000:.0f} ms)"
    )
    return EXIT_OK if s.synchronized_at_time(now) else EXIT_FAILED


def _stop(tool: CarTool, args: argparse.Namespace, emergency: bool) -> int:
    tool.connect(args.timeout)
    now = time.monotonic()
    if emergency:
        tool.session.estop(now)
    else:
        tool.session.stop(now)
    tool.flush()
    before = tool.session.telemetry
    assert before is not None
    ok = tool.pump(
        lambda now: (t := tool.session.telemetry) is not None
        and t.token != before.token
        and not t.armed
        and (t.estop or not emergency),
        args.timeout,
    )
    t = tool.session.telemetry
    assert t is not None
    _say(describe(t))
    if not ok:
        _say("the car did not confirm the stop within the timeout")
        return EXIT_FAILED
    _say("e-stop latched" if emergency else "stopped")
    return EXIT_OK


def _reset(tool: CarTool, args: argparse.Namespace) -> int:
    t = tool.connect(args.timeout)
    if not t.estop:
        _say(f"car {t.id}: no e-stop latched; nothing to reset")
        return EXIT_OK
    tool.session.reset_estop(time.monotonic())
    tool.flush()
    ok = tool.pump(lambda now: not (tool.session.telemetry and tool.session.telemetry.estop),
                   args.timeout)
    _say("e-stop cleared (the car stays disarmed)" if ok else "the car refused the reset: "
         f"{tool.session.telemetry.reason if tool.session.telemetry else '?'}")
    return EXIT_OK if ok else EXIT_FAILED


def _drive(tool: CarTool, args: argparse.Namespace) -> int:
    for name in ("left", "right"):
        if not -1.0 <= getattr(args, name) <= 1.0:
            _say(f"--{name} must be in [-1, 1]")
            return EXIT_USAGE
    if not 0 < args.seconds <= 30:
        _say("--for must be in (0, 30] seconds")
        return EXIT_USAGE
    t = tool.connect(args.timeout)
    with CarLock(tool.address):
        s = tool.session
        if not tool.pump(s.armable_at_time, args.timeout):
            why = "e-stop latched" if t.estop else (
                "clock not synchronised" if not s.synchronized_at_time(time.monotonic())
                else "car not armable (armed by another controller, or unhealthy)")
            _say(f"cannot arm: {why}")
            return EXIT_FAILED
        s.set_decision(0.0, 0.0, time.monotonic())
        s.set_decision(args.left, args.right, time.monotonic())  # the arming gesture
        _say(f"driving car {s.robot_id}: left {args.left:+.2f}, right {args.right:+.2f} "
             f"for {args.seconds:g} s")
        end = time.monotonic() + args.seconds
        refresh = [0.0]

        def keep_deciding(now: float) -> bool:
            if now - refresh[0] >= 0.1:  # a fresh decision well inside its 0.3 s lease
                s.set_decision(args.left, args.right, now)
                refresh[0] = now
            return now >= end or s.state not in (SessionState.ARMING, SessionState.DRIVING)

        tool.pump(keep_deciding, args.seconds + 1.0)
        interrupted = s.state not in (SessionState.ARMING, SessionState.DRIVING)
        s.close(time.monotonic())
        tool.flush()
        tool.pump(lambda now: False, 0.2)
    events = [f"{e.new.value} ({e.reason})" for e in tool.history]
    if interrupted:
        _say("the drive was interrupted: " + "; ".join(events[-3:]))
        return EXIT_FAILED
    _say("done; car stopped")
    return EXIT_OK


def main(args: argparse.Namespace) -> int:
    expect_ok = args.expect_id is None or 1 <= args.expect_id <= 255
    if not 0 <= args.id <= 255 or not expect_ok:
        print("stigmesh car: --id and --expect-id take a robot id 1..255", file=sys.stderr)
        return EXIT_USAGE
    try:
        address = socket.gethostbyname(args.address)
    except OSError as exc:
        print(f"stigmesh car: cannot resolve {args.address!r}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.action == "teleop":
        from tools.car_teleop import teleop_main  # it imports this module

        return teleop_main(address, args)
    tool = CarTool(address, args.id, Expected(args.expect_id))
    try:
        if args.action == "status":
            return _status(tool, args)
        if args.action == "probe":
            return _probe(tool, args)
        if args.action in ("stop", "estop"):
            return _stop(tool, args, emergency=args.action == "estop")
        if args.action == "reset-estop":
            return _reset(tool, args)
        return _drive(tool, args)
    except TimeoutError as exc:
        print(f"stigmesh car: {exc}", file=sys.stderr)
        return EXIT_NO_CAR
    except CarLockedError as exc:
        print(f"stigmesh car: {exc}", file=sys.stderr)
        return EXIT_LOCKED
    except KeyboardInterrupt:
        tool.session.stop(time.monotonic())
        tool.flush()
        print("interrupted: STOP sent", file=sys.stderr)
        return EXIT_FAILED
    finally:
        tool.close()
