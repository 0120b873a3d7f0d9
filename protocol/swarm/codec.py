"""Swarm datagrams: ``msgpack(envelope) || HMAC-SHA256(key, msgpack)[:16]``.

``encode`` is deterministic. ``decode_datagram`` runs every check of SWARM.md except
the replay window (which needs state, see :mod:`protocol.swarm.receiver`) and raises
only :class:`SwarmDecodeError`.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np

from protocol.swarm.cells import BYTES_PER_CELL, Cells
from protocol.swarm.errors import FieldError, RejectReason, SwarmDecodeError
from protocol.swarm.messages import (
    BYE_REASON_MAX_BYTES,
    BYTES_PER_LOOK,
    DEFAULT_DATAGRAM_LIMIT,
    MAC_LEN,
    MAX_COUNTERS,
    PROTOCOL_VERSION,
    Body,
    Bye,
    Heartbeat,
    Kind,
    Look,
    Message,
    Patch,
    Ping,
    Pong,
    Snapshot,
    Track,
    check_datagram_limit,
    looks_from_bytes,
    validate_header,
)

MIN_KEY_BYTES = 16
MAX_KEY_BYTES = 1024
ENVELOPE_LEN = 8
# Structural limits given to the msgpack parser: the largest string, array and map
# any valid message holds. Anything larger is ``malformed`` before types are looked at.
MAX_STR_LEN = BYE_REASON_MAX_BYTES
MAX_ARRAY_LEN = 10
MAX_MAP_LEN = MAX_COUNTERS
MAX_DEPTH = 3  # envelope, body, an array inside the body (a covariance, the counters)
# One shape rule for every bin (cells and looks): its length is a multiple of 8.
assert BYTES_PER_CELL == BYTES_PER_LOOK


def check_key(key: bytes) -> bytes:
    """Validate a swarm key: 16..1024 bytes (32 random bytes recommended)."""
    if not isinstance(key, bytes | bytearray | memoryview):
        raise TypeError("the swarm key must be bytes")
    key = bytes(key)
    if not MIN_KEY_BYTES <= len(key) <= MAX_KEY_BYTES:
        raise ValueError(f"the swarm key must be {MIN_KEY_BYTES}..{MAX_KEY_BYTES} bytes")
    return key


_SHA256_BLOCK = 64


class MacKey:
    """HMAC-SHA256 with the key's two padded blocks hashed once (RFC 2104).

    ``tag`` copies the two hash states instead of absorbing ``key ^ ipad`` and
    ``key ^ opad`` again per datagram: the same tag as ``hmac.digest`` in about
    half the time for a full datagram. The states are never updated, only copied,
    so one ``MacKey`` serves any number of threads.
    """

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        if len(key) > _SHA256_BLOCK:  # RFC 2104: a long key is hashed first
            key = hashlib.sha256(key).digest()
        block = key.ljust(_SHA256_BLOCK, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in block))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in block))

    def tag(self, payload: bytes) -> bytes:
        """The first 16 bytes of HMAC-SHA256(key, payload)."""
        inner = self._inner.copy()
        inner.update(payload)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()[:MAC_LEN]


def mac(payload: bytes, key: bytes) -> bytes:
    """The 16-byte tag: the first 16 bytes of HMAC-SHA256(key, payload)."""
    return hmac.digest(key, payload, "sha256")[:MAC_LEN]  # one-shot: OpenSSL, no hmac.HMAC


def seal(payload: bytes, key: bytes) -> bytes:
    """Append the MAC to msgpack bytes (also used to craft test datagrams)."""
    return payload + mac(payload, check_key(key))


class F32Array(list[Any]):
    """An array of floats written as msgpack float 32 (covariances and the track mean).

    Half the bytes of float 64 with all the precision a metre-scale estimate needs;
    this is what keeps an agent under 4 KB/s with TRACK sent at every detection.
    Times are never written this way.
    """


def _pack_f32(values: F32Array) -> bytes | None:
    """The array as float 32, or None when a value does not fit float 32 (then float 64)."""
    if len(values) > 15:
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        f32 = np.asarray(values, dtype=">f4")
    if not np.isfinite(f32).all():
        return None
    raw = f32.tobytes()  # big-endian, 4 bytes a value
    return bytes([0x90 | len(values)]) + b"".join(
        b"\xca" + raw[i : i + 4] for i in range(0, len(raw), 4)
    )


def pack(obj: Any) -> bytes:
    """Deterministic msgpack: shortest int forms, float 64 (float 32 for :class:`F32Array`),
    str and bin types, maps in order."""
    if isinstance(obj, F32Array) and all(type(v) is float for v in obj):
        packed = _pack_f32(obj)
        if packed is not None:
            return packed
    if isinstance(obj, list) and any(isinstance(v, list) for v in obj):
        if len(obj) > 15:
            raise ValueError("nested arrays of the envelope are short")
        return bytes([0x90 | len(obj)]) + b"".join(pack(v) for v in obj)
    data: bytes = msgpack.packb(obj, use_bin_type=True)
    return data


# --- message -> wire ------------------------------------------------------------------------


def body_to_wire(body: Body) -> list[Any]:
    """The msgpack array of a body (layouts in SWARM.md)."""
    match body:
        case Heartbeat():
            return [
                body.x, body.y, body.heading, F32Array(body.cov), int(body.mode),
                body.origin_ix, body.origin_iy, dict(body.counters),
            ]
        case Patch():
            return [body.cell_size_mm, body.t_ref, body.cells.to_bytes()]
        case Track():
            return [F32Array(body.mean), F32Array(body.cov), body.t_ref, body.updates]
        case Ping():
            return [body.ping_id]
        case Pong():
            return [body.ping_id, body.t1, body.t2, body.t3]
        case Snapshot():
            return [
                body.snapshot_id, body.chunk_index, body.chunk_count, body.origin_ix,
                body.origin_iy, body.width, body.height, body.cell_size_mm, body.t_ref,
                body.cells.to_bytes(),
            ]
        case Bye():
            return [body.reason]
        case Look():
            return [body.first_seq, body.t_ref, body.range_cm, body.fov_mrad, body.to_bytes()]
    raise TypeError(f"not a message body: {type(body).__name__}")


def to_wire(message: Message) -> list[Any]:
    """The envelope array: [version, kind, swarm_id, sender, epoch, seq, t_sent, body]."""
    return [
        PROTOCOL_VERSION, int(message.kind), message.swarm_id, message.sender,
        message.epoch, message.seq, message.t_sent, body_to_wire(message.body),
    ]


# Bodies that hold an F32Array need pack(); msgpack.packb writes the others' envelope
# in one call with the very same bytes (shortest ints, float 64, fixarray headers).
_F32_KINDS = frozenset((Kind.HEARTBEAT, Kind.TRACK))


def payload_of(message: Message) -> bytes:
    """The msgpack bytes of the message's envelope (the datagram without its MAC)."""
    wire = to_wire(message)
    if message.body.KIND in _F32_KINDS:
        return pack(wire)
    data: bytes = msgpack.packb(wire, use_bin_type=True)
    return data


