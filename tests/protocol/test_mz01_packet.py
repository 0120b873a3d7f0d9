"""The MZ01 command codec and the MZC1 clock probe codec."""

from __future__ import annotations

import math
import re
import struct
from pathlib import Path

import pytest

from protocol.errors import ProtocolError
from protocol.mz01 import (
    Command,
    Kind,
    PacketError,
    ProbeError,
    ProbeReply,
    ProbeRequest,
    Reason,
    decode_command,
    decode_probe_reply,
    decode_probe_request,
    encode_command,
    encode_probe_reply,
    encode_probe_request,
    to_binary32,
)

SPEC = (Path(__file__).resolve().parents[2] / "protocol" / "MZ01.md").read_text(encoding="utf-8")


def raw(kind: int = 1, flags: int = 0, left: float = 0.0, right: float = 0.0, magic=b"MZ01"):
    return struct.pack(">4sBBHIIIIff", magic, 7, kind, flags, 1, 2, 3, 4, left, right)


def test_layout_matches_the_table() -> None:
    data = bytes.fromhex(
        "4d5a3031"  # magic
        "07"  # robot_id
        "03"  # kind DRIVE
        "0000"  # flags
        "01020304"  # boot_nonce
        "0a0b0c0d"  # session_token
        "fffffffe"  # seq
        "00000064"  # stamp_ms
        "3f000000"  # left 0.5
        "be800000"  # right -0.25
    )
    cmd = decode_command(data)
    assert cmd == Command(7, Kind.DRIVE, 0, 0x01020304, 0x0A0B0C0D, 0xFFFFFFFE, 100, 0.5, -0.25)
    assert encode_command(cmd) == data


def test_kinds_and_reasons_are_the_specs() -> None:
    kinds = dict(re.findall(r"(\d) (HELLO|ARM|DRIVE|STOP|ESTOP)", SPEC))
    assert {int(v): name for v, name in kinds.items()} == {k.value: k.name for k in Kind}
    section = SPEC.split("## Reasons", 1)[1].split("##", 1)[0]
    assert set(re.findall(r"`([a-z_]+)`", section)) == {r.value for r in Reason}


def test_round_trip_keeps_binary32_values_and_negative_zero() -> None:
    cmd = Command(255, Kind.HELLO, 1, 2**32 - 1, 0, 2**32 - 1, 0, -0.0, 1.0)
    back = decode_command(encode_command(cmd))
    assert back == cmd
    assert math.copysign(1.0, back.left) == -1.0
    drive = decode_command(encode_command(Command(1, Kind.DRIVE, left=0.1, right=-1.0)))
    assert drive.left == to_binary32(0.1) == 0.100000001490116119384765625
    assert drive.right == -1.0


def test_decode_accepts_bytearray_and_memoryview() -> None:
    data = raw()
    expected = decode_command(data)
    assert decode_command(bytearray(data)) == decode_command(memoryview(data)) == expected


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", Reason.BAD_LENGTH),
        (raw()[:31], Reason.BAD_LENGTH),
        (raw() + b"\0", Reason.BAD_LENGTH),
        (raw(kind=0, flags=2, left=math.nan, magic=b"MZ10"), Reason.BAD_MAGIC),
        (raw(kind=0, flags=2, left=math.nan), Reason.BAD_KIND),
        (raw(kind=6), Reason.BAD_KIND),
        (raw(kind=1, flags=2, left=math.nan), Reason.BAD_FLAGS),
        (raw(kind=1, flags=0x8001), Reason.BAD_FLAGS),
        (raw(kind=2, flags=1), Reason.BAD_FLAGS),
        (raw(kind=3, flags=1), Reason.BAD_FLAGS),
        (raw(kind=3, left=math.nan), Reason.BAD_WHEELS),
        (raw(kind=3, right=-math.inf), Reason.BAD_WHEELS),
        (raw(kind=3, left=1.0000001), Reason.BAD_WHEELS),
        (raw(kind=1, right=-2.0), Reason.BAD_WHEELS),
        (raw(kind=4, flags=1, magic=b"MZ00"), Reason.BAD_MAGIC),
        (raw(kind=5)[:31], Reason.BAD_LENGTH),
    ],
)
def test_decode_reasons_in_order(data: bytes, reason: Reason) -> None:
    with pytest.raises(PacketError) as info:
        decode_command(data)
    assert info.value.reason == reason
    assert isinstance(info.value, ProtocolError)


