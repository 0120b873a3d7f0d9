"""Swarm message kinds and their bodies, as frozen dataclasses that validate themselves.

Constructors check every field (type, finiteness, range, consistency) and raise
:class:`~protocol.swarm.errors.FieldError` (a ``ValueError``) with a named reason.
On the sending side that is the sender's bug; the decoder builds the same classes
from the wire and turns the error into a rejection, so both sides share one set
of rules. Units: metres, radians, seconds on the sender's monotonic clock.
"""

from __future__ import annotations

import functools
import hashlib
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar, NamedTuple, NewType

import numpy as np
import numpy.typing as npt

from protocol.swarm.cells import INT16_MAX, INT16_MIN, Cells
from protocol.swarm.errors import FieldError, RejectReason

PROTOCOL_VERSION = 1
DEFAULT_SWARM_PORT = 47000  # SWARM.md §10.1: every member of a swarm uses the same port
MAC_LEN = 16
DEFAULT_DATAGRAM_LIMIT = 1200
MIN_DATAGRAM_LIMIT = 1200
MAX_DATAGRAM_LIMIT = 65000
U16_MAX = 2**16 - 1
U32_MAX = 2**32 - 1
SENDER_MAX_BYTES = 32
COUNTER_NAME_MAX_BYTES = 32
MAX_COUNTERS = 16
BYE_REASON_MAX_BYTES = 64
SWARM_NAME_MAX_BYTES = 64
MAX_TIME = 2.0**32
"""Every time on the wire is a monotonic reading in seconds, 0 <= t < 2**32 (136 years)."""
NAME_CHARACTERS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"
)
"""Sender and counter names: ASCII letters, digits, '.', '_' and '-' only, so that no
name can reorder, hide or fake text where it is printed (a status table, a log)."""

SwarmId = NewType("SwarmId", int)


class Kind(IntEnum):
    HEARTBEAT = 1
    PATCH = 2
    TRACK = 3
    PING = 4
    PONG = 5
    SNAPSHOT = 6
    BYE = 7
    LOOK = 8


class Mode(IntEnum):
    """What a robot is doing, as announced in its HEARTBEAT."""

    IDLE = 0
    SEARCH = 1
    TRACK = 2
    LOST_POSE = 3


def swarm_id_from_name(name: str) -> SwarmId:
    """The u32 swarm id of a swarm name: SHA-256 of its UTF-8 bytes, first 4 bytes big-endian."""
    raw = name.encode("utf-8")
    if not 1 <= len(raw) <= SWARM_NAME_MAX_BYTES:
        raise ValueError(f"swarm name must be 1..{SWARM_NAME_MAX_BYTES} UTF-8 bytes")
    return SwarmId(int.from_bytes(hashlib.sha256(raw).digest()[:4], "big"))


