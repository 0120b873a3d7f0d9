"""The MZ01 golden scenarios, every outcome written by hand from MZ01.md.

Nothing here runs the firmware model. Datagrams are packed with ``struct``
straight from MZ01.md's table. :class:`Car` carries the expected state from
step to step; each accepted step and tick names what it changes, so the
whole state is spelled out without repeating it. The only rules applied
generically are MZ01.md's own one-liners: a rejection changes nothing but
``reason`` and sends nothing; a disarm is wheels 0, unarmed, unbound, token
+ 1, reason.
"""

from __future__ import annotations

import struct
from dataclasses import replace
from typing import Any

from tools.vectors.mz01_format import (
    Address,
    Boot,
    Health,
    Note,
    Rx,
    Scenario,
    State,
    Step,
    Tick,
)

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
BELOW_ONE = 0.999999940395355224609375  # the binary32 right before 1.0 (0x3f7fffff)
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


def wheel_bits(data: bytes, left: int, right: int) -> bytes:
    """``data`` with its wheels replaced by these binary32 bit patterns."""
    return data[:24] + struct.pack(">II", left, right)


def _hello(**kw: Any) -> bytes:
    return pkt(HELLO, **kw)


def _arm(seq: int, stamp: int, **kw: Any) -> bytes:
    return pkt(ARM, seq=seq, stamp=stamp, **kw)


def _drive(seq: int, left: float, right: float, stamp: int, **kw: Any) -> bytes:
    return pkt(DRIVE, seq=seq, left=left, right=right, stamp=stamp, **kw)


GOOD_HELLO = _hello()


def armed(src: Address, seq: int, feed: int) -> dict[str, Any]:
    """What an accepted ARM sets (MZ01.md), with its lease start ``feed``."""
    return {
        "armed": True, "bound": src, "last_seq": seq, "left": 0.0, "right": 0.0,
        "last_feed_us": feed, "reason": "",
    }  # fmt: skip


def driven(seq: int, left: float, right: float, feed: int) -> dict[str, Any]:
    """What an accepted DRIVE sets, with its lease start ``feed``."""
    return {"left": left, "right": right, "last_seq": seq, "last_feed_us": feed}


class Car:
    """The expected car state, carried from step to step."""

    def __init__(self, boot: Boot) -> None:
        self.boot = boot
        self.state = State(token=boot.token, motor_ok=boot.motor_ok, camera_ok=boot.camera_ok)

    def ok(self, t_us: int, src: Address, data: bytes, *, sent: tuple[Address, ...] = (),
           **change: Any) -> Rx:
        self.state = replace(self.state, **change)
        return Rx(t_us, src, data, True, "", self.state, sent)

    def no(self, t_us: int, src: Address, data: bytes, reason: str) -> Rx:
        self.state = replace(self.state, reason=reason)
        return Rx(t_us, src, data, False, reason, self.state, ())

    def tick(self, t_us: int, *, sent: tuple[Address, ...] = (), **change: Any) -> Tick:
        self.state = replace(self.state, **change)
        return Tick(t_us, self.state, sent)

    def health(self, t_us: int, motor_ok: bool, camera_ok: bool) -> Health:
        self.state = replace(self.state, motor_ok=motor_ok, camera_ok=camera_ok)
        return Health(t_us, motor_ok, camera_ok)

    def disarm(self, reason: str) -> dict[str, Any]:
        return {
            "armed": False, "bound": None, "left": 0.0, "right": 0.0,
            "token": (self.state.token + 1) % U32, "reason": reason,
        }  # fmt: skip

    def scenario(self, name: str, doc: str, *steps: Step) -> Scenario:
        return Scenario(name, doc, self.boot, steps)


def note(text: str) -> Note:
    return Note(text)


