"""The MZC1 clock probe (UDP 4211): an 8-byte request and its 16-byte reply.

Request: ``MZC1`` + u32 request id. Reply: ``MZC1`` + the same id + u64 car
uptime in µs when the request was handled. Big-endian.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from protocol.errors import ProtocolError

PROBE_MAGIC = b"MZC1"
REQUEST_SIZE = 8
REPLY_SIZE = 16
U64_MAX = 0xFFFF_FFFF_FFFF_FFFF

BytesLike = bytes | bytearray | memoryview

_REQUEST = struct.Struct(">4sI")
_REPLY = struct.Struct(">4sIQ")


class ProbeError(ProtocolError):
    """A probe datagram was malformed; ``reason`` is ``bad_length`` or ``bad_magic``."""


@dataclass(frozen=True)
class ProbeRequest:
    request_id: int


@dataclass(frozen=True)
class ProbeReply:
    request_id: int
    uptime_us: int


def _check_uint(name: str, value: int, top: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
        raise ValueError(f"{name} must be an integer in 0..{top}, got {value!r}")


def _raw(data: BytesLike, size: int) -> bytes:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ProbeError("bad_length", f"not bytes: {type(data).__name__}")
    raw = bytes(data)
    if len(raw) != size:
        raise ProbeError("bad_length", f"{len(raw)} bytes, expected {size}")
    if raw[:4] != PROBE_MAGIC:
        raise ProbeError("bad_magic", repr(raw[:4]))
    return raw


def encode_probe_request(req: ProbeRequest) -> bytes:
    _check_uint("request_id", req.request_id, 0xFFFF_FFFF)
    return _REQUEST.pack(PROBE_MAGIC, req.request_id)


def decode_probe_request(data: BytesLike) -> ProbeRequest:
    _, request_id = _REQUEST.unpack(_raw(data, REQUEST_SIZE))
    return ProbeRequest(request_id)


def encode_probe_reply(reply: ProbeReply) -> bytes:
    _check_uint("request_id", reply.request_id, 0xFFFF_FFFF)
    _check_uint("uptime_us", reply.uptime_us, U64_MAX)
    return _REPLY.pack(PROBE_MAGIC, reply.request_id, reply.uptime_us)


def decode_probe_reply(data: BytesLike) -> ProbeReply:
    _, request_id, uptime_us = _REPLY.unpack(_raw(data, REPLY_SIZE))
    return ProbeReply(request_id, uptime_us)
