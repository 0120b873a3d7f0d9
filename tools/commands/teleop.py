"""``stigmesh car ADDR teleop``: drive a car from the keyboard, its telemetry on screen.

Keys: arrows or WASD drive (forward, back, turn in place), space STOP, e
ESTOP (latches on the car), r reset the e-stop, + and - change the duty, q
quit. A key drives for ``--hold`` seconds (a held key's auto-repeat keeps it
going); then the wheels go to zero, and after ``--idle`` seconds without a
key the car is stopped (disarmed). The next key re-arms it with the
neutral-to-motion gesture.

Everything goes through the real controller session, as ``stigmesh car
drive`` does: clock sync, ARM, DRIVE at the session's rate carrying the
newest decision, STOP. Quitting, Ctrl-C, SIGTERM, SIGHUP, a closed terminal
or any error sends STOP before anything else; only SIGKILL cannot, and then
the car stops by itself 300 ms after the last DRIVE.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import select
import shutil
import signal
import sys
import termios
import time
import tty
from collections import deque
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any, TextIO

from agents.drivers.carlock import CarLock, CarLockedError
from protocol.mz01.session import SessionState
from tools.cartool import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    CarTool,
    Expected,
    refused,
    warn,
)

DRAW_EVERY = 0.1  # s between screen refreshes
DECIDE_EVERY = 0.05  # s between fresh decisions (the lease is 0.3 s)
ARM_RETRY = 0.3  # s between arming attempts while keys keep coming

# key bytes -> action; arrows in both normal and application cursor mode
KEYS: dict[bytes, str] = {
    b"\x1b[A": "forward", b"\x1bOA": "forward", b"w": "forward", b"W": "forward",
    b"\x1b[B": "back", b"\x1bOB": "back", b"s": "back", b"S": "back",
    b"\x1b[D": "left", b"\x1bOD": "left", b"a": "left", b"A": "left",
    b"\x1b[C": "right", b"\x1bOC": "right", b"d": "right", b"D": "right",
    b" ": "stop", b"e": "estop", b"E": "estop", b"r": "reset", b"R": "reset",
    b"q": "quit", b"Q": "quit", b"+": "faster", b"=": "faster", b"-": "slower",
}  # fmt: skip
MOTIONS = ("forward", "back", "left", "right")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def parse_keys(buf: bytes) -> tuple[list[str], bytes]:
    """Actions in ``buf`` and the unfinished escape sequence left at its end."""
    actions: list[str] = []
    i = 0
    while i < len(buf):
        if buf[i] == 0x1B:
            if len(buf) - i < 3:
                return actions, buf[i:]
            action = KEYS.get(buf[i : i + 3])
            if action:
                actions.append(action)
            i += 3  # an unknown sequence of three bytes is dropped whole
            continue
        action = KEYS.get(buf[i : i + 1])
        if action:
            actions.append(action)
        i += 1
    return actions, b""


def wheels_for(action: str, speed: float, turn: float) -> tuple[float, float]:
    return {
        "forward": (speed, speed),
        "back": (-speed, -speed),
        "left": (-turn, turn),
        "right": (turn, -turn),
    }[action]


def why_not_armable(tool: CarTool, now: float) -> str:
    s, t = tool.session, tool.session.telemetry
    if t is None or s.state is SessionState.CONNECTING:
        return "no telemetry from the car"
    if t.estop or s.state is SessionState.ESTOPPED:
        return "e-stop latched: r resets it"
    if not s.synchronized_at_time(now):
        return "clock not synchronised yet"
    if t.armed and s.state is SessionState.READY:
        return "the car is armed by another controller"
    if not (t.motor_ok and t.camera_ok):
        return "the car reports a fault (motors or camera)"
    return f"session {s.state.value}"


class Teleop:
    """Keys in, decisions to the session out; no I/O of its own."""

    def __init__(self, tool: CarTool, speed: float, turn: float, hold: float,
                 idle: float) -> None:
        self.tool = tool
        self.speed, self.turn, self.hold, self.idle = speed, turn, hold, idle
        self.action: str | None = None  # the motion key in force
        self.key_at = -1e9
        self.decided_at = -1e9
        self.arm_tried_at = -1e9
        self.message = "ready: press a motion key"
        self.done = False

    def wheels(self) -> tuple[float, float]:
        if self.action is None:
            return (0.0, 0.0)
        return wheels_for(self.action, self.speed, self.turn)

    def key(self, action: str, now: float) -> None:
        s = self.tool.session
        if action == "quit":
            self.done = True
        elif action == "stop":
            self.action = None
            s.stop(now)
            self.message = "STOP sent"
        elif action == "estop":
            self.action = None
            s.estop(now)
            self.message = "ESTOP sent: the car latches it until r"
        elif action == "reset":
            s.reset_estop(now)
            self.message = "e-stop reset requested (the car stays disarmed)"
        elif action in ("faster", "slower"):
            step = 0.05 if action == "faster" else -0.05
            self.speed = round(min(1.0, max(0.1, self.speed + step)), 2)
            self.turn = round(min(1.0, max(0.1, self.turn + step)), 2)
            self.message = f"duty: drive {self.speed:.2f}, turn {self.turn:.2f}"
        elif action in MOTIONS:
            self.action, self.key_at = action, now
            self._arm_or_drive(now)

    def _arm_or_drive(self, now: float) -> None:
        s = self.tool.session
        if s.state in (SessionState.ARMING, SessionState.DRIVING):
            self._decide(now)
            self.message = f"driving: {self.action}"
        elif not s.armable_at_time(now):
            self.message = f"cannot drive: {why_not_armable(self.tool, now)}"
        elif now - self.arm_tried_at >= ARM_RETRY:
            self.arm_tried_at = now
            s.set_decision(0.0, 0.0, now)  # the gesture: neutral, then motion
            self._decide(now)
            self.message = f"arming: {self.action}"

    def _decide(self, now: float) -> None:
        left, right = self.wheels()
        self.tool.session.set_decision(left, right, now)
        self.decided_at = now

    def tick(self, now: float) -> None:
        """Expire the key, refresh the decision, stop when idle."""
        s = self.tool.session
        if self.action is not None and now - self.key_at >= self.hold:
            self.action = None
        if s.state not in (SessionState.ARMING, SessionState.DRIVING):
            return
        if now - self.key_at >= self.idle:
            s.stop(now)
            self.message = f"no key for {self.idle:g} s: stopped"
        elif now - self.decided_at >= DECIDE_EVERY or self.action is None:
            self._decide(now)


def render(tool: CarTool, ui: Teleop, notices: deque[str], now: float) -> list[str]:
    """The screen, as lines."""
    s, t = tool.session, tool.session.telemetry
    left, right = ui.wheels()
    lines = [
        f"stigmesh car {tool.address} teleop \N{MIDDLE DOT} car {s.robot_id or '?'}"
        f" \N{MIDDLE DOT} session {s.state.value}",
        "keys: arrows/WASD drive, space STOP, e ESTOP, r reset e-stop, +/- duty, q quit",
        f"you:   {ui.action or 'no key'}  L {left:+.2f} R {right:+.2f}  (duty {ui.speed:.2f}, "
        f"turn {ui.turn:.2f}; a key holds {ui.hold:g} s, stop after {ui.idle:g} s idle)",
    ]
    if t is None:
        lines.append("car:   no telemetry yet")
    else:
        age = "" if s.telemetry_at is None else f", {1000 * (now - s.telemetry_at):.0f} ms ago"
        gyro = "none" if t.gyro_z is None else f"{t.gyro_z:+.3f} rad/s"
        lines += [
            f"car:   {'ARMED' if t.armed else 'disarmed'}  "
            f"e-stop {'LATCHED' if t.estop else 'clear'}  "
            f"wheels L {t.duty[0]:+.2f} R {t.duty[1]:+.2f}  reason {t.reason or '-'}  "
            f"motors {'ok' if t.motor_ok else 'FAULT'}  camera {'ok' if t.camera_ok else 'FAULT'}",
            f"       id {t.id}  boot {t.boot:08x}  up {t.uptime_ms / 1000:.1f} s  "
            f"rssi {t.rssi} dBm  gyro {gyro}  battery not in MZ01 telemetry{age}",
        ]
    clock = s.clock
    sync = "synchronised" if s.synchronized_at_time(now) else "NOT synchronised"
    bound = clock.uncertainty_at_time(now)
    if math.isfinite(bound):
        sync += f" \N{PLUS-MINUS SIGN}{bound * 1000:.2f} ms"
    rejected = ", ".join(f"{k} {v}" for k, v in s.rejects.as_dict().items()) or "none"
    sent = ", ".join(f"{k} {v}" for k, v in s.sent.items())
    lines += [
        f"clock: {sync}; probe replies rejected {clock.rejects.total}",
        f"rejected telemetry: {rejected}; sent: {sent}",
        f"> {ui.message}",
    ]
    lines += [f"! {n}" for n in notices]
    return lines


class _Signalled(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)


def _raise_signal(signum: int, frame: FrameType | None) -> None:
    raise _Signalled(signum)


class Terminal:
    """Keys one at a time without echo, on the alternate screen; restored on exit."""

    def __init__(self, fd: int, out: TextIO) -> None:
        self.fd, self.out = fd, out
        self._saved: list[Any] | None = None

    def __enter__(self) -> Terminal:
        self._saved = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd)
        self.out.write("\x1b[?1049h\x1b[?25l")
        self.out.flush()
        return self

    def draw(self, lines: list[str]) -> None:
        width = max(20, shutil.get_terminal_size((100, 24)).columns)
        body = "".join(f"{line[:width]}\x1b[K\n" for line in lines)
        self.out.write("\x1b[H" + body + "\x1b[J")
        self.out.flush()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.out.write("\x1b[?25h\x1b[?1049l")
        self.out.flush()
        if self._saved is not None:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)


def add_teleop_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--speed", type=float, default=0.6,
                   help="duty for forward and back, 0.1..1 (default 0.6; the FNK0053 "
                   "needs about 0.4 to move)")
    p.add_argument("--turn", type=float, default=0.5,
                   help="duty of each wheel when turning in place, 0.1..1 (default 0.5)")
    p.add_argument("--hold", type=float, default=0.5,
                   help="seconds a key press drives (default 0.5; raise it if your "
                   "keyboard's auto-repeat delay is longer)")
    p.add_argument("--idle", type=float, default=2.0,
                   help="seconds without a key before the car is stopped (default 2)")


def _send_stop(tool: CarTool) -> None:
    """STOP now, whatever state the session is in; never raises."""
    try:
        if tool.session.robot_id:
            tool.session.stop(time.monotonic())
        tool.flush()
    except (OSError, RuntimeError):
        pass


def _loop(tool: CarTool, ui: Teleop, term: Terminal, fd: int, notices: deque[str]) -> None:
    pending = b""
    next_draw = 0.0
    while not ui.done:
        now = time.monotonic()
        ui.tick(now)
        timer = tool.service(now)
        if now >= next_draw:
            term.draw(render(tool, ui, notices, now))
            next_draw = now + DRAW_EVERY
        wait = min(next_draw, timer if timer is not None else next_draw) - time.monotonic()
        sock = tool.sock.fileno()
        readable, _, _ = select.select([sock, fd], [], [], max(0.0, min(wait, 0.05)))
        if sock in readable:
            tool.receive()
        if fd in readable:
            data = os.read(fd, 256)
            if not data:  # the terminal went away
                ui.done = True
                ui.message = "the terminal closed"
            actions, pending = parse_keys(pending + data)
            for action in actions:
                ui.key(action, time.monotonic())
                tool.flush()
        elif pending:  # a lone ESC: nothing more came
            pending = b""


def teleop_main(address: str, args: argparse.Namespace) -> int:
    for name, low, high in (("speed", 0.1, 1.0), ("turn", 0.1, 1.0), ("hold", 0.1, 2.0),
                            ("idle", 0.2, 60.0)):
        if not low <= getattr(args, name) <= high:
            print(f"stigmesh car: --{name} must be in [{low:g}, {high:g}]", file=sys.stderr)
            return EXIT_USAGE
    if not os.isatty(sys.stdin.fileno()):
        print("stigmesh car: teleop reads keys from a terminal, and stdin is not one",
              file=sys.stderr)
        return EXIT_USAGE
    notices: deque[str] = deque(maxlen=4)  # the newest, on screen
    shown: list[str] = []  # every one shown on screen, repeated once the screen is gone
    on_screen = [False]

    def notice(text: str) -> None:
        if on_screen[0]:
            notices.append(text)
            shown.append(text)
        else:
            warn(text)

    tool = CarTool(address, args.id, Expected(args.expect_id), notice)
    handlers: dict[int, Callable[[int, FrameType | None], object] | int | None] = {}
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        handlers[sig] = signal.signal(sig, _raise_signal)
    ui = Teleop(tool, args.speed, args.turn, args.hold, args.idle)
    how = "quit"
    status = EXIT_OK
    try:
        tool.connect(args.timeout)
        with CarLock(tool.address):
            fd = sys.stdin.fileno()
            with Terminal(fd, sys.stdout) as term:
                on_screen[0] = True
                try:
                    _loop(tool, ui, term, fd, notices)
                finally:
                    _send_stop(tool)  # first, before the terminal is restored
                    on_screen[0] = False
            how = ui.message if ui.message == "the terminal closed" else "quit"
    except (TimeoutError, CarLockedError) as exc:
        return refused(exc)
    except (KeyboardInterrupt, _Signalled) as exc:
        how, status = f"interrupted ({str(exc) or 'SIGINT'})", EXIT_FAILED
    finally:
        _send_stop(tool)
        with contextlib.suppress(OSError, KeyboardInterrupt, _Signalled):  # the car confirms
            tool.pump(lambda now: (t := tool.session.telemetry) is None or not t.armed, 0.5)
        tool.session.close(time.monotonic())
        tool.flush()
        tool.close()
        for signum, old in handlers.items():
            signal.signal(signum, old)
    t = tool.session.telemetry
    state = "no telemetry" if t is None else (
        f"car {t.id} {'ARMED' if t.armed else 'disarmed'}, wheels "
        f"L {t.duty[0]:+.2f} R {t.duty[1]:+.2f}, e-stop {'LATCHED' if t.estop else 'clear'}")
    if t is not None and t.armed:
        state = f"NOT confirmed by the car within 0.5 s; its last telemetry: {state}"
    print(f"teleop {how}: STOP sent; {state}", flush=True)
    for text in shown:
        warn(text)
    return status
