"""The search map: the probability that the target is in each coarse cell of the room.

A :class:`SearchMap` covers the whole room in square cells of ``cell_size``
(0.25 m: 32 × 24 cells for an 8 m × 6 m room). Its array ``p`` holds the
probability that the target is in each cell: it sums to 1 over the free cells
and is 0 in cells whose centre lies inside an obstacle or outside the room.
These change it:

- **predict** (time passes): the target moves at most ``target_speed`` (the
  site's declared maximum). Every ``tau = cell_size / target_speed`` seconds,
  each cell hands a fraction ``BETA`` (0.2) of its probability to each of its
  four free neighbours (a lazy random walk). Probability therefore travels at
  most one cell per ``tau`` in the Manhattan metric, so never farther than
  ``target_speed · t`` in any direction: a searched area is refilled from its
  edge at the speed the target could really come back, not forgotten all at once.
  The step conserves the total exactly (up to rounding) and keeps every cell >= 0.
- **a look that saw nothing** (:meth:`SearchMap.apply_look`): each cell is
  multiplied by ``1 - P_d`` and the map renormalised. ``P_d`` is the chance
  that a camera at the look's pose detects a target in that cell
  (:meth:`SearchMap.detection`): ``p_detect`` within 80 % of the range and of the
  half field of view, falling linearly to 0 at their edges, 0 closer than
  ``min_range`` and 0 behind an obstacle or another robot the look is told of
  (:mod:`agents.belief.occlusion`). After every update a
  ``floor`` share of the uniform map is mixed back in, so no look makes a
  place impossible.
- **a late look** (a peer's, or a frame placed once a pose came): the map is at
  its present, the look ``age`` seconds older, and the target may have walked
  into the footprint since. The look is applied as the map would have it had it
  been applied at its time and then predicted: under the map's own walk, the
  chance that a target in a cell now was seen then is ``P_d`` walked for ``age``
  (the same steps as ``predict``; the walk is symmetric, so backward and forward
  are one kernel). The look says "not here" less near its edges, and a look older
  than the target needs to cross it says almost nothing.
- **a detection or a track** (:meth:`SearchMap.collapse`): the map becomes the
  track's position Gaussian (its covariance plus the cell's own c²/12),
  restricted to free cells; when the track is later dropped, the search
  resumes from there and spreads at the target's speed. A sighting placed late
  spreads at once for its age, as the map would have since.

:class:`Viewpoints` are the camera poses (x, y, θ) a robot could drive to: a
lattice of positions clear of walls and obstacles times ``viewpoint_headings``
headings, each with its footprint's ``P_d`` over the cells as one row of a
sparse matrix, so that the probability each viewpoint would see is one
matrix-vector product (:meth:`Viewpoints.gains`).

Looks are rounded as the wire carries them (SWARM.md §6b: centimetres,
π/32768 rad, whole centimetres of range, milliradians of field of view;
:func:`rounded_look`), and the agent applies its own looks rounded too, so that
every member of a swarm applies the very same look.

Deterministic: no random numbers; numpy operations in a fixed order.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import sparse

from agents.belief.occlusion import hidden
from agents.checks import finite, require
from agents.room import Room
from agents.shortest_paths import PathTrees, grid_graph

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

BETA = 0.2
"""Fraction of a cell's probability handed to each free neighbour per predict step."""
CORE = 0.8
"""P_d is ``p_detect`` within this fraction of the range and of the half field of view."""
HEADING_UNIT = math.pi / 32768.0  # SWARM.md §6b
FOV_MRAD_MAX = 6283
INT16_MIN, INT16_MAX = -32768, 32767


