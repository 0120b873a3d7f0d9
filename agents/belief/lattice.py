"""The global lattice and the index maths of a window on it.

Cell (i, j) of the lattice covers ``[i·c, (i+1)·c) × [j·c, (j+1)·c)`` in the
world frame. Every agent must map positions to cells with :func:`cell_index`
so that all agents agree on the boundaries (floating-point edges included).

A window is ``width × height`` cells whose cell (0, 0) has the global index
``origin``. Arrays over a window are shaped ``(height, width)`` and indexed
``[local_iy, local_ix]`` (row = y, column = x), like an image whose first row
is the smallest y.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from agents.belief.params import INT16_MAX

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]


def cell_index(coord: float, cell_size: float) -> int:
    """Global index of the cell containing world coordinate ``coord``."""
    return math.floor(coord / cell_size)


def cell_centre(index: int, cell_size: float) -> float:
    """World coordinate of the centre of cell ``index`` along one axis."""
    return (index + 0.5) * cell_size


def centre_cell(width: int, height: int) -> tuple[int, int]:
    """Local index of a window's centre cell (for even sizes, the upper of the two middles)."""
    return width // 2, height // 2


def origin_for(x: float, y: float, cell_size: float, width: int, height: int) -> tuple[int, int]:
    """Window origin that puts the cell containing (x, y) at the window's centre cell."""
    cx, cy = centre_cell(width, height)
    return cell_index(x, cell_size) - cx, cell_index(y, cell_size) - cy


def check_int16_window(origin: tuple[int, int], width: int, height: int) -> None:
    """Raise ``ValueError`` if any cell of the window has an index outside int16."""
    ox, oy = origin
    lo, hi = -INT16_MAX - 1, INT16_MAX
    if not (lo <= ox and ox + width - 1 <= hi and lo <= oy and oy + height - 1 <= hi):
        raise ValueError(f"window at origin {origin} leaves the int16 lattice")


def global_to_local(
    ix: npt.ArrayLike,
    iy: npt.ArrayLike,
    origin: tuple[int, int],
    width: int,
    height: int,
) -> tuple[IntArray, IntArray, BoolArray]:
    """Local indices of global cells and a mask of those inside the window.

    The local indices are only meaningful where the mask is true.
    """
    lx = np.asarray(ix, dtype=np.int64) - origin[0]
    ly = np.asarray(iy, dtype=np.int64) - origin[1]
    inside = (lx >= 0) & (lx < width) & (ly >= 0) & (ly < height)
    return lx, ly, inside


def local_to_global(
    lx: npt.ArrayLike, ly: npt.ArrayLike, origin: tuple[int, int]
) -> tuple[IntArray, IntArray]:
    """Global indices of local window cells."""
    return (
        np.asarray(lx, dtype=np.int64) + origin[0],
        np.asarray(ly, dtype=np.int64) + origin[1],
    )


def axis_centres(origin_index: int, n: int, cell_size: float) -> FloatArray:
    """World coordinates of the centres of ``n`` cells starting at global ``origin_index``."""
    return (np.arange(n, dtype=np.float64) + (origin_index + 0.5)) * cell_size


def shift_slices(shift: int, n: int) -> tuple[slice, slice]:
    """(destination, source) slices that move a length-``n`` axis by ``shift`` cells.

    After re-centring, new local index ``k`` holds what old index ``k + shift`` held.
    Requires ``|shift| < n``.
    """
    if shift >= 0:
        return slice(0, n - shift), slice(shift, n)
    return slice(-shift, n), slice(0, n + shift)
