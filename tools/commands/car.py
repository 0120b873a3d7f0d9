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
import signal
import socket
import sys
import time
from pathlib import Path

from agents.drivers.carlock import CarLock, CarLockedError
from protocol.mz01.session import PROBE_PORT, SessionState
from protocol.robotfile import read_robot
from protocol.tomlfile import FileError
from tools.cartool import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    CarTool,
    Expected,
    describe,
    refused,
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("address", help="the car's IPv4 address or host name, or a robot file "
                   "(ROBOT.toml: its car, and its car_id as --expect-id)")
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
    from tools.commands.teleop import add_teleop_arguments

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
    fastest = s.clock.fastest_round_trip_at_time(now)
    if fastest is None:
        _say(f"no usable probe replies from {tool.address} (sent {s.sent['probe'] - sent0})")
        return EXIT_FAILED
    _say(
        f"clock probes to {tool.address}:{PROBE_PORT}: sent {s.sent['probe'] - sent0}, "
        f"rejected {s.clock.rejects.total}\n"
        f"  best round trip {fastest * 1000:.2f} ms\n"
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


def _from_robot_file(args: argparse.Namespace) -> str | None:
    """A robot file given as the address: take its car and car_id; the error, if any."""
    path = Path(args.address)
    if not (args.address.endswith(".toml") and path.is_file()):
        return None
    try:
        robot = read_robot(path)
    except FileError as exc:
        return str(exc)
    if "car" not in robot:
        return f"{path}: no car = ADDRESS in this robot file"
    args.address = robot["car"]
    if args.expect_id is None:
        args.expect_id = robot.get("car_id")
    return None


def main(args: argparse.Namespace) -> int:
    problem = _from_robot_file(args)
    if problem is not None:
        print(f"stigmesh car: {problem}", file=sys.stderr)
        return EXIT_USAGE
    expect_ok = args.expect_id is None or 1 <= args.expect_id <= 255
    if not 0 <= args.id <= 255 or not expect_ok:
        print("stigmesh car: --id and --expect-id take a robot id 1..255", file=sys.stderr)
        return EXIT_USAGE
    try:
        address = socket.gethostbyname(args.address)
    except OSError as exc:
        print(f"stigmesh car: cannot resolve {args.address!r}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    # ^C (SIGINT) must reach the command even when it was started with SIGINT ignored (in
    # the background of a script, under nohup): it is how a driving car is stopped at once.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return _run(address, args)
    finally:
        signal.signal(signal.SIGINT, previous)


def _run(address: str, args: argparse.Namespace) -> int:
    if args.action == "teleop":
        from tools.commands.teleop import teleop_main

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
    except (TimeoutError, CarLockedError) as exc:
        return refused(exc)
    except KeyboardInterrupt:
        tool.session.stop(time.monotonic())
        tool.flush()
        print("interrupted: STOP sent", file=sys.stderr)
        return EXIT_FAILED
    finally:
        tool.close()