@dataclass(frozen=True)
class SearchParams:
    """The search map, the looks and their sharing, and the viewpoints (metres, seconds)."""

    enabled: bool = True
    """Keep a search map and choose search goals as viewpoints on it (else: the
    pheromone grid's utility, as before)."""
    share: bool = True
    """Send this agent's looks (LOOK) and apply the peers' looks."""
    cell_size: float = 0.25
    target_speed: float = 0.5
    """The target's maximum speed, m/s (the site's declared ``max_speed`` when it has one)."""
    p_detect: float = 0.8
    """P_d of one look at the heart of the footprint."""
    min_range: float = 0.15
    floor: float = 1e-4
    """Share of the uniform map mixed back in after every look and collapse."""
    look_interval: float = 0.25
    """At most one look every this many seconds (frames in between add nothing new)."""
    max_pose_std: float = 0.25
    """No look while the pose's position standard deviation (largest axis) exceeds this, m."""
    backfill: float = 4.0
    """Frames seen without a pose in the last this many seconds become looks (and their
    sightings detections, with or without a search map) once a pose comes, placed by dead
    reckoning back from it (agents.backfill); 4 s holds a full turn on the spot at the
    navigator's 2 rad/s (3.1 s) and most of its 1 s margin (0: none)."""
    look_period: float = 1.0
    """A LOOK datagram every this many seconds, while there are looks to send."""
    look_resend: float = 2.0
    """Every LOOK carries the looks of the last this many seconds (each travels about twice)."""
    peer_look_rate: float = 8.0
    """Looks per second applied from one peer at most (a bucket of ``peer_look_burst``)."""
    peer_look_burst: float = 16.0
    look_window: int = 1024
    """Look numbers remembered per (sender, epoch): older ones are refused."""
    peer_speed: float = 1.0
    """A peer's look must lie within ``peer_slack`` + this speed times the time between
    the look and the peer's last HEARTBEAT of that HEARTBEAT's position, m/s."""
    peer_slack: float = 1.0
    viewpoint_spacing: float = 0.5
    viewpoint_headings: int = 8
    clearance: float = 0.2
    """Viewpoints and coarse paths keep this far from walls and obstacles, m."""
    turn_rate: float = 1.5
    """Turning speed used to price a change of heading, rad/s."""
    look_time: float = 1.0
    """Seconds added to every viewpoint's travel time (the look itself; no division by 0)."""
    switch_ratio: float = 1.25
    """Another viewpoint replaces the current goal only when it scores this many times more."""
    partition: float = 0.2
    """Weight, in the choice of a goal, of the probability in cells nearer to a peer (where
    its newest look stood) than to this robot: the peer will look there (1: no partition)."""
    peer_view_age: float = 3.0
    """A peer's newest look places it for this long, s."""
    arrive_radius: float = 0.2
    """Within this of a viewpoint the robot stops and turns to the viewpoint's heading."""
    max_predict_steps: int = 400

    def __post_init__(self) -> None:
        for name in ("cell_size", "p_detect", "look_interval", "look_period", "look_resend",
                     "peer_look_rate", "peer_look_burst", "viewpoint_spacing", "turn_rate",
                     "look_time", "switch_ratio"):
            value = getattr(self, name)
            require(math.isfinite(value) and value > 0.0, f"search.{name} must be > 0")
        for name in ("target_speed", "min_range", "floor", "max_pose_std", "backfill", "peer_speed",
                     "peer_slack", "clearance", "arrive_radius", "peer_view_age"):
            value = getattr(self, name)
            require(math.isfinite(value) and value >= 0.0, f"search.{name} must be >= 0")
        require(self.p_detect <= 1.0 and self.floor < 1.0, "search.p_detect <= 1, floor < 1")
        require(0.0 <= self.partition <= 1.0, "search.partition must be in [0, 1]")
        require(self.switch_ratio >= 1.0, "search.switch_ratio must be >= 1")
        for name in ("look_window", "viewpoint_headings", "max_predict_steps"):
            value = getattr(self, name)
            require(isinstance(value, int) and value >= 1, f"search.{name} must be an int >= 1")
        require(self.look_window <= 65536, "search.look_window must be <= 65536")
        require(isinstance(self.enabled, bool) and isinstance(self.share, bool),
                "search.enabled and search.share must be booleans")


