"""Paths over the belief window: where a robot may drive, how far each cell is, where to aim.

:class:`WindowPlanner` is the :class:`~agents.navigation.Navigator`'s path planner. Over the
cells of the belief window (centres ``xs`` by ``ys``), those outside the room or closer
than ``keep_out`` to a wall or obstacle are blocked; path lengths from the robot are
shortest paths on the free cells (Dijkstra, :mod:`agents.shortest_paths`), and the robot
steers at a waypoint on such a path, so a box between robot and goal is driven around.

The graph depends only on the room and where the window lies, never on the belief, so the
graphs of the last :data:`GRAPHS_KEPT` window placements are kept, with their trees: a
decision from a cell already planned from costs no Dijkstra, with the very same result.
Deterministic: no random numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from agents.room import Room
from agents.shortest_paths import PathTrees, grid_graph

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int32]

GRAPHS_KEPT = 4  # window placements whose graphs (and their trees) are kept

GraphKey = tuple[float, float, float, int, int, Room]  # x0, y0, cell size, width, height, room


@dataclass
class _Graph:
    """Shortest-path graph over the free cells of one window placement.

    The graph depends only on the room and where the window lies, never on the
    belief, so the shortest-path tree from a cell is a function of that cell:
    ``paths`` keeps the most recently used ones (read-only), and a decision from
    a cell already planned from costs no Dijkstra, with the very same result.
    """

    key: GraphKey
    blocked: BoolArray
    paths: PathTrees


class Paths(NamedTuple):
    """From the robot over the window: ``dist`` the path length to every cell, shaped
    (len(ys), len(xs)) (inf: unreachable or blocked); ``pred`` the predecessors and
    ``source`` the flat index of the cell planned from (both None: the robot is near no
    free cell, and ``dist`` is straight-line); ``blocked`` the cells not driven through.

    ``pred`` is shared with later decisions: read it, never write."""

    dist: FloatArray
    pred: IntArray | None
    source: int | None
    blocked: BoolArray


def cell_of(xs: FloatArray, ys: FloatArray, point: tuple[float, float]) -> int | None:
    """The flat index of the window cell holding ``point``, or None outside the window."""
    c = float(xs[1] - xs[0])
    lx = round((point[0] - float(xs[0])) / c)
    ly = round((point[1] - float(ys[0])) / c)
    h, w = ys.size, xs.size
    if 0 <= lx < w and 0 <= ly < h:
        return int(ly * w + lx)
    return None


class WindowPlanner:
    """Shortest paths from the robot over the belief window; see the module docstring."""

    def __init__(self, keep_out: float, waypoint_distance: float) -> None:
        """``keep_out``: cells closer than this (m) to a wall or obstacle are blocked (the
        robot's radius and a margin); ``waypoint_distance``: how far along a path (m) the
        robot aims."""
        self.keep_out = keep_out
        self.waypoint_distance = waypoint_distance
        self._graphs: dict[GraphKey, _Graph] = {}

    def paths(self, xs: FloatArray, ys: FloatArray, room: Room, x: float, y: float) -> Paths:
        """Path length from the robot at (x, y) to every cell of the window, and how."""
        graph = self._graph_for(xs, ys, room)
        source = self._source(xs, ys, graph, x, y)
        if source is None:
            gx, gy = np.meshgrid(xs, ys)
            dist = np.hypot(gx - x, gy - y)
            dist[graph.blocked] = np.inf
            return Paths(dist, None, None, graph.blocked)
        d, pred = graph.paths.tree(source)
        sy, sx = divmod(source, xs.size)
        offset = math.hypot(float(xs[sx]) - x, float(ys[sy]) - y)
        return Paths(d + offset, pred, source, graph.blocked)

    def waypoint(
        self,
        xs: FloatArray,
        ys: FloatArray,
        *,
        pred: IntArray,
        dist: FloatArray,
        source: int,
        goal_index: int,
    ) -> tuple[float, float]:
        """The farthest cell on the path to the goal within ``waypoint_distance`` of the source."""
        w = xs.size
        limit = float(dist.flat[source]) + self.waypoint_distance
        k = goal_index
        while k != source and pred[k] >= 0 and float(dist.flat[k]) > limit:
            k = int(pred[k])
        ky, kx = divmod(k, w)
        return float(xs[kx]), float(ys[ky])

    def route(
        self, xs: FloatArray, ys: FloatArray, room: Room, *,
        start: tuple[float, float], target: tuple[float, float],
    ) -> tuple[float, float] | None:
        """A waypoint from ``start`` towards ``target`` around obstacles, or None without a
        usable path."""
        dist, pred, source, _ = self.paths(xs, ys, room, start[0], start[1])
        k = cell_of(xs, ys, target)
        if pred is None or source is None or k is None:
            return None
        if not math.isfinite(float(dist.flat[k])):
            # The target's own cell may be too near a wall: plan to the nearest reachable cell.
            gx, gy = np.meshgrid(xs, ys)
            near = np.where(np.isfinite(dist), np.hypot(gx - target[0], gy - target[1]), np.inf)
            k = int(np.argmin(near))
            if not math.isfinite(float(near.flat[k])):
                return None
        return self.waypoint(xs, ys, pred=pred, dist=dist, source=source, goal_index=k)

    def straight_clear(self, room: Room, start: tuple[float, float],
                       at: tuple[float, float], length: float) -> bool:
        """Whether the first ``length`` metres of the straight line from ``start`` towards
        ``at`` keep ``keep_out`` from every wall and obstacle (the robot's own first 0.1 m
        excepted: it may stand closer than that already). Sampled every 0.05 m."""
        d = math.hypot(at[0] - start[0], at[1] - start[1])
        if d <= 0.0 or length <= 0.1:
            return True
        s = np.arange(0.1, min(length, d) + 1e-9, 0.05)
        ux, uy = (at[0] - start[0]) / d, (at[1] - start[1]) / d
        gap = room.surface_distance(start[0] + s * ux, start[1] + s * uy)
        return bool(np.all(gap >= self.keep_out))

    def _graph_for(self, xs: FloatArray, ys: FloatArray, room: Room) -> _Graph:
        c = float(xs[1] - xs[0])
        key = (float(xs[0]), float(ys[0]), c, xs.size, ys.size, room)
        graph = self._graphs.pop(key, None)
        if graph is None:
            graph = self._build_graph(key, xs, ys, room)
            if len(self._graphs) >= GRAPHS_KEPT:
                del self._graphs[next(iter(self._graphs))]  # the least recently used
        self._graphs[key] = graph
        return graph

    def _build_graph(self, key: GraphKey, xs: FloatArray, ys: FloatArray, room: Room) -> _Graph:
        c = float(xs[1] - xs[0])
        gx, gy = np.meshgrid(xs, ys)
        inside = (gx > 0.0) & (gx < room.width) & (gy > 0.0) & (gy < room.height)
        clear = room.surface_distance(gx, gy) >= self.keep_out
        blocked = ~(inside & clear)
        return _Graph(key, blocked, grid_graph(~blocked, c))

    def _source(
        self, xs: FloatArray, ys: FloatArray, graph: _Graph, x: float, y: float
    ) -> int | None:
        """The free cell to plan from: the robot's own, else the nearest free one within 2 cells."""
        k = cell_of(xs, ys, (x, y))
        if k is None:
            return None
        h, w = ys.size, xs.size
        ly, lx = divmod(k, w)
        best: tuple[float, int] | None = None
        for dy in range(-2, 3):
            for dx in range(-2, 3):
                jy, jx = ly + dy, lx + dx
                if 0 <= jy < h and 0 <= jx < w and not graph.blocked[jy, jx]:
                    d = math.hypot(float(xs[jx]) - x, float(ys[jy]) - y)
                    if best is None or d < best[0]:
                        best = (d, jy * w + jx)
        return None if best is None else best[1]
