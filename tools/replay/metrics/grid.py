"""The grid family: the belief windows an agent logged, where their peak was against the truth,
the cells searched (coverage) and how much two agents searched the same cells."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from protocol.scene import GRID_LEVELS
from tools.replay.load import Line, ProcessLog, float32_grid
from tools.replay.metrics.common import FloatArray
from tools.replay.metrics.truth import Truth

COVERAGE_VAR = 0.5  # a cell counts as searched while its var is below this (var_max is 1)


@dataclass(frozen=True)
class GridRecord:
    """One ``belief`` record: the window and what came with it. The cells are kept as logged:
    one byte a cell when they are protocol.scene's levels (a run log's grid; a long run's
    grids are the bulk of a replay's memory), float32 otherwise; ``mu`` and ``var`` give the
    float values the log's reader gives, exactly."""

    t: float
    origin: tuple[int, int]
    mu_cells: npt.NDArray[Any]
    var_cells: npt.NDArray[Any]
    mean_var: float
    pose: tuple[float, float, float] | None

    @property
    def mu(self) -> FloatArray:
        return widen(self.mu_cells)

    @property
    def var(self) -> FloatArray:
        return widen(self.var_cells)

    def inside(self, room_cells: tuple[int, int] | None) -> npt.NDArray[np.bool_]:
        return window_inside(self.origin, (self.var.shape[0], self.var.shape[1]), room_cells)

    def searched(
        self, var_below: float, room_cells: tuple[int, int] | None
    ) -> npt.NDArray[np.bool_]:
        return (self.var < var_below) & self.inside(room_cells)

    def cells(self, mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        """Global cell keys (ix, iy packed in one int64) where ``mask`` is true."""
        rows, cols = np.nonzero(mask)
        return cell_keys(cols + self.origin[0], rows + self.origin[1])


def widen(cells: npt.NDArray[Any]) -> FloatArray:
    """Cell values as floats: levels (uint8) as the log's reader widens them."""
    if cells.dtype == np.uint8:
        return cells.astype(np.float32) / np.float32(GRID_LEVELS)  # type: ignore[return-value]
    return cells


def narrow(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """``values`` as levels (uint8) when that loses nothing (they came from a run log's
    grid), else unchanged."""
    levels = np.round(np.clip(values, 0.0, 1.0) * GRID_LEVELS).astype(np.uint8)
    return levels if np.array_equal(widen(levels), values) else values


def window_inside(
    origin: tuple[int, int], shape: tuple[int, int], room_cells: tuple[int, int] | None
) -> npt.NDArray[np.bool_]:
    """Which cells of a window (row = y) lie in the room [0, nx) x [0, ny) of cells."""
    h, w = shape
    if room_cells is None:
        return np.ones((h, w), dtype=bool)
    ix = origin[0] + np.arange(w)
    iy = origin[1] + np.arange(h)
    cols = (ix >= 0) & (ix < room_cells[0])
    rows = (iy >= 0) & (iy < room_cells[1])
    return rows[:, None] & cols[None, :]


def room_cells_of(size_x: float, size_y: float, cell: float) -> tuple[int, int]:
    """The room's extent in lattice cells (cell (0, 0) has its corner at the room's origin)."""
    return math.ceil(size_x / cell - 1e-9), math.ceil(size_y / cell - 1e-9)


def cell_keys(ix: npt.ArrayLike, iy: npt.ArrayLike) -> npt.NDArray[np.int64]:
    return (np.asarray(ix, dtype=np.int64) << 32) + (np.asarray(iy, dtype=np.int64) + (1 << 31))


def grid_record(line: Line) -> GridRecord | None:
    """The window of one belief record, or None when it carries none (one record in two)."""
    try:
        shape = (int(line["shape"][0]), int(line["shape"][1]))
        origin = (int(line["origin"][0]), int(line["origin"][1]))
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    mu = float32_grid(line.get("mu_f32"), shape)
    var = float32_grid(line.get("var_f32"), shape)
    if mu is None or var is None:
        return None
    pose = line.get("pose")
    mean_var = line.get("mean_var")
    return GridRecord(
        float(line["t"]),
        origin,
        narrow(mu),
        narrow(var),
        float(mean_var) if isinstance(mean_var, int | float) else float(var.mean()),
        (float(pose[0]), float(pose[1]), float(pose[2]))
        if isinstance(pose, list) and len(pose) == 3
        else None,
    )


def grid_records(log: ProcessLog) -> list[GridRecord]:
    """The windows of the agent's belief records (:func:`grid_record` of each)."""
    return [g for line in log.events("belief") if (g := grid_record(line)) is not None]


def grid_peak_errors(
    grids: Sequence[GridRecord], truth: Truth, cell: float, min_mu: float
) -> FloatArray:
    """Distance from the grid's peak cell to the target, where the peak's mu >= ``min_mu``."""
    out = np.full(len(grids), np.nan)
    for k, g in enumerate(grids):
        flat = int(np.argmax(g.mu))
        r, c = divmod(flat, g.mu.shape[1])
        if g.mu[r, c] < min_mu:
            continue
        x, y = (g.origin[0] + c + 0.5) * cell, (g.origin[1] + r + 0.5) * cell
        true = truth.target_at(g.t)[0]
        out[k] = math.hypot(x - true[0], y - true[1])
    return out


def coverage(
    grids: Sequence[GridRecord],
    var_below: float = COVERAGE_VAR,
    room_cells: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """Cells searched (var below the threshold; in the room when known) now, and ever."""
    now = np.array([int(np.count_nonzero(g.searched(var_below, room_cells))) for g in grids])
    ever: set[int] = set()
    ever_n = []
    for g in grids:
        ever.update(g.cells(g.searched(var_below, room_cells)).tolist())
        ever_n.append(len(ever))
    return {"now": now, "ever": np.array(ever_n), "ever_cells": ever}


def window_mean_var(
    var: FloatArray, origin: tuple[int, int], room_cells: tuple[int, int] | None
) -> float:
    """Mean var of the window's cells inside the room (the whole window when unknown; NaN when
    no cell is inside)."""
    inside = window_inside(origin, (var.shape[0], var.shape[1]), room_cells)
    return float(var[inside].mean()) if inside.any() else math.nan


def room_mean_var(grids: Sequence[GridRecord], room_cells: tuple[int, int] | None) -> FloatArray:
    """Each record's mean var over the cells in the room (the logged window mean if unknown)."""
    out = np.full(len(grids), np.nan)
    for k, g in enumerate(grids):
        out[k] = g.mean_var if room_cells is None else window_mean_var(g.var, g.origin, room_cells)
    return out


def _pair_records(
    a: Sequence[GridRecord], b: Sequence[GridRecord], within: float = 0.5
) -> list[tuple[GridRecord, GridRecord]]:
    if not a or not b:
        return []
    tb = np.array([g.t for g in b])
    pairs = []
    for ga in a:
        j = int(np.argmin(np.abs(tb - ga.t)))
        if abs(tb[j] - ga.t) <= within:
            pairs.append((ga, b[j]))
    return pairs


def coverage_overlap(
    a: Sequence[GridRecord],
    b: Sequence[GridRecord],
    var_below: float = COVERAGE_VAR,
    room_cells: tuple[int, int] | None = None,
) -> dict[str, FloatArray]:
    """At paired record times: searched cells of both, of either, and their ratio (Jaccard)."""
    t, both, either = [], [], []
    for ga, gb in _pair_records(a, b):
        ca = ga.cells(ga.searched(var_below, room_cells))
        cb = gb.cells(gb.searched(var_below, room_cells))
        t.append(ga.t)
        both.append(np.intersect1d(ca, cb, assume_unique=True).size)
        either.append(np.union1d(ca, cb).size)
    both_a, either_a = np.array(both, dtype=np.float64), np.array(either, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        jac = np.where(either_a > 0, both_a / either_a, np.nan)
    return {"t": np.array(t), "both": both_a, "either": either_a, "jaccard": jac}