def encoded_size(message: Message) -> int:
    """Length of the datagram ``encode`` would produce, MAC included."""
    return len(payload_of(message)) + MAC_LEN


def encode(message: Message, key: bytes, *, limit: int = DEFAULT_DATAGRAM_LIMIT) -> bytes:
    """Encode and sign; ``ValueError`` if the datagram would exceed ``limit``."""
    check_datagram_limit(limit)
    payload = _sized_payload(message, limit)
    return payload + mac(payload, check_key(key))


def encode_checked(message: Message, key: MacKey, limit: int) -> bytes:
    """:func:`encode` for a key and limit already validated (the sender checks them once)."""
    payload = _sized_payload(message, limit)
    return payload + key.tag(payload)


def _sized_payload(message: Message, limit: int) -> bytes:
    payload = payload_of(message)
    if len(payload) + MAC_LEN > limit:
        raise ValueError(
            f"{message.kind.name} datagram of {len(payload) + MAC_LEN} bytes exceeds the "
            f"{limit}-byte limit (split cells with protocol.swarm.chunking)"
        )
    return payload


# --- wire -> message ------------------------------------------------------------------------


class _MapPairs(tuple[tuple[Any, Any], ...]):
    """A decoded msgpack map, kept as its pairs so duplicates and types can be checked."""


