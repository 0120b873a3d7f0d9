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

_WIRE_WORD = np.dtype(">i2")
_INT16 = np.dtype(np.int16)
_INT32 = np.dtype(np.int32)
_FLOAT16 = np.dtype(np.float16)
_FLOAT64 = np.dtype(np.float64)


# The high byte of a big-endian binary16 holds the sign, the five exponent bits and the
# two top mantissa bits; all five exponent bits set (0x7C) is infinity or NaN.
_FINITE_HIGH = bytes(b for b in range(256) if b & 0x7C != 0x7C)
# High bytes that alone prove a finite value > 0 (0x00 is +0 or a tiny subnormal).
_POSITIVE_HIGH = bytes(range(0x01, 0x7C))


def _check_cells(wire: bytes, words: npt.NDArray[np.int16]) -> None:
    """Every mu and var finite, every var > 0, no (ix, iy) twice, checked in that order.

    ``wire`` is the cell bin, ``words`` its 4n 16-bit words in native byte order. The
    checks read bit patterns, exactly: numpy emulates float16 arithmetic in software,
    and each numpy call costs about a microsecond on arrays of a datagram's size.
    """
    n = len(words) // 4
    if not n:
        return
    if wire[4 * n :: 2].translate(None, _FINITE_HIGH):  # the high byte of an inf or NaN
        raise FieldError(RejectReason.NOT_FINITE, "mu and var must be finite")
    # Every value is finite now, so var > 0 exactly when its int16 bits are > 0
    # (0x0001..0x7BFF); only a var with a high byte outside 0x01..0x7B needs that look.
    if wire[6 * n :: 2].translate(None, _POSITIVE_HIGH) and words[3 * n :].min() <= 0:
        raise FieldError(RejectReason.OUT_OF_RANGE, "var must be > 0")
    if n > 1:
        # One 32-bit key per cell from its (ix, iy) words (any one-to-one key serves);
        # once sorted, a repeated cell is two equal neighbours.
        keys = words[: 2 * n].reshape(2, n).T.copy().view(_INT32)  # shape (n, 1)
        keys.sort(axis=0)
        if (keys[1:] == keys[:-1]).tobytes().count(1):  # bools are bytes 0 or 1
            raise FieldError(RejectReason.INCONSISTENT, "a cell (ix, iy) appears twice")


def _words_of(*arrays: npt.NDArray[Any]) -> npt.NDArray[np.int16]:
    """16-bit arrays back to back, as one new native int16 array of their bits."""
    return np.concatenate([a.view(np.int16) for a in arrays])


def _plain(
    ix: object, iy: object, mu: object, var: object
) -> tuple[npt.NDArray[np.int16], npt.NDArray[np.int16], npt.NDArray[Any], npt.NDArray[Any]] | None:
    """The arrays when they are what a sender usually has: 1-D int16, int16, float64,
    float64 numpy arrays of one length (converted in one go); None otherwise."""
    if (
        type(ix) is not np.ndarray or type(iy) is not np.ndarray
        or type(mu) is not np.ndarray or type(var) is not np.ndarray
    ):
        return None
    if (ix.dtype, iy.dtype, mu.dtype, var.dtype) != (_INT16, _INT16, _FLOAT64, _FLOAT64):
        return None
    if ix.ndim != 1 or not ix.shape == iy.shape == mu.shape == var.shape:
        return None
    return ix, iy, mu, var


def _convert(
    ix: npt.ArrayLike, iy: npt.ArrayLike, mu: npt.ArrayLike, var: npt.ArrayLike
) -> tuple[npt.NDArray[np.int16], list[npt.NDArray[Any]]]:
    """Any arrays to cell words (ix, iy int16 | mu, var rounded to float16), and mu, var."""
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
            a = a.astype(np.int16)
        idx.append(a)  # the caller's array when int16: _words_of copies it
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
    return _words_of(idx[0], idx[1], f16), vals


def _convert_plain(
    ix: npt.NDArray[np.int16], iy: npt.NDArray[np.int16],
    mu: npt.NDArray[np.float64], var: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.int16], list[npt.NDArray[Any]]]:
    """:func:`_convert` of :func:`_plain` arrays: each copied or rounded into place, the
    same float64 -> float16 rounding (tests compare the two on random arrays)."""
    n = len(ix)
    words = np.empty(4 * n, np.int16)
    words[:n] = ix
    words[n : 2 * n] = iy
    halves = words.view(_FLOAT16)
    with np.errstate(over="ignore", invalid="ignore"):
        halves[2 * n : 3 * n] = mu
        halves[3 * n :] = var
    return words, [mu, var]


