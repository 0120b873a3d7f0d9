"""MZ01 golden vectors: scenarios with outcomes written by hand from MZ01.md.

Nothing here runs the firmware model: datagrams are packed with ``struct``
straight from the table in MZ01.md and every expected state is spelled out.
``python -m protocol.mz01.vectors`` writes ``protocol/vectors/mz01_vectors.json``
(canonical) and ``mz01_vectors.txt`` (the line format of MZ01.md);
``--check`` only compares them with what it would write.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Address = tuple[str, int]

FORMAT = "mz01-vectors/1"
VECTOR_DIR = Path(__file__).resolve().parent.parent / "vectors"
JSON_PATH = VECTOR_DIR / "mz01_vectors.json"
TXT_PATH = VECTOR_DIR / "mz01_vectors.txt"


# -- the data model -----------------------------------------------------------


@dataclass(frozen=True)
class Boot:
    robot_id: int
    nonce: int
    token: int
    motor_ok: bool = True
    camera_ok: bool = True


@dataclass(frozen=True)
class State:
    """The car state a step checks: armed, e-stop latch, token, wheel duties."""

    armed: bool
    estop: bool
    token: int
    left: float = 0.0
    right: float = 0.0


@dataclass(frozen=True)
class Rx:
    t_us: int
    src: Address
    data: bytes
    accept: bool
    reason: str  # the rejection reason, "" when accepted
    state: State


@dataclass(frozen=True)
class Tick:
    t_us: int
    state: State
    reason: str  # the car's reason field afterwards


@dataclass(frozen=True)
class Health:
    t_us: int
    motor_ok: bool
    camera_ok: bool


@dataclass(frozen=True)
class Probe:
    t_us: int
    request: bytes
    reply: bytes | None


@dataclass(frozen=True)
class Note:
    text: str


Step = Rx | Tick | Health | Probe | Note


@dataclass(frozen=True)
class Scenario:
    name: str
    doc: str
    boot: Boot
    steps: tuple[Step, ...]


# -- building blocks, straight from the datagram table --------------------------

HELLO, ARM, DRIVE, STOP, ESTOP = 1, 2, 3, 4, 5

ROBOT = 7
N = 2654435769  # boot nonce 0x9e3779b9
T = 4242  # session token at boot

A: Address = ("127.0.0.10", 40000)  # the first controller
A2: Address = ("127.0.0.10", 40001)  # same host as A, another port
B: Address = ("127.0.0.11", 40000)  # a second controller
X: Address = ("127.0.0.99", 50000)  # a stranger on the LAN

NAN = float("nan")
INF = float("inf")
ABOVE_ONE = 1.00000011920928955078125  # the binary32 right after 1.0 (0x3f800001)
TINY = 2.0**-149  # the smallest binary32 subnormal (0x00000001)
F32_0_1 = 0.100000001490116119384765625  # binary32 nearest 0.1 (0x3dcccccd)
F32_0_7 = 0.699999988079071044921875  # binary32 nearest 0.7 (0x3f333333)
U32 = 2**32


def pkt(
    kind: int,
    *,
    rid: int = ROBOT,
    flags: int = 0,
    nonce: int = N,
    token: int = T,
    seq: int = 0,
    stamp: int = 0,
    left: float = 0.0,
    right: float = 0.0,
    magic: bytes = b"MZ01",
) -> bytes:
    """A 32-byte command, any field value allowed (NaN wheels, bad kinds, ...)."""
    return struct.pack(
        ">4sBBHIIIIff", magic, rid, kind, flags, nonce, token, seq, stamp, left, right
    )


def st(armed: int, estop: int, token: int, left: float = 0.0, right: float = 0.0) -> State:
    return State(bool(armed), bool(estop), token, left, right)


def ok(t_us: int, src: Address, data: bytes, state: State) -> Rx:
    return Rx(t_us, src, data, True, "", state)


def no(t_us: int, src: Address, data: bytes, reason: str, state: State) -> Rx:
    return Rx(t_us, src, data, False, reason, state)


def tick(t_us: int, state: State, reason: str) -> Tick:
    return Tick(t_us, state, reason)


def note(text: str) -> Note:
    return Note(text)


def _hello(**kw: Any) -> bytes:
    return pkt(HELLO, **kw)


def _arm(seq: int, stamp: int, **kw: Any) -> bytes:
    return pkt(ARM, seq=seq, stamp=stamp, **kw)


def _drive(seq: int, left: float, right: float, **kw: Any) -> bytes:
    return pkt(DRIVE, seq=seq, left=left, right=right, **kw)


GOOD_HELLO = _hello()
S0 = st(0, 0, T)


# -- the scenarios --------------------------------------------------------------


def _codec_reasons() -> Scenario:
    return Scenario(
        "codec_reasons_in_order",
        "Every codec reason, and that the first failing check in MZ01.md's order wins.",
        Boot(ROBOT, N, T),
        (
            note("length first: empty, 31, 33 and 64 bytes"),
            no(1000, A, b"", "bad_length", S0),
            no(2000, A, GOOD_HELLO[:31], "bad_length", S0),
            no(3000, A, GOOD_HELLO + b"\x00", "bad_length", S0),
            no(4000, A, GOOD_HELLO + GOOD_HELLO, "bad_length", S0),
            note("magic before kind, flags and wheels"),
            no(5000, A, pkt(9, flags=0xFFFF, left=NAN, magic=b"MZ02"), "bad_magic", S0),
            no(6000, A, pkt(HELLO, magic=b"mz01"), "bad_magic", S0),
            note("kind outside 1..5 before flags and wheels"),
            no(7000, A, pkt(0, flags=0x0002, left=NAN), "bad_kind", S0),
            no(8000, A, pkt(6), "bad_kind", S0),
            no(9000, A, pkt(255), "bad_kind", S0),
            note("flags: any bit but bit 0, or bit 0 on a kind other than HELLO"),
            no(10000, A, _hello(flags=0x0002, left=NAN), "bad_flags", S0),
            no(11000, A, _hello(flags=0x8000), "bad_flags", S0),
            no(12000, A, _arm(1, 12, flags=0x0001), "bad_flags", S0),
            no(13000, A, _drive(1, 0.0, 0.0, flags=0x0001), "bad_flags", S0),
            no(14000, A, pkt(STOP, flags=0x0001), "bad_flags", S0),
            no(15000, A, pkt(ESTOP, flags=0x0001), "bad_flags", S0),
            note("wheels: not finite or outside [-1, 1]; codec checks come before wrong_robot"),
            no(16000, A, _arm(1, 16, rid=9, left=NAN), "bad_wheels", S0),
            no(17000, A, _drive(1, 0.0, INF), "bad_wheels", S0),
            no(18000, A, _drive(1, -INF, 0.0), "bad_wheels", S0),
            no(19000, A, _drive(1, ABOVE_ONE, 0.0), "bad_wheels", S0),
            no(20000, A, _drive(1, 0.0, -ABOVE_ONE), "bad_wheels", S0),
            note("STOP goes through the codec too: no disarm, no token bump"),
            no(21000, X, pkt(STOP, left=2.0), "bad_wheels", S0),
            tick(25000, S0, "bad_wheels"),
            note("exactly -1 and 1 pass the codec; this DRIVE fails later, on not_armed"),
            no(26000, A, _drive(1, 1.0, -1.0), "not_armed", S0),
            tick(30000, S0, "not_armed"),
        ),
    )


def _wrong_robot() -> Scenario:
    return Scenario(
        "wrong_robot_and_hello_to_any",
        "robot_id must be the car's; only HELLO may use 0 to ask any car.",
        Boot(ROBOT, N, T),
        (
            ok(1000, A, _hello(rid=0), S0),
            ok(2000, A, _hello(rid=ROBOT), S0),
            no(3000, A, _hello(rid=8), "wrong_robot", S0),
            no(4000, A, _arm(1, 4, rid=0), "wrong_robot", S0),
            note("wrong_robot comes before the nonce check"),
            no(5000, A, _arm(1, 5, rid=8, nonce=N + 1), "wrong_robot", S0),
            no(6000, A, _drive(1, 0.5, 0.5, rid=0), "wrong_robot", S0),
            note("STOP and ESTOP to id 0 or another id are rejected: no bump, no latch"),
            no(7000, X, pkt(STOP, rid=0), "wrong_robot", S0),
            no(8000, X, pkt(ESTOP, rid=255), "wrong_robot", S0),
            note("HELLO to id 0 with the reset flag still checks nonce and token"),
            ok(9000, A, _hello(rid=0, flags=1), S0),
            no(10000, A, _hello(rid=0, flags=1, nonce=N + 1), "bad_nonce", S0),
            tick(15000, S0, "bad_nonce"),
        ),
    )


def _hello_rules() -> Scenario:
    return Scenario(
        "hello",
        "HELLO ignores the session fields unless flag bit 0 is set; it never changes reason.",
        Boot(ROBOT, N, T),
        (
            ok(1000, X, _hello(nonce=1, token=2, seq=3, stamp=4, left=0.5, right=-0.5), S0),
            no(2000, A, _hello(flags=1, nonce=N + 1), "bad_nonce", S0),
            no(3000, A, _hello(flags=1, token=T + 1), "bad_token", S0),
            no(4000, A, _hello(flags=1, nonce=N ^ 1, token=T ^ 1), "bad_nonce", S0),
            note("reset with good nonce and token but no latch: accepted, nothing changes"),
            ok(5000, A, _hello(flags=1), S0),
            tick(6000, S0, "bad_nonce"),
            ok(7000, A, _arm(1, 7), st(1, 0, T)),
            tick(8000, st(1, 0, T), ""),
            ok(9000, A, GOOD_HELLO, st(1, 0, T)),
            tick(10000, st(1, 0, T), ""),
        ),
    )


def _arm_order() -> Scenario:
    bad_stamp = 500  # far ahead of the car's uptime in every step below
    T1 = T + 1
    return Scenario(
        "arm_checks_in_order",
        "ARM: nonce, token, e-stop latch, health, zero wheels, stamp, bound sender, seq.",
        Boot(ROBOT, N, T),
        (
            ok(10000, X, pkt(ESTOP, nonce=0, token=0), st(0, 1, T1)),
            Health(11000, False, True),
            note("everything wrong: the nonce is reported"),
            no(12000, A, _arm(1, bad_stamp, nonce=N + 1, left=0.5), "bad_nonce", st(0, 1, T1)),
            no(13000, A, _arm(1, bad_stamp, token=T, left=0.5), "bad_token", st(0, 1, T1)),
            no(14000, A, _arm(1, bad_stamp, token=T1, left=0.5), "estop_latched", st(0, 1, T1)),
            ok(15000, A, _hello(flags=1, token=T1), st(0, 0, T1)),
            no(16000, A, _arm(1, bad_stamp, token=T1, left=0.5), "unhealthy", st(0, 0, T1)),
            Health(17000, True, False),
            no(18000, A, _arm(1, bad_stamp, token=T1, left=0.5), "unhealthy", st(0, 0, T1)),
            Health(19000, True, True),
            no(20000, A, _arm(1, bad_stamp, token=T1, left=0.5), "nonzero_wheels", st(0, 0, T1)),
            no(21000, A, _arm(1, bad_stamp, token=T1, right=-0.25), "nonzero_wheels", st(0, 0, T1)),
            no(22000, A, _arm(1, bad_stamp, token=T1), "stale_stamp", st(0, 0, T1)),
            ok(23000, A, _arm(10, 23, token=T1), st(1, 0, T1)),
            note("armed: another sender is not_bound, the bound one needs a newer seq"),
            no(24000, B, _arm(11, 24, token=T1), "not_bound", st(1, 0, T1)),
            no(25000, B, _arm(5, 25, token=T1), "not_bound", st(1, 0, T1)),
            no(26000, A, _arm(10, 26, token=T1), "stale_seq", st(1, 0, T1)),
            no(27000, A, _arm(9, 27, token=T1), "stale_seq", st(1, 0, T1)),
            no(28000, B, _arm(12, bad_stamp, token=T1), "stale_stamp", st(1, 0, T1)),
            ok(29000, A, _drive(11, 0.5, 0.5, token=T1), st(1, 0, T1, 0.5, 0.5)),
            tick(29500, st(1, 0, T1, 0.5, 0.5), "stale_stamp"),
            note("re-ARM by the bound sender: accepted, wheels back to 0, reason cleared"),
            ok(30000, A, _arm(12, 30, token=T1), st(1, 0, T1)),
            tick(31000, st(1, 0, T1), ""),
            no(32000, A, _arm(13, 32, token=T1, left=0.5), "nonzero_wheels", st(1, 0, T1)),
            note("health gates ARM only: an armed car stays armed and keeps driving"),
            Health(33000, True, False),
            no(34000, A, _arm(14, 34, token=T1), "unhealthy", st(1, 0, T1)),
            ok(35000, A, _drive(14, 0.25, 0.25, token=T1), st(1, 0, T1, 0.25, 0.25)),
            tick(36000, st(1, 0, T1, 0.25, 0.25), "unhealthy"),
        ),
    )


def _unhealthy_at_boot() -> Scenario:
    return Scenario(
        "unhealthy_at_boot",
        "A car booting with a bad motor or camera refuses ARM until both are healthy.",
        Boot(ROBOT, N, T, motor_ok=False, camera_ok=True),
        (
            no(1000, A, _arm(1, 1), "unhealthy", S0),
            Health(2000, True, False),
            no(3000, A, _arm(1, 3), "unhealthy", S0),
            Health(4000, False, False),
            no(5000, A, _arm(1, 5), "unhealthy", S0),
            Health(6000, True, True),
            ok(7000, A, _arm(1, 7), st(1, 0, T)),
        ),
    )


def _stamp_window() -> Scenario:
    return Scenario(
        "arm_stamp_window",
        "d = int32(stamp_ms - now_us/1000) must lie in -30..+150, edges included.",
        Boot(ROBOT, N, T),
        (
            note("uptime_ms is 1000 from 1000000 to 1000999 us"),
            no(1_000_000, A, _arm(1, 969), "stale_stamp", S0),
            no(1_000_000, A, _arm(1, 1151), "stale_stamp", S0),
            no(1_000_999, A, _arm(1, 969), "stale_stamp", S0),
            ok(1_000_999, A, _arm(1, 970), st(1, 0, T)),
            note("uptime_ms 1001: +150 accepted, +151 rejected"),
            ok(1_001_000, A, _arm(2, 1151), st(1, 0, T)),
            no(1_001_000, A, _arm(3, 1152), "stale_stamp", st(1, 0, T)),
            no(1_001_000, A, _arm(3, 0), "stale_stamp", st(1, 0, T)),
            note("d = -2^31 and d = 2^31 - 1 are both stale"),
            no(1_001_000, A, _arm(3, 1001 + 2**31), "stale_stamp", st(1, 0, T)),
            no(1_001_000, A, _arm(3, 1001 + 2**31 - 1), "stale_stamp", st(1, 0, T)),
            ok(1_001_999, A, _arm(3, 971), st(1, 0, T)),
        ),
    )


def _stamp_wraps() -> Scenario:
    T1, T2 = T + 1, T + 2
    near_wrap_us = (U32 - 50) * 1000 + 999  # uptime_ms = 2^32 - 50
    past_wrap_us = (U32 + 5) * 1000  # uptime_ms = 2^32 + 5, which is 5 modulo 2^32
    return Scenario(
        "arm_stamp_wraps",
        "The stamp check is modulo 2^32 on both sides of the wrap of uptime_ms.",
        Boot(ROBOT, N, T),
        (
            note("uptime_ms 10: stamp 2^32-21 is d = -31, stamp 2^32-20 is d = -30"),
            no(10_000, A, _arm(1, U32 - 21), "stale_stamp", S0),
            ok(10_000, A, _arm(1, U32 - 20), st(1, 0, T)),
            ok(20_000, X, pkt(STOP), st(0, 0, T1)),
            note("uptime_ms 2^32-50: stamp 101 is d = +151, stamp 100 is d = +150"),
            no(near_wrap_us, A, _arm(2, 101, token=T1), "stale_stamp", st(0, 0, T1)),
            ok(near_wrap_us, A, _arm(2, 100, token=T1), st(1, 0, T1)),
            ok(near_wrap_us, X, pkt(STOP), st(0, 0, T2)),
            note("uptime_ms 2^32+5: stamp 156 is d = +151, 2^32-26 is d = -31, 155 is d = +150"),
            no(past_wrap_us, A, _arm(3, 156, token=T2), "stale_stamp", st(0, 0, T2)),
            no(past_wrap_us, A, _arm(3, U32 - 26, token=T2), "stale_stamp", st(0, 0, T2)),
            ok(past_wrap_us, A, _arm(3, 155, token=T2), st(1, 0, T2)),
        ),
    )


def _drive_order() -> Scenario:
    armed = st(1, 0, T)
    return Scenario(
        "drive_checks_in_order",
        "DRIVE: nonce, token, armed, bound sender, strictly newer unsigned seq.",
        Boot(ROBOT, N, T),
        (
            no(1000, A, _drive(1, 0.5, 0.5, nonce=N + 1, token=T + 1), "bad_nonce", S0),
            no(2000, A, _drive(1, 0.5, 0.5, token=T + 1), "bad_token", S0),
            no(3000, A, _drive(1, 0.5, 0.5), "not_armed", S0),
            no(4000, B, _drive(1, 0.5, 0.5), "not_armed", S0),
            ok(5000, A, _arm(100, 5), armed),
            no(6000, B, _drive(101, 0.5, 0.5), "not_bound", armed),
            note("same host, other port: a different sender"),
            no(7000, A2, _drive(101, 0.5, 0.5), "not_bound", armed),
            no(8000, B, _drive(1, 0.5, 0.5), "not_bound", armed),
            no(9000, B, _drive(101, 0.5, 0.5, token=T + 1), "bad_token", armed),
            no(10000, A, _drive(101, 0.5, 0.5, nonce=N + 1), "bad_nonce", armed),
            no(11000, A, _drive(100, 0.5, 0.5), "stale_seq", armed),
            no(12000, A, _drive(99, 0.5, 0.5), "stale_seq", armed),
            note("DRIVE does not look at the stamp"),
            ok(13000, A, _drive(101, 0.5, -0.25, stamp=U32 - 1), st(1, 0, T, 0.5, -0.25)),
            no(14000, A, _drive(101, 1.0, 1.0), "stale_seq", st(1, 0, T, 0.5, -0.25)),
            note("binary32 wheels are applied as decoded"),
            ok(15000, A, _drive(102, 0.1, -0.7), st(1, 0, T, F32_0_1, -F32_0_7)),
            tick(16000, st(1, 0, T, F32_0_1, -F32_0_7), "stale_seq"),
            ok(17000, A, _drive(U32 - 1, 1.0, -1.0), st(1, 0, T, 1.0, -1.0)),
            note("seq is compared unsigned: no wrap back to 0"),
            no(18000, A, _drive(0, 0.0, 0.0), "stale_seq", st(1, 0, T, 1.0, -1.0)),
            tick(19000, st(1, 0, T, 1.0, -1.0), "stale_seq"),
        ),
    )


def _stop_estop() -> Scenario:
    T1, T2, T3, T4 = T + 1, T + 2, T + 3, T + 4
    garbage: dict[str, Any] = {"nonce": 0xFFFFFFFF, "token": 12345, "seq": 7, "stamp": 99999}
    return Scenario(
        "stop_estop_latch_and_reset",
        "Anyone may STOP or ESTOP with garbage session fields; the latch needs a good reset.",
        Boot(ROBOT, N, T),
        (
            ok(1000, A, _arm(1, 1), st(1, 0, T)),
            ok(2000, A, _drive(2, 0.75, 0.75), st(1, 0, T, 0.75, 0.75)),
            ok(3000, X, pkt(STOP, nonce=0, token=0, left=0.5, right=-1.0), st(0, 0, T1)),
            tick(4000, st(0, 0, T1), "stop"),
            note("the old controller's packets carry the old token"),
            no(5000, A, _drive(3, 0.75, 0.75), "bad_token", st(0, 0, T1)),
            no(6000, A, _arm(3, 6), "bad_token", st(0, 0, T1)),
            note("not armed: ARM accepts any seq"),
            ok(7000, A, _arm(1, 7, token=T1), st(1, 0, T1)),
            ok(8000, X, pkt(ESTOP, **garbage), st(0, 1, T2)),
            tick(9000, st(0, 1, T2), "estop"),
            no(10000, A, _drive(2, 0.5, 0.5, token=T2), "not_armed", st(0, 1, T2)),
            no(11000, A, _arm(2, 11, token=T2), "estop_latched", st(0, 1, T2)),
            note("STOP and ESTOP bump the token when not armed; STOP keeps the latch"),
            ok(12000, X, pkt(STOP, **garbage), st(0, 1, T3)),
            ok(13000, X, pkt(ESTOP, **garbage), st(0, 1, T4)),
            no(14000, A, _hello(flags=1, token=T3), "bad_token", st(0, 1, T4)),
            no(15000, A, _hello(flags=1, nonce=N + 1, token=T4), "bad_nonce", st(0, 1, T4)),
            ok(16000, A, _hello(token=T4), st(0, 1, T4)),
            ok(17000, A, _hello(flags=1, token=T4), st(0, 0, T4)),
            tick(18000, st(0, 0, T4), "bad_nonce"),
            ok(19000, A, _arm(1, 19, token=T4), st(1, 0, T4)),
            tick(20000, st(1, 0, T4), ""),
            note("ESTOP from the bound controller itself, while driving"),
            ok(21000, A, _drive(2, -0.5, 0.5, token=T4), st(1, 0, T4, -0.5, 0.5)),
            ok(22000, A, pkt(ESTOP, token=T4, seq=3), st(0, 1, T4 + 1)),
            tick(23000, st(0, 1, T4 + 1), "estop"),
        ),
    )


def _token_wraps() -> Scenario:
    top = U32 - 1
    return Scenario(
        "token_wraps",
        "The token is a u32: a disarm at 2^32-1 wraps it to 0.",
        Boot(ROBOT, N, top),
        (
            ok(1000, A, _arm(1, 1, token=top), st(1, 0, top)),
            ok(2000, X, pkt(STOP), st(0, 0, 0)),
            ok(3000, A, _arm(2, 3, token=0), st(1, 0, 0)),
            tick(303_000, st(0, 0, 1), "watchdog"),
        ),
    )


def _watchdog_edges() -> Scenario:
    T1 = T + 1
    driving = st(1, 0, T, 0.5, 0.5)
    return Scenario(
        "watchdog_edges",
        "Disarm at the first tick with now_us - last_feed_us >= 300000, not before.",
        Boot(ROBOT, N, T),
        (
            ok(1000, A, _arm(1, 1), st(1, 0, T)),
            ok(50_000, A, _drive(2, 0.5, 0.5), driving),
            tick(100_000, driving, ""),
            tick(349_999, driving, ""),
            tick(350_000, st(0, 0, T1), "watchdog"),
            tick(355_000, st(0, 0, T1), "watchdog"),
            no(360_000, A, _drive(3, 0.5, 0.5), "bad_token", st(0, 0, T1)),
            no(361_000, A, _drive(3, 0.5, 0.5, token=T1), "not_armed", st(0, 0, T1)),
            note("after a disarm ARM starts a new session with any seq"),
            ok(362_000, A, _arm(1, 362, token=T1), st(1, 0, T1)),
            tick(661_999, st(1, 0, T1), ""),
            tick(662_000, st(0, 0, T + 2), "watchdog"),
        ),
    )


def _watchdog_feeds() -> Scenario:
    return Scenario(
        "watchdog_feeds",
        "ARM and accepted DRIVEs feed the watchdog; HELLO and rejected datagrams do not.",
        Boot(ROBOT, N, T),
        (
            ok(1000, A, _arm(1, 1), st(1, 0, T)),
            ok(200_000, A, GOOD_HELLO, st(1, 0, T)),
            no(250_000, A, _drive(1, 0.5, 0.5), "stale_seq", st(1, 0, T)),
            no(260_000, B, _drive(2, 0.5, 0.5), "not_bound", st(1, 0, T)),
            tick(300_999, st(1, 0, T), "not_bound"),
            tick(301_000, st(0, 0, T + 1), "watchdog"),
        ),
    )


def _watchdog_only_ticks() -> Scenario:
    late = st(1, 0, T, 0.5, 0.5)
    return Scenario(
        "watchdog_runs_only_on_tick",
        "The watchdog is the tick's job: with no tick since ARM, a late DRIVE still feeds it.",
        Boot(ROBOT, N, T),
        (
            ok(1000, A, _arm(1, 1), st(1, 0, T)),
            ok(500_000, A, _drive(2, 0.5, 0.5), late),
            tick(500_001, late, ""),
            tick(799_999, late, ""),
            tick(800_000, st(0, 0, T + 1), "watchdog"),
        ),
    )


def _second_controller() -> Scenario:
    T1 = T + 1
    return Scenario(
        "second_controller",
        "A second controller cannot drive or arm a bound car, but can stop it.",
        Boot(ROBOT, N, T),
        (
            ok(1000, A, _arm(1, 1), st(1, 0, T)),
            ok(2000, A, _drive(2, 0.5, 0.5), st(1, 0, T, 0.5, 0.5)),
            ok(3000, B, GOOD_HELLO, st(1, 0, T, 0.5, 0.5)),
            no(4000, B, _drive(1000, 1.0, 1.0), "not_bound", st(1, 0, T, 0.5, 0.5)),
            no(5000, B, _arm(1000, 5), "not_bound", st(1, 0, T, 0.5, 0.5)),
            ok(6000, A, _drive(3, 0.25, 0.25), st(1, 0, T, 0.25, 0.25)),
            ok(7000, B, pkt(STOP, seq=1001), st(0, 0, T1)),
            no(8000, A, _drive(4, 0.25, 0.25), "bad_token", st(0, 0, T1)),
            ok(9000, B, _arm(1, 9, token=T1), st(1, 0, T1)),
            no(10000, A, _drive(5, 0.25, 0.25, token=T1), "not_bound", st(1, 0, T1)),
            ok(11000, B, _drive(2, -0.5, 0.5, token=T1), st(1, 0, T1, -0.5, 0.5)),
            tick(12000, st(1, 0, T1, -0.5, 0.5), "not_bound"),
        ),
    )


def _zero_wheels() -> Scenario:
    return Scenario(
        "negative_zero_wheels",
        "-0.0 is zero for ARM; the smallest subnormal is not.",
        Boot(ROBOT, N, T),
        (
            ok(1000, A, _arm(1, 1, left=-0.0, right=-0.0), st(1, 0, T)),
            ok(2000, A, _drive(2, -0.0, 0.0), st(1, 0, T, -0.0, 0.0)),
            no(3000, A, _arm(3, 3, left=TINY), "nonzero_wheels", st(1, 0, T, -0.0, 0.0)),
            no(4000, A, _arm(3, 4, right=-TINY), "nonzero_wheels", st(1, 0, T, -0.0, 0.0)),
            ok(5000, A, _arm(3, 5, left=0.0, right=-0.0), st(1, 0, T)),
        ),
    )


def _rejections_keep_session() -> Scenario:
    driving = st(1, 0, T, 0.5, 0.5)
    return Scenario(
        "rejections_keep_the_session",
        "A rejected datagram changes nothing but reason, even on an armed, driving car.",
        Boot(ROBOT, N, T),
        (
            ok(1000, A, _arm(1, 1), st(1, 0, T)),
            ok(2000, A, _drive(2, 0.5, 0.5), driving),
            no(3000, A, b"", "bad_length", driving),
            no(4000, A, pkt(DRIVE, seq=3, magic=b"MZ00"), "bad_magic", driving),
            no(5000, X, pkt(STOP, rid=8), "wrong_robot", driving),
            no(6000, A, _drive(3, NAN, 0.0), "bad_wheels", driving),
            no(7000, X, pkt(ESTOP, flags=1), "bad_flags", driving),
            no(8000, A, pkt(7, seq=3), "bad_kind", driving),
            tick(9000, driving, "bad_kind"),
            ok(10000, A, _drive(3, -0.5, -0.5), st(1, 0, T, -0.5, -0.5)),
            tick(11000, st(1, 0, T, -0.5, -0.5), "bad_kind"),
        ),
    )


def _probes() -> Scenario:
    request = bytes.fromhex("4d5a4331deadbeef")
    return Scenario(
        "clock_probe",
        "MZC1 + u32 id gets MZC1 + id + u64 uptime in us; anything else gets no reply.",
        Boot(ROBOT, N, T),
        (
            Probe(123_456_789, request, bytes.fromhex("4d5a4331deadbeef00000000075bcd15")),
            Probe(123_456_790, b"", None),
            Probe(123_456_791, request[:7], None),
            Probe(123_456_792, request + b"\x00", None),
            Probe(123_456_793, bytes.fromhex("4d5a4331deadbeef00000000075bcd15"), None),
            Probe(123_456_794, bytes.fromhex("4d5a4332deadbeef"), None),
            Probe(123_456_795, bytes.fromhex("4d5a3031deadbeef"), None),
            note("a probe request sent to the command port is just a short datagram"),
            no(123_456_796, A, request, "bad_length", S0),
            Probe(
                2**40 + 1,
                bytes.fromhex("4d5a433100000000"),
                bytes.fromhex("4d5a4331000000000000010000000001"),
            ),
            tick(2**40 + 2, S0, "bad_length"),
        ),
    )


def scenarios() -> tuple[Scenario, ...]:
    """Every scenario, in file order."""
    return (
        _codec_reasons(),
        _wrong_robot(),
        _hello_rules(),
        _arm_order(),
        _unhealthy_at_boot(),
        _stamp_window(),
        _stamp_wraps(),
        _drive_order(),
        _stop_estop(),
        _token_wraps(),
        _watchdog_edges(),
        _watchdog_feeds(),
        _watchdog_only_ticks(),
        _second_controller(),
        _zero_wheels(),
        _rejections_keep_session(),
        _probes(),
    )


# -- rendering and loading --------------------------------------------------------


def _f32(x: float) -> float:
    return float(struct.unpack(">f", struct.pack(">f", x))[0])


def _g9(x: float) -> str:
    return "%.9g" % x  # noqa: UP031  (the exact C printf format MZ01.md names)


def _hex(data: bytes) -> str:
    return data.hex() if data else "-"


def _step_to_json(step: Step) -> dict[str, Any]:
    if isinstance(step, Note):
        return {"op": "note", "text": step.text}
    if isinstance(step, Health):
        return {
            "op": "health", "t_us": step.t_us,
            "motor_ok": step.motor_ok, "camera_ok": step.camera_ok,
        }  # fmt: skip
    if isinstance(step, Probe):
        reply = None if step.reply is None else step.reply.hex()
        return {
            "op": "probe", "t_us": step.t_us,
            "request_hex": step.request.hex(), "reply_hex": reply,
        }  # fmt: skip
    s = step.state
    state = {"armed": s.armed, "estop": s.estop, "token": s.token, "left": s.left, "right": s.right}
    if isinstance(step, Tick):
        return {"op": "tick", "t_us": step.t_us, **state, "reason": step.reason}
    return {
        "op": "rx", "t_us": step.t_us, "src": list(step.src), "hex": step.data.hex(),
        "verdict": "accept" if step.accept else "reject", "reason": step.reason, **state,
    }  # fmt: skip


def _boot_to_json(b: Boot) -> dict[str, Any]:
    return {
        "robot_id": b.robot_id, "nonce": b.nonce, "token": b.token,
        "motor_ok": b.motor_ok, "camera_ok": b.camera_ok,
    }  # fmt: skip


def render_json(items: Sequence[Scenario]) -> str:
    """The canonical JSON: one step per line, so diffs stay readable."""
    dump = json.dumps
    lines = ["{", f'  "format": {dump(FORMAT)},', '  "spec": "protocol/MZ01.md",']
    lines.append('  "scenarios": [')
    for i, sc in enumerate(items):
        lines += [
            "    {",
            f'      "name": {dump(sc.name)},',
            f'      "doc": {dump(sc.doc)},',
            f'      "boot": {dump(_boot_to_json(sc.boot))},',
            '      "steps": [',
        ]
        steps = [dump(_step_to_json(step), allow_nan=False) for step in sc.steps]
        lines += [f"        {text}," for text in steps[:-1]] + [f"        {steps[-1]}"]
        lines += ["      ]", "    }" + ("," if i < len(items) - 1 else "")]
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def _bit(flag: bool) -> str:
    return "1" if flag else "0"


def _state_txt(s: State) -> str:
    return f"{_bit(s.armed)} {_bit(s.estop)} {s.token} {_g9(s.left)} {_g9(s.right)}"


def _step_to_txt(step: Step) -> str:
    if isinstance(step, Note):
        return f"# {step.text}"
    if isinstance(step, Health):
        return f"health {step.t_us} {_bit(step.motor_ok)} {_bit(step.camera_ok)}"
    if isinstance(step, Probe):
        reply = "-" if step.reply is None else _hex(step.reply)
        return f"probe {step.t_us} {_hex(step.request)} {reply}"
    if isinstance(step, Tick):
        return f"tick {step.t_us} {_state_txt(step.state)} {step.reason or '-'}"
    verdict = "accept" if step.accept else "reject"
    host, port = step.src
    return (
        f"rx {step.t_us} {host} {port} {_hex(step.data)} {verdict} {step.reason or '-'} "
        f"{_state_txt(step.state)}"
    )


def render_txt(items: Sequence[Scenario]) -> str:
    """The line format of MZ01.md, "Golden vectors"."""
    lines = [
        "# MZ01 golden vectors, written by `python -m protocol.mz01.vectors`; do not edit.",
        "# The same content as mz01_vectors.json; the format is in protocol/MZ01.md.",
    ]
    for sc in items:
        b = sc.boot
        lines += [
            f"scenario {sc.name}",
            f"# {sc.doc}",
            f"boot {b.robot_id} {b.nonce} {b.token} {_bit(b.motor_ok)} {_bit(b.camera_ok)}",
        ]
        lines += [_step_to_txt(step) for step in sc.steps]
        lines.append("end")
    return "\n".join(lines) + "\n"


def _state_from_json(d: dict[str, Any]) -> State:
    return State(d["armed"], d["estop"], d["token"], float(d["left"]), float(d["right"]))


def _step_from_json(d: dict[str, Any]) -> Step:
    op = d["op"]
    if op == "note":
        return Note(d["text"])
    if op == "health":
        return Health(d["t_us"], d["motor_ok"], d["camera_ok"])
    if op == "probe":
        reply = None if d["reply_hex"] is None else bytes.fromhex(d["reply_hex"])
        return Probe(d["t_us"], bytes.fromhex(d["request_hex"]), reply)
    if op == "tick":
        return Tick(d["t_us"], _state_from_json(d), d["reason"])
    if op == "rx":
        host, port = d["src"]
        accept = {"accept": True, "reject": False}[d["verdict"]]
        data = bytes.fromhex(d["hex"])
        return Rx(d["t_us"], (host, port), data, accept, d["reason"], _state_from_json(d))
    raise ValueError(f"unknown op {op!r}")


def load_json(text: str) -> tuple[Scenario, ...]:
    """Scenarios from the canonical JSON."""
    doc = json.loads(text)
    if doc.get("format") != FORMAT:
        raise ValueError(f"not {FORMAT}: {doc.get('format')!r}")
    out = []
    for sc in doc["scenarios"]:
        b = sc["boot"]
        boot = Boot(b["robot_id"], b["nonce"], b["token"], b["motor_ok"], b["camera_ok"])
        steps = tuple(_step_from_json(s) for s in sc["steps"])
        out.append(Scenario(sc["name"], sc["doc"], boot, steps))
    return tuple(out)


def _unhex(field: str) -> bytes:
    return b"" if field == "-" else bytes.fromhex(field)


def _flag(field: str) -> bool:
    return {"0": False, "1": True}[field]


def _state_from_txt(f: Sequence[str]) -> State:
    armed, estop, token, left, right = f
    return State(_flag(armed), _flag(estop), int(token), _f32(float(left)), _f32(float(right)))


def load_txt(text: str) -> tuple[Scenario, ...]:
    """Scenarios from the line format, as a C reader would see them."""
    out: list[Scenario] = []
    name: str | None = None
    doc = ""
    boot: Boot | None = None
    steps: list[Step] = []
    for line in text.splitlines():
        if line.startswith("#"):
            if name is not None and boot is None:
                doc = line[2:]
            elif name is not None:
                steps.append(Note(line[2:]))
            continue
        f = line.split(" ")
        op, args = f[0], f[1:]
        if op == "scenario":
            name, doc, boot, steps = args[0], "", None, []
        elif op == "boot":
            rid, nonce, token, motor, camera = args
            boot = Boot(int(rid), int(nonce), int(token), _flag(motor), _flag(camera))
        elif op == "health":
            steps.append(Health(int(args[0]), _flag(args[1]), _flag(args[2])))
        elif op == "probe":
            reply = None if args[2] == "-" else _unhex(args[2])
            steps.append(Probe(int(args[0]), _unhex(args[1]), reply))
        elif op == "tick":
            reason = "" if args[6] == "-" else args[6]
            steps.append(Tick(int(args[0]), _state_from_txt(args[1:6]), reason))
        elif op == "rx":
            t_us, host, port, hexdata, verdict, reason = args[:6]
            accept = {"accept": True, "reject": False}[verdict]
            state = _state_from_txt(args[6:11])
            rejected = "" if reason == "-" else reason
            steps.append(Rx(int(t_us), (host, int(port)), _unhex(hexdata), accept, rejected, state))
        elif op == "end":
            if name is None or boot is None:
                raise ValueError("end without scenario and boot")
            out.append(Scenario(name, doc, boot, tuple(steps)))
            name, boot = None, None
        else:
            raise ValueError(f"unknown record {op!r}")
    return tuple(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    args = parser.parse_args(argv)
    items = scenarios()
    outputs = {JSON_PATH: render_json(items), TXT_PATH: render_txt(items)}
    if args.check:
        stale = [p for p, text in outputs.items() if not p.exists() or p.read_text() != text]
        for path in stale:
            print(f"out of date: {path}", file=sys.stderr)
        return 1 if stale else 0
    VECTOR_DIR.mkdir(parents=True, exist_ok=True)
    for path, text in outputs.items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
