"""The checks every swarm message field goes through, shared by sender and decoder.

Each raises :class:`~protocol.swarm.errors.FieldError` (a ``ValueError``) with a
named reason; :mod:`protocol.swarm.messages` builds its bodies from them.
"""

from __future__ import annotations

import functools
import math
import struct
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from protocol.swarm.errors import FieldError, RejectReason

SENDER_MAX_BYTES = 32
MAX_TIME = 2.0**32
"""Every time on the wire is a monotonic reading in seconds, 0 <= t < 2**32 (136 years)."""
NAME_CHARACTERS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"
)
"""Sender and counter names: ASCII letters, digits, '.', '_' and '-' only, so that no
name can reorder, hide or fake text where it is printed (a status table, a log)."""


def float_field(name: str, value: object) -> float:
    if type(value) is float:  # the common case, with nothing to convert
        f = value
    elif isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise FieldError(RejectReason.BAD_TYPE, f"{name} must be a number")
    else:
        f = float(value)
    if not math.isfinite(f):
        raise FieldError(RejectReason.NOT_FINITE, f"{name} must be finite, got {f}")
    return f


def time_field(name: str, value: object) -> float:
    t = float_field(name, value)
    if not 0.0 <= t < MAX_TIME:
        raise FieldError(RejectReason.OUT_OF_RANGE, f"{name}={t} outside 0..2**32 s")
    return t


def int_field(name: str, value: object, lo: int, hi: int) -> int:
    if type(value) is int:  # the common case, with nothing to convert
        i = value
    elif isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise FieldError(RejectReason.BAD_TYPE, f"{name} must be an integer")
    else:
        i = int(value)
    if not lo <= i <= hi:
        raise FieldError(RejectReason.OUT_OF_RANGE, f"{name}={i} outside {lo}..{hi}")
    return i


def text_field(name: str, value: object, min_bytes: int, max_bytes: int, *, is_name: bool) -> str:
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
    return text_field(what, name, 1, SENDER_MAX_BYTES, is_name=True)


def floats_field(name: str, value: object, n: int) -> tuple[float, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray):
        raise FieldError(RejectReason.BAD_SHAPE, f"{name} must be a sequence of {n} numbers")
    if len(value) != n:
        raise FieldError(RejectReason.BAD_SHAPE, f"{name} must hold {n} numbers")
    return tuple(float_field(f"{name}[{i}]", v) for i, v in enumerate(value))


@functools.cache
def _binary32(n: int) -> struct.Struct:
    return struct.Struct(f"<{n}f")


def binary32_field(name: str, values: tuple[float, ...]) -> tuple[float, ...]:
    """Round to float 32, as these fields travel (codec.F32Array); refuse what overflows.

    struct's ``f`` rounds as numpy's float32 cast does (the C cast, to nearest even) and
    raises where that cast would give an infinity."""
    fmt = _binary32(len(values))
    try:
        out: tuple[float, ...] = fmt.unpack(fmt.pack(*values))
    except OverflowError:
        raise FieldError(RejectReason.OUT_OF_RANGE, f"{name} does not fit float 32") from None
    if not all(map(math.isfinite, out)):
        raise FieldError(RejectReason.OUT_OF_RANGE, f"{name} does not fit float 32")
    return out


def covariance_field(name: str, value: object, dim: int) -> tuple[float, ...]:
    """An upper triangle (row-major) of a dim x dim covariance; diagonal must be >= 0."""
    tri = floats_field(name, value, dim * (dim + 1) // 2)
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


@functools.cache
def _triu(dim: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """``np.triu_indices(dim)``, computed once per size (read-only)."""
    rows, cols = np.triu_indices(dim)
    rows.flags.writeable = cols.flags.writeable = False
    return rows, cols


def upper_triangle(matrix: npt.ArrayLike) -> tuple[float, ...]:
    """Row-major upper triangle (diagonal included) of a square matrix."""
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError("a square matrix is required")
    rows, cols = _triu(m.shape[0])
    return tuple(float(v) for v in m[rows, cols])


def from_upper_triangle(values: Sequence[float], dim: int) -> npt.NDArray[np.float64]:
    """The symmetric dim x dim matrix whose row-major upper triangle is ``values``."""
    if len(values) != dim * (dim + 1) // 2:
        raise ValueError(f"{dim}x{dim} needs {dim * (dim + 1) // 2} values")
    m = np.zeros((dim, dim))
    rows, cols = _triu(dim)
    m[rows, cols] = values
    m[cols, rows] = values
    return m