def _codec_reasons() -> Scenario:
    c = Car(Boot(ROBOT, N, T))
    return c.scenario(
        "codec_reasons_in_order",
        "Every codec reason, and that the first failing check in MZ01.md's order wins.",
        note("length first: empty, 31, 33 and 64 bytes"),
        c.no(1000, A, b"", "bad_length"),
        c.no(2000, A, GOOD_HELLO[:31], "bad_length"),
        c.no(3000, A, GOOD_HELLO + b"\x00", "bad_length"),
        c.no(4000, A, GOOD_HELLO + GOOD_HELLO, "bad_length"),
        note("magic before kind, flags and wheels, on a STOP too"),
        c.no(5000, A, pkt(9, flags=0xFFFF, left=NAN, magic=b"MZ02"), "bad_magic"),
        c.no(6000, A, pkt(HELLO, magic=b"mz01"), "bad_magic"),
        c.no(6500, X, pkt(STOP, magic=b"MZ00"), "bad_magic"),
        note("kind outside 1..5 before flags and wheels"),
        c.no(7000, A, pkt(0, flags=0x0002, left=NAN), "bad_kind"),
        c.no(8000, A, pkt(6), "bad_kind"),
        c.no(9000, A, pkt(255), "bad_kind"),
        note("flags (HELLO, ARM, DRIVE): any bit but bit 0, or bit 0 on ARM or DRIVE"),
        c.no(10000, A, _hello(flags=0x0002, left=NAN), "bad_flags"),
        c.no(11000, A, _hello(flags=0x8000), "bad_flags"),
        c.no(12000, A, _arm(1, 12, flags=0x0001), "bad_flags"),
        c.no(13000, A, _drive(1, 0.0, 0.0, 13, flags=0x0001), "bad_flags"),
        note("wheels: not finite or outside [-1, 1]; codec checks come before wrong_robot"),
        c.no(16000, A, _arm(1, 16, rid=9, left=NAN), "bad_wheels"),
        c.no(17000, A, _drive(1, 0.0, INF, 17), "bad_wheels"),
        c.no(18000, A, _drive(1, -INF, 0.0, 18), "bad_wheels"),
        c.no(19000, A, _drive(1, ABOVE_ONE, 0.0, 19), "bad_wheels"),
        c.no(20000, A, _drive(1, 0.0, -ABOVE_ONE, 20), "bad_wheels"),
        note("a signalling NaN and a negative NaN with a payload, on a HELLO"),
        c.no(21000, A, wheel_bits(GOOD_HELLO, 0x7F800001, 0), "bad_wheels"),
        c.no(22000, A, wheel_bits(GOOD_HELLO, 0, 0xFFC00001), "bad_wheels"),
        c.tick(25000),
        note("exactly -1 and 1, the float below 1 and the smallest subnormal pass the codec"),
        c.no(26000, A, _drive(1, 1.0, -1.0, 26), "not_armed"),
        c.no(27000, A, _drive(1, BELOW_ONE, -TINY, 27), "not_armed"),
        c.tick(30000),
    )


def _wrong_robot() -> Scenario:
    c = Car(Boot(ROBOT, N, T))
    return c.scenario(
        "wrong_robot_and_any_car",
        "robot_id must be the car's; HELLO, STOP and ESTOP may use 0 for any car.",
        c.ok(1000, A, _hello(rid=0), sent=(A,), telemetry_to=A),
        c.ok(2000, A, _hello(rid=ROBOT), sent=(A,)),
        c.no(3000, A, _hello(rid=8), "wrong_robot"),
        c.no(4000, A, _arm(1, 4, rid=0), "wrong_robot"),
        note("wrong_robot comes before the nonce check"),
        c.no(5000, A, _arm(1, 5, rid=8, nonce=N + 1), "wrong_robot"),
        c.no(6000, A, _drive(1, 0.5, 0.5, 6, rid=0), "wrong_robot"),
        note("STOP and ESTOP to another car's id are refused: no bump, no latch"),
        c.no(7000, X, pkt(STOP, rid=8), "wrong_robot"),
        c.no(8000, X, pkt(ESTOP, rid=255), "wrong_robot"),
        note("HELLO to id 0 with the reset flag still checks nonce and token"),
        c.ok(9000, A, _hello(rid=0, flags=1), sent=(A,)),
        c.no(10000, A, _hello(rid=0, flags=1, nonce=N + 1), "bad_nonce"),
        c.tick(15000),
    )


def _hello_rules() -> Scenario:
    c = Car(Boot(ROBOT, N, T))
    return c.scenario(
        "hello",
        "HELLO ignores the session fields unless flag bit 0 is set; it never changes reason.",
        c.ok(1000, X, _hello(nonce=1, token=2, seq=3, stamp=4, left=0.5, right=-0.5),
             sent=(X,), telemetry_to=X),
        c.no(2000, A, _hello(flags=1, nonce=N + 1), "bad_nonce"),
        c.no(3000, A, _hello(flags=1, token=T + 1), "bad_token"),
        c.no(4000, A, _hello(flags=1, nonce=N ^ 1, token=T ^ 1), "bad_nonce"),
        note("reset with good nonce and token but no latch: accepted, reason kept"),
        c.ok(5000, A, _hello(flags=1), sent=(A,), telemetry_to=A),
        c.tick(6000),
        c.ok(7000, A, _arm(1, 7), **armed(A, 1, 7000)),
        c.tick(8000),
        c.ok(9000, A, GOOD_HELLO, sent=(A,)),
        note("another sender's HELLO takes telemetry_to; the bound controller drives on"),
        c.ok(9500, B, GOOD_HELLO, sent=(B,), telemetry_to=B),
        c.tick(10000),
        note("periodic telemetry: telemetry_to first, then the bound controller"),
        c.tick(100_000, sent=(B, A), last_telemetry_us=100_000),
    )


