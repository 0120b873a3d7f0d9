"""Swarm message kinds and their bodies, as frozen dataclasses that validate themselves.

Constructors check every field (type, finiteness, range, consistency) and raise
:class:`~protocol.swarm.errors.FieldError` (a ``ValueError``) with a named reason.
On the sending side that is the sender's bug; the decoder builds the same classes
from the wire and turns the error into a rejection, so both sides share one set
of rules. Units: metres, radians, seconds on the sender's monotonic clock.
"""

from __future__ import annotations

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
from protocol.swarm.fields import (
    MAX_TIME,
    SENDER_MAX_BYTES,
    binary32_field,
    covariance_field,
    float_field,
    floats_field,
    from_upper_triangle,
    int_field,
    text_field,
    time_field,
)

PROTOCOL_VERSION = 1
DEFAULT_SWARM_PORT = 47000  # SWARM.md §10.1: every member of a swarm uses the same port
MAC_LEN = 16
DEFAULT_DATAGRAM_LIMIT = 1200
MIN_DATAGRAM_LIMIT = 1200
MAX_DATAGRAM_LIMIT = 65000
U16_MAX = 2**16 - 1
U32_MAX = 2**32 - 1
COUNTER_NAME_MAX_BYTES = 32
MAX_COUNTERS = 16
BYE_REASON_MAX_BYTES = 64
SWARM_NAME_MAX_BYTES = 64

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
        _set(self, "x", float_field("x", self.x))
        _set(self, "y", float_field("y", self.y))
        h = float_field("heading", self.heading)
        if not -math.pi <= h <= math.pi:
            raise FieldError(RejectReason.OUT_OF_RANGE, f"heading {h} outside [-pi, pi]")
        _set(self, "heading", h)
        _set(self, "cov", binary32_field("cov", covariance_field("cov", self.cov, 3)))
        _set(self, "mode", _mode(self.mode))
        _set(self, "origin_ix", int_field("origin_ix", self.origin_ix, INT16_MIN, INT16_MAX))
        _set(self, "origin_iy", int_field("origin_iy", self.origin_iy, INT16_MIN, INT16_MAX))
        _set(self, "counters", _counters(self.counters))

    @property
    def counter_map(self) -> dict[str, int]:
        return dict(self.counters)

    @property
    def cov_matrix(self) -> npt.NDArray[np.float64]:
        return from_upper_triangle(self.cov, 3)


def _mode(value: object) -> Mode:
    m = int_field("mode", value, 0, U32_MAX)
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
        name = text_field("counter name", pair[0], 1, COUNTER_NAME_MAX_BYTES, is_name=True)
        if name in out:
            raise FieldError(RejectReason.INCONSISTENT, f"counter {name!r} appears twice")
        out[name] = int_field(f"counter {name!r}", pair[1], 0, U32_MAX)
    return tuple(sorted(out.items()))


def _cell_size_mm(value: object) -> int:
    return int_field("cell_size_mm", value, 1, U16_MAX)


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
        c, t = self.cell_size_mm, self.t_ref
        # the usual case first: an int and a float in range pass unchanged
        if not (type(c) is int and 1 <= c <= U16_MAX):
            _set(self, "cell_size_mm", _cell_size_mm(c))
        if not (type(t) is float and 0.0 <= t < MAX_TIME):
            _set(self, "t_ref", time_field("t_ref", t))
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
        _set(self, "mean", binary32_field("mean", floats_field("mean", self.mean, 4)))
        _set(self, "cov", binary32_field("cov", covariance_field("cov", self.cov, 4)))
        _set(self, "t_ref", time_field("t_ref", self.t_ref))
        _set(self, "updates", int_field("updates", self.updates, 0, U32_MAX))

    @property
    def cov_matrix(self) -> npt.NDArray[np.float64]:
        return from_upper_triangle(self.cov, 4)


@dataclass(frozen=True)
class Ping:
    """Clock probe; its t1 is the envelope's ``t_sent``."""

    KIND: ClassVar[Kind] = Kind.PING

    ping_id: int

    def __post_init__(self) -> None:
        _set(self, "ping_id", int_field("ping_id", self.ping_id, 0, U32_MAX))


@dataclass(frozen=True)
class Pong:
    """Answer to a PING: t1 echoed, t2 = responder's receive time, t3 = its send time."""

    KIND: ClassVar[Kind] = Kind.PONG

    ping_id: int
    t1: float
    t2: float
    t3: float

    def __post_init__(self) -> None:
        _set(self, "ping_id", int_field("ping_id", self.ping_id, 0, U32_MAX))
        for name in ("t1", "t2", "t3"):
            _set(self, name, time_field(name, getattr(self, name)))
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
        _set(self, "snapshot_id", int_field("snapshot_id", self.snapshot_id, 0, U32_MAX))
        _set(self, "chunk_index", int_field("chunk_index", self.chunk_index, 0, U16_MAX))
        _set(self, "chunk_count", int_field("chunk_count", self.chunk_count, 1, U16_MAX))
        _set(self, "origin_ix", int_field("origin_ix", self.origin_ix, INT16_MIN, INT16_MAX))
        _set(self, "origin_iy", int_field("origin_iy", self.origin_iy, INT16_MIN, INT16_MAX))
        _set(self, "width", int_field("width", self.width, 1, U16_MAX))
        _set(self, "height", int_field("height", self.height, 1, U16_MAX))
        _set(self, "cell_size_mm", _cell_size_mm(self.cell_size_mm))
        _set(self, "t_ref", time_field("t_ref", self.t_ref))
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
        reason = text_field("reason", self.reason, 0, BYE_REASON_MAX_BYTES, is_name=False)
        _set(self, "reason", reason)


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
            int_field(f"look {k} age_ms", item[0], 0, U16_MAX),
            int_field(f"look {k} x_cm", item[1], INT16_MIN, INT16_MAX),
            int_field(f"look {k} y_cm", item[2], INT16_MIN, INT16_MAX),
            int_field(f"look {k} heading", item[3], INT16_MIN, INT16_MAX),
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
        _set(self, "first_seq", int_field("first_seq", self.first_seq, 0, U32_MAX))
        _set(self, "t_ref", time_field("t_ref", self.t_ref))
        _set(self, "range_cm", int_field("range_cm", self.range_cm, 1, U16_MAX))
        _set(self, "fov_mrad", int_field("fov_mrad", self.fov_mrad, 1, FOV_MRAD_MAX))
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
    if (
        type(swarm_id) is int and type(epoch) is int and type(seq) is int
        and type(t_sent) is float and 0 <= swarm_id <= U32_MAX and 0 <= epoch <= U32_MAX
        and 0 <= seq <= U32_MAX and 0.0 <= t_sent < MAX_TIME
    ):  # the usual case: the numbers pass as they are, only the sender is left to check
        sender = text_field("sender", sender, 1, SENDER_MAX_BYTES, is_name=True)
        return swarm_id, sender, epoch, seq, t_sent
    return (
        int_field("swarm_id", swarm_id, 0, U32_MAX),
        text_field("sender", sender, 1, SENDER_MAX_BYTES, is_name=True),
        int_field("epoch", epoch, 0, U32_MAX),
        int_field("seq", seq, 0, U32_MAX),
        time_field("t_sent", t_sent),
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
        # the fields a frozen dataclass keeps in its __dict__, set directly
        fields = message.__dict__
        fields["swarm_id"], fields["sender"], fields["epoch"], fields["seq"], fields["t_sent"] = (
            header
        )
        fields["body"] = body
        return message

    @property
    def kind(self) -> Kind:
        return self.body.KIND
