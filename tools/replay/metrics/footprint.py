"""The footprint family: what each robot's camera could see, from the ground truth and the arena.

A camera sees a floor point when it is within the arena's sensing range (and at least
:data:`MIN_RANGE` away), within half the horizontal field of view of the heading, and no
obstacle at least as tall as the camera stands between them (obstacles as their
axis-aligned bounding boxes). On a 0.1 m lattice of the room that gives each robot's
footprint A_i over a span of time (the union of its views), and the swarm's redundancy
Σ|A_i| / |∪A_i|: 1 when no two robots looked at the same cell, N when N robots all
looked at the same cells. :func:`target_visible` says, at each time, whether a camera
could have seen the target (its centre, by the same rules).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence, Set
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from tools.replay.metrics.common import FloatArray
from tools.replay.metrics.truth import Truth

if TYPE_CHECKING:
    from worlds.arena import Arena

CELL = 0.1  # m: the lattice of footprints
MIN_RANGE = 0.15  # m: closer than this a camera sees nothing whole
STEP = 0.5  # s between the poses a footprint is made of
WINDOW = 10.0  # s: the redundancy of a run is averaged over windows this long

Box = tuple[float, float, float, float]  # x0, x1, y0, y1


def lattice(arena: Arena) -> tuple[FloatArray, FloatArray, int]:
    """Cell centres (x, y, flattened row by row) of the room's lattice, and the cell count."""
    nx = math.ceil(arena.room.size_x / CELL - 1e-9)
    ny = math.ceil(arena.room.size_y / CELL - 1e-9)
    gx, gy = np.meshgrid((np.arange(nx) + 0.5) * CELL, (np.arange(ny) + 0.5) * CELL)
    return gx.ravel(), gy.ravel(), nx * ny


def blockers(arena: Arena) -> list[Box]:
    """Bounding boxes of the obstacles at least as tall as the cameras."""
    out = []
    for ob in arena.obstacles:
        if ob.height < arena.car_model.camera_height:
            continue
        c, n = abs(math.cos(ob.yaw)), abs(math.sin(ob.yaw))
        hx, hy = (c * ob.size_x + n * ob.size_y) / 2, (n * ob.size_x + c * ob.size_y) / 2
        out.append((ob.x - hx, ob.x + hx, ob.y - hy, ob.y + hy))
    return out


Camera = tuple[float, float, float]  # x, y, yaw


def camera_of(arena: Arena, x: float, y: float, yaw: float) -> Camera:
    """The camera (its position and heading) of a car at (x, y, yaw)."""
    ahead = arena.car_model.camera_forward
    return x + ahead * math.cos(yaw), y + ahead * math.sin(yaw), yaw


