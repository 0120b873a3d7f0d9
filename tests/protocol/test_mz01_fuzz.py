"""Hypothesis: decoders raise only their own error; the firmware model never raises
and never arms on a datagram that MZ01.md says must be rejected."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import struct
from typing import TypeVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.mz01 import (
    CarState,
    Command,
    EventKind,
    FirmwareModel,
    Kind,
    PacketError,
    ProbeError,
    ProbeReply,
    ProbeRequest,
    Telemetry,
    TelemetryError,
    decode_command,
    decode_probe_reply,
    decode_probe_request,
    encode_command,
    encode_probe_reply,
    encode_probe_request,
    encode_telemetry,
    parse_telemetry,
)
from protocol.mz01.telemetry import MAX_GYRO_ANGLE

V = TypeVar("V")

FAST = settings(max_examples=300, deadline=None)
SLOW = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)
wheel = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5]),
    st.floats(-1.0, 1.0, width=32),
)
commands = st.builds(
    Command,
    robot_id=st.integers(0, 255),
    kind=st.sampled_from(list(Kind)),
    flags=st.just(0),
    boot_nonce=u32,
    session_token=u32,
    seq=u32,
    stamp_ms=u32,
    left=wheel,
    right=wheel,
)


@st.composite
def mutated(draw: st.DrawFn, base: st.SearchStrategy[bytes]) -> bytes:
    """A valid datagram with a few bytes flipped, cut off or appended."""
    data = bytearray(draw(base))
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["flip", "set", "cut", "add"]))
        if op in ("flip", "set") and data:
            i = draw(st.integers(0, len(data) - 1))
            data[i] = (
                data[i] ^ (1 << draw(st.integers(0, 7)))
                if op == "flip"
                else draw(st.integers(0, 255))
            )
        elif op == "cut" and data:
            del data[draw(st.integers(0, len(data) - 1)) :]
        else:
            data += draw(st.binary(max_size=4))
    return bytes(data)


command_bytes = st.one_of(
    st.binary(max_size=40),
    st.builds(encode_command, commands),
    mutated(commands.map(encode_command)),
)


@FAST
@given(command_bytes)
def test_decode_command_raises_only_packet_error(data: bytes) -> None:
    try:
        cmd = decode_command(data)
    except PacketError:
        return
    if cmd.kind in (Kind.STOP, Kind.ESTOP):  # decoded whatever its flags and wheels hold
        fields = struct.unpack(">4sBBHIIIIff", data)
        assert dataclasses.astuple(cmd)[:7] == fields[1:8]
        assert all(a == b or (math.isnan(a) and math.isnan(b))
                   for a, b in zip((cmd.left, cmd.right), fields[8:], strict=True))
        return
    assert encode_command(cmd) == data  # anything accepted re-encodes to the same bytes


@FAST
@given(commands)
def test_encode_decode_round_trip(cmd: Command) -> None:
    back = decode_command(encode_command(cmd))
    assert back == cmd
    assert math.copysign(1.0, back.left) == math.copysign(1.0, cmd.left)


probe_bytes = st.one_of(
    st.binary(max_size=20),
    mutated(st.builds(lambda i: encode_probe_request(ProbeRequest(i)), u32)),
    mutated(st.builds(lambda i, t: encode_probe_reply(ProbeReply(i, t)), u32, u64)),
)


@FAST
@given(probe_bytes)
def test_probe_decoders_raise_only_probe_error(data: bytes) -> None:
    with contextlib.suppress(ProbeError):
        assert encode_probe_request(decode_probe_request(data)) == data
    with contextlib.suppress(ProbeError):
        assert encode_probe_reply(decode_probe_reply(data)) == data


finite = st.floats(allow_nan=False, allow_infinity=False)
json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), finite, st.text(max_size=8)
)
json_values = st.recursive(
    json_leaf, lambda c: st.lists(c) | st.dictionaries(st.text(max_size=4), c), max_leaves=20
)
telemetries = st.builds(
    Telemetry,
    id=st.integers(1, 255),
    boot=u32,
    token=u32,
    uptime_ms=u64,
    armed=st.booleans(),
    estop=st.booleans(),
    reason=st.text(max_size=64),
    rssi=st.integers(-128, 127),
    camera_ok=st.booleans(),
    motor_ok=st.booleans(),
    seq=u32,
    duty=st.tuples(st.floats(-1, 1), st.floats(-1, 1)),
    gyro_z=st.none() | finite,
    gyro_angle=st.none() | st.floats(-MAX_GYRO_ANGLE, MAX_GYRO_ANGLE),
    sim=st.none() | st.dictionaries(st.text(max_size=5), json_leaf, max_size=4),
)


@FAST
@given(telemetries)
def test_telemetry_round_trip(t: Telemetry) -> None:
    assert parse_telemetry(encode_telemetry(t)) == t


telemetry_bytes = st.one_of(
    st.binary(max_size=300),
    mutated(st.builds(encode_telemetry, telemetries)),
    st.builds(lambda o: json.dumps(o).encode(), json_values),
)


@FAST
@given(telemetry_bytes)
def test_parse_telemetry_raises_only_telemetry_error(data: bytes) -> None:
    try:
        t = parse_telemetry(data)
    except TelemetryError:
        return
    assert parse_telemetry(encode_telemetry(t)) == t  # whatever parses is valid to send


# -- the firmware model ------------------------------------------------------------

ID, NONCE = 7, 0x9E3779B9
SOURCES = [("127.0.0.10", 40000), ("127.0.0.10", 40001), ("127.0.0.11", 40000)]


def allowed(s: CarState, cmd: Command, src: tuple[str, int], now_us: int) -> bool:
    """MZ01.md's state checks for a decoded command, restated apart from the model."""
    d = (cmd.stamp_ms - now_us // 1000) % 2**32
    d = d - 2**32 if d >= 2**31 else d
    session = cmd.boot_nonce == NONCE and cmd.session_token == s.token
    any_car = cmd.robot_id == 0 and cmd.kind in (Kind.HELLO, Kind.STOP, Kind.ESTOP)
    if cmd.robot_id != ID and not any_car:
        return False
    if cmd.kind == Kind.HELLO:
        return session or not cmd.flags
    if cmd.kind == Kind.ARM:
        return (
            session
            and not s.estop
            and s.motor_ok
            and s.camera_ok
            and cmd.left == 0.0
            and cmd.right == 0.0
            and -100 <= d <= 30
            and (not s.armed or (src == s.bound and cmd.seq > s.last_seq))
        )
    if cmd.kind == Kind.DRIVE:
        fresh = -100 <= d <= 30
        return session and s.armed and fresh and src == s.bound and cmd.seq > s.last_seq
    return True  # STOP and ESTOP


def mostly(good: V, *bad: V) -> st.SearchStrategy[V]:
    """Usually ``good`` (hypothesis favours the first element), sometimes one of ``bad``."""
    return st.sampled_from([good] * 9 + list(bad))


KIND_MIX = [Kind.DRIVE] * 8 + [Kind.ARM] * 6 + [Kind.HELLO] * 4 + [Kind.STOP, Kind.ESTOP]


@st.composite
def near_valid(draw: st.DrawFn, car: FirmwareModel, now_us: int) -> bytes:
    """A datagram that is often valid for this car right now, then maybe mutated."""
    s = car.state
    kind = draw(st.sampled_from(KIND_MIX))
    zero = kind == Kind.ARM and draw(mostly(True, False))
    offset = draw(mostly(0, -100, 30, -101, 31, 2**31))
    cmd = Command(
        robot_id=draw(mostly(ID, 0, 8)),
        kind=kind,
        flags=1 if kind == Kind.HELLO and draw(st.booleans()) else 0,
        boot_nonce=draw(mostly(NONCE, NONCE ^ 1)),
        session_token=draw(mostly(s.token, (s.token - 1) % 2**32, 0)),
        seq=draw(mostly(s.last_seq + 1, s.last_seq, 0)) % 2**32,
        stamp_ms=(now_us // 1000 + offset) % 2**32,
        left=draw(st.sampled_from([0.0, -0.0]) if zero else wheel),
        right=draw(st.sampled_from([0.0, -0.0]) if zero else wheel),
    )
    data = encode_command(cmd)
    return draw(mutated(st.just(data))) if draw(mostly(False, True)) else data


@SLOW
@given(st.data(), st.booleans() | st.just(True), st.booleans() | st.just(True))
def test_firmware_never_raises_and_never_arms_on_a_rejected_datagram(
    data: st.DataObject, motor_ok: bool, camera_ok: bool
) -> None:
    car = FirmwareModel(ID, NONCE, data.draw(u32, "token"), motor_ok, camera_ok)
    now = 0
    for _ in range(data.draw(st.integers(1, 40), "steps")):
        now += data.draw(st.sampled_from([0, 1, 999, 5_000, 5_000, 50_000, 299_999, 300_000]))
        actions = ["rx"] * 6 + ["garbage", "tick", "tick", "health", "probe"]
        action = data.draw(st.sampled_from(actions))
        before = car.state
        if action == "tick":
            result = car.tick(now)
            disarms = [e for e in result.events if e.kind is EventKind.DISARMED]
            assert car.armed == (before.armed and not disarms)
            assert car.token == (before.token + len(disarms)) % 2**32
            assert not car.armed or (car.state.motor_ok and car.state.camera_ok)
        elif action == "health":
            car.set_health(data.draw(mostly(True, False)), data.draw(mostly(True, False)))
        elif action == "probe":
            car.receive_probe(data.draw(probe_bytes), SOURCES[0], now)
            assert car.state == before
        else:
            raw = data.draw(near_valid(car, now) if action == "rx" else command_bytes)
            src = data.draw(st.sampled_from([before.bound or SOURCES[0]] * 3 + SOURCES))
            result = car.receive_datagram(raw, src, now)
            if not result.accepted:
                assert result.reason and car.reason == result.reason
                assert car.state == dataclasses.replace(before, reason=result.reason)
            else:
                assert result.reason == ""
            try:
                cmd = decode_command(raw)
            except PacketError as exc:
                assert result.reason == exc.reason
            else:
                assert result.accepted == allowed(before, cmd, src, now)
            if car.armed and not before.armed:
                assert result.accepted and result.command is not None
                assert result.command.kind == Kind.ARM
            disarms = [e for e in result.events if e.kind is EventKind.DISARMED]
            assert car.token == (before.token + len(disarms)) % 2**32
        s = car.state
        if not s.armed:
            assert s.wheels == (0.0, 0.0) and s.bound is None
        else:
            assert not s.estop and s.bound is not None
