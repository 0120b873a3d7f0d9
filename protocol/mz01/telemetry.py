"""Car telemetry: one compact UTF-8 JSON object per datagram (MZ01.md, "Telemetry").

``parse_telemetry`` checks, in order: size, UTF-8, JSON (no NaN/Infinity, no
duplicate keys), a top-level object, then each required key's presence, type
and range; unknown keys are ignored; ``gyro_angle`` may be absent (firmware older
than the key: None); ``sim`` is kept as a plain object of bounded depth for the
simulator code to validate.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import ProtocolError

MAX_TELEMETRY_BYTES = 8192
MAX_REASON_CHARS = 64
MAX_SIM_DEPTH = 8
U32_MAX = 0xFFFF_FFFF
U64_MAX = 0xFFFF_FFFF_FFFF_FFFF
MAX_GYRO_ANGLE = 3.1416  # rad: the wrapped angle, pi rounded up past float32's pi

BytesLike = bytes | bytearray | memoryview

TOO_LARGE = "too_large"
BAD_UTF8 = "bad_utf8"
BAD_JSON = "bad_json"
NOT_OBJECT = "not_object"
DUPLICATE_KEY = "duplicate_key"
MISSING_KEY = "missing_key"
BAD_TYPE = "bad_type"
OUT_OF_RANGE = "out_of_range"
BAD_SIM = "bad_sim"


class TelemetryError(ProtocolError):
    """A telemetry datagram was rejected; ``reason`` names the failed check."""


@dataclass(frozen=True)
class Telemetry:
    """The telemetry object; field names are the JSON keys."""

    id: int
    boot: int
    token: int
    uptime_ms: int
    armed: bool
    estop: bool
    reason: str
    rssi: int
    camera_ok: bool
    motor_ok: bool
    seq: int
    duty: tuple[float, float]
    gyro_z: float | None
    gyro_angle: float | None = None  # rad, the yaw rate integrated on the car, wrapped
    sim: Mapping[str, Any] | None = field(default=None, hash=False)


class _Duplicate(Exception):
    pass


class _NonFinite(Exception):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(key)
        out[key] = value
    return out


def _reject_constant(name: str) -> float:
    raise _NonFinite(name)


def _int(obj: Mapping[str, Any], key: str, low: int, high: int) -> int:
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise TelemetryError(BAD_TYPE, f"{key} must be an integer")
    if not low <= value <= high:
        raise TelemetryError(OUT_OF_RANGE, f"{key}={value} outside {low}..{high}")
    return value


def _bool(obj: Mapping[str, Any], key: str) -> bool:
    value = obj[key]
    if not isinstance(value, bool):
        raise TelemetryError(BAD_TYPE, f"{key} must be true or false")
    return value


def _number(value: object, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TelemetryError(BAD_TYPE, f"{key} must be a number")
    number = float(value)
    if not math.isfinite(number):
        raise TelemetryError(OUT_OF_RANGE, f"{key} must be finite")
    return number


def _sim_problem(value: object) -> str | None:
    """Why ``sim`` is refused: not an object, nested deeper than MAX_SIM_DEPTH, or holding a
    number beyond binary64 (``1e309`` reads as infinity: it could not be written back)."""
    if not isinstance(value, dict):
        return "sim must be an object"
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            depth += 1
            if depth > MAX_SIM_DEPTH:
                return f"sim must be nested at most {MAX_SIM_DEPTH} deep"
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth) for child in children)
        elif isinstance(item, float) and not math.isfinite(item):
            return "sim holds a number beyond binary64"
    return None


_REQUIRED = (
    "id", "boot", "token", "uptime_ms", "armed", "estop", "reason",
    "rssi", "camera_ok", "motor_ok", "seq", "duty", "gyro_z",
)  # fmt: skip


def _from_object(obj: Mapping[str, Any]) -> Telemetry:
    for key in _REQUIRED:
        if key not in obj:
            raise TelemetryError(MISSING_KEY, key)
    reason = obj["reason"]
    if not isinstance(reason, str):
        raise TelemetryError(BAD_TYPE, "reason must be a string")
    if len(reason) > MAX_REASON_CHARS:
        raise TelemetryError(OUT_OF_RANGE, f"reason longer than {MAX_REASON_CHARS}")
    duty = obj["duty"]
    if not isinstance(duty, list):
        raise TelemetryError(BAD_TYPE, "duty must be a list")
    if len(duty) != 2:
        raise TelemetryError(OUT_OF_RANGE, "duty must hold 2 numbers")
    left, right = (_number(d, "duty") for d in duty)
    if not (-1.0 <= left <= 1.0 and -1.0 <= right <= 1.0):
        raise TelemetryError(OUT_OF_RANGE, "duty outside [-1, 1]")
    gyro_z = None if obj["gyro_z"] is None else _number(obj["gyro_z"], "gyro_z")
    angle = obj.get("gyro_angle")
    gyro_angle = None if angle is None else _number(angle, "gyro_angle")
    if gyro_angle is not None and abs(gyro_angle) > MAX_GYRO_ANGLE:
        raise TelemetryError(OUT_OF_RANGE, f"gyro_angle={gyro_angle} outside [-pi, pi]")
    sim = obj.get("sim")
    problem = _sim_problem(sim) if "sim" in obj else None
    if problem is not None:
        raise TelemetryError(BAD_SIM, problem)
    return Telemetry(
        id=_int(obj, "id", 1, 0xFF),
        boot=_int(obj, "boot", 0, U32_MAX),
        token=_int(obj, "token", 0, U32_MAX),
        uptime_ms=_int(obj, "uptime_ms", 0, U64_MAX),
        armed=_bool(obj, "armed"),
        estop=_bool(obj, "estop"),
        reason=reason,
        rssi=_int(obj, "rssi", -128, 127),
        camera_ok=_bool(obj, "camera_ok"),
        motor_ok=_bool(obj, "motor_ok"),
        seq=_int(obj, "seq", 0, U32_MAX),
        duty=(left, right),
        gyro_z=gyro_z,
        gyro_angle=gyro_angle,
        sim=sim,
    )


def parse_telemetry(data: BytesLike) -> Telemetry:
    """Validate one telemetry datagram; raises only :class:`TelemetryError`."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TelemetryError(BAD_TYPE, f"not bytes: {type(data).__name__}")
    raw = bytes(data)
    if len(raw) > MAX_TELEMETRY_BYTES:
        raise TelemetryError(TOO_LARGE, f"{len(raw)} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TelemetryError(BAD_UTF8, str(exc)) from None
    try:
        obj = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except _Duplicate as exc:
        raise TelemetryError(DUPLICATE_KEY, str(exc)) from None
    except _NonFinite as exc:
        raise TelemetryError(BAD_JSON, f"non-finite constant {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise TelemetryError(BAD_JSON, str(exc)[:200]) from None
    if not isinstance(obj, dict):
        raise TelemetryError(NOT_OBJECT, type(obj).__name__)
    return _from_object(obj)


def encode_telemetry(t: Telemetry) -> bytes:
    """Compact UTF-8 JSON; ValueError if the result would not parse back."""
    obj: dict[str, Any] = {
        "id": t.id,
        "boot": t.boot,
        "token": t.token,
        "uptime_ms": t.uptime_ms,
        "armed": t.armed,
        "estop": t.estop,
        "reason": t.reason,
        "rssi": t.rssi,
        "camera_ok": t.camera_ok,
        "motor_ok": t.motor_ok,
        "seq": t.seq,
        "duty": list(t.duty),
        "gyro_z": t.gyro_z,
        "gyro_angle": t.gyro_angle,
    }
    if t.sim is not None:
        obj["sim"] = t.sim
    try:
        data = json.dumps(obj, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode(
            "utf-8"
        )
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"telemetry is not encodable: {exc}") from None
    try:
        parse_telemetry(data)
    except TelemetryError as exc:
        raise ValueError(f"telemetry would be rejected: {exc}") from None
    return data