@pytest.mark.parametrize("kind", [Kind.STOP, Kind.ESTOP])
def test_decode_stop_and_estop_whatever_flags_and_wheels_hold(kind: Kind) -> None:
    cmd = decode_command(raw(kind=kind, flags=0xFFFF, left=math.nan, right=-math.inf))
    assert (cmd.kind, cmd.flags, cmd.right) == (kind, 0xFFFF, -math.inf)
    assert math.isnan(cmd.left)
    assert decode_command(raw(kind=kind, flags=1, left=2.0)).left == 2.0


def test_decode_accepts_hello_reset_flag_and_edge_wheels() -> None:
    assert decode_command(raw(kind=1, flags=1)).flags == 1
    cmd = decode_command(raw(kind=3, left=-1.0, right=2.0**-149))
    assert (cmd.left, cmd.right) == (-1.0, 2.0**-149)


def test_decode_rejects_non_bytes() -> None:
    with pytest.raises(PacketError):
        decode_command("MZ01" * 8)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "cmd",
    [
        Command(256, Kind.HELLO),
        Command(-1, Kind.HELLO),
        Command(True, Kind.HELLO),
        Command(1, 6),  # type: ignore[arg-type]
        Command(1, Kind.HELLO, flags=2),
        Command(1, Kind.HELLO, flags=0x10000),
        Command(1, Kind.ARM, flags=1),
        Command(1, Kind.STOP, flags=1),
        Command(1, Kind.ARM, boot_nonce=2**32),
        Command(1, Kind.ARM, session_token=-1),
        Command(1, Kind.DRIVE, seq=2**32),
        Command(1, Kind.ARM, stamp_ms=1.0),  # type: ignore[arg-type]
        Command(1, Kind.DRIVE, left=math.nan),
        Command(1, Kind.DRIVE, right=math.inf),
        Command(1, Kind.DRIVE, left=1.5),
        Command(1, Kind.DRIVE, right=-1.0000000001),
        Command(1, Kind.DRIVE, left="0.5"),  # type: ignore[arg-type]
    ],
)
def test_encode_refuses_what_the_car_would_reject(cmd: Command) -> None:
    with pytest.raises(ValueError):
        encode_command(cmd)


def test_encode_accepts_plain_int_kind() -> None:
    assert encode_command(Command(7, 3)) == encode_command(Command(7, Kind.DRIVE))  # type: ignore[arg-type]


# -- clock probe ------------------------------------------------------------------


def test_probe_round_trip_and_layout() -> None:
    req = encode_probe_request(ProbeRequest(0xDEADBEEF))
    assert req == bytes.fromhex("4d5a4331deadbeef")
    assert decode_probe_request(req) == ProbeRequest(0xDEADBEEF)
    reply = encode_probe_reply(ProbeReply(0xDEADBEEF, 2**64 - 1))
    assert reply == bytes.fromhex("4d5a4331deadbeef" + "ff" * 8)
    assert decode_probe_reply(reply) == ProbeReply(0xDEADBEEF, 2**64 - 1)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "bad_length"),
        (b"MZC1\0\0\0", "bad_length"),
        (b"MZC1\0\0\0\0\0", "bad_length"),
        (b"MZC2\0\0\0\0", "bad_magic"),
        (b"MZ01\0\0\0\0", "bad_magic"),
    ],
)
def test_probe_request_garbage(data: bytes, reason: str) -> None:
    with pytest.raises(ProbeError) as info:
        decode_probe_request(data)
    assert info.value.reason == reason


def test_probe_reply_garbage() -> None:
    with pytest.raises(ProbeError):
        decode_probe_reply(b"MZC1\0\0\0\0")
    with pytest.raises(ProbeError):
        decode_probe_reply(b"XZC1" + bytes(12))
    with pytest.raises(ProbeError):
        decode_probe_reply(12)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-1, 2**32, True])
def test_probe_encode_refuses_out_of_range(bad: int) -> None:
    with pytest.raises(ValueError):
        encode_probe_request(ProbeRequest(bad))
    with pytest.raises(ValueError):
        encode_probe_reply(ProbeReply(bad, 0))


def test_probe_reply_uptime_is_u64() -> None:
    with pytest.raises(ValueError):
        encode_probe_reply(ProbeReply(0, 2**64))
