"""The grid tests' window, small and not square, and random beliefs to fill it with."""

from __future__ import annotations

import numpy as np

from agents.belief.grid import CellBlock, PheromoneGrid
from agents.belief.params import GridParams

# A non-square window catches any x/y (row/column) mix-up.
SMALL = GridParams(width=24, height=17)


def _randomise(grid: PheromoneGrid, seed: int, var_lo: float = 0.05) -> None:
    rng = np.random.default_rng(seed)
    snap = grid.snapshot()
    grid.assign(
        CellBlock(
            snap.ix,
            snap.iy,
            rng.uniform(0.0, 1.0, len(snap)),
            rng.uniform(var_lo, grid.params.var_max, len(snap)),
        )
    )