def _arm_order() -> Scenario:
    bad_stamp = 500  # far ahead of the car's uptime in every step below
    c = Car(Boot(ROBOT, N, T))
    T1 = T + 1
    return c.scenario(
        "arm_checks_in_order",
        "ARM: nonce, token, e-stop latch, health, zero wheels, stamp, bound sender, seq.",
        c.ok(10000, X, pkt(ESTOP, nonce=0, token=0), estop=True, **c.disarm("estop")),
        c.health(11000, False, True),
        note("everything wrong: the nonce is reported"),
        c.no(12000, A, _arm(1, bad_stamp, nonce=N + 1, left=0.5), "bad_nonce"),
        c.no(13000, A, _arm(1, bad_stamp, token=T, left=0.5), "bad_token"),
        c.no(14000, A, _arm(1, bad_stamp, token=T1, left=0.5), "estop_latched"),
        c.ok(15000, A, _hello(flags=1, token=T1), sent=(A,), estop=False, telemetry_to=A),
        c.no(16000, A, _arm(1, bad_stamp, token=T1, left=0.5), "unhealthy"),
        c.health(17000, True, False),
        c.no(18000, A, _arm(1, bad_stamp, token=T1, left=0.5), "unhealthy"),
        c.health(19000, True, True),
        c.no(20000, A, _arm(1, bad_stamp, token=T1, left=0.5), "nonzero_wheels"),
        c.no(21000, A, _arm(1, bad_stamp, token=T1, right=-0.25), "nonzero_wheels"),
        c.no(22000, A, _arm(1, bad_stamp, token=T1), "stale_stamp"),
        c.ok(23000, A, _arm(10, 23, token=T1), **armed(A, 10, 23000)),
        note("armed: another sender is not_bound, the bound one needs a newer seq"),
        c.no(24000, B, _arm(11, 24, token=T1), "not_bound"),
        c.no(25000, B, _arm(5, 25, token=T1), "not_bound"),
        c.no(26000, A, _arm(10, 26, token=T1), "stale_seq"),
        c.no(27000, A, _arm(9, 27, token=T1), "stale_seq"),
        c.no(28000, B, _arm(12, bad_stamp, token=T1), "stale_stamp"),
        c.ok(29000, A, _drive(11, 0.5, 0.5, 29, token=T1), **driven(11, 0.5, 0.5, 29000)),
        c.tick(29500),
        note("re-ARM by the bound sender: accepted, wheels back to 0, reason cleared"),
        c.ok(30000, A, _arm(12, 30, token=T1), **armed(A, 12, 30000)),
        c.tick(31000),
        c.no(32000, A, _arm(13, 32, token=T1, left=0.5), "nonzero_wheels"),
        note("health gates ARM; an armed car that lost it is disarmed at the next tick"),
        c.health(33000, True, False),
        c.no(34000, A, _arm(14, 34, token=T1), "unhealthy"),
        c.ok(35000, A, _drive(14, 0.25, 0.25, 35, token=T1), **driven(14, 0.25, 0.25, 35000)),
        c.tick(36000, sent=(A,), **c.disarm("unhealthy")),
    )


def _unhealthy_at_boot() -> Scenario:
    c = Car(Boot(ROBOT, N, T, motor_ok=False, camera_ok=True))
    return c.scenario(
        "unhealthy_at_boot",
        "A car booting with a bad motor or camera refuses ARM until both are healthy.",
        c.no(1000, A, _arm(1, 1), "unhealthy"),
        c.health(2000, True, False),
        c.no(3000, A, _arm(1, 3), "unhealthy"),
        c.health(4000, False, False),
        c.no(5000, A, _arm(1, 5), "unhealthy"),
        c.health(6000, True, True),
        c.ok(7000, A, _arm(1, 7), **armed(A, 1, 7000)),
    )