def _map_pairs(pairs: list[tuple[Any, Any]]) -> _MapPairs:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate map key")
    return _MapPairs(pairs)


def _no_ext(code: int, data: bytes) -> Any:
    raise ValueError(f"ext type {code} is not allowed")


def _unpack(payload: bytes, limit: int) -> Any:
    try:
        return msgpack.unpackb(
            payload,
            raw=False,
            use_list=True,
            strict_map_key=True,
            object_pairs_hook=_map_pairs,
            ext_hook=_no_ext,
            timestamp=0,
            max_str_len=MAX_STR_LEN,
            max_bin_len=limit,
            max_array_len=MAX_ARRAY_LEN,
            max_map_len=MAX_MAP_LEN,
            max_ext_len=0,
        )
    except msgpack.ExtraData as e:
        raise SwarmDecodeError(RejectReason.TRAILING_BYTES, f"{len(e.extra)} bytes") from None
    except Exception as e:  # msgpack raises many types; none may escape
        raise SwarmDecodeError(RejectReason.MALFORMED, f"{type(e).__name__}: {e}") from None


def _check_depth(env: Any) -> None:
    """Refuse containers nested deeper than any message is, before anything reads them."""
    stack: list[tuple[Any, int]] = [(env, 1)]
    while stack:
        obj, depth = stack.pop()
        if isinstance(obj, _MapPairs):
            items: list[Any] = [x for pair in obj for x in pair]
        elif isinstance(obj, list):
            items = obj
        else:
            continue
        if depth > MAX_DEPTH:
            raise SwarmDecodeError(RejectReason.MALFORMED, f"nested deeper than {MAX_DEPTH}")
        stack.extend((x, depth + 1) for x in items)


# Wire types of a field: F float, I int, S str, B bin, M map of str -> int,
# or an int n for an array of n floats.
_FieldSpec = str | int
_BODY_SPECS: dict[Kind, tuple[_FieldSpec, ...]] = {
    Kind.HEARTBEAT: ("F", "F", "F", 6, "I", "I", "I", "M"),
    Kind.PATCH: ("I", "F", "B"),
    Kind.TRACK: (4, 10, "F", "I"),
    Kind.PING: ("I",),
    Kind.PONG: ("I", "F", "F", "F"),
    Kind.SNAPSHOT: ("I", "I", "I", "I", "I", "I", "I", "I", "F", "B"),
    Kind.BYE: ("S",),
    Kind.LOOK: ("I", "F", "I", "I", "B"),
}
_SCALAR_TYPES: dict[str, type] = {"F": float, "I": int, "S": str, "B": bytes}


def _check_field(where: str, value: Any, spec: _FieldSpec) -> None:
    if isinstance(spec, int):
        if type(value) is not list or len(value) != spec:
            raise SwarmDecodeError(RejectReason.BAD_SHAPE, f"{where} must be an array of {spec}")
        for i, v in enumerate(value):
            if type(v) is not float:
                raise SwarmDecodeError(RejectReason.BAD_TYPE, f"{where}[{i}] must be a float")
    elif spec == "M":
        if not isinstance(value, _MapPairs):
            raise SwarmDecodeError(RejectReason.BAD_SHAPE, f"{where} must be a map")
        for k, v in value:
            if type(k) is not str or type(v) is not int:
                raise SwarmDecodeError(RejectReason.BAD_TYPE, f"{where} must map str to int")
    else:
        if type(value) is not _SCALAR_TYPES[spec]:
            raise SwarmDecodeError(RejectReason.BAD_TYPE, f"{where} has the wrong type")
        if isinstance(value, bytes) and len(value) % BYTES_PER_CELL:
            raise SwarmDecodeError(
                RejectReason.BAD_SHAPE, f"{where}: bin length is not a multiple of 8"
            )


