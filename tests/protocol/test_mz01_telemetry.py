"""Telemetry JSON: encoding, and every reason the parser refuses an object."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from protocol.errors import ProtocolError
from protocol.mz01 import MAX_TELEMETRY_BYTES, Telemetry, TelemetryError, encode_telemetry
from protocol.mz01 import parse_telemetry as parse

GOOD = Telemetry(
    id=7,
    boot=2654435769,
    token=4242,
    uptime_ms=123456,
    armed=True,
    estop=False,
    reason="",
    rssi=-61,
    camera_ok=True,
    motor_ok=True,
    seq=99,
    duty=(0.5, -0.25),
    gyro_z=None,
)


def obj(**changes: Any) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(encode_telemetry(GOOD))
    out.update(changes)
    return out


def dumps(o: object) -> bytes:
    return json.dumps(o).encode()


def reason_of(data: bytes) -> str:
    with pytest.raises(TelemetryError) as info:
        parse(data)
    assert isinstance(info.value, ProtocolError)
    return info.value.reason


def test_round_trip_compact_utf8() -> None:
    data = encode_telemetry(GOOD)
    assert b" " not in data and b"\n" not in data
    assert parse(data) == GOOD
    with_sim = Telemetry(**{**GOOD.__dict__, "gyro_z": -0.5, "sim": {"tags": [[1, 0.5, -0.1]]}})
    assert parse(encode_telemetry(with_sim)) == with_sim


@pytest.mark.parametrize(
    "angle", [None, 0.0, -0.0, 1.25, -2, -3.14159274, 3.14159274, 3.1416, -3.1416]
)
def test_gyro_angle_round_trip(angle: float | None) -> None:
    t = Telemetry(**{**GOOD.__dict__, "gyro_z": 0.5, "gyro_angle": angle})
    back = parse(encode_telemetry(t))
    assert back == t and back.gyro_angle == angle
    if angle is not None and back.gyro_angle is not None:
        assert math.copysign(1.0, back.gyro_angle) == math.copysign(1.0, angle)


def test_gyro_angle_follows_gyro_z_in_the_encoding() -> None:
    with_sim = Telemetry(**{**GOOD.__dict__, "gyro_z": -0.5, "gyro_angle": 2.5, "sim": {"a": 1}})
    assert encode_telemetry(with_sim).endswith(b',"gyro_z":-0.5,"gyro_angle":2.5,"sim":{"a":1}}')
    assert encode_telemetry(GOOD).endswith(b'"duty":[0.5,-0.25],"gyro_z":null,"gyro_angle":null}')
    keys = list(json.loads(encode_telemetry(with_sim)))
    assert keys == ["id", "boot", "token", "uptime_ms", "armed", "estop", "reason", "rssi",
                    "camera_ok", "motor_ok", "seq", "duty", "gyro_z", "gyro_angle", "sim"]


def test_gyro_angle_is_optional_older_firmware_sends_none() -> None:
    o = obj(gyro_z=0.25)
    del o["gyro_angle"]
    t = parse(dumps(o))
    assert t.gyro_angle is None and t.gyro_z == 0.25
    assert parse(dumps(obj(gyro_angle=None))).gyro_angle is None
    t = parse(dumps(obj(gyro_angle=-2)))
    assert t.gyro_angle == -2.0 and isinstance(t.gyro_angle, float)


def test_non_ascii_reason_is_utf8() -> None:
    t = Telemetry(**{**GOOD.__dict__, "reason": "é"})
    assert "é".encode() in encode_telemetry(t)
    assert parse(encode_telemetry(t)).reason == "é"


def test_unknown_keys_are_ignored_and_ints_work_as_floats() -> None:
    t = parse(dumps(obj(extra={"a": [1, 2]}, fw="1.2", duty=[0, 1], gyro_z=2)))
    assert t.duty == (0.0, 1.0) and t.gyro_z == 2.0 and isinstance(t.gyro_z, float)


def test_sim_is_optional_and_kept() -> None:
    assert parse(dumps(obj())).sim is None
    assert parse(dumps(obj(sim={"x": {"y": [1]}}))).sim == {"x": {"y": [1]}}


@pytest.mark.parametrize(
    "key",
    ["id", "boot", "token", "uptime_ms", "armed", "estop", "reason", "rssi",
     "camera_ok", "motor_ok", "seq", "duty", "gyro_z"],
)  # fmt: skip
def test_missing_required_key(key: str) -> None:
    o = obj()
    del o[key]
    assert reason_of(dumps(o)) == "missing_key"


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"id": True}, "bad_type"),
        ({"seq": 1.0}, "bad_type"),
        ({"token": "1"}, "bad_type"),
        ({"armed": 1}, "bad_type"),
        ({"estop": None}, "bad_type"),
        ({"camera_ok": "true"}, "bad_type"),
        ({"reason": 3}, "bad_type"),
        ({"duty": "0,0"}, "bad_type"),
        ({"duty": [True, 0]}, "bad_type"),
        ({"gyro_z": "0"}, "bad_type"),
        ({"gyro_z": False}, "bad_type"),
        ({"gyro_angle": "0.5"}, "bad_type"),
        ({"gyro_angle": True}, "bad_type"),
        ({"gyro_angle": False}, "bad_type"),
        ({"gyro_angle": [0.5]}, "bad_type"),
        ({"gyro_angle": 3.15}, "out_of_range"),
        ({"gyro_angle": -4}, "out_of_range"),
        ({"gyro_angle": 3.1416000001}, "out_of_range"),
        ({"gyro_angle": -3.14160001}, "out_of_range"),
        ({"id": 0}, "out_of_range"),
        ({"id": 256}, "out_of_range"),
        ({"boot": 2**32}, "out_of_range"),
        ({"token": -1}, "out_of_range"),
        ({"seq": 2**32}, "out_of_range"),
        ({"uptime_ms": 2**64}, "out_of_range"),
        ({"rssi": -129}, "out_of_range"),
        ({"duty": [0.0]}, "out_of_range"),
        ({"duty": [0.0, 0.0, 0.0]}, "out_of_range"),
        ({"duty": [1.5, 0.0]}, "out_of_range"),
        ({"duty": [0.0, -1.0000001]}, "out_of_range"),
        ({"reason": "x" * 65}, "out_of_range"),
        ({"sim": []}, "bad_sim"),
        ({"sim": None}, "bad_sim"),
        ({"sim": {"a": [[[[[[[[1]]]]]]]]}}, "bad_sim"),
    ],
)
def test_bad_fields(changes: dict[str, Any], reason: str) -> None:
    assert reason_of(dumps(obj(**changes))) == reason


def test_sim_depth_limit_is_inclusive() -> None:
    assert parse(dumps(obj(sim={"a": [[[[[[[1]]]]]]]}))).sim is not None


@pytest.mark.parametrize("key", ["gyro_z", "gyro_angle"])
@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_constants_are_bad_json(key: str, constant: str) -> None:
    text = dumps(obj(**{key: 0.0})).replace(f'"{key}": 0.0'.encode(),
                                            f'"{key}": {constant}'.encode())
    assert constant.encode() in text
    assert reason_of(text) == "bad_json"


@pytest.mark.parametrize("key", ["gyro_z", "gyro_angle"])
def test_overflowing_float_is_out_of_range(key: str) -> None:
    text = dumps(obj(**{key: 0.0})).replace(f'"{key}": 0.0'.encode(), f'"{key}": 1e999'.encode())
    assert f'"{key}": 1e999'.encode() in text
    assert reason_of(text) == "out_of_range"


def test_an_overflowing_number_in_sim_is_bad_sim() -> None:
    # Found by the fuzz (test_mz01_fuzz): 1.8e309 read as inf, accepted, and then the
    # object could not be written back.
    text = dumps(obj(sim={"": 1.0})).replace(b"1.0}", b"1.7976931347313734e+309}")
    assert b"e+309" in text
    assert reason_of(text) == "bad_sim"
    assert parse(dumps(obj(sim={"a": [1.5, {"b": -2e300}]}))).sim == {"a": [1.5, {"b": -2e300}]}


def test_duplicate_keys_anywhere() -> None:
    assert reason_of(b'{"id": 7, "id": 7}') == "duplicate_key"
    nested = dumps(obj(sim={"a": 1}))[:-2] + b', "a": 2}}'
    assert reason_of(nested) == "duplicate_key"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "bad_json"),
        (b"{", "bad_json"),
        (b"{} {}", "bad_json"),
        (b"[1, 2]", "not_object"),
        (b"7", "not_object"),
        (b"\xff\xfe{\x00}\x00", "bad_utf8"),
        (b'{"reason": "\xc3"}', "bad_utf8"),
        ("{}".encode("utf-16"), "bad_utf8"),
    ],
)
def test_garbage(data: bytes, reason: str) -> None:
    assert reason_of(data) == reason


def test_size_limit() -> None:
    base = dumps(obj(pad=""))
    fill = MAX_TELEMETRY_BYTES - len(base)
    exact = dumps(obj(pad="x" * fill))
    assert len(exact) == MAX_TELEMETRY_BYTES
    assert parse(exact) == GOOD
    assert reason_of(dumps(obj(pad="x" * (fill + 1)))) == "too_large"


def test_pathological_json_within_the_size_limit() -> None:
    deep = b'{"x": ' + b"[" * 4000 + b"]" * 4000 + b"}"
    assert reason_of(deep) == "bad_json"
    huge_int = b'{"seq": ' + b"9" * 5000 + b"}"
    assert reason_of(huge_int) in {"bad_json", "out_of_range"}


def test_non_bytes_input() -> None:
    assert reason_of("{}") == "bad_type"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "changes",
    [
        {"duty": (2.0, 0.0)},
        {"duty": (0.0,)},
        {"armed": 1},
        {"gyro_z": math.nan},
        {"gyro_angle": math.nan},
        {"gyro_angle": math.inf},
        {"gyro_angle": 3.15},
        {"gyro_angle": -4.0},
        {"id": 0},
        {"sim": {"blob": "x" * MAX_TELEMETRY_BYTES}},
        {"sim": {"s": {1, 2}}},
    ],
)
def test_encode_refuses_what_parse_would_refuse(changes: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        encode_telemetry(Telemetry(**{**GOOD.__dict__, **changes}))


def test_telemetry_is_hashable_without_sim() -> None:
    assert hash(GOOD) == hash(parse(encode_telemetry(GOOD)))
