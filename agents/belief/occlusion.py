"""What a camera cannot see past: the room's box obstacles and the other robots.

A look that sees nothing is evidence that the target is not where the camera could
see it, and nowhere else. Both maps that count such looks (the pheromone grid's
negative evidence, :meth:`agents.belief.grid.PheromoneGrid.deposit`, and the search
map, :meth:`agents.belief.search.SearchMap.apply_look`) mask the cells hidden from the
camera with :func:`hidden`: a cell is hidden when the segment from the camera to its
centre crosses an obstacle (every obstacle is taken to block the view; one that does
not only costs information), or passes within ``robot_radius`` of another robot's
centre (a camera behind a partner sees its back). Where the other robots are is what
the agent believes (their own reported positions): a robot that lies about its
position hides cells that are not hidden, which costs evidence, not correctness.

Vectorised over the cells: plain numpy on arrays of cell centres.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from agents.room import Box, Room

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def hidden_by_boxes(cx: float, cy: float, px: FloatArray, py: FloatArray,
                    boxes: Sequence[Box]) -> BoolArray:
    """Whether the segment from the camera (cx, cy) to each point crosses a box (slab
    test)."""
    out = np.zeros(np.shape(px), dtype=bool)
    if not boxes:
        return out
    dx, dy = px - cx, py - cy
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_x, inv_y = 1.0 / dx, 1.0 / dy
        for b in boxes:
            x0, x1 = b.cx - 0.5 * b.sx, b.cx + 0.5 * b.sx
            y0, y1 = b.cy - 0.5 * b.sy, b.cy + 0.5 * b.sy
            ax, bx = (x0 - cx) * inv_x, (x1 - cx) * inv_x
            ay, by = (y0 - cy) * inv_y, (y1 - cy) * inv_y
            enter = np.maximum(np.minimum(ax, bx), np.minimum(ay, by))
            leave = np.minimum(np.maximum(ax, bx), np.maximum(ay, by))
            out |= (enter <= leave) & (leave >= 0.0) & (enter <= 1.0)
    return out


def hidden_by_discs(cx: float, cy: float, px: FloatArray, py: FloatArray,
                    centres: Sequence[tuple[float, float]], *, radius: float) -> BoolArray:
    """Whether the segment from the camera (cx, cy) to each point passes within
    ``radius`` of one of ``centres`` (a disc the camera stands in hides everything)."""
    out = np.zeros(np.shape(px), dtype=bool)
    if radius <= 0.0 or not centres:
        return out
    dx, dy = px - cx, py - cy
    n = dx * dx + dy * dy
    r2 = radius * radius
    for ox, oy in centres:
        qx, qy = ox - cx, oy - cy
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.clip((qx * dx + qy * dy) / n, 0.0, 1.0)
        s = np.where(n > 0.0, s, 0.0)
        ex, ey = qx - s * dx, qy - s * dy
        out |= ex * ex + ey * ey < r2
    return out


def hidden(cx: float, cy: float, px: FloatArray, py: FloatArray, room: Room | None, *,
           robots: Sequence[tuple[float, float]] = (), robot_radius: float = 0.0) -> BoolArray:
    """The points hidden from a camera at (cx, cy) by the room's obstacles or by the
    other ``robots`` (discs of ``robot_radius``)."""
    out = hidden_by_boxes(cx, cy, px, py, room.obstacles if room is not None else ())
    if robots:
        out |= hidden_by_discs(cx, cy, px, py, robots, radius=robot_radius)
    return out


__all__ = ["hidden", "hidden_by_boxes", "hidden_by_discs"]
