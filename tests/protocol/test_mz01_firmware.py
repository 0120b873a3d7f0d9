"""The reference firmware model's API: outgoing telemetry, events, probes, inputs.

The protocol rules themselves are pinned by the golden vectors
(``test_mz01_vectors.py``); this file covers what the vectors cannot see.
"""

from __future__ import annotations

import pytest

from protocol.mz01 import (
    Command,
    EventKind,
    FirmwareModel,
    Kind,
    Outgoing,
    Reason,
    encode_command,
    parse_telemetry,
)

ID, NONCE, TOKEN = 7, 0x9E3779B9, 4242
A = ("127.0.0.10", 40000)
B = ("127.0.0.11", 40000)


def car(**kw: bool) -> FirmwareModel:
    return FirmwareModel(ID, NONCE, TOKEN, **kw)


def hello(rid: int = ID, flags: int = 0, token: int = TOKEN) -> bytes:
    return encode_command(Command(rid, Kind.HELLO, flags, NONCE, token))


def arm(now_us: int, seq: int = 1, token: int = TOKEN) -> bytes:
    return encode_command(Command(ID, Kind.ARM, 0, NONCE, token, seq, now_us // 1000))


def drive(seq: int, left: float, right: float, token: int = TOKEN) -> bytes:
    return encode_command(Command(ID, Kind.DRIVE, 0, NONCE, token, seq, 0, left, right))


def stop(kind: Kind = Kind.STOP) -> bytes:
    return encode_command(Command(ID, kind))


def test_boot_state() -> None:
    c = car(motor_ok=False)
    assert (c.armed, c.estop, c.token, c.wheels, c.reason) == (False, False, TOKEN, (0.0, 0.0), "")
    assert (c.bound, c.telemetry_to, c.last_seq, c.boot_nonce) == (None, None, 0, NONCE)
    assert (c.motor_ok, c.camera_ok, c.robot_id) == (False, True, ID)


@pytest.mark.parametrize(
    "args", [(0, 1, 1), (256, 1, 1), (1, -1, 1), (1, 1, 2**32), (1.0, 1, 1), (True, 1, 1)]
)
def test_constructor_refuses_out_of_range(args: tuple[int, int, int]) -> None:
    with pytest.raises(ValueError):
        FirmwareModel(*args)


@pytest.mark.parametrize("now", [-1, 2**64, 1.5, True])
def test_time_must_be_u64_integer_microseconds(now: int) -> None:
    c = car()
    with pytest.raises(ValueError):
        c.tick(now)
    with pytest.raises(ValueError):
        c.receive_datagram(hello(), A, now)


def test_hello_answers_with_telemetry_at_once() -> None:
    c = car()
    result = c.receive_datagram(hello(rid=0), A, 1_234_567)
    assert result.accepted and result.reason == ""
    assert result.command == Command(0, Kind.HELLO, 0, NONCE, TOKEN)
    [out] = result.outgoing
    assert isinstance(out, Outgoing) and out.dst == A
    t = parse_telemetry(out.data)
    assert (t.id, t.boot, t.token, t.uptime_ms, t.armed, t.estop) == (
        ID, NONCE, TOKEN, 1234, False, False,
    )  # fmt: skip
    assert (t.reason, t.rssi, t.seq, t.duty, t.gyro_z, t.sim) == ("", 0, 0, (0.0, 0.0), None, None)
    assert c.telemetry_to == A
    assert [e.kind for e in result.events] == [EventKind.ACCEPTED, EventKind.TELEMETRY_TO]


def test_rejected_datagram_sends_nothing_and_logs_the_reason() -> None:
    c = car()
    result = c.receive_datagram(hello(rid=9), A, 0)
    assert not result.accepted and result.reason == Reason.WRONG_ROBOT == c.reason
    assert result.outgoing == () and c.telemetry_to is None
    [event] = result.events
    assert (event.kind, event.reason, event.command, event.src) == (
        EventKind.REJECTED, "wrong_robot", Kind.HELLO, A,
    )  # fmt: skip
    garbage = c.receive_datagram(b"\x00", A, 0)
    assert garbage.command is None and garbage.events[0].command is None


def test_periodic_telemetry_every_100ms_to_telemetry_to() -> None:
    c = car()
    assert c.tick(5_000).outgoing == ()
    c.receive_datagram(hello(), A, 90_000)
    assert c.tick(95_000).outgoing == ()
    [out] = c.tick(100_000).outgoing  # the HELLO answer did not restart the timer
    assert out.dst == A and parse_telemetry(out.data).uptime_ms == 100
    assert c.tick(199_999).outgoing == ()
    assert len(c.tick(200_000).outgoing) == 1


def test_timer_restarts_even_without_destination() -> None:
    c = car()
    assert c.tick(100_000).outgoing == ()
    c.receive_datagram(hello(), A, 150_000)
    assert c.tick(195_000).outgoing == ()
    assert [o.dst for o in c.tick(200_000).outgoing] == [A]


def test_telemetry_goes_to_bound_controller_too() -> None:
    c = car()
    c.receive_datagram(hello(), A, 0)
    c.receive_datagram(arm(1_000), B, 1_000)
    outs = c.tick(100_000).outgoing
    assert [o.dst for o in outs] == [A, B]
    assert outs[0].data == outs[1].data
    assert parse_telemetry(outs[0].data).armed


def test_bound_equal_to_telemetry_to_gets_one_copy() -> None:
    c = car()
    c.receive_datagram(hello(), A, 0)
    c.receive_datagram(arm(1_000), A, 1_000)
    assert [o.dst for o in c.tick(100_000).outgoing] == [A]


def test_bound_without_hello_still_gets_telemetry() -> None:
    c = car()
    c.receive_datagram(arm(1_000), B, 1_000)
    assert [o.dst for o in c.tick(100_000).outgoing] == [B]


def test_watchdog_disarm_tells_telemetry_to_and_the_bound_controller_at_once() -> None:
    c = car()
    c.receive_datagram(hello(), A, 0)
    c.receive_datagram(arm(1_000), B, 1_000)
    c.receive_datagram(drive(2, 0.5, 0.5), B, 2_000)
    for t in range(5_000, 300_000, 5_000):
        c.tick(t)
    result = c.tick(302_000)
    assert [e.kind for e in result.events] == [EventKind.DISARMED]
    assert result.events[0].reason == Reason.WATCHDOG and result.events[0].token == TOKEN + 1
    assert [o.dst for o in result.outgoing] == [A, B]
    tele = parse_telemetry(result.outgoing[1].data)
    assert not tele.armed and tele.reason == "watchdog" and tele.token == TOKEN + 1


def test_stop_tells_telemetry_to_and_the_bound_controller_not_the_sender() -> None:
    c = car()
    stranger = ("127.0.0.99", 50000)
    assert c.receive_datagram(stop(), stranger, 500).outgoing == ()  # nobody to tell
    c.receive_datagram(hello(), A, 1_000)
    c.receive_datagram(arm(2_000, token=TOKEN + 1), B, 2_000)
    result = c.receive_datagram(stop(Kind.ESTOP), stranger, 3_000)
    assert [o.dst for o in result.outgoing] == [A, B]
    tele = parse_telemetry(result.outgoing[0].data)
    assert (tele.armed, tele.estop, tele.reason, tele.uptime_ms) == (False, True, "estop", 3)


def test_health_loss_disarms_at_the_next_tick() -> None:
    c = car()
    c.receive_datagram(hello(), A, 0)
    c.receive_datagram(arm(1_000), A, 1_000)
    c.set_health(motor_ok=False, camera_ok=True)
    assert c.armed  # health is the tick's business
    result = c.tick(5_000)
    assert not c.armed and c.reason == "unhealthy" and c.token == TOKEN + 1
    assert [(e.kind, e.reason) for e in result.events] == [(EventKind.DISARMED, "unhealthy")]
    assert [o.dst for o in result.outgoing] == [A]
    assert c.tick(10_000).events == ()  # a disarmed car is not disarmed again


def test_a_late_drive_keeps_only_the_rest_of_its_lease() -> None:
    c = car()
    c.receive_datagram(arm(1_000_000), A, 1_000_000)
    late = encode_command(Command(ID, Kind.DRIVE, 0, NONCE, TOKEN, 2, 1_000, 0.5, 0.5))
    assert c.receive_datagram(late, A, 1_080_000).accepted  # 80 ms late
    assert c.state.last_feed_us == 1_000_000
    assert c.tick(1_299_999).events == ()
    assert c.tick(1_300_000).events[0].reason == "watchdog"  # 220 ms after it arrived


def test_drive_telemetry_reports_duty_and_seq() -> None:
    c = car()
    c.receive_datagram(arm(1_000, seq=5), A, 1_000)
    result = c.receive_datagram(drive(6, 0.1, -0.75), A, 2_000)
    assert result.accepted and result.events[0].command is Kind.DRIVE
    t = c.telemetry(3_000)
    assert t.seq == 6 and t.duty == (0.100000001490116119384765625, -0.75)
    assert c.last_seq == 6 and c.bound == A


def test_arm_stop_estop_and_reset_events() -> None:
    c = car()
    armed = c.receive_datagram(arm(1_000), A, 1_000)
    assert [e.kind for e in armed.events] == [EventKind.ACCEPTED, EventKind.ARMED]
    assert armed.events[1].src == A
    stopped = c.receive_datagram(stop(), B, 2_000)
    assert [e.kind for e in stopped.events] == [EventKind.ACCEPTED, EventKind.DISARMED]
    assert stopped.events[1].reason == "stop" and stopped.events[1].token == TOKEN + 1
    latched = c.receive_datagram(stop(Kind.ESTOP), B, 3_000)
    assert [e.kind for e in latched.events] == [
        EventKind.ACCEPTED, EventKind.DISARMED, EventKind.ESTOP_LATCHED,
    ]  # fmt: skip
    assert c.estop and c.token == TOKEN + 2 and c.reason == "estop"
    reset = c.receive_datagram(hello(flags=1, token=TOKEN + 2), A, 4_000)
    assert EventKind.ESTOP_CLEARED in [e.kind for e in reset.events]
    assert not c.estop and not c.armed


def test_set_health_gates_arm() -> None:
    c = car()
    c.set_health(motor_ok=True, camera_ok=False)
    assert c.receive_datagram(arm(1_000), A, 1_000).reason == "unhealthy"
    c.set_health(motor_ok=True, camera_ok=True)
    assert c.receive_datagram(arm(2_000), A, 2_000).accepted
    assert c.telemetry(2_000).camera_ok


def test_set_sensors_feed_every_telemetry() -> None:
    c = car()
    c.set_sensors(rssi=-70, gyro_z=0.25, sim={"target": [1.0, 2.0]})
    [out] = c.receive_datagram(hello(), A, 0).outgoing
    t = parse_telemetry(out.data)
    assert (t.rssi, t.gyro_z, t.sim) == (-70, 0.25, {"target": [1.0, 2.0]})
    with pytest.raises(ValueError):
        c.set_sensors(rssi=-500)
    with pytest.raises(ValueError):
        c.set_sensors(sim={"big": "x" * 9000})
    [again] = c.receive_datagram(hello(), A, 1).outgoing
    assert parse_telemetry(again.data).rssi == -70


def test_state_snapshot_is_immutable_and_rejection_only_touches_reason() -> None:
    c = car()
    c.receive_datagram(arm(1_000), A, 1_000)
    before = c.state
    c.receive_datagram(drive(1, 0.5, 0.5), A, 2_000)  # stale_seq
    after = c.state
    assert after.reason == "stale_seq"
    assert after.__class__(**{**after.__dict__, "reason": before.reason}) == before
    with pytest.raises(AttributeError):
        after.armed = False  # type: ignore[misc]


def test_probe_reply_goes_to_the_source() -> None:
    c = car()
    src = ("127.0.0.5", 6000)
    out = c.receive_probe(bytes.fromhex("4d5a433100000009"), src, 5_000_001)
    assert out == Outgoing(src, bytes.fromhex("4d5a43310000000900000000004c4b41"))
    assert c.receive_probe(b"MZC1", src, 0) is None
    assert c.receive_probe(bytearray(b"MZC1\0\0\0\1"), src, 0) is not None
    assert c.reason == ""


def test_bytes_like_inputs_are_fine() -> None:
    c = car()
    assert c.receive_datagram(bytearray(hello()), A, 0).accepted
    assert c.receive_datagram(memoryview(hello()), A, 0).accepted


def test_clock_running_backwards_fails_closed() -> None:
    c = car()
    c.receive_datagram(arm(1_000_000), A, 1_000_000)
    result = c.tick(999_999)
    assert not c.armed and result.events[0].reason == "watchdog"


def test_seq_is_reset_by_a_new_session_only() -> None:
    c = car()
    c.receive_datagram(arm(1_000, seq=500), A, 1_000)
    assert c.receive_datagram(drive(400, 0.5, 0.5), A, 2_000).reason == "stale_seq"
    c.receive_datagram(stop(), A, 3_000)
    assert c.last_seq == 500
    assert c.receive_datagram(arm(4_000, seq=1, token=TOKEN + 1), A, 4_000).accepted
    assert c.last_seq == 1