def _stamp_window() -> Scenario:
    c = Car(Boot(ROBOT, N, T))
    return c.scenario(
        "arm_stamp_window",
        "d = int32(stamp_ms - now_us/1000) must lie in -100..+30, edges included; the lease "
        "starts at the stamp when it is in the past.",
        note("uptime_ms is 1000 from 1000000 to 1000999 us"),
        c.no(1_000_000, A, _arm(1, 899), "stale_stamp"),
        c.no(1_000_000, A, _arm(1, 1031), "stale_stamp"),
        c.no(1_000_999, A, _arm(1, 899), "stale_stamp"),
        note("d = -100: accepted; the lease started 100 ms ago"),
        c.ok(1_000_999, A, _arm(1, 900), **armed(A, 1, 900_999)),
        note("uptime_ms 1001: +30 accepted with the lease from now, +31 rejected"),
        c.ok(1_001_000, A, _arm(2, 1031), **armed(A, 2, 1_001_000)),
        c.no(1_001_000, A, _arm(3, 1032), "stale_stamp"),
        c.no(1_001_000, A, _arm(3, 0), "stale_stamp"),
        note("d = -2^31 and d = 2^31 - 1 are both stale"),
        c.no(1_001_000, A, _arm(3, 1001 + 2**31), "stale_stamp"),
        c.no(1_001_000, A, _arm(3, 1001 + 2**31 - 1), "stale_stamp"),
        c.ok(1_001_999, A, _arm(3, 901), **armed(A, 3, 901_999)),
        note("the watchdog counts 300 ms from the lease start 901999"),
        c.tick(1_201_998, sent=(A,), last_telemetry_us=1_201_998),
        c.tick(1_201_999, sent=(A,), **c.disarm("watchdog")),
    )


def _stamp_wraps() -> Scenario:
    near_wrap_us = (U32 - 20) * 1000 + 999  # uptime_ms = 2^32 - 20
    past_wrap_us = (U32 + 5) * 1000  # uptime_ms = 2^32 + 5, which is 5 modulo 2^32
    c = Car(Boot(ROBOT, N, T))
    T1, T2 = T + 1, T + 2
    return c.scenario(
        "arm_stamp_wraps",
        "The stamp check is modulo 2^32 on both sides of the wrap of uptime_ms.",
        note("uptime_ms 10: stamp 2^32-91 is d = -101, 2^32-90 is d = -100;"),
        note("that lease would start before boot, so it starts at 0"),
        c.no(10_000, A, _arm(1, U32 - 91), "stale_stamp"),
        c.ok(10_000, A, _arm(1, U32 - 90), **armed(A, 1, 0)),
        c.ok(20_000, X, pkt(STOP), sent=(A,), **c.disarm("stop")),
        note("uptime_ms 2^32-20: stamp 11 is d = +31, stamp 10 is d = +30"),
        c.no(near_wrap_us, A, _arm(2, 11, token=T1), "stale_stamp"),
        c.ok(near_wrap_us, A, _arm(2, 10, token=T1), **armed(A, 2, near_wrap_us)),
        c.ok(near_wrap_us, X, pkt(STOP), sent=(A,), **c.disarm("stop")),
        note("uptime_ms 2^32+5: stamp 36 is d = +31, 2^32-96 is d = -101, 35 is d = +30"),
        c.no(past_wrap_us, A, _arm(3, 36, token=T2), "stale_stamp"),
        c.no(past_wrap_us, A, _arm(3, U32 - 96, token=T2), "stale_stamp"),
        c.ok(past_wrap_us, A, _arm(3, 35, token=T2), **armed(A, 3, past_wrap_us)),
        note("a DRIVE stamped 2^32-95 (d = -100, across the wrap): lease from 100 ms ago"),
        c.ok(past_wrap_us, A, _drive(4, 0.5, 0.5, U32 - 95, token=T2),
             **driven(4, 0.5, 0.5, past_wrap_us - 100_000)),
    )


