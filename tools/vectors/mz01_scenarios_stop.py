"""MZ01 golden scenarios, part two: STOP and ESTOP, the watchdog, health, disarm telemetry.

Written by hand from MZ01.md like part one (:mod:`tools.vectors.mz01_scenarios`,
which holds the builder and says how to read these).
"""

from __future__ import annotations

from typing import Any

from tools.vectors.mz01_format import Boot, Probe, Scenario
from tools.vectors.mz01_scenarios import (
    ABOVE_ONE,
    DRIVE,
    ESTOP,
    GOOD_HELLO,
    INF,
    NAN,
    ROBOT,
    STOP,
    TINY,
    U32,
    A,
    B,
    Car,
    N,
    T,
    X,
    _arm,
    _drive,
    _hello,
    armed,
    driven,
    note,
    pkt,
    wheel_bits,
)


def _stop_estop() -> Scenario:
    garbage: dict[str, Any] = {"nonce": 0xFFFFFFFF, "token": 12345, "seq": 7, "stamp": 99999}
    c = Car(Boot(ROBOT, N, T))
    T1, T2, T3, T4 = T + 1, T + 2, T + 3, T + 4
    return c.scenario(
        "stop_estop_latch_and_reset",
        "Anyone may STOP or ESTOP with garbage session fields; the latch needs a good reset. "
        "A disarm tells telemetry_to and the bound controller at once, not the stranger.",
        c.ok(1000, A, _arm(1, 1), **armed(A, 1, 1000)),
        c.ok(2000, A, _drive(2, 0.75, 0.75, 2), **driven(2, 0.75, 0.75, 2000)),
        c.ok(3000, X, pkt(STOP, nonce=0, token=0, left=0.5, right=-1.0), sent=(A,),
             **c.disarm("stop")),
        c.tick(4000),
        note("the old controller's packets carry the old token"),
        c.no(5000, A, _drive(3, 0.75, 0.75, 5), "bad_token"),
        c.no(6000, A, _arm(3, 6), "bad_token"),
        note("not armed: ARM accepts any seq"),
        c.ok(7000, A, _arm(1, 7, token=T1), **armed(A, 1, 7000)),
        c.ok(8000, X, pkt(ESTOP, **garbage), sent=(A,), estop=True, **c.disarm("estop")),
        c.tick(9000),
        c.no(10000, A, _drive(2, 0.5, 0.5, 10, token=T2), "not_armed"),
        c.no(11000, A, _arm(2, 11, token=T2), "estop_latched"),
        note("STOP and ESTOP bump the token when not armed; STOP keeps the latch;"),
        note("nobody is bound and no HELLO came yet, so no telemetry"),
        c.ok(12000, X, pkt(STOP, **garbage), **c.disarm("stop")),
        c.ok(13000, X, pkt(ESTOP, **garbage), **c.disarm("estop")),
        c.no(14000, A, _hello(flags=1, token=T3), "bad_token"),
        c.no(15000, A, _hello(flags=1, nonce=N + 1, token=T4), "bad_nonce"),
        c.ok(16000, A, _hello(token=T4), sent=(A,), telemetry_to=A),
        c.ok(17000, A, _hello(flags=1, token=T4), sent=(A,), estop=False),
        c.tick(18000),
        c.ok(19000, A, _arm(1, 19, token=T4), **armed(A, 1, 19000)),
        c.tick(20000),
        note("ESTOP from the bound controller itself, while driving: one copy to it"),
        c.ok(21000, A, _drive(2, -0.5, 0.5, 21, token=T4), **driven(2, -0.5, 0.5, 21000)),
        c.ok(22000, A, pkt(ESTOP, token=T4, seq=3), sent=(A,), estop=True, **c.disarm("estop")),
        c.tick(23000),
    )


