"""``Byzantine``: a lying agent's distortions, as functions on detections and message bodies.

The agent calls :meth:`Byzantine.transform_detection` on each detection before
fusing it, and :meth:`Byzantine.transform_track` / :meth:`Byzantine.transform_patch`
(or :meth:`Byzantine.transform_cells` on the cell arrays before chunking) on each
belief before sending it. Which of them change anything depends on
:attr:`ByzantineSpec.at`, so the agent can call all of them unconditionally and a
bias is never applied twice. Seeded (``numpy.random.default_rng``), no clock read.

Order: replay picks the belief, then bias and noise move it, then overconfidence
shrinks its covariance.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from agents.faults.byzantine_spec import ByzantineSpec, Stage
from agents.observations import Detection
from protocol.swarm import Cells, Patch, Track

FloatArray = npt.NDArray[np.float64]
Int16Array = npt.NDArray[np.int16]
MAX_HISTORY = 4096
VAR_FLOOR = 2.0**-24  # smallest positive float16: a cell variance must stay > 0 on the wire
_I16 = (-(2**15), 2**15 - 1)

T = TypeVar("T")
B = TypeVar("B", Track, Patch)


def _indices(values: npt.ArrayLike, name: str) -> Int16Array:
    a = np.asarray(values)
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise ValueError(f"{name} must hold integers, got {a.dtype}")
    wide = a.astype(np.int64)
    if wide.size and (wide.min() < _I16[0] or wide.max() > _I16[1]):
        raise ValueError(f"{name} outside int16")
    return wide.astype(np.int16)


def _restamp(t_ref: float, t_held: float, now: float) -> float:
    """A belief held since ``t_held``, presented as if sent at ``now``: its time moves
    along, and never past ``now`` when it was not past ``t_held`` (float rounding)."""
    shifted = t_ref + (now - t_held)
    return min(shifted, now) if t_ref <= t_held else shifted


class CellArrays(NamedTuple):
    """Cells by global lattice index with their belief (the arrays of a PATCH)."""

    ix: Int16Array
    iy: Int16Array
    mu: FloatArray
    var: FloatArray


@dataclass(frozen=True)
class _Held(Generic[T]):
    t: float
    value: T


class _History(Generic[T]):
    """The beliefs sent over the last ``age`` seconds, plus the newest one older than that."""

    def __init__(self, max_len: int) -> None:
        self._items: deque[_Held[T]] = deque()
        self._max = max_len
        self.overflow = 0

    def pick(self, now: float, value: T, age: float) -> _Held[T]:
        """Record ``value`` at ``now``; return the newest record at least ``age`` old,
        or the oldest held while the history is younger than ``age``."""
        self._items.append(_Held(now, value))
        if len(self._items) > self._max:
            self._items.popleft()
            self.overflow += 1
        cutoff = now - age
        while len(self._items) >= 2 and self._items[1].t <= cutoff:
            self._items.popleft()
        return self._items[0]

    def __len__(self) -> int:
        return len(self._items)


class Byzantine:
    """Applies a :class:`ByzantineSpec`; see the module docstring."""

    def __init__(self, spec: ByzantineSpec, seed: int, *, max_history: int = MAX_HISTORY) -> None:
        if not isinstance(spec, ByzantineSpec):
            raise TypeError("spec must be a ByzantineSpec")
        if not 1 <= max_history <= 1_000_000:
            raise ValueError("max_history must be in 1..1000000")
        self._spec = spec
        self._rng = np.random.default_rng(seed)
        self._max_history = max_history
        self._histories: dict[Hashable, _History[object]] = {}
        self._counts: dict[str, int] = dict.fromkeys(
            ("detection", "track", "patch", "cells", "replayed", "cells_off_lattice"), 0
        )

    @property
    def spec(self) -> ByzantineSpec:
        return self._spec

    def set_spec(self, spec: ByzantineSpec) -> None:
        """Change the behaviour; the replay history is kept."""
        if not isinstance(spec, ByzantineSpec):
            raise TypeError("spec must be a ByzantineSpec")
        self._spec = spec

    @property
    def counters(self) -> dict[str, int]:
        """How many detections, tracks, patches and cell sets were distorted or replayed."""
        out = dict(self._counts)
        out["history_overflow"] = sum(h.overflow for h in self._histories.values())
        return out

    # ------------------------------------------------------------------ detections

    def transform_detection(
        self, x: float, y: float, cov: npt.ArrayLike, now: float
    ) -> tuple[float, float, FloatArray]:
        """A detection as a broken sensor reports it (changed only when ``at=sense``)."""
        c = np.array(cov, dtype=np.float64)
        if not self._distorts(Stage.SENSE):
            return float(x), float(y), c
        self._counts["detection"] += 1
        dx, dy = self._offset()
        return float(x) + dx, float(y) + dy, c / self._spec.overconfident

    def transform_observation(self, det: Detection, now: float) -> Detection:
        """:meth:`transform_detection` on an observation's :class:`Detection`."""
        if not self._distorts(Stage.SENSE):
            return det
        x, y, cov = self.transform_detection(det.x, det.y, det.cov, now)
        return Detection(x, y, cov, det.t)

    # ------------------------------------------------------------------ sent beliefs

    def transform_track(self, track: Track, now: float) -> Track:
        """The TRACK a liar sends instead of ``track`` (sent at ``now``)."""
        s = self._spec
        track, t_ref = self._held_belief("track", now, track)
        if not self._distorts(Stage.SEND):
            if t_ref == track.t_ref:
                return track
            return Track(track.mean, track.cov, t_ref, track.updates)
        self._counts["track"] += 1
        dx, dy = self._offset()
        x, y, vx, vy = track.mean
        cov = tuple(v / s.overconfident for v in track.cov)
        return Track((x + dx, y + dy, vx, vy), cov, t_ref, track.updates)

    def transform_patch(self, patch: Patch, now: float) -> Patch:
        """The PATCH a liar sends instead of ``patch`` (sent at ``now``)."""
        patch, t_ref = self._held_belief("patch", now, patch)
        if not self._distorts(Stage.SEND):
            return patch if t_ref == patch.t_ref else Patch(patch.cell_size_mm, t_ref, patch.cells)
        self._counts["patch"] += 1
        c = patch.cells
        out = self._distort_cells(
            c.ix, c.iy, c.mu.astype(np.float64), c.var.astype(np.float64), patch.cell_size_m
        )
        cells = Cells.from_arrays(out.ix, out.iy, out.mu, out.var)
        return Patch(patch.cell_size_mm, t_ref, cells)

    def transform_cells(
        self,
        ix: npt.ArrayLike,
        iy: npt.ArrayLike,
        mu: npt.ArrayLike,
        var: npt.ArrayLike,
        now: float,
        *,
        cell_size: float,
        stream: Hashable = "cells",
    ) -> CellArrays:
        """The cells a liar sends instead of these (``cell_size`` in metres).

        Bias and noise shift every cell by the same whole number of cells (the offset
        rounded to the nearest cell); cells shifted off the int16 lattice are dropped.
        Overconfidence divides ``var``, floored at the smallest float16 > 0. Replay
        returns the arrays given ``replay`` seconds ago on the same ``stream``.
        """
        if not cell_size > 0:
            raise ValueError(f"cell_size must be > 0, got {cell_size}")
        cells = CellArrays(
            _indices(ix, "ix"),
            _indices(iy, "iy"),
            np.asarray(mu, dtype=np.float64).copy(),
            np.asarray(var, dtype=np.float64).copy(),
        )
        n = len(cells.ix)
        if any(a.ndim != 1 or len(a) != n for a in cells):
            raise ValueError("ix, iy, mu, var must be 1-D arrays of one length")
        if self._spec.replay:
            held = self._replayed(stream, now, cells)
            assert isinstance(held.value, CellArrays)
            cells = held.value
        if not self._distorts(Stage.SEND):
            return cells
        self._counts["cells"] += 1
        return self._distort_cells(*cells, cell_size)

    # ------------------------------------------------------------------ internals

    def _distorts(self, stage: Stage) -> bool:
        s = self._spec
        return s.at is stage and (
            s.bias != (0.0, 0.0) or s.noise > 0.0 or s.overconfident != 1.0
        )

    def _offset(self) -> tuple[float, float]:
        dx, dy = self._spec.bias
        if self._spec.noise:
            nx, ny = self._rng.normal(0.0, self._spec.noise, 2)
            dx, dy = dx + float(nx), dy + float(ny)
        return dx, dy

    def _held_belief(self, stream: str, now: float, message: B) -> tuple[B, float]:
        """The message to send (under ``replay``: the one held that long ago) and its t_ref
        (a replayed message restamped as if it were fresh)."""
        if not self._spec.replay:
            return message, message.t_ref
        held = self._replayed(stream, now, message)
        old = held.value
        assert isinstance(old, type(message))
        return old, _restamp(old.t_ref, held.t, now)

    def _replayed(self, stream: Hashable, now: float, value: object) -> _Held[object]:
        history = self._histories.get(stream)
        if history is None:
            history = self._histories[stream] = _History(self._max_history)
        held = history.pick(now, value, self._spec.replay)
        if held.t < now:
            self._counts["replayed"] += 1
        return held

    def _distort_cells(
        self,
        ix: Int16Array,
        iy: Int16Array,
        mu: FloatArray,
        var: FloatArray,
        cell_size: float,
    ) -> CellArrays:
        dx, dy = self._offset()
        sx, sy = round(dx / cell_size), round(dy / cell_size)
        nx = ix.astype(np.int64) + sx
        ny = iy.astype(np.int64) + sy
        keep = (nx >= _I16[0]) & (nx <= _I16[1]) & (ny >= _I16[0]) & (ny <= _I16[1])
        self._counts["cells_off_lattice"] += int(len(keep) - np.count_nonzero(keep))
        f = self._spec.overconfident
        new_var = var[keep] if f == 1.0 else np.maximum(var[keep] / f, VAR_FLOOR)
        return CellArrays(
            nx[keep].astype(np.int16), ny[keep].astype(np.int16), mu[keep].copy(), new_var
        )
