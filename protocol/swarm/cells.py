"""Cell arrays: global lattice indices (int16) with float16 (mu, var), and their wire form.

On the wire the cells of one message are a single msgpack ``bin`` holding four
big-endian arrays back to back: ``ix[n] (int16) | iy[n] (int16) | mu[n] (float16) |
var[n] (float16)``, 8 bytes a cell. This module also holds the arithmetic that
splits a cell set into chunks that fit a datagram.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from protocol.swarm.errors import FieldError, RejectReason

BYTES_PER_CELL = 8
INT16_MIN = -(2**15)
INT16_MAX = 2**15 - 1

_WIRE_INDEX = np.dtype(">i2")
_WIRE_VALUE = np.dtype(">f2")
_WIRE_WORD = np.dtype(">u2")


def _readonly(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    a.flags.writeable = False
    return a


def _check_values(
    ix: npt.NDArray[np.int16],
    iy: npt.NDArray[np.int16],
    values: npt.NDArray[np.float16],
    var: npt.NDArray[np.float16],
) -> None:
    """Every mu and var finite, every var > 0, no (ix, iy) twice; ``values`` is mu and var."""
    if not len(var):
        return
    # Few numpy calls: this runs on every datagram (the fastest forms measured here).
    if not np.isfinite(values).all():
        raise FieldError(RejectReason.NOT_FINITE, "mu and var must be finite")
    if not var.min() > 0:
        raise FieldError(RejectReason.OUT_OF_RANGE, "var must be > 0")
    _check_unique(ix, iy)


def _check_unique(ix: npt.NDArray[np.int16], iy: npt.NDArray[np.int16]) -> None:
    if len(ix) > 1:
        keys = (ix.view(np.uint16).astype(np.uint32) << 16) | iy.view(np.uint16)
        keys.sort()
        if (keys[1:] == keys[:-1]).any():
            raise FieldError(RejectReason.INCONSISTENT, "a cell (ix, iy) appears twice")


class Cells:
    """An immutable set of cells: ``ix``, ``iy`` (int16) and ``mu``, ``var`` (float16).

    Every value is finite, every ``var`` is > 0 and no (ix, iy) appears twice.
    Equality is bitwise on the wire form. Build one from arbitrary numeric arrays
    with :meth:`from_arrays` (raises ``ValueError`` on anything out of range) or
    from wire bytes with :meth:`from_bytes`.
    """

    __slots__ = ("_bytes", "ix", "iy", "mu", "var")

    ix: npt.NDArray[np.int16]
    iy: npt.NDArray[np.int16]
    mu: npt.NDArray[np.float16]
    var: npt.NDArray[np.float16]
    _bytes: bytes | None

    def __init__(
        self,
        ix: npt.NDArray[np.int16],
        iy: npt.NDArray[np.int16],
        mu: npt.NDArray[np.float16],
        var: npt.NDArray[np.float16],
    ) -> None:
        arrays = (ix, iy, mu, var)
        dtypes = (np.int16, np.int16, np.float16, np.float16)
        for name, a, dt in zip(("ix", "iy", "mu", "var"), arrays, dtypes, strict=True):
            if not isinstance(a, np.ndarray) or a.dtype != dt or a.ndim != 1:
                raise FieldError(
                    RejectReason.BAD_TYPE, f"{name} must be a 1-D {np.dtype(dt)} array"
                )
        if not len(iy) == len(mu) == len(var) == len(ix):
            raise FieldError(RejectReason.BAD_SHAPE, "ix, iy, mu, var must have equal lengths")
        _check_values(ix, iy, np.concatenate((mu, var)), var)
        self._set(
            _readonly(ix.copy()), _readonly(iy.copy()), _readonly(mu.copy()),
            _readonly(var.copy()), None,
        )

    def _set(
        self,
        ix: npt.NDArray[np.int16],
        iy: npt.NDArray[np.int16],
        mu: npt.NDArray[np.float16],
        var: npt.NDArray[np.float16],
        wire: bytes | None,
    ) -> None:
        object.__setattr__(self, "ix", ix)
        object.__setattr__(self, "iy", iy)
        object.__setattr__(self, "mu", mu)
        object.__setattr__(self, "var", var)
        object.__setattr__(self, "_bytes", wire)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Cells is immutable")

    @classmethod
    def empty(cls) -> Cells:
        return cls(
            np.zeros(0, np.int16), np.zeros(0, np.int16),
            np.zeros(0, np.float16), np.zeros(0, np.float16),
        )

    @classmethod
    def from_arrays(
        cls, ix: npt.ArrayLike, iy: npt.ArrayLike, mu: npt.ArrayLike, var: npt.ArrayLike
    ) -> Cells:
        """Convert sender-side arrays, refusing what the wire cannot carry.

        ``ix``/``iy`` must be integers within int16; ``mu``/``var`` are rounded to the
        nearest float16 and must stay finite (|x| < 65520), with ``var`` still > 0 after
        rounding. Raises ``ValueError`` (a :class:`FieldError`) otherwise.
        """
        idx = []
        for name, raw in (("ix", ix), ("iy", iy)):
            a = np.asarray(raw)
            if a.ndim != 1:
                raise FieldError(RejectReason.BAD_SHAPE, f"{name} must be 1-D")
            if a.dtype != np.int16:
                if a.size and not np.issubdtype(a.dtype, np.integer):
                    raise FieldError(
                        RejectReason.BAD_TYPE, f"{name} must hold integers, got {a.dtype}"
                    )
                if a.size and (int(a.min()) < INT16_MIN or int(a.max()) > INT16_MAX):
                    raise FieldError(RejectReason.OUT_OF_RANGE, f"{name} outside int16")
            idx.append(a.astype(np.int16))  # always a fresh array
        vals = []
        for name, raw in (("mu", mu), ("var", var)):
            a = np.asarray(raw)
            if a.ndim != 1:
                raise FieldError(RejectReason.BAD_SHAPE, f"{name} must be 1-D")
            if a.size and a.dtype.kind not in "fiu":
                raise FieldError(RejectReason.BAD_TYPE, f"{name} must hold numbers, got {a.dtype}")
            vals.append(a)
        if not len(idx[1]) == len(vals[0]) == len(vals[1]) == len(idx[0]):
            raise FieldError(RejectReason.BAD_SHAPE, "ix, iy, mu, var must have equal lengths")
        with np.errstate(over="ignore", invalid="ignore"):
            f16 = np.concatenate(vals).astype(np.float16)
        n = len(idx[0])
        mu16, var16 = f16[:n], f16[n:]
        try:
            _check_values(idx[0], idx[1], f16, var16)
        except FieldError as exc:
            if exc.reason is RejectReason.NOT_FINITE:  # name the cause precisely
                for name, a in zip(("mu", "var"), vals, strict=True):
                    if a.dtype.kind == "f" and not np.isfinite(a).all():
                        raise FieldError(
                            RejectReason.NOT_FINITE, f"{name} holds NaN or infinity"
                        ) from None
                raise FieldError(
                    RejectReason.OUT_OF_RANGE, "mu or var outside the float16 range"
                ) from None
            if exc.reason is RejectReason.OUT_OF_RANGE:
                raise FieldError(
                    RejectReason.OUT_OF_RANGE,
                    "var must be > 0 (and not underflow to 0 in float16)",
                ) from None
            raise
        cells = object.__new__(cls)
        cells._set(_readonly(idx[0]), _readonly(idx[1]), _readonly(mu16), _readonly(var16), None)
        return cells

    @classmethod
    def from_bytes(cls, data: bytes) -> Cells:
        """Parse the wire ``bin``; raises :class:`FieldError` on a bad length or value."""
        if len(data) % BYTES_PER_CELL:
            raise FieldError(
                RejectReason.BAD_SHAPE, f"cell bin of {len(data)} bytes is not a multiple of 8"
            )
        n = len(data) // BYTES_PER_CELL
        # One byte swap for the whole bin, then typed views of its four parts.
        native = _readonly(np.frombuffer(data, _WIRE_WORD).astype(np.uint16))
        ix, iy = native[:n].view(np.int16), native[n : 2 * n].view(np.int16)
        values = native[2 * n :].view(np.float16)
        mu, var = values[:n], values[n:]
        _check_values(ix, iy, values, var)
        cells = object.__new__(cls)
        cells._set(ix, iy, mu, var, bytes(data))
        return cells

    def to_bytes(self) -> bytes:
        cached: bytes | None = self._bytes
        if cached is None:
            cached = b"".join(
                (
                    self.ix.astype(_WIRE_INDEX).tobytes(),
                    self.iy.astype(_WIRE_INDEX).tobytes(),
                    self.mu.astype(_WIRE_VALUE).tobytes(),
                    self.var.astype(_WIRE_VALUE).tobytes(),
                )
            )
            object.__setattr__(self, "_bytes", cached)
        return cached

    def slice(self, start: int, stop: int) -> Cells:
        if start <= 0 and stop >= len(self):
            return self
        part = object.__new__(Cells)  # a subset of valid cells is valid: no re-check
        part._set(
            self.ix[start:stop], self.iy[start:stop], self.mu[start:stop], self.var[start:stop],
            None,
        )
        return part

    @classmethod
    def concatenate(cls, parts: list[Cells]) -> Cells:
        """Join cell sets; raises :class:`FieldError` if a cell appears in two parts."""
        if not parts:
            return cls.empty()
        return cls(
            np.concatenate([p.ix for p in parts]),
            np.concatenate([p.iy for p in parts]),
            np.concatenate([p.mu for p in parts]),
            np.concatenate([p.var for p in parts]),
        )

    def __len__(self) -> int:
        return len(self.ix)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Cells):
            return NotImplemented
        return self.to_bytes() == other.to_bytes()

    def __hash__(self) -> int:
        return hash(self.to_bytes())

    def __repr__(self) -> str:
        return f"Cells(n={len(self)})"


def bin_header_size(n_bytes: int) -> int:
    """Bytes of the msgpack header of a ``bin`` of ``n_bytes`` (bin 8, 16 or 32)."""
    if n_bytes < 2**8:
        return 2
    if n_bytes < 2**16:
        return 3
    return 5


def cells_that_fit(limit: int, overhead_without_bin: int) -> int:
    """Most cells whose datagram stays <= ``limit`` bytes.

    ``overhead_without_bin`` is the encoded datagram size (MAC included) of the same
    message with no cells, minus the 2-byte header of its empty ``bin``.
    """
    room = limit - overhead_without_bin
    n = max(0, (room - 2) // BYTES_PER_CELL)
    while n > 0 and bin_header_size(n * BYTES_PER_CELL) + n * BYTES_PER_CELL > room:
        n -= 1
    return n


def split_cells(cells: Cells, per_chunk: int) -> list[Cells]:
    """Cut ``cells`` into consecutive chunks of at most ``per_chunk`` cells (none if empty)."""
    if per_chunk < 1:
        raise ValueError(f"per_chunk must be >= 1, got {per_chunk}")
    return [cells.slice(i, i + per_chunk) for i in range(0, len(cells), per_chunk)]