def check_datagram_limit(limit: int) -> int:
    """Validate a configured datagram size limit (bytes, MAC included)."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"datagram limit must be an int, got {type(limit).__name__}")
    if not MIN_DATAGRAM_LIMIT <= limit <= MAX_DATAGRAM_LIMIT:
        raise ValueError(
            f"datagram limit must be within {MIN_DATAGRAM_LIMIT}..{MAX_DATAGRAM_LIMIT}, got {limit}"
        )
    return limit


# --- field checks -------------------------------------------------------------------------


def _float(name: str, value: object) -> float:
    if type(value) is float:  # the common case, with nothing to convert
        f = value
    elif isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise FieldError(RejectReason.BAD_TYPE, f"{name} must be a number")
    else:
        f = float(value)
    if not math.isfinite(f):
        raise FieldError(RejectReason.NOT_FINITE, f"{name} must be finite, got {f}")
    return f


def _time(name: str, value: object) -> float:
    t = _float(name, value)
    if not 0.0 <= t < MAX_TIME:
        raise FieldError(RejectReason.OUT_OF_RANGE, f"{name}={t} outside 0..2**32 s")
    return t


def _int(name: str, value: object, lo: int, hi: int) -> int:
    if type(value) is int:  # the common case, with nothing to convert
        i = value
    elif isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise FieldError(RejectReason.BAD_TYPE, f"{name} must be an integer")
    else:
        i = int(value)
    if not lo <= i <= hi:
        raise FieldError(RejectReason.OUT_OF_RANGE, f"{name}={i} outside {lo}..{hi}")
    return i


def _text(name: str, value: object, min_bytes: int, max_bytes: int, *, is_name: bool) -> str:
    if not isinstance(value, str):
        raise FieldError(RejectReason.BAD_TYPE, f"{name} must be a string")
    return _checked_text(name, value, min_bytes, max_bytes, is_name)


@functools.lru_cache(maxsize=256)  # the same few sender ids arrive in every datagram
def _checked_text(name: str, value: str, min_bytes: int, max_bytes: int, is_name: bool) -> str:
    try:
        n = len(value.encode("utf-8"))
    except UnicodeEncodeError as e:  # lone surrogates cannot be sent
        raise FieldError(RejectReason.OUT_OF_RANGE, f"{name} is not valid Unicode") from e
    if not min_bytes <= n <= max_bytes:
        raise FieldError(
            RejectReason.OUT_OF_RANGE, f"{name} must be {min_bytes}..{max_bytes} UTF-8 bytes"
        )
    if is_name:
        if not NAME_CHARACTERS.issuperset(value):
            raise FieldError(
                RejectReason.OUT_OF_RANGE, f"{name} may hold only A-Z a-z 0-9 . _ -"
            )
    elif any(not 0x20 <= ord(c) <= 0x7E for c in value):
        raise FieldError(RejectReason.OUT_OF_RANGE, f"{name} may hold only printable ASCII")
    return value


def check_name(name: str, what: str = "name") -> str:
    """A sender (agent) name as the wire allows it; ``ValueError`` saying why otherwise."""
    return _text(what, name, 1, SENDER_MAX_BYTES, is_name=True)


def _floats(name: str, value: object, n: int) -> tuple[float, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray):
        raise FieldError(RejectReason.BAD_SHAPE, f"{name} must be a sequence of {n} numbers")
    if len(value) != n:
        raise FieldError(RejectReason.BAD_SHAPE, f"{name} must hold {n} numbers")
    return tuple(_float(f"{name}[{i}]", v) for i, v in enumerate(value))


def _binary32(name: str, values: tuple[float, ...]) -> tuple[float, ...]:
    """Round to float 32, as these fields travel (codec.F32Array); refuse what overflows."""
    with np.errstate(over="ignore"):
        f32 = np.asarray(values, dtype=np.float32)
    if not np.isfinite(f32).all():
        raise FieldError(RejectReason.OUT_OF_RANGE, f"{name} does not fit float 32")
    return tuple(float(v) for v in f32.tolist())


def _covariance(name: str, value: object, dim: int) -> tuple[float, ...]:
    """An upper triangle (row-major) of a dim x dim covariance; diagonal must be >= 0."""
    tri = _floats(name, value, dim * (dim + 1) // 2)
    for k in _diagonal_positions(dim):
        if tri[k] < 0:
            raise FieldError(RejectReason.OUT_OF_RANGE, f"{name} has a negative variance")
    return tri


def _diagonal_positions(dim: int) -> list[int]:
    out, k = [], 0
    for row in range(dim):
        out.append(k)
        k += dim - row
    return out


def upper_triangle(matrix: npt.ArrayLike) -> tuple[float, ...]:
    """Row-major upper triangle (diagonal included) of a square matrix."""
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError("a square matrix is required")
    rows, cols = np.triu_indices(m.shape[0])
    return tuple(float(v) for v in m[rows, cols])


def from_upper_triangle(values: Sequence[float], dim: int) -> npt.NDArray[np.float64]:
    """The symmetric dim x dim matrix whose row-major upper triangle is ``values``."""
    if len(values) != dim * (dim + 1) // 2:
        raise ValueError(f"{dim}x{dim} needs {dim * (dim + 1) // 2} values")
    m = np.zeros((dim, dim))
    rows, cols = np.triu_indices(dim)
    m[rows, cols] = values
    m[cols, rows] = values
    return m


def _set(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)


# --- bodies -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Heartbeat:
    """Pose with covariance, mode, window origin and a few counters (1 Hz)."""

    KIND: ClassVar[Kind] = Kind.HEARTBEAT

    x: float
    y: float
    heading: float  # radians in [-pi, pi]
    cov: tuple[float, ...]  # upper triangle of the 3x3 (x, y, heading) covariance, 6 values
    mode: Mode
    origin_ix: int  # global lattice index of the sender's window cell (0, 0)
    origin_iy: int
    # (name, u32) pairs, at most 16; a Mapping is accepted too; stored sorted by name
    counters: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        _set(self, "x", _float("x", self.x))
        _set(self, "y", _float("y", self.y))
        h = _float("heading", self.heading)
        if not -math.pi <= h <= math.pi:
            raise FieldError(RejectReason.OUT_OF_RANGE, f"heading {h} outside [-pi, pi]")
        _set(self, "heading", h)
        _set(self, "cov", _binary32("cov", _covariance("cov", self.cov, 3)))
        _set(self, "mode", _mode(self.mode))
        _set(self, "origin_ix", _int("origin_ix", self.origin_ix, INT16_MIN, INT16_MAX))
        _set(self, "origin_iy", _int("origin_iy", self.origin_iy, INT16_MIN, INT16_MAX))
        _set(self, "counters", _counters(self.counters))

    @property
    def counter_map(self) -> dict[str, int]:
        return dict(self.counters)

    @property
    def cov_matrix(self) -> npt.NDArray[np.float64]:
        return from_upper_triangle(self.cov, 3)


def _mode(value: object) -> Mode:
    m = _int("mode", value, 0, U32_MAX)
    try:
        return Mode(m)
    except ValueError:
        raise FieldError(RejectReason.OUT_OF_RANGE, f"unknown mode {m}") from None


def _counters(value: object) -> tuple[tuple[str, int], ...]:
    items = list(value.items()) if isinstance(value, Mapping) else value
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise FieldError(RejectReason.BAD_SHAPE, "counters must be (name, value) pairs")
    if len(items) > MAX_COUNTERS:
        raise FieldError(RejectReason.OUT_OF_RANGE, f"at most {MAX_COUNTERS} counters")
    out: dict[str, int] = {}
    for pair in items:
        if not isinstance(pair, Sequence) or isinstance(pair, str | bytes) or len(pair) != 2:
            raise FieldError(RejectReason.BAD_TYPE, "counters must be (name, value) pairs")
        name = _text("counter name", pair[0], 1, COUNTER_NAME_MAX_BYTES, is_name=True)
        if name in out:
            raise FieldError(RejectReason.INCONSISTENT, f"counter {name!r} appears twice")
        out[name] = _int(f"counter {name!r}", pair[1], 0, U32_MAX)
    return tuple(sorted(out.items()))


def _cell_size_mm(value: object) -> int:
    return _int("cell_size_mm", value, 1, U16_MAX)


def _cells(value: object) -> Cells:
    if not isinstance(value, Cells):
        raise FieldError(RejectReason.BAD_TYPE, "cells must be a Cells")
    return value


@dataclass(frozen=True)
class Patch:
    """Sparse belief cells on the global lattice (2 Hz); every chunk is self-contained."""

    KIND: ClassVar[Kind] = Kind.PATCH

    cell_size_mm: int  # lattice pitch in millimetres, 1..65535 (0.1 m -> 100)
    t_ref: float  # sender-monotonic time the belief refers to
    cells: Cells

    def __post_init__(self) -> None:
        _set(self, "cell_size_mm", _cell_size_mm(self.cell_size_mm))
        _set(self, "t_ref", _time("t_ref", self.t_ref))
        _cells(self.cells)

    @property
    def cell_size_m(self) -> float:
        return self.cell_size_mm / 1000.0


@dataclass(frozen=True)
class Track:
    """Track filter state [x, y, vx, vy] with covariance at ``t_ref`` (5 Hz)."""

    KIND: ClassVar[Kind] = Kind.TRACK

    mean: tuple[float, ...]  # x, y, vx, vy
    cov: tuple[float, ...]  # upper triangle of the 4x4 covariance, 10 values
    t_ref: float
    updates: int  # how many measurements the filter has fused, u32

    def __post_init__(self) -> None:
        _set(self, "mean", _binary32("mean", _floats("mean", self.mean, 4)))
        _set(self, "cov", _binary32("cov", _covariance("cov", self.cov, 4)))
        _set(self, "t_ref", _time("t_ref", self.t_ref))
        _set(self, "updates", _int("updates", self.updates, 0, U32_MAX))

    @property
    def cov_matrix(self) -> npt.NDArray[np.float64]:
        return from_upper_triangle(self.cov, 4)


@dataclass(frozen=True)
class Ping:
    """Clock probe; its t1 is the envelope's ``t_sent``."""

    KIND: ClassVar[Kind] = Kind.PING

    ping_id: int

    def __post_init__(self) -> None:
        _set(self, "ping_id", _int("ping_id", self.ping_id, 0, U32_MAX))