def _check_types(env: Any) -> Kind:
    """Shape and msgpack types of the envelope and body, in wire order."""
    if type(env) is not list or not env:
        raise SwarmDecodeError(RejectReason.BAD_SHAPE, "envelope must be a non-empty array")
    if type(env[0]) is not int or env[0] != PROTOCOL_VERSION:
        raise SwarmDecodeError(RejectReason.BAD_VERSION, f"version {env[0]!r}")
    if len(env) != ENVELOPE_LEN:
        raise SwarmDecodeError(RejectReason.BAD_SHAPE, f"envelope has {len(env)} elements")
    if type(env[1]) is not int:
        raise SwarmDecodeError(RejectReason.BAD_TYPE, "kind must be an int")
    try:
        kind = Kind(env[1])
    except ValueError:
        raise SwarmDecodeError(RejectReason.UNKNOWN_KIND, f"kind {env[1]}") from None
    for where, value, wire_type in zip(
        ("swarm_id", "sender", "epoch", "seq", "t_sent"), env[2:7], "ISIIF", strict=True
    ):
        _check_field(where, value, wire_type)
    body = env[7]
    specs = _BODY_SPECS[kind]
    if type(body) is not list or len(body) != len(specs):
        raise SwarmDecodeError(
            RejectReason.BAD_SHAPE, f"{kind.name} body must be an array of {len(specs)}"
        )
    for i, (value, spec) in enumerate(zip(body, specs, strict=True)):
        _check_field(f"{kind.name} body[{i}]", value, spec)
    return kind


_WIRE_TYPES: dict[str, type] = {**_SCALAR_TYPES, "M": _MapPairs}
_HEADER_TYPES = (int, int, int, str, int, int, float, list)
# Per kind value: the exact Python type of each body field, the array fields' lengths, and
# where its bins and maps are.
_Indices = tuple[int, ...]
_EXACT_BODY: dict[
    int, tuple[Kind, tuple[type, ...], tuple[tuple[int, int], ...], _Indices, _Indices]
] = {
    int(kind): (
        kind,
        tuple(list if isinstance(spec, int) else _WIRE_TYPES[spec] for spec in specs),
        tuple((i, spec) for i, spec in enumerate(specs) if isinstance(spec, int)),
        tuple(i for i, spec in enumerate(specs) if spec == "B"),
        tuple(i for i, spec in enumerate(specs) if spec == "M"),
    )
    for kind, specs in _BODY_SPECS.items()
}


def _well_typed_kind(env: Any) -> Kind | None:
    """The kind when the envelope has exactly the expected shape and types, else None.

    A shortcut for the common case: when it returns a kind, :func:`_check_depth` and
    :func:`_check_types` would pass and return the same kind (every container is where
    a message has one, its elements scalars). None decides nothing: the full checks
    then run and name the first failure.
    """
    if type(env) is not list or len(env) != ENVELOPE_LEN:
        return None
    if tuple(map(type, env)) != _HEADER_TYPES or env[0] != PROTOCOL_VERSION:
        return None
    exact = _EXACT_BODY.get(env[1])
    if exact is None:
        return None
    kind, body_types, arrays, bins, maps = exact
    body = env[7]
    if tuple(map(type, body)) != body_types:
        return None
    for i, n in arrays:
        if len(body[i]) != n or any(type(v) is not float for v in body[i]):
            return None
    for i in bins:
        if len(body[i]) % BYTES_PER_CELL:
            return None
    for i in maps:
        if any(type(k) is not str or type(v) is not int for k, v in body[i]):
            return None
    return kind