class Cells:
    """An immutable set of cells: ``ix``, ``iy`` (int16) and ``mu``, ``var`` (float16).

    Every value is finite, every ``var`` is > 0 and no (ix, iy) appears twice.
    Equality is bitwise on the wire form. Build one from arbitrary numeric arrays
    with :meth:`from_arrays` (raises ``ValueError`` on anything out of range) or
    from wire bytes with :meth:`from_bytes`.
    """

    # The arrays are read-only views of one buffer and the public names read-only
    # properties: plain slots, set once where a Cells is made, cost far less to fill
    # than a __setattr__ guard would.
    __slots__ = ("_bytes", "_ix", "_iy", "_mu", "_var")

    _ix: npt.NDArray[np.int16]
    _iy: npt.NDArray[np.int16]
    _mu: npt.NDArray[np.float16]
    _var: npt.NDArray[np.float16]
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
        words = _words_of(ix, iy, mu, var)  # a copy: the caller's arrays stay theirs
        wire = words.astype(_WIRE_WORD).tobytes()
        _check_cells(wire, words)
        self._set_words(words, wire)

    @property
    def ix(self) -> npt.NDArray[np.int16]:
        return self._ix

    @property
    def iy(self) -> npt.NDArray[np.int16]:
        return self._iy

    @property
    def mu(self) -> npt.NDArray[np.float16]:
        return self._mu

    @property
    def var(self) -> npt.NDArray[np.float16]:
        return self._var

    def _set_words(self, words: npt.NDArray[np.int16], wire: bytes) -> None:
        """Take over checked ``words`` (ix | iy | mu | var bits, native order) of bin ``wire``."""
        n = len(words) // 4
        words.setflags(write=False)  # first: the views below inherit it
        halves = words.view(_FLOAT16)
        self._ix = words[:n]
        self._iy = words[n : 2 * n]
        self._mu = halves[2 * n : 3 * n]
        self._var = halves[3 * n :]
        self._bytes = wire

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
        plain = _plain(ix, iy, mu, var)
        if plain is not None:
            words, vals = _convert_plain(*plain)
        else:
            words, vals = _convert(ix, iy, mu, var)
        wire = words.astype(_WIRE_WORD).tobytes()
        try:
            _check_cells(wire, words)
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
        cells._set_words(words, wire)
        return cells

    @classmethod
    def from_bytes(cls, data: bytes) -> Cells:
        """Parse the wire ``bin``; raises :class:`FieldError` on a bad length or value."""
        if len(data) % BYTES_PER_CELL:
            raise FieldError(
                RejectReason.BAD_SHAPE, f"cell bin of {len(data)} bytes is not a multiple of 8"
            )
        wire = data if type(data) is bytes else bytes(data)
        # One byte swap for the whole bin; the four arrays are views of its words.
        words = np.frombuffer(wire, _WIRE_WORD).astype(_INT16)
        _check_cells(wire, words)
        cells = object.__new__(cls)
        cells._set_words(words, wire)
        return cells

    def to_bytes(self) -> bytes:
        cached: bytes | None = self._bytes
        if cached is None:
            words = _words_of(self.ix, self.iy, self.mu, self.var)
            cached = words.astype(_WIRE_WORD).tobytes()
            self._bytes = cached
        return cached

    def slice(self, start: int, stop: int) -> Cells:
        n = len(self)
        if start <= 0 and stop >= n:
            return self
        part = object.__new__(Cells)  # a subset of valid cells is valid: no re-check
        wire: bytes | None = self._bytes
        if wire is not None:  # the part's bin: the same slice of each of the four arrays
            r = range(n)[start:stop]
            wire = b"".join(wire[2 * (k * n + r.start) : 2 * (k * n + r.stop)] for k in range(4))
        part._ix = self._ix[start:stop]
        part._iy = self._iy[start:stop]
        part._mu = self._mu[start:stop]
        part._var = self._var[start:stop]
        part._bytes = wire
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
        return len(self._ix)

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
    if len(cells) <= per_chunk:  # the usual case: one chunk (or none)
        return [cells] if len(cells) else []
    return [cells.slice(i, i + per_chunk) for i in range(0, len(cells), per_chunk)]