def _stop_whatever_else() -> Scenario:
    c = Car(Boot(ROBOT, N, T))
    T1 = T + 1
    junk_stop = pkt(STOP, rid=0, flags=0xFFFF, nonce=1, token=2, seq=3, stamp=4,
                    left=NAN, right=INF)  # fmt: skip
    junk_estop = pkt(ESTOP, rid=0, flags=0x0001, seq=U32 - 1, stamp=12345,
                     left=ABOVE_ONE, right=-INF)  # fmt: skip
    return c.scenario(
        "stop_and_estop_whatever_else",
        "A STOP or ESTOP with length, magic and kind right, to this car or to 0, stops it "
        "whatever its flags, wheels and session fields hold.",
        c.ok(1000, B, GOOD_HELLO, sent=(B,), telemetry_to=B),
        c.ok(2000, A, _arm(1, 2), **armed(A, 1, 2000)),
        c.ok(3000, A, _drive(2, 1.0, 1.0, 3), **driven(2, 1.0, 1.0, 3000)),
        note("to id 0, every flag bit set, NaN and Inf wheels, from a stranger"),
        c.ok(4000, X, junk_stop, sent=(B, A), **c.disarm("stop")),
        c.ok(5000, A, _arm(3, 5, token=T1), **armed(A, 3, 5000)),
        c.ok(6000, A, _drive(4, -1.0, -1.0, 6, token=T1), **driven(4, -1.0, -1.0, 6000)),
        c.ok(7000, X, junk_estop, sent=(B, A), estop=True, **c.disarm("estop")),
        note("a signalling NaN and a negative NaN: a STOP to a car that is not armed"),
        c.ok(8000, X, wheel_bits(pkt(STOP, rid=0, flags=0x8000), 0x7F800001, 0xFFC00001),
             sent=(B,), **c.disarm("stop")),
        note("but length, magic, kind and robot id still count"),
        c.no(9000, X, pkt(STOP, rid=0)[:31], "bad_length"),
        c.no(10000, X, pkt(STOP, rid=0, magic=b"MZ02"), "bad_magic"),
        c.no(11000, X, pkt(ESTOP, rid=8, left=NAN), "wrong_robot"),
        c.tick(12000),
    )


def _token_wraps() -> Scenario:
    top = U32 - 1
    c = Car(Boot(ROBOT, N, top))
    return c.scenario(
        "token_wraps",
        "The token is a u32: a disarm at 2^32-1 wraps it to 0.",
        c.ok(1000, A, _arm(1, 1, token=top), **armed(A, 1, 1000)),
        c.ok(2000, X, pkt(STOP), sent=(A,), **c.disarm("stop")),
        c.ok(3000, A, _arm(2, 3, token=0), **armed(A, 2, 3000)),
        c.tick(303_000, sent=(A,), last_telemetry_us=303_000, **c.disarm("watchdog")),
    )


def _watchdog_edges() -> Scenario:
    c = Car(Boot(ROBOT, N, T))
    T1 = T + 1
    return c.scenario(
        "watchdog_edges",
        "Disarm at the first tick with now_us - last_feed_us >= 300000, not before.",
        c.ok(1000, A, _arm(1, 1), **armed(A, 1, 1000)),
        c.ok(50_000, A, _drive(2, 0.5, 0.5, 50), **driven(2, 0.5, 0.5, 50_000)),
        c.tick(100_000, sent=(A,), last_telemetry_us=100_000),
        c.tick(349_999, sent=(A,), last_telemetry_us=349_999),
        c.tick(350_000, sent=(A,), **c.disarm("watchdog")),
        c.tick(355_000),
        c.no(360_000, A, _drive(3, 0.5, 0.5, 360), "bad_token"),
        c.no(361_000, A, _drive(3, 0.5, 0.5, 361, token=T1), "not_armed"),
        note("after a disarm ARM starts a new session with any seq"),
        c.ok(362_000, A, _arm(1, 362, token=T1), **armed(A, 1, 362_000)),
        c.tick(661_999, sent=(A,), last_telemetry_us=661_999),
        c.tick(662_000, sent=(A,), **c.disarm("watchdog")),
    )


def _watchdog_feeds() -> Scenario:
    c = Car(Boot(ROBOT, N, T))
    return c.scenario(
        "watchdog_feeds",
        "ARM and accepted DRIVEs feed the watchdog; HELLO and rejected datagrams do not.",
        c.ok(1000, A, _arm(1, 1), **armed(A, 1, 1000)),
        c.ok(200_000, A, GOOD_HELLO, sent=(A,), telemetry_to=A),
        c.no(250_000, A, _drive(1, 0.5, 0.5, 250), "stale_seq"),
        c.no(260_000, B, _drive(2, 0.5, 0.5, 260), "not_bound"),
        c.no(270_000, A, _drive(2, 0.5, 0.5, 100), "stale_stamp"),
        c.tick(300_999, sent=(A,), last_telemetry_us=300_999),
        c.tick(301_000, sent=(A,), **c.disarm("watchdog")),
    )