@dataclass(frozen=True)
class CameraLook:
    """One look: the camera at (x, y) facing ``heading`` at time ``t``, seeing up to
    ``range`` metres within ``fov`` radians, and not seeing the target."""

    t: float
    x: float
    y: float
    heading: float
    range: float
    fov: float

    def __post_init__(self) -> None:
        require(finite(self.t, self.x, self.y, self.heading, self.range, self.fov),
                "look values must be finite")
        require(self.range > 0.0 and 0.0 < self.fov <= 2.0 * math.pi,
                "a look needs range > 0 and 0 < fov <= 2π")


def heading_units(heading: float) -> int:
    """The heading as the wire's int16 (π/32768 rad, [-π, π): +π becomes -32768)."""
    q = round(math.remainder(heading, 2.0 * math.pi) / HEADING_UNIT)
    return INT16_MIN if q > INT16_MAX else max(q, INT16_MIN)


def range_cm(value: float) -> int:
    return min(max(round(value * 100.0), 1), 65535)


def fov_mrad(value: float) -> int:
    return min(max(round(value * 1000.0), 1), FOV_MRAD_MAX)


def position_cm(value: float) -> int:
    return min(max(round(value * 100.0), INT16_MIN), INT16_MAX)


def rounded_look(t: float, camera: tuple[float, float, float], range_: float,
                 fov: float) -> CameraLook:
    """The look of a camera at (x, y, heading) as every receiver will decode it
    (SWARM.md §6b), time excepted."""
    x, y, heading = camera
    return CameraLook(
        t, position_cm(x) / 100.0, position_cm(y) / 100.0, heading_units(heading) * HEADING_UNIT,
        range_cm(range_) / 100.0, fov_mrad(fov) / 1000.0,
    )


def walk(p: FloatArray, both_x: FloatArray, both_y: FloatArray, steps: int) -> FloatArray:
    """``steps`` lazy random-walk steps of ``p``: BETA of each cell to each 4-neighbour where
    both are free (``both_x``: pairs along x, shape (rows, columns - 1); ``both_y`` along
    y). Conserves the total (up to rounding) and keeps every cell >= 0."""
    for _ in range(steps):
        out = p.copy()
        right = BETA * p[:, :-1] * both_x  # from column i to i + 1
        left = BETA * p[:, 1:] * both_x  # from column i + 1 to i
        out[:, :-1] += left - right
        out[:, 1:] += right - left
        up = BETA * p[:-1, :] * both_y
        down = BETA * p[1:, :] * both_y
        out[:-1, :] += down - up
        out[1:, :] += up - down
        p = out
    return p