def _body_with_cells(b: list[Any], build: Callable[[Cells], Patch | Snapshot]) -> Body:
    try:
        cells = Cells.from_bytes(b[-1])
    except FieldError:
        build(_NO_CELLS)  # checks run in wire order: a bad scalar field is named first
        raise
    return build(cells)


_NO_CELLS = Cells.empty()


def _build_body(kind: Kind, b: list[Any]) -> Body:
    match kind:
        case Kind.HEARTBEAT:
            return Heartbeat(b[0], b[1], b[2], tuple(b[3]), b[4], b[5], b[6], tuple(b[7]))
        case Kind.PATCH:
            return _body_with_cells(b, lambda cells: Patch(b[0], b[1], cells))
        case Kind.TRACK:
            return Track(tuple(b[0]), tuple(b[1]), b[2], b[3])
        case Kind.PING:
            return Ping(b[0])
        case Kind.PONG:
            return Pong(b[0], b[1], b[2], b[3])
        case Kind.SNAPSHOT:
            return _body_with_cells(
                b,
                lambda cells: Snapshot(
                    b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], cells
                ),
            )
        case Kind.BYE:
            return Bye(b[0])
        case Kind.LOOK:
            # the bin's length was checked with the shapes: its records cannot fail
            return Look(b[0], b[1], b[2], b[3], looks_from_bytes(b[4]))


def decode_payload(
    payload: bytes, swarm_id: int, *, limit: int = DEFAULT_DATAGRAM_LIMIT
) -> Message:
    """Checks 3 to 9 of SWARM.md on msgpack bytes whose MAC has been verified."""
    env = _unpack(payload, limit)
    kind = _well_typed_kind(env)
    if kind is None:
        _check_depth(env)
        kind = _check_types(env)
    try:
        header = validate_header(*env[2:7])
        body = _build_body(kind, env[7])
        message = Message.from_checked(header, body)  # the header is not checked twice
    except FieldError as e:
        raise SwarmDecodeError(e.reason, e.detail) from None
    if message.swarm_id != swarm_id:
        raise SwarmDecodeError(RejectReason.WRONG_SWARM, f"swarm id {message.swarm_id}")
    return message


def decode_datagram(
    data: bytes, key: bytes, swarm_id: int, *, limit: int = DEFAULT_DATAGRAM_LIMIT
) -> Message:
    """Decode one datagram, raising :class:`SwarmDecodeError` on the first failed check.

    Pure: the replay window is not consulted (``SwarmReceiver`` does that last).
    """
    check_datagram_limit(limit)
    payload, tag = _payload_and_tag(data, limit)
    if not hmac.compare_digest(mac(payload, key), tag):
        raise SwarmDecodeError(RejectReason.BAD_MAC)
    return decode_payload(payload, swarm_id, limit=limit)


def decode_checked(data: bytes, key: MacKey, swarm_id: int, limit: int) -> Message:
    """:func:`decode_datagram` with a :class:`MacKey` and a limit already validated (the
    receiver makes and checks them once)."""
    payload, tag = _payload_and_tag(data, limit)
    if not hmac.compare_digest(key.tag(payload), tag):
        raise SwarmDecodeError(RejectReason.BAD_MAC)
    return decode_payload(payload, swarm_id, limit=limit)


def _payload_and_tag(data: bytes, limit: int) -> tuple[bytes, bytes]:
    """Check 1 of SWARM.md (the size); the msgpack bytes and the MAC they end with."""
    data = bytes(data)
    if len(data) < MAC_LEN + 1:
        raise SwarmDecodeError(RejectReason.TOO_SHORT, f"{len(data)} bytes")
    if len(data) > limit:
        raise SwarmDecodeError(RejectReason.TOO_LONG, f"{len(data)} > {limit} bytes")
    return data[:-MAC_LEN], data[-MAC_LEN:]