@dataclass(frozen=True)
class Pong:
    """Answer to a PING: t1 echoed, t2 = responder's receive time, t3 = its send time."""

    KIND: ClassVar[Kind] = Kind.PONG

    ping_id: int
    t1: float
    t2: float
    t3: float

    def __post_init__(self) -> None:
        _set(self, "ping_id", _int("ping_id", self.ping_id, 0, U32_MAX))
        for name in ("t1", "t2", "t3"):
            _set(self, name, _time(name, getattr(self, name)))
        if self.t3 < self.t2:
            raise FieldError(RejectReason.INCONSISTENT, "t3 (reply sent) before t2 (ping received)")


@dataclass(frozen=True)
class Snapshot:
    """One chunk of a whole-window snapshot, unicast to a new or returning peer."""

    KIND: ClassVar[Kind] = Kind.SNAPSHOT

    snapshot_id: int  # u32, chosen by the sender
    chunk_index: int  # 0..chunk_count-1
    chunk_count: int  # 1..65535
    origin_ix: int  # global lattice index of window cell (0, 0)
    origin_iy: int
    width: int  # window size in cells; the window must lie inside int16
    height: int
    cell_size_mm: int
    t_ref: float
    cells: Cells  # every cell inside the window

    def __post_init__(self) -> None:
        _set(self, "snapshot_id", _int("snapshot_id", self.snapshot_id, 0, U32_MAX))
        _set(self, "chunk_index", _int("chunk_index", self.chunk_index, 0, U16_MAX))
        _set(self, "chunk_count", _int("chunk_count", self.chunk_count, 1, U16_MAX))
        _set(self, "origin_ix", _int("origin_ix", self.origin_ix, INT16_MIN, INT16_MAX))
        _set(self, "origin_iy", _int("origin_iy", self.origin_iy, INT16_MIN, INT16_MAX))
        _set(self, "width", _int("width", self.width, 1, U16_MAX))
        _set(self, "height", _int("height", self.height, 1, U16_MAX))
        _set(self, "cell_size_mm", _cell_size_mm(self.cell_size_mm))
        _set(self, "t_ref", _time("t_ref", self.t_ref))
        cells = _cells(self.cells)
        if max(self.origin_ix + self.width, self.origin_iy + self.height) - 1 > INT16_MAX:
            raise FieldError(RejectReason.OUT_OF_RANGE, "window extends beyond int16 indices")
        if self.chunk_index >= self.chunk_count:
            raise FieldError(RejectReason.INCONSISTENT, "chunk_index >= chunk_count")
        if len(cells):
            dx = cells.ix.astype(np.int32) - self.origin_ix
            dy = cells.iy.astype(np.int32) - self.origin_iy
            if dx.min() < 0 or dy.min() < 0 or dx.max() >= self.width or dy.max() >= self.height:
                raise FieldError(RejectReason.INCONSISTENT, "a cell lies outside the window")

    @property
    def cell_size_m(self) -> float:
        return self.cell_size_mm / 1000.0