class SearchMap:
    """Where the target may be, room-wide; see the module docstring."""

    def __init__(self, room: Room, params: SearchParams | None = None,
                 robot_radius: float = 0.0) -> None:
        """``robot_radius``: the other robots' discs, which hide what is behind them from a
        look that is told where they stand (0: robots hide nothing)."""
        self.room = room
        self.params = params if params is not None else SearchParams()
        self.robot_radius = robot_radius
        c = self.params.cell_size
        self.nx = max(1, math.ceil(room.width / c - 1e-9))
        self.ny = max(1, math.ceil(room.height / c - 1e-9))
        self.xs: FloatArray = (np.arange(self.nx, dtype=np.float64) + 0.5) * c
        self.ys: FloatArray = (np.arange(self.ny, dtype=np.float64) + 0.5) * c
        gx, gy = np.meshgrid(self.xs, self.ys)
        free = (gx < room.width) & (gy < room.height)
        for b in room.obstacles:
            free &= ~((np.abs(gx - b.cx) <= 0.5 * b.sx) & (np.abs(gy - b.cy) <= 0.5 * b.sy))
        require(bool(free.any()), "the search map needs at least one free cell")
        self.free: BoolArray = free
        self._uniform = free / float(free.sum())
        self.p: FloatArray = self._uniform.copy()
        self._pending = 0.0  # seconds of motion not yet diffused
        # Neighbour pairs along x and y that both lie in free cells.
        self._both_x = (free[:, :-1] & free[:, 1:]).astype(np.float64)
        self._both_y = (free[:-1, :] & free[1:, :]).astype(np.float64)
        self._graph: tuple[float, PathTrees, BoolArray] | None = None

    # ------------------------------------------------------------------ state

    @property
    def cell_size(self) -> float:
        return self.params.cell_size

    def total(self) -> float:
        return float(self.p.sum())

    def entropy(self) -> float:
        """Shannon entropy of the map, nats (log of the free cell count when uniform)."""
        q = self.p[self.p > 0.0]
        return float(-(q * np.log(q)).sum())

    def cell_of(self, x: float, y: float) -> tuple[int, int]:
        """(row, column) of the cell containing (x, y), clipped into the map."""
        c = self.params.cell_size
        return (min(max(math.floor(y / c), 0), self.ny - 1),
                min(max(math.floor(x / c), 0), self.nx - 1))

    def partition(self, me: tuple[float, float],
                  peers: list[tuple[float, float]], weight: float) -> FloatArray:
        """The map for choosing a goal: ``p`` times ``weight`` in the cells nearer to a peer
        than to ``me`` (a Voronoi split: each robot mostly searches its own side)."""
        if not peers or weight >= 1.0:
            return self.p
        gx, gy = np.meshgrid(self.xs, self.ys)
        mine = np.hypot(gx - me[0], gy - me[1])
        theirs = np.full(mine.shape, np.inf)
        for px, py in peers:
            theirs = np.minimum(theirs, np.hypot(gx - px, gy - py))
        return np.where(theirs < mine, weight * self.p, self.p)

    def probability_within(self, x: float, y: float, radius: float) -> float:
        """The probability of the cells whose centre lies within ``radius`` of (x, y)."""
        gx, gy = np.meshgrid(self.xs, self.ys)
        return float(self.p[np.hypot(gx - x, gy - y) <= radius].sum())

    # ------------------------------------------------------------------ predict

    def predict(self, dt: float) -> int:
        """Let ``dt`` seconds pass; returns the number of diffusion steps taken."""
        v = self.params.target_speed
        if not (dt > 0.0 and v > 0.0):
            return 0
        tau = self.params.cell_size / v
        self._pending += dt
        n = math.floor(self._pending / tau + 1e-9)
        if n <= 0:
            return 0
        self._pending = max(0.0, self._pending - n * tau)
        self.p = walk(self.p, self._both_x, self._both_y, min(n, self.params.max_predict_steps))
        return n

    def _steps_for(self, age: float) -> int:
        """The walk's steps in ``age`` seconds (as :meth:`predict` counts them)."""
        v = self.params.target_speed
        if not (age > 0.0 and v > 0.0):
            return 0
        return min(math.floor(age * v / self.params.cell_size + 1e-9),
                   self.params.max_predict_steps)

    # ------------------------------------------------------------------ looks

    def detection(
        self, look: CameraLook, robots: Sequence[tuple[float, float]] = (), steps: int = 0
    ) -> tuple[tuple[slice, slice], FloatArray]:
        """P_d of ``look`` over the cells of its bounding box: (rows, columns) and the array
        (``robots``: where the other robots stood, hiding what is behind them). ``steps``:
        P_d walked this many steps of the map's walk (a late look; the box grows by as many
        cells, as far as the walk can carry it)."""
        s = self.params
        c = s.cell_size
        r = look.range + max(steps, 0) * c
        i0 = max(0, math.floor((look.x - r) / c))
        i1 = min(self.nx, math.floor((look.x + r) / c) + 1)
        j0 = max(0, math.floor((look.y - r) / c))
        j1 = min(self.ny, math.floor((look.y + r) / c) + 1)
        box = (slice(j0, max(j0, j1)), slice(i0, max(i0, i1)))
        if i1 <= i0 or j1 <= j0:
            return box, np.zeros((max(0, j1 - j0), max(0, i1 - i0)))
        px, py = np.meshgrid(self.xs[i0:i1], self.ys[j0:j1])
        pd = self._pd(look, px, py, robots) * self.free[box]
        if steps > 0:
            pd = walk(pd, self._both_x[j0:j1, i0:i1 - 1], self._both_y[j0:j1 - 1, i0:i1], steps)
        return box, pd

    def _pd(self, look: CameraLook, px: FloatArray, py: FloatArray,
            robots: Sequence[tuple[float, float]]) -> FloatArray:
        s = self.params
        x, y, heading, range_, fov = look.x, look.y, look.heading, look.range, look.fov
        dx, dy = px - x, py - y
        dist = np.hypot(dx, dy)
        g = np.clip((range_ - dist) / ((1.0 - CORE) * range_), 0.0, 1.0)
        g = np.where(dist < s.min_range, 0.0, g)
        if fov < 2.0 * math.pi:
            half = 0.5 * fov
            bearing = np.abs(np.remainder(np.arctan2(dy, dx) - heading + math.pi, 2.0 * math.pi)
                             - math.pi)
            g = g * np.clip((half - bearing) / ((1.0 - CORE) * half), 0.0, 1.0)
        g = np.where(hidden(x, y, px, py, self.room, robots=robots,
                            robot_radius=self.robot_radius), 0.0, g)
        return s.p_detect * g

    def apply_look(self, look: CameraLook, robots: Sequence[tuple[float, float]] = (),
                   age: float = 0.0) -> float:
        """A look that saw nothing; returns the probability it had of seeing the target
        (``robots``: where the other robots stood, hiding what is behind them). ``age``: how
        long before the map's present the look was taken (a peer's, or one placed late); its
        P_d is walked for that long (see the module docstring)."""
        box, pd = self.detection(look, robots, self._steps_for(age))
        region = self.p[box]
        seen = float((region * pd).sum())
        self.p[box] = region * (1.0 - pd)
        self._renormalise()
        return seen

    def collapse(self, x: float, y: float, cov: npt.ArrayLike, age: float = 0.0) -> None:
        """The target is at (x, y) with this 2×2 covariance (a detection, a track); ``age``:
        it was there this long before the map's present (a sighting placed late), so the
        map then walks for ``age``, as :meth:`predict` would have since."""
        c = self.params.cell_size
        S = np.asarray(cov, dtype=np.float64).reshape(2, 2) + (c * c / 12.0) * np.eye(2)
        S = 0.5 * (S + S.T)
        det = float(S[0, 0] * S[1, 1] - S[0, 1] * S[1, 0])
        if not (finite(x, y, det) and det > 0.0 and S[0, 0] > 0.0):
            return
        inv = np.array([[S[1, 1], -S[0, 1]], [-S[1, 0], S[0, 0]]]) / det
        gx, gy = np.meshgrid(self.xs - x, self.ys - y)
        q = inv[0, 0] * gx * gx + 2.0 * inv[0, 1] * gx * gy + inv[1, 1] * gy * gy
        p = np.where(self.free, np.exp(-0.5 * q), 0.0)
        if not float(p.sum()) > 0.0:  # far outside every free cell: the nearest free one
            p = np.zeros_like(self.p)
            d = np.where(self.free, np.hypot(gx, gy), np.inf)
            p.flat[int(np.argmin(d))] = 1.0
        self.p = walk(p, self._both_x, self._both_y, self._steps_for(age))
        self._pending = 0.0
        self._renormalise()

    def reset(self) -> None:
        """Back to the uniform map (nothing known)."""
        self.p = self._uniform.copy()
        self._pending = 0.0

    def _renormalise(self) -> None:
        total = float(self.p.sum())
        if not (math.isfinite(total) and total > 1e-300):
            self.p = self._uniform.copy()
            return
        f = self.params.floor
        self.p = (1.0 - f) * (self.p / total) + f * self._uniform

    # ------------------------------------------------------------------ paths

    def _free_graph(self) -> tuple[PathTrees, BoolArray]:
        """The 8-connected graph of cells at least ``clearance`` from every surface (its
        shortest-path trees, kept per source cell) and those cells."""
        clearance = self.params.clearance
        if self._graph is not None and self._graph[0] == clearance:
            return self._graph[1], self._graph[2]
        gx, gy = np.meshgrid(self.xs, self.ys)
        ok = self.free & (self.room.surface_distance(gx, gy) >= clearance)
        paths = grid_graph(ok, self.params.cell_size)
        self._graph = (clearance, paths, ok)
        return paths, ok

    def path_lengths(self, x: float, y: float) -> FloatArray:
        """Path length from (x, y) to every cell centre around obstacles (inf: unreachable),
        on the coarse cells clear of surfaces, from the nearest such cell within 2 cells."""
        paths, ok = self._free_graph()
        j, i = self.cell_of(x, y)
        best: tuple[float, int] | None = None
        for dj in range(-2, 3):
            for di in range(-2, 3):
                jj, ii = j + dj, i + di
                if 0 <= jj < self.ny and 0 <= ii < self.nx and ok[jj, ii]:
                    d = math.hypot(float(self.xs[ii]) - x, float(self.ys[jj]) - y)
                    if best is None or d < best[0]:
                        best = (d, jj * self.nx + ii)
        if best is None:
            gx, gy = np.meshgrid(self.xs, self.ys)
            return np.where(ok, np.hypot(gx - x, gy - y), np.inf)
        return paths.tree(best[1])[0] + best[0]


