"""Shortest-path trees over one fixed grid graph, the most recently used kept.

A graph that depends only on the room (never on a belief) gives, from a source cell,
always the same tree: a planner that asks again from a cell it already planned from
gets the very same (read-only) arrays without another Dijkstra.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import sparse
from scipy.sparse.csgraph import dijkstra

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int32]

BoolArray = npt.NDArray[np.bool_]

TREES_KEPT = 64  # trees kept per graph (one per source cell, ~50 KB each at most)


class PathTrees:
    """Path lengths and predecessors from a source cell of an undirected grid graph."""

    def __init__(self, matrix: sparse.csr_matrix, shape: tuple[int, int]) -> None:
        self.matrix = matrix
        self.shape = shape
        self._trees: dict[int, tuple[FloatArray, IntArray]] = {}

    def tree(self, source: int) -> tuple[FloatArray, IntArray]:
        """Path lengths (shaped like the grid, read-only) and predecessors from ``source``."""
        tree = self._trees.pop(source, None)
        if tree is None:
            d, pred = dijkstra(self.matrix, directed=False, indices=source,
                               return_predecessors=True)
            dist = np.asarray(d, dtype=np.float64).reshape(self.shape)
            dist.flags.writeable = False
            pred.flags.writeable = False
            tree = (dist, pred)
            if len(self._trees) >= TREES_KEPT:
                del self._trees[next(iter(self._trees))]  # the least recently used
        self._trees[source] = tree
        return tree


def grid_graph(free: BoolArray, cell_size: float) -> PathTrees:
    """The 8-connected graph of the ``free`` cells of a grid (edges cost their length) and
    its shortest-path trees: the navigator's window and the search map plan on it."""
    h, w = free.shape
    ids = np.arange(h * w).reshape(h, w)
    rows, cols, costs = [], [], []
    for dy, dx in ((0, 1), (1, 0), (1, 1), (1, -1)):
        a = (slice(0, h - dy), slice(max(0, -dx), w - max(0, dx)))
        b = (slice(dy, h), slice(max(0, dx), w - max(0, -dx)))
        both = free[a] & free[b]
        rows.append(ids[a][both])
        cols.append(ids[b][both])
        costs.append(np.full(int(both.sum()), cell_size * math.hypot(dx, dy)))
    matrix = sparse.csr_matrix(
        (np.concatenate(costs), (np.concatenate(rows), np.concatenate(cols))),
        shape=(h * w, h * w),
    )
    return PathTrees(matrix, (h, w))