def _watchdog_only_ticks() -> Scenario:
    c = Car(Boot(ROBOT, N, T))
    return c.scenario(
        "watchdog_runs_only_on_tick",
        "The watchdog is the tick's job: with no tick since ARM, a fresh DRIVE still feeds it.",
        c.ok(1000, A, _arm(1, 1), **armed(A, 1, 1000)),
        c.ok(500_000, A, _drive(2, 0.5, 0.5, 500), **driven(2, 0.5, 0.5, 500_000)),
        c.tick(500_001, sent=(A,), last_telemetry_us=500_001),
        c.tick(799_999, sent=(A,), last_telemetry_us=799_999),
        c.tick(800_000, sent=(A,), **c.disarm("watchdog")),
    )


def _second_controller() -> Scenario:
    c = Car(Boot(ROBOT, N, T))
    T1 = T + 1
    return c.scenario(
        "second_controller",
        "A second controller cannot drive or arm a bound car, but can stop it.",
        c.ok(1000, A, _arm(1, 1), **armed(A, 1, 1000)),
        c.ok(2000, A, _drive(2, 0.5, 0.5, 2), **driven(2, 0.5, 0.5, 2000)),
        c.ok(3000, B, GOOD_HELLO, sent=(B,), telemetry_to=B),
        c.no(4000, B, _drive(1000, 1.0, 1.0, 4), "not_bound"),
        c.no(5000, B, _arm(1000, 5), "not_bound"),
        c.ok(6000, A, _drive(3, 0.25, 0.25, 6), **driven(3, 0.25, 0.25, 6000)),
        c.ok(7000, B, pkt(STOP, seq=1001), sent=(B, A), **c.disarm("stop")),
        c.no(8000, A, _drive(4, 0.25, 0.25, 8), "bad_token"),
        c.ok(9000, B, _arm(1, 9, token=T1), **armed(B, 1, 9000)),
        c.no(10000, A, _drive(5, 0.25, 0.25, 10, token=T1), "not_bound"),
        c.ok(11000, B, _drive(2, -0.5, 0.5, 11, token=T1), **driven(2, -0.5, 0.5, 11000)),
        c.tick(12000),
        note("bound and telemetry_to are the same sender: one copy"),
        c.tick(100_000, sent=(B,), last_telemetry_us=100_000),
    )


def _zero_wheels() -> Scenario:
    c = Car(Boot(ROBOT, N, T))
    return c.scenario(
        "negative_zero_wheels",
        "-0.0 is zero for ARM; the smallest subnormal is not, and DRIVE applies it as sent.",
        c.ok(1000, A, _arm(1, 1, left=-0.0, right=-0.0), **armed(A, 1, 1000)),
        c.ok(2000, A, _drive(2, -0.0, 0.0, 2), **driven(2, -0.0, 0.0, 2000)),
        c.no(3000, A, _arm(3, 3, left=TINY), "nonzero_wheels"),
        c.no(4000, A, _arm(3, 4, right=-TINY), "nonzero_wheels"),
        c.ok(5000, A, _arm(3, 5, left=0.0, right=-0.0), **armed(A, 3, 5000)),
        c.ok(6000, A, _drive(4, TINY, -TINY, 6), **driven(4, TINY, -TINY, 6000)),
    )


def _rejections_keep_session() -> Scenario:
    c = Car(Boot(ROBOT, N, T))
    return c.scenario(
        "rejections_keep_the_session",
        "A rejected datagram changes nothing but reason, even on an armed, driving car.",
        c.ok(1000, A, _arm(1, 1), **armed(A, 1, 1000)),
        c.ok(2000, A, _drive(2, 0.5, 0.5, 2), **driven(2, 0.5, 0.5, 2000)),
        c.no(3000, A, b"", "bad_length"),
        c.no(4000, A, pkt(DRIVE, seq=3, magic=b"MZ00"), "bad_magic"),
        c.no(5000, X, pkt(STOP, rid=8), "wrong_robot"),
        c.no(6000, A, _drive(3, NAN, 0.0, 6), "bad_wheels"),
        c.no(7000, A, _hello(flags=4), "bad_flags"),
        c.no(8000, A, pkt(7, seq=3), "bad_kind"),
        c.no(8500, A, _drive(3, 0.5, 0.5, 200), "stale_stamp"),
        c.tick(9000),
        c.ok(10000, A, _drive(3, -0.5, -0.5, 10), **driven(3, -0.5, -0.5, 10000)),
        c.tick(11000),
    )