class Viewpoints:
    """Camera poses to drive to, and the probability each would see on a map."""

    def __init__(self, smap: SearchMap, range_: float, fov: float,
                 camera_forward: float = 0.0) -> None:
        s = smap.params
        c = s.cell_size
        k = max(1, round(s.viewpoint_spacing / c))
        cols = np.arange((k - 1) // 2, smap.nx, k)
        rows = np.arange((k - 1) // 2, smap.ny, k)
        mesh_i, mesh_j = np.meshgrid(cols, rows)
        gi, gj = mesh_i.ravel(), mesh_j.ravel()
        vx: FloatArray = smap.xs[gi]
        vy: FloatArray = smap.ys[gj]
        ok = smap.free[gj, gi] & (smap.room.surface_distance(vx, vy) >= s.clearance)
        gi, gj, vx, vy = gi[ok], gj[ok], vx[ok], vy[ok]
        n_h = s.viewpoint_headings
        headings = np.arange(n_h) * (2.0 * math.pi / n_h)
        self.x = np.repeat(vx, n_h)
        self.y = np.repeat(vy, n_h)
        self.heading = np.tile(headings, len(vx))
        self.cell = np.repeat(gj * smap.nx + gi, n_h)  # the map cell each viewpoint stands in
        rows_, cols_, vals = [], [], []
        for n, (x, y, h) in enumerate(zip(self.x, self.y, self.heading, strict=True)):
            cx, cy = x + camera_forward * math.cos(h), y + camera_forward * math.sin(h)
            look = CameraLook(0.0, float(cx), float(cy), float(h), range_, fov)
            (sj, si), pd = smap.detection(look)
            nz = np.flatnonzero(pd > 0.0)
            if not nz.size:
                continue
            w = pd.shape[1]
            jj, ii = nz // w + sj.start, nz % w + si.start
            rows_.append(np.full(nz.size, n))
            cols_.append(jj * smap.nx + ii)
            vals.append(pd.ravel()[nz])
        size = (len(self.x), smap.nx * smap.ny)
        if rows_:
            self.matrix = sparse.csr_matrix(
                (np.concatenate(vals), (np.concatenate(rows_), np.concatenate(cols_))),
                shape=size,
            )
        else:
            self.matrix = sparse.csr_matrix(size)

    def __len__(self) -> int:
        return len(self.x)

    def gains(self, p: FloatArray) -> FloatArray:
        """The probability of detecting the target from each viewpoint, on map ``p``."""
        return np.asarray(self.matrix @ p.ravel(), dtype=np.float64)


@functools.lru_cache(maxsize=16)
def viewpoints_for(room: Room, params: SearchParams, range_: float, fov: float,
                   camera_forward: float) -> Viewpoints:
    """The viewpoints of a room (built once per process for each camera and setting)."""
    return Viewpoints(SearchMap(room, params), range_, fov, camera_forward)