def _drive_order() -> Scenario:
    c = Car(Boot(ROBOT, N, T))
    return c.scenario(
        "drive_checks_in_order",
        "DRIVE: nonce, token, armed, fresh stamp, bound sender, strictly newer unsigned seq.",
        c.no(1000, A, _drive(1, 0.5, 0.5, 500, nonce=N + 1, token=T + 1), "bad_nonce"),
        c.no(2000, A, _drive(1, 0.5, 0.5, 500, token=T + 1), "bad_token"),
        c.no(3000, A, _drive(1, 0.5, 0.5, 500), "not_armed"),
        c.no(4000, B, _drive(1, 0.5, 0.5, 4), "not_armed"),
        c.ok(5000, A, _arm(100, 5), **armed(A, 100, 5000)),
        note("a stale stamp is reported before the sender and the seq"),
        c.no(6000, B, _drive(1, 0.5, 0.5, 500), "stale_stamp"),
        c.no(6500, A, _drive(100, 0.5, 0.5, 500), "stale_stamp"),
        c.no(7000, B, _drive(101, 0.5, 0.5, 7), "not_bound"),
        note("same host, other port: a different sender"),
        c.no(8000, A2, _drive(101, 0.5, 0.5, 8), "not_bound"),
        c.no(9000, B, _drive(1, 0.5, 0.5, 9), "not_bound"),
        c.no(10000, B, _drive(101, 0.5, 0.5, 10, token=T + 1), "bad_token"),
        c.no(11000, A, _drive(101, 0.5, 0.5, 11, nonce=N + 1), "bad_nonce"),
        c.no(12000, A, _drive(100, 0.5, 0.5, 12), "stale_seq"),
        c.no(13000, A, _drive(99, 0.5, 0.5, 13), "stale_seq"),
        c.ok(14000, A, _drive(101, 0.5, -0.25, 14), **driven(101, 0.5, -0.25, 14000)),
        c.no(15000, A, _drive(101, 1.0, 1.0, 15), "stale_seq"),
        note("binary32 wheels are applied as decoded"),
        c.ok(16000, A, _drive(102, 0.1, -0.7, 16), **driven(102, F32_0_1, -F32_0_7, 16000)),
        c.tick(17000),
        c.ok(18000, A, _drive(U32 - 1, 1.0, -1.0, 18), **driven(U32 - 1, 1.0, -1.0, 18000)),
        note("seq is compared unsigned: no wrap back to 0"),
        c.no(19000, A, _drive(0, 0.0, 0.0, 19), "stale_seq"),
        c.tick(20000),
    )


def _drive_stamp() -> Scenario:
    c = Car(Boot(ROBOT, N, T))
    T1, T2 = T + 1, T + 2
    return c.scenario(
        "drive_stamp_and_lease",
        "A DRIVE must be fresh (d in -100..+30); it drives for 300 ms after its own stamp, "
        "however late it arrives.",
        c.ok(1_000_000, A, _arm(1, 1000), **armed(A, 1, 1_000_000)),
        note("uptime_ms 1050: the newest seq 101 ms late, or 31 ms ahead, is refused"),
        c.no(1_050_000, A, _drive(2, 0.5, 0.5, 949), "stale_stamp"),
        c.no(1_050_000, A, _drive(2, 0.5, 0.5, 1081), "stale_stamp"),
        note("100 ms late is accepted, but its lease started at its stamp"),
        c.ok(1_050_000, A, _drive(2, 0.5, 0.5, 950), **driven(2, 0.5, 0.5, 950_000)),
        c.tick(1_249_999, sent=(A,), last_telemetry_us=1_249_999),
        c.tick(1_250_000, sent=(A,), **c.disarm("watchdog")),
        note("a stamp ahead of the car starts the lease now, not later"),
        c.ok(1_300_000, A, _arm(1, 1300, token=T1), **armed(A, 1, 1_300_000)),
        c.ok(1_310_000, A, _drive(2, -0.5, -0.5, 1340, token=T1),
             **driven(2, -0.5, -0.5, 1_310_000)),
        c.tick(1_609_999, sent=(A,), last_telemetry_us=1_609_999),
        c.tick(1_610_000, sent=(A,), **c.disarm("watchdog")),
        note("a newer DRIVE with an older stamp shortens the lease: the newest one counts"),
        c.ok(2_000_000, A, _arm(1, 2000, token=T2), **armed(A, 1, 2_000_000)),
        c.ok(2_010_000, A, _drive(2, 0.5, 0.5, 2010, token=T2), **driven(2, 0.5, 0.5, 2_010_000)),
        c.ok(2_020_000, A, _drive(3, 0.25, 0.25, 1930, token=T2),
             **driven(3, 0.25, 0.25, 1_930_000)),
        c.tick(2_229_999, sent=(A,), last_telemetry_us=2_229_999),
        c.tick(2_230_000, sent=(A,), **c.disarm("watchdog")),
    )


def scenarios() -> tuple[Scenario, ...]:
    """Part one, in file order (part two: :mod:`tools.vectors.mz01_scenarios_stop`)."""
    return (
        _codec_reasons(),
        _wrong_robot(),
        _hello_rules(),
        _arm_order(),
        _unhealthy_at_boot(),
        _stamp_window(),
        _stamp_wraps(),
        _drive_order(),
        _drive_stamp(),
    )
