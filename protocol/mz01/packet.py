"""The MZ01 32-byte command datagram: kinds, reasons, and its codec.

Layout (big-endian), as in ``protocol/MZ01.md``: magic ``MZ01``, robot_id u8,
kind u8, flags u16, boot_nonce u32, session_token u32, seq u32, stamp_ms u32,
left binary32, right binary32.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from enum import IntEnum, StrEnum

from protocol.errors import ProtocolError

MAGIC = b"MZ01"
COMMAND_SIZE = 32
FLAG_RESET_ESTOP = 0x0001
U32_MAX = 0xFFFF_FFFF

BytesLike = bytes | bytearray | memoryview

_LAYOUT = struct.Struct(">4sBBHIIIIff")
_BINARY32 = struct.Struct(">f")
assert _LAYOUT.size == COMMAND_SIZE


class Kind(IntEnum):
    HELLO = 1
    ARM = 2
    DRIVE = 3
    STOP = 4
    ESTOP = 5


class Reason(StrEnum):
    """Every rejection and disarm reason in MZ01.md, spelled as on the wire."""

    BAD_LENGTH = "bad_length"
    BAD_MAGIC = "bad_magic"
    WRONG_ROBOT = "wrong_robot"
    BAD_KIND = "bad_kind"
    BAD_FLAGS = "bad_flags"
    BAD_WHEELS = "bad_wheels"
    BAD_NONCE = "bad_nonce"
    BAD_TOKEN = "bad_token"
    STALE_STAMP = "stale_stamp"
    NONZERO_WHEELS = "nonzero_wheels"
    UNHEALTHY = "unhealthy"
    ESTOP_LATCHED = "estop_latched"
    NOT_ARMED = "not_armed"
    NOT_BOUND = "not_bound"
    STALE_SEQ = "stale_seq"
    WATCHDOG = "watchdog"
    STOP = "stop"
    ESTOP = "estop"


CODEC_REASONS = (
    Reason.BAD_LENGTH,
    Reason.BAD_MAGIC,
    Reason.BAD_KIND,
    Reason.BAD_FLAGS,
    Reason.BAD_WHEELS,
)
# ``unhealthy`` is both: an ARM refused, and an armed car disarmed at a tick.
DISARM_REASONS = (Reason.WATCHDOG, Reason.STOP, Reason.ESTOP, Reason.UNHEALTHY)
REJECTION_REASONS = tuple(
    r for r in Reason if r not in (Reason.WATCHDOG, Reason.STOP, Reason.ESTOP)
)
STOP_KINDS = frozenset({4, 5})  # STOP and ESTOP: stop the car whatever else the datagram holds


class PacketError(ProtocolError):
    """A command datagram failed a codec check; ``reason`` is one of ``CODEC_REASONS``."""


@dataclass(frozen=True)
class Command:
    """One command datagram's fields; ``left``/``right`` are binary32 values once decoded."""

    robot_id: int
    kind: Kind
    flags: int = 0
    boot_nonce: int = 0
    session_token: int = 0
    seq: int = 0
    stamp_ms: int = 0
    left: float = 0.0
    right: float = 0.0


def to_binary32(x: float) -> float:
    """Round ``x`` to the nearest IEEE-754 binary32 value (as a Python float)."""
    return float(_BINARY32.unpack(_BINARY32.pack(x))[0])


def wheel_ok(x: float) -> bool:
    """A wheel duty the codec accepts: finite and within [-1, 1]."""
    return math.isfinite(x) and -1.0 <= x <= 1.0


def _check_uint(name: str, value: int, top: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
        raise ValueError(f"{name} must be an integer in 0..{top}, got {value!r}")


def encode_command(cmd: Command) -> bytes:
    """The 32 bytes of ``cmd``; ValueError if a field is one the car would reject."""
    _check_uint("robot_id", cmd.robot_id, 0xFF)
    if isinstance(cmd.kind, bool) or cmd.kind not in set(Kind):
        raise ValueError(f"kind must be a Kind, got {cmd.kind!r}")
    kind = Kind(cmd.kind)
    _check_uint("flags", cmd.flags, 0xFFFF)
    if cmd.flags & ~FLAG_RESET_ESTOP or (cmd.flags and kind is not Kind.HELLO):
        raise ValueError(f"flags {cmd.flags:#06x} are invalid on {kind.name}")
    for name in ("boot_nonce", "session_token", "seq", "stamp_ms"):
        _check_uint(name, getattr(cmd, name), U32_MAX)
    for name in ("left", "right"):
        value = getattr(cmd, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not wheel_ok(value):
            raise ValueError(f"{name} must be a finite number in [-1, 1], got {value!r}")
    return _LAYOUT.pack(
        MAGIC,
        cmd.robot_id,
        kind,
        cmd.flags,
        cmd.boot_nonce,
        cmd.session_token,
        cmd.seq,
        cmd.stamp_ms,
        float(cmd.left),
        float(cmd.right),
    )


def decode_command(data: BytesLike) -> Command:
    """Parse a datagram, running the codec checks of MZ01.md in their order.

    A STOP or ESTOP passes on length, magic and kind alone: its flags and
    wheels are returned as they are on the wire (wheels may be NaN).
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise PacketError(Reason.BAD_LENGTH, f"not bytes: {type(data).__name__}")
    raw = bytes(data)
    if len(raw) != COMMAND_SIZE:
        raise PacketError(Reason.BAD_LENGTH, f"{len(raw)} bytes")
    magic, robot_id, kind, flags, nonce, token, seq, stamp, left, right = _LAYOUT.unpack(raw)
    if magic != MAGIC:
        raise PacketError(Reason.BAD_MAGIC, repr(magic))
    if kind not in Kind._value2member_map_:
        raise PacketError(Reason.BAD_KIND, str(kind))
    if kind in STOP_KINDS:
        return Command(robot_id, Kind(kind), flags, nonce, token, seq, stamp, left, right)
    if flags & ~FLAG_RESET_ESTOP or (flags and kind != Kind.HELLO):
        raise PacketError(Reason.BAD_FLAGS, f"{flags:#06x} on kind {kind}")
    if not (wheel_ok(left) and wheel_ok(right)):
        raise PacketError(Reason.BAD_WHEELS, f"{left!r}, {right!r}")
    return Command(robot_id, Kind(kind), flags, nonce, token, seq, stamp, left, right)