@dataclass(frozen=True)
class Bye:
    """Clean shutdown, with an optional short reason (at most 64 UTF-8 bytes)."""

    KIND: ClassVar[Kind] = Kind.BYE

    reason: str = ""

    def __post_init__(self) -> None:
        _set(self, "reason", _text("reason", self.reason, 0, BYE_REASON_MAX_BYTES, is_name=False))


BYTES_PER_LOOK = 8
MAX_LOOKS = 64
FOV_MRAD_MAX = 6283  # 2*pi rad is 6283.19 mrad: a whole circle rounds down to this
HEADING_UNIT = math.pi / 32768.0  # a look's heading on the wire: int16 units of this (rad)
_LOOK_RECORD = struct.Struct(">Hhhh")


class LookRecord(NamedTuple):
    """One look of a LOOK body, as it travels (SWARM.md §6b): integers only."""

    age_ms: int  # u16: milliseconds before the body's t_ref
    x_cm: int  # i16: the camera's position, centimetres
    y_cm: int  # i16
    heading: int  # i16: the camera's heading in units of pi/32768 rad, [-pi, pi)


def _look_records(value: object) -> tuple[LookRecord, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise FieldError(RejectReason.BAD_SHAPE, "looks must be a sequence of look records")
    out = []
    for k, item in enumerate(value):
        if isinstance(item, str | bytes) or not isinstance(item, Sequence) or len(item) != 4:
            raise FieldError(RejectReason.BAD_SHAPE, f"look {k} must be 4 integers")
        out.append(LookRecord(
            _int(f"look {k} age_ms", item[0], 0, U16_MAX),
            _int(f"look {k} x_cm", item[1], INT16_MIN, INT16_MAX),
            _int(f"look {k} y_cm", item[2], INT16_MIN, INT16_MAX),
            _int(f"look {k} heading", item[3], INT16_MIN, INT16_MAX),
        ))
    return tuple(out)


def looks_from_bytes(data: bytes) -> tuple[LookRecord, ...]:
    """The records of a LOOK ``bin``; ``bad_shape`` unless its length is a multiple of 8.

    Every 8-byte record is valid by its types (u16, i16, i16, i16): the count and the
    sequence numbers are the body's checks.
    """
    if len(data) % BYTES_PER_LOOK:
        raise FieldError(
            RejectReason.BAD_SHAPE, f"look bin of {len(data)} bytes is not a multiple of 8"
        )
    return tuple(LookRecord(*r) for r in _LOOK_RECORD.iter_unpack(data))


def looks_to_bytes(looks: Sequence[LookRecord]) -> bytes:
    return b"".join(_LOOK_RECORD.pack(*r) for r in looks)


@dataclass(frozen=True)
class Look:
    """Where the sender's camera looked and did not see the target (SWARM.md §5, §6b).

    Looks are numbered per (sender, epoch): look ``k`` of ``looks`` has sequence number
    ``first_seq + k``, so a receiver applies each look once however often it arrives.
    """

    KIND: ClassVar[Kind] = Kind.LOOK

    first_seq: int  # u32: the look sequence number of looks[0]
    t_ref: float  # the sender time the ages count back from
    range_cm: int  # 1..65535: the camera's range, centimetres
    fov_mrad: int  # 1..6283: its horizontal field of view, milliradians
    looks: tuple[LookRecord, ...]  # 1..64 records

    def __post_init__(self) -> None:
        _set(self, "first_seq", _int("first_seq", self.first_seq, 0, U32_MAX))
        _set(self, "t_ref", _time("t_ref", self.t_ref))
        _set(self, "range_cm", _int("range_cm", self.range_cm, 1, U16_MAX))
        _set(self, "fov_mrad", _int("fov_mrad", self.fov_mrad, 1, FOV_MRAD_MAX))
        looks = _look_records(self.looks)
        if not 1 <= len(looks) <= MAX_LOOKS:
            raise FieldError(RejectReason.OUT_OF_RANGE, f"a LOOK holds 1..{MAX_LOOKS} looks")
        if self.first_seq + len(looks) - 1 > U32_MAX:
            raise FieldError(RejectReason.OUT_OF_RANGE, "look sequence numbers beyond u32")
        _set(self, "looks", looks)

    def to_bytes(self) -> bytes:
        return looks_to_bytes(self.looks)

    @property
    def range_m(self) -> float:
        return self.range_cm / 100.0

    @property
    def fov_rad(self) -> float:
        return self.fov_mrad / 1000.0

    @property
    def oldest(self) -> float:
        """The sender time of the oldest look."""
        return self.t_ref - max(r.age_ms for r in self.looks) / 1000.0


Body = Heartbeat | Patch | Track | Ping | Pong | Snapshot | Bye | Look
BODY_TYPES: dict[Kind, type[Body]] = {
    cls.KIND: cls for cls in (Heartbeat, Patch, Track, Ping, Pong, Snapshot, Bye, Look)
}


# --- the envelope -------------------------------------------------------------------------


_BODY_CLASSES = tuple(BODY_TYPES.values())


_TIMED_BODIES = (Patch, Snapshot, Track, Look)


def _check_t_ref(body: Body, t_sent: float) -> None:
    if isinstance(body, _TIMED_BODIES) and body.t_ref > t_sent:
        raise FieldError(RejectReason.INCONSISTENT, "t_ref is later than t_sent")


def validate_header(
    swarm_id: object, sender: object, epoch: object, seq: object, t_sent: object
) -> tuple[int, str, int, int, float]:
    """Check the envelope fields in wire order; return them normalised."""
    return (
        _int("swarm_id", swarm_id, 0, U32_MAX),
        _text("sender", sender, 1, SENDER_MAX_BYTES, is_name=True),
        _int("epoch", epoch, 0, U32_MAX),
        _int("seq", seq, 0, U32_MAX),
        _time("t_sent", t_sent),
    )


@dataclass(frozen=True)
class Message:
    """One swarm datagram's content: who sent it, when, and the body."""

    swarm_id: int  # u32, see swarm_id_from_name
    sender: str  # 1..32 UTF-8 bytes, no control characters
    epoch: int  # u32, random per sender process start
    seq: int  # u32, per (sender, epoch)
    t_sent: float  # sender-monotonic seconds
    body: Body

    def __post_init__(self) -> None:
        swarm_id, sender, epoch, seq, t_sent = validate_header(
            self.swarm_id, self.sender, self.epoch, self.seq, self.t_sent
        )
        _set(self, "swarm_id", swarm_id)
        _set(self, "sender", sender)
        _set(self, "epoch", epoch)
        _set(self, "seq", seq)
        _set(self, "t_sent", t_sent)
        if not isinstance(self.body, _BODY_CLASSES):
            raise FieldError(RejectReason.BAD_TYPE, "body must be one of the message bodies")
        _check_t_ref(self.body, t_sent)

    @classmethod
    def from_checked(cls, header: tuple[int, str, int, int, float], body: Body) -> Message:
        """A message from what :func:`validate_header` returned and a constructed body.

        Checks only what joins the two (t_ref <= t_sent): the caller validated the header
        (the decoder once, in wire order; the chunking once per message), not again here.
        """
        _check_t_ref(body, header[4])
        message = object.__new__(cls)
        swarm_id, sender, epoch, seq, t_sent = header
        # the fields a frozen dataclass keeps in its __dict__, set in one go
        vars(message).update(
            swarm_id=swarm_id, sender=sender, epoch=epoch, seq=seq, t_sent=t_sent, body=body
        )
        return message

    @property
    def kind(self) -> Kind:
        return self.body.KIND