def sees(arena: Arena, camera: Camera, px: npt.ArrayLike, py: npt.ArrayLike,
         *, boxes: Sequence[Box] | None = None) -> npt.NDArray[np.bool_]:
    """Which points (px, py) the ``camera`` (x, y, yaw) sees."""
    cx, cy, yaw = camera
    px, py = np.asarray(px, dtype=np.float64), np.asarray(py, dtype=np.float64)
    s = arena.sensing
    dx, dy = px - cx, py - cy
    r = np.hypot(dx, dy)
    bearing = np.abs(np.remainder(np.arctan2(dy, dx) - yaw + math.pi, 2 * math.pi) - math.pi)
    seen: npt.NDArray[np.bool_] = (
        (r >= MIN_RANGE) & (r <= s.range) & (bearing <= math.radians(s.hfov_deg) / 2)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        ix, iy = 1.0 / dx, 1.0 / dy
        for x0, x1, y0, y1 in blockers(arena) if boxes is None else boxes:
            ax, bx = (x0 - cx) * ix, (x1 - cx) * ix
            ay, by = (y0 - cy) * iy, (y1 - cy) * iy
            enter = np.maximum(np.minimum(ax, bx), np.minimum(ay, by))
            leave = np.minimum(np.maximum(ax, bx), np.maximum(ay, by))
            seen &= ~((enter <= leave) & (leave >= 0.0) & (enter <= 1.0))
    return seen


def camera_footprints(
    truth: Truth, arena: Arena, name: str, times: FloatArray
) -> list[npt.NDArray[np.int64]]:
    """Room cells (flat indices of :func:`lattice`) in robot ``name``'s view at each time."""
    px, py, _ = lattice(arena)
    boxes = blockers(arena)
    out = []
    for x, y, yaw in truth.car_at(name, times):
        if not math.isfinite(x):
            out.append(np.zeros(0, dtype=np.int64))
            continue
        out.append(np.flatnonzero(sees(arena, camera_of(arena, x, y, yaw), px, py, boxes=boxes)))
    return out


def covered(truth: Truth, arena: Arena, names: Sequence[str], t_from: float,
            t_to: float) -> dict[str, set[int]]:
    """Each robot's footprint A_i over [t_from, t_to): the cells its camera saw, every
    :data:`STEP` seconds."""
    times = np.arange(t_from, t_to, STEP)
    out: dict[str, set[int]] = {}
    for name in names:
        cells = camera_footprints(truth, arena, name, times)
        out[name] = set(np.concatenate(cells).tolist()) if cells else set()
    return out


def redundancy(footprints: Mapping[str, Set[int]]) -> float | None:
    """Σ|A_i| / |∪A_i| (None when no robot saw anything)."""
    union: set[int] = set().union(*footprints.values()) if footprints else set()
    if not union:
        return None
    return sum(len(a) for a in footprints.values()) / len(union)


def windowed(truth: Truth, arena: Arena, names: Sequence[str], t_from: float, t_to: float,
             *, window: float = WINDOW) -> dict[str, Any]:
    """Per window of ``window`` seconds: the redundancy Σ|A_i|/|∪A_i| and, per pair of
    robots, |A∩B|/|A∪B|; each averaged over the windows (and pairs), and the fraction of
    the room any camera covered over the whole span."""
    times = np.arange(t_from, t_to, STEP)
    _, _, n_cells = lattice(arena)
    if times.size == 0 or not names:
        return {"redundancy": None, "overlap": None, "union_fraction": None, "windows": 0}
    cells = {n: camera_footprints(truth, arena, n, times) for n in names}
    every: set[int] = set()
    for per_time in cells.values():
        for c in per_time:
            every.update(c.tolist())
    bins = np.floor((times - t_from) / window).astype(int)
    ratios, pairs = [], []
    for b in np.unique(bins):
        sets = {n: set(np.concatenate([cells[n][k] for k in np.flatnonzero(bins == b)]).tolist())
                for n in names}
        r = redundancy(sets)
        if r is not None:
            ratios.append(r)
        for first, second in itertools.combinations(names, 2):
            union = sets[first] | sets[second]
            if union:
                pairs.append(len(sets[first] & sets[second]) / len(union))
    return {
        "redundancy": float(np.mean(ratios)) if ratios else None,
        "overlap": float(np.mean(pairs)) if pairs else None,
        "union_fraction": len(every) / n_cells,
        "windows": len(ratios),
    }


def target_visible(truth: Truth, arena: Arena, name: str,
                   times: FloatArray) -> npt.NDArray[np.bool_]:
    """At each time, whether robot ``name``'s camera could see the target's centre."""
    poses = truth.car_at(name, times)
    target = truth.target_at(times)
    boxes = blockers(arena)
    out = np.zeros(times.size, dtype=bool)
    for k, (x, y, yaw) in enumerate(poses):
        if not (math.isfinite(x) and math.isfinite(target[k, 0])):
            continue
        camera = camera_of(arena, x, y, yaw)
        out[k] = bool(sees(arena, camera, target[k, :1], target[k, 1:2], boxes=boxes)[0])
    return out
