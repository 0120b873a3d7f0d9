"""The world's side of a SITL car, sans-IO: its link codec, board wiring and firmware mirror."""

from __future__ import annotations

import json
import struct

import pytest

from protocol.mz01 import Command, EventKind, Kind, encode_command
from worlds.sitl import (
    Bound,
    FrameRequest,
    Motors,
    Panic,
    SerialLine,
    SitlError,
    SitlFirmware,
    Trace,
    decode,
    encode_frame,
    encode_link,
    encode_no_frame,
    encode_sensors,
    wheel_duties,
)


def _msg(kind: str, obj: object) -> bytes:
    return kind.encode() + json.dumps(obj).encode()


def test_decode_every_message_from_the_car() -> None:
    pwm = [0] * 16
    assert decode(_msg("M", {"us": 5, "pwm": pwm})) == Motors(5, tuple(pwm))
    assert decode(_msg("R", {"us": 7, "id": 3})) == FrameRequest(7, 3)
    assert decode(_msg("B", {"proto": "udp", "port": 4210, "errno": 98, "error": "x"})) == Bound(
        "udp", 4210, 98, "x"
    )
    assert decode(b"Pwifi: up") == SerialLine("wifi: up")
    assert decode(b"Xtask watchdog") == Panic("task watchdog")
    trace = decode(_msg("T", {"ev": "probe", "us": 1, "ok": True}))
    assert isinstance(trace, Trace) and trace.ev == "probe"


@pytest.mark.parametrize(
    "packet",
    [b"", b"Q{}", b"M{", b"M[]", _msg("M", {"us": 1, "pwm": [0] * 15}),
     _msg("M", {"us": 1, "pwm": [4097] + [0] * 15}), _msg("R", {"us": 1})],
)  # fmt: skip
def test_malformed_messages_are_refused(packet: bytes) -> None:
    with pytest.raises(SitlError):
        decode(packet)


def test_encode_messages_to_the_car() -> None:
    assert encode_sensors(None, None) == b"S" + struct.pack("<Bf", 0, 0.0)
    sensors = encode_sensors(0.25, {"obs_ms": 1})
    assert sensors[:6] == b"S" + struct.pack("<Bf", 1, 0.25) and sensors[6:] == b'{"obs_ms":1}'
    assert encode_sensors(float("nan"), None)[1] == 0  # a non-finite reading is none
    assert encode_frame(2, 10**12, b"jpg") == b"F" + struct.pack("<IQ", 2, 10**12) + b"jpg"
    assert encode_no_frame(9) == b"f" + struct.pack("<I", 9)
    assert encode_link(-5) == b"L" + bytes(8)


def _pwm(**channels: int) -> list[int]:
    out = [0] * 16
    for name, count in channels.items():
        out[int(name[1:])] = count
    return out


def test_wheel_duties_follow_the_fnk0053_wiring() -> None:
    # The sketch's 0.8 forward on both sides: IN1 of every motor at round(0.8 * 4095).
    forward = _pwm(c15=3276, c9=3276, c12=3276, c10=3276)
    assert wheel_duties(forward) == pytest.approx((0.8, 0.8), abs=1e-4)
    spin = _pwm(c15=4096, c9=4096, c13=2048, c11=2048)  # left full on, right IN2
    assert wheel_duties(spin) == pytest.approx((1.0, -2048 / 4095))
    assert wheel_duties(_pwm(c0=307, c1=307)) == (0.0, 0.0)  # the servos move no wheel
    start = wheel_duties(_pwm(c15=1600, c9=1600))[0]
    assert start == pytest.approx(1600 / 4095) and start >= 0.3907  # moves the simulated car


def _rx(fw: SitlFirmware, cmd: Command, ok: bool = True, reason: str = "", **state: object):
    fields = {
        "us": 1000, "src": "127.0.0.1:5000", "hex": encode_command(cmd).hex(), "ok": ok,
        "reason": reason, "armed": fw.armed, "estop": fw.estop, "token": fw.token,
        "tel": "", "was_armed": fw.armed, "was_estop": fw.estop, "was_tel": "",
    } | state  # fmt: skip
    return fw.apply(Trace("rx", fields))


def test_the_mirror_turns_the_trace_into_the_models_events() -> None:
    fw = SitlFirmware(3, 11, 77)
    init = {"us": 0, "ok": True, "id": 3, "boot": 12, "token": 78, "motor_ok": True,
            "camera_ok": False}  # fmt: skip
    assert fw.apply(Trace("init", init)) is None and (fw.boot_nonce, fw.token) == (12, 78)
    hello = _rx(fw, Command(3, Kind.HELLO), tel="127.0.0.1:5000")
    assert hello is not None and [e.kind for e in hello.events] == [
        EventKind.ACCEPTED, EventKind.TELEMETRY_TO,
    ]  # fmt: skip
    arm = _rx(fw, Command(3, Kind.ARM, boot_nonce=12, session_token=78, seq=1), armed=True)
    assert arm is not None and arm.events[-1].kind is EventKind.ARMED and fw.armed
    assert arm.events[0].src == ("127.0.0.1", 5000)
    stale = Command(3, Kind.DRIVE, boot_nonce=12, session_token=70, seq=2)
    refused = _rx(fw, stale, ok=False, reason="bad_token")
    assert refused is not None and not refused.accepted and fw.reason == "bad_token"
    assert refused.events[0].command is Kind.DRIVE
    disarm = fw.apply(Trace("disarm", {"us": 5, "reason": "watchdog", "token": 79}))
    assert disarm is not None and disarm.events[0].reason == "watchdog"
    assert not fw.armed and fw.token == 79
    estop = _rx(fw, Command(0, Kind.ESTOP), estop=True, token=80)
    assert estop is not None and [e.kind for e in estop.events] == [
        EventKind.ACCEPTED, EventKind.DISARMED, EventKind.ESTOP_LATCHED,
    ]  # fmt: skip
    assert fw.estop and fw.reason == "estop"
    short = fw.apply(Trace("rx", {**init, "ev": "rx", "src": "127.0.0.1:1", "hex": "4d5a",
                                  "ok": False, "reason": "bad_length", "armed": False,
                                  "estop": True, "token": 80, "tel": "", "was_armed": False,
                                  "was_estop": True, "was_tel": ""}))  # fmt: skip
    assert short is not None and short.command is None and fw.reason == "bad_length"