def _health_loss() -> Scenario:
    c = Car(Boot(ROBOT, N, T))
    T1, T2 = T + 1, T + 2
    return c.scenario(
        "health_loss_disarms",
        "An armed car whose motor or camera turns unhealthy is disarmed at its next tick "
        "(reason unhealthy), with telemetry at once; the watchdog comes first.",
        c.ok(1000, A, GOOD_HELLO, sent=(A,), telemetry_to=A),
        c.ok(2000, B, _arm(1, 2), **armed(B, 1, 2000)),
        c.ok(3000, B, _drive(2, 0.5, 0.5, 3), **driven(2, 0.5, 0.5, 3000)),
        c.health(4000, False, True),
        note("a DRIVE before the tick is still applied; the tick disarms"),
        c.ok(4500, B, _drive(3, 0.625, 0.625, 4), **driven(3, 0.625, 0.625, 4500)),
        c.tick(5000, sent=(A, B), **c.disarm("unhealthy")),
        c.tick(10000),
        c.no(11000, B, _arm(4, 11, token=T1), "unhealthy"),
        c.health(12000, True, True),
        c.ok(13000, B, _arm(4, 13, token=T1), **armed(B, 4, 13000)),
        note("the camera counts as much as the motor"),
        c.health(14000, True, False),
        c.tick(15000, sent=(A, B), **c.disarm("unhealthy")),
        note("health does not disarm a car that is not armed: no token bump"),
        c.health(21000, False, False),
        c.tick(25000),
        c.health(26000, True, True),
        c.ok(27000, B, _arm(5, 27, token=T2), **armed(B, 5, 27000)),
        note("watchdog and health due at one tick: one disarm, reason watchdog"),
        c.health(28000, False, True),
        c.tick(327_000, sent=(A, B), last_telemetry_us=327_000, **c.disarm("watchdog")),
    )


def _disarm_telemetry() -> Scenario:
    c = Car(Boot(ROBOT, N, T))
    T1, T2 = T + 1, T + 2
    return c.scenario(
        "disarm_telemetry",
        "A disarm sends telemetry at once to telemetry_to and the bound controller, each once; "
        "it does not restart the 100 ms timer.",
        c.ok(1000, A, GOOD_HELLO, sent=(A,), telemetry_to=A),
        c.tick(100_000, sent=(A,), last_telemetry_us=100_000),
        c.ok(110_000, B, _arm(1, 110), **armed(B, 1, 110_000)),
        c.ok(120_000, X, pkt(STOP), sent=(A, B), **c.disarm("stop")),
        c.tick(199_999),
        c.tick(200_000, sent=(A,), last_telemetry_us=200_000),
        c.ok(210_000, B, _arm(1, 210, token=T1), **armed(B, 1, 210_000)),
        c.tick(300_000, sent=(A, B), last_telemetry_us=300_000),
        note("a watchdog disarm and the periodic telemetry in one tick: each once"),
        c.tick(510_000, sent=(A, B), last_telemetry_us=510_000, **c.disarm("watchdog")),
        note("ESTOP from the bound controller that is also telemetry_to: one copy"),
        c.ok(520_000, A, _arm(1, 520, token=T2), **armed(A, 1, 520_000)),
        c.ok(530_000, A, pkt(ESTOP), sent=(A,), estop=True, **c.disarm("estop")),
    )


def _probes() -> Scenario:
    request = bytes.fromhex("4d5a4331deadbeef")
    c = Car(Boot(ROBOT, N, T))
    return c.scenario(
        "clock_probe",
        "MZC1 + u32 id gets MZC1 + id + u64 uptime in us; anything else gets no reply.",
        Probe(123_456_789, request, bytes.fromhex("4d5a4331deadbeef00000000075bcd15")),
        Probe(123_456_790, b"", None),
        Probe(123_456_791, request[:7], None),
        Probe(123_456_792, request + b"\x00", None),
        Probe(123_456_793, bytes.fromhex("4d5a4331deadbeef00000000075bcd15"), None),
        Probe(123_456_794, bytes.fromhex("4d5a4332deadbeef"), None),
        Probe(123_456_795, bytes.fromhex("4d5a3031deadbeef"), None),
        note("a probe request sent to the command port is just a short datagram"),
        c.no(123_456_796, A, request, "bad_length"),
        Probe(
            2**40 + 1,
            bytes.fromhex("4d5a433100000000"),
            bytes.fromhex("4d5a4331000000000000010000000001"),
        ),
        c.tick(2**40 + 2, last_telemetry_us=2**40 + 2),
    )


def scenarios() -> tuple[Scenario, ...]:
    """Part two, in file order."""
    return (
        _stop_estop(),
        _stop_whatever_else(),
        _token_wraps(),
        _watchdog_edges(),
        _watchdog_feeds(),
        _watchdog_only_ticks(),
        _second_controller(),
        _zero_wheels(),
        _rejections_keep_session(),
        _health_loss(),
        _disarm_telemetry(),
        _probes(),
    )
