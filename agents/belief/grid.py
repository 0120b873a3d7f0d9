"""The pheromone grid: a sliding window of per-cell scalar Kalman filters.

Each cell of a ``width × height`` window on the global lattice holds a
Gaussian belief ``(mu, var)`` about the target's presence in that cell.
Arrays are shaped ``(height, width)`` and indexed ``[local_iy, local_ix]``
(see :mod:`agents.belief.lattice`). Every step is a separate method; ``tick``
runs SLIDE, PREDICT, DEPOSIT and DECAY in the design's order.

Invariants kept by every method: ``var_min <= var <= var_max`` (so var is
always in (0, var_max]) and ``mu`` finite. Received cells with a non-finite
value or a non-positive variance are ignored, not guessed at.

Why one module of ~510 lines: it is one class whose steps share the window's
arrays and keep those invariants together; the maths of each step lives in
its own module (lattice, deposit, fusion, occlusion).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from agents.belief.deposit import Detection, Footprint
from agents.belief.fusion import SCALAR_RULES, FusionRule
from agents.belief.lattice import (
    FloatArray,
    axis_centres,
    check_int16_window,
    global_to_local,
    origin_for,
    shift_slices,
)
from agents.belief.occlusion import hidden
from agents.belief.params import GridParams
from agents.room import Room

Int16Array = npt.NDArray[np.int16]

_MAX_EXCHANGE_PER_STEP = 0.25
"""Largest per-neighbour exchange fraction of one diffusion sub-step (stable, positive)."""


@dataclass(frozen=True, eq=False)
class CellBlock:
    """Cells by global lattice index (int16) with their belief, e.g. a patch or a snapshot."""

    ix: Int16Array
    iy: Int16Array
    mu: FloatArray
    var: FloatArray

    def __len__(self) -> int:
        return int(self.ix.shape[0])


@dataclass(frozen=True)
class GridPeak:
    """The cell with the largest mu: global index, centre in the world frame, belief."""

    ix: int
    iy: int
    x: float
    y: float
    mu: float
    var: float
    cell_size: float


_Box = tuple[int, int, int, int]
"""Local cells ``[row0, row1) × [col0, col1)``."""


class PheromoneGrid:
    """A ``height × width`` window of ``(mu, var)`` cells centred on the robot."""

    def __init__(self, params: GridParams | None = None, x: float = 0.0, y: float = 0.0) -> None:
        self.params = params if params is not None else GridParams()
        p = self.params
        h, w = p.height, p.width
        self._origin = origin_for(x, y, p.cell_size, w, h)
        check_int16_window(self._origin, w, h)
        # mu, var and what was last sent of each, stacked so that SLIDE moves all four
        # in one copy into the spare buffer (then the two buffers swap).
        self._prior = np.array([0.0, p.var_max, 0.0, p.var_max]).reshape(4, 1, 1)
        self._layers = np.empty((4, h, w))
        self._layers[...] = self._prior
        self._spare = np.empty_like(self._layers)
        self._bind_layers()
        self._xs = axis_centres(self._origin[0], w, p.cell_size)
        self._ys = axis_centres(self._origin[1], h, p.cell_size)
        # Diffusion works on the flattened window, where both neighbour offsets (1 and
        # width) are contiguous views. The horizontal flux across a row end is masked.
        n = h * w
        self._flux_x = np.empty(n - 1)
        self._flux_y = np.empty(n - w)
        self._row_mask = np.ones(n - 1)
        self._row_mask[w - 1 :: w] = 0.0
        self._k_mask = self._row_mask.copy()
        self._k_of_mask = 1.0
        self._last_tick: float | None = None

    def _bind_layers(self) -> None:
        self._mu = self._layers[0]
        self._var = self._layers[1]
        self._sent_mu = self._layers[2]
        self._sent_var = self._layers[3]

    # ------------------------------------------------------------------ state
    @property
    def origin(self) -> tuple[int, int]:
        """Global lattice index of local cell (0, 0)."""
        return self._origin

    @property
    def shape(self) -> tuple[int, int]:
        """(height, width) of every window array."""
        return self.params.height, self.params.width

    @property
    def mu(self) -> FloatArray:
        """Read-only view of mu, shape (height, width); valid until the next slide."""
        view = self._mu.view()
        view.flags.writeable = False
        return view

    @property
    def var(self) -> FloatArray:
        """Read-only view of var, shape (height, width); valid until the next slide."""
        view = self._var.view()
        view.flags.writeable = False
        return view

    @property
    def xs(self) -> FloatArray:
        """World x of the cell centres of each column, shape (width,)."""
        view = self._xs.view()
        view.flags.writeable = False
        return view

    @property
    def ys(self) -> FloatArray:
        """World y of the cell centres of each row, shape (height,)."""
        view = self._ys.view()
        view.flags.writeable = False
        return view

    def cell_centres(self) -> tuple[FloatArray, FloatArray]:
        """World (x, y) of every cell centre, each shaped (height, width)."""
        gx, gy = np.meshgrid(self._xs, self._ys)
        return gx, gy

    def peak(self) -> GridPeak:
        """The cell with the largest mu (the first one on a tie)."""
        flat = int(np.argmax(self._mu))
        ly, lx = divmod(flat, self.params.width)
        return GridPeak(
            ix=lx + self._origin[0],
            iy=ly + self._origin[1],
            x=float(self._xs[lx]),
            y=float(self._ys[ly]),
            mu=float(self._mu[ly, lx]),
            var=float(self._var[ly, lx]),
            cell_size=self.params.cell_size,
        )

    def mean_variance(self) -> float:
        """Mean var over the window (var_max when nothing is known)."""
        return float(self._var.mean())

    def total_mass(self) -> float:
        """Sum of mu over the window (conserved by PREDICT)."""
        return float(self._mu.sum())

    # ------------------------------------------------------------------ SLIDE
    def slide_to(self, x: float, y: float) -> bool:
        """Re-centre on the cell containing (x, y) if it is not the centre cell already.

        Surviving cells keep their global index (so their world position); entering
        cells start at ``(0, var_max)`` and count as never sent. Returns whether it slid.
        """
        if not (math.isfinite(x) and math.isfinite(y)):
            raise ValueError("robot position must be finite")
        p = self.params
        new_origin = origin_for(x, y, p.cell_size, p.width, p.height)
        if new_origin == self._origin:
            return False
        check_int16_window(new_origin, p.width, p.height)
        sx = new_origin[0] - self._origin[0]
        sy = new_origin[1] - self._origin[1]
        h, w = p.height, p.width
        if abs(sx) >= w or abs(sy) >= h:
            self._layers[...] = self._prior
        else:
            dst_c, src_c = shift_slices(sx, w)
            dst_r, src_r = shift_slices(sy, h)
            new = self._spare
            new[:, dst_r, dst_c] = self._layers[:, src_r, src_c]
            if sy > 0:
                new[:, h - sy :, :] = self._prior
            elif sy < 0:
                new[:, :-sy, :] = self._prior
            if sx > 0:
                new[:, :, w - sx :] = self._prior
            elif sx < 0:
                new[:, :, :-sx] = self._prior
            self._spare, self._layers = self._layers, new
            self._bind_layers()
        self._origin = new_origin
        self._xs = axis_centres(new_origin[0], p.width, p.cell_size)
        self._ys = axis_centres(new_origin[1], p.height, p.cell_size)
        return True

    # ---------------------------------------------------------------- PREDICT
    def predict(self, dt: float) -> None:
        """Diffuse mu (flux form, no-flux borders, mass conserved); grow var by Q·dt.

        Each sub-step moves ``k·(mu_j - mu_i)`` across every edge between
        4-neighbours, with ``k = rate·dt/n <= 0.25`` (``rate = diffusivity / c²``),
        which keeps the scheme stable and mu within its previous range.
        """
        if not dt >= 0.0:
            raise ValueError(f"dt must be >= 0, got {dt}")
        if dt == 0.0:
            return
        p = self.params
        rate = p.exchange_rate
        if rate > 0.0:
            steps = max(1, math.ceil(rate * dt / _MAX_EXCHANGE_PER_STEP))
            k = rate * dt / steps
            if k != self._k_of_mask:
                np.multiply(self._row_mask, k, out=self._k_mask)
                self._k_of_mask = k
            w = p.width
            flat = self._mu.reshape(-1)
            fx, fy, k_mask = self._flux_x, self._flux_y, self._k_mask
            west, east = flat[:-1], flat[1:]
            south, north = flat[:-w], flat[w:]
            for _ in range(steps):
                np.subtract(east, west, out=fx)
                fx *= k_mask
                np.subtract(north, south, out=fy)
                fy *= k
                west += fx
                east -= fx
                south += fy
                north -= fy
        self._var += p.process_noise * dt
        np.minimum(self._var, p.var_max, out=self._var)

    # ---------------------------------------------------------------- DEPOSIT
    def deposit(self, footprint: Footprint | None, detections: Sequence[Detection] = (), *,
                room: Room | None = None, robots: Sequence[tuple[float, float]] = (),
                robot_radius: float = 0.0) -> int:
        """Scalar Kalman update of the observed cells; returns how many were updated.

        Positive evidence: a detection with covariance ``S`` (plus ``c²/12·I``, the
        spread of a point within its cell, which guarantees that the cell containing
        the detection passes the gate) marks every cell whose centre has squared
        Mahalanobis distance ``d² <= detection_gate`` with ``z = 1`` and
        ``R = r_hit · exp(d²/2)``: the measurement weakens as the cell is less likely
        to hold the target. Where detections overlap, the smallest R wins. Detections
        count whether or not they lie inside the footprint.

        Negative evidence: every other cell whose centre lies in the footprint, and is not
        hidden from the camera by the ``room``'s obstacles or the other ``robots`` (discs
        of ``robot_radius``, :mod:`agents.belief.occlusion`), gets ``z = 0`` with
        ``R = r_miss`` (searched and found empty).

        Update: ``K = var/(var+R)``, ``mu += K(z - mu)``, ``var = (1-K)·var``.
        Only the bounding box of the footprint and the detection gates is touched.
        """
        p = self.params
        boxes: list[_Box] = []
        if footprint is not None:
            box = self._box(*footprint.bounds())
            if box is not None:
                boxes.append(box)
        gates: list[tuple[Detection, float, float, float, _Box]] = []
        pad = p.cell_size * p.cell_size / 12.0
        gate = p.detection_gate
        for det in detections:
            sxx, sxy, syy = det.cov_xx + pad, det.cov_xy, det.cov_yy + pad
            det_s = sxx * syy - sxy * sxy
            ex, ey = math.sqrt(gate * sxx), math.sqrt(gate * syy)
            box = self._box(det.x - ex, det.x + ex, det.y - ey, det.y + ey)
            if box is not None:
                gates.append((det, syy / det_s, -sxy / det_s, sxx / det_s, box))
                boxes.append(box)
        if not boxes:
            return 0
        r0, r1, c0, c1 = boxes[0]
        for b0, b1, b2, b3 in boxes[1:]:
            r0, r1, c0, c1 = min(r0, b0), max(r1, b1), min(c0, b2), max(c1, b3)

        # info = 1/R per cell; 0 where the cell is not observed (R = ∞, K = 0).
        if footprint is not None:
            seen = footprint.sees(self._xs[c0:c1], self._ys[r0:r1])
            if robots or (room is not None and room.obstacles):
                sr, sc = np.nonzero(seen)
                behind = hidden(footprint.x, footprint.y, self._xs[c0 + sc], self._ys[r0 + sr],
                                room, robots=robots, robot_radius=robot_radius)
                seen[sr[behind], sc[behind]] = False
            info = seen * (1.0 / p.r_miss)
        else:
            info = np.zeros((r1 - r0, c1 - c0))
        # Positive evidence: weight = 1/R of a z = 1 measurement = exp(-d²/2) / r_hit inside
        # the gate and 0 outside, on each detection's own box.
        hits: list[tuple[slice, slice, FloatArray, npt.NDArray[np.bool_]]] = []
        log_gain = -math.log(p.r_hit)
        floor = math.exp(-0.5 * gate + log_gain)
        for det, ixx, ixy, iyy, (g0, g1, h0, h1) in gates:
            dx = self._xs[h0:h1] - det.x
            dy = self._ys[g0:g1] - det.y
            # -d²/2 - ln r_hit with d² = ixx·dx² + 2·ixy·dx·dy + iyy·dy²
            expo = np.add.outer((-0.5 * iyy) * dy * dy, (-0.5 * ixx) * dx * dx + log_gain)
            if ixy != 0.0:
                expo -= np.multiply.outer(ixy * dy, dx)
            weight = np.exp(expo, out=expo)
            inside = weight >= floor  # d² <= gate
            weight *= inside
            hits.append((slice(g0 - r0, g1 - r0), slice(h0 - c0, h1 - c0), weight, inside))
        if len(hits) > 1:
            # Overlapping detections: the strongest (smallest R) wins in each cell.
            strongest = np.zeros_like(info)
            for rows, cols, weight, _ in hits:
                view = strongest[rows, cols]
                np.maximum(view, weight, out=view)
            hits = [(slice(None), slice(None), strongest, strongest > 0.0)]
        for rows, cols, weight, inside in hits:
            np.copyto(info[rows, cols], weight, where=inside)

        # K = var/(var+R) = t/(1+t) with t = var/R, so mu + K(z - mu) = (mu + t·z)/(1+t)
        # and (1-K)·var = var/(1+t); cells with info = 0 stay exactly as they were.
        mu = self._mu[r0:r1, c0:c1]
        var = self._var[r0:r1, c0:c1]
        t = var * info
        for rows, cols, weight, _ in hits:
            mu[rows, cols] += var[rows, cols] * weight  # t·z: z = 1 exactly where weight > 0
        t += 1.0
        mu /= t
        var /= t
        np.maximum(var, p.var_min, out=var)
        return int(np.count_nonzero(info))

    def _box(self, xmin: float, xmax: float, ymin: float, ymax: float) -> _Box | None:
        """Local cells whose centres may lie in the box (padded by one cell), or None."""
        p = self.params
        c = p.cell_size
        ox, oy = self._origin
        c0 = max(math.ceil(xmin / c - 1.5) - ox, 0)
        c1 = min(math.floor(xmax / c + 0.5) - ox + 1, p.width)
        r0 = max(math.ceil(ymin / c - 1.5) - oy, 0)
        r1 = min(math.floor(ymax / c + 0.5) - oy + 1, p.height)
        if r0 >= r1 or c0 >= c1:
            return None
        return r0, r1, c0, c1

    # ------------------------------------------------------------------ DECAY
    def decay(self, dt: float) -> None:
        """Evaporation ``mu *= 1 - decay·dt`` (clamped at 0); ``var += decay_noise·dt``."""
        if not dt >= 0.0:
            raise ValueError(f"dt must be >= 0, got {dt}")
        if dt == 0.0:
            return
        p = self.params
        self._mu *= max(0.0, 1.0 - p.decay * dt)
        self._var += p.decay_noise * dt
        np.minimum(self._var, p.var_max, out=self._var)

    # ------------------------------------------------------------------- tick
    def tick(
        self,
        now: float,
        pose: Sequence[float],
        footprint: Footprint | None = None,
        detections: Sequence[Detection] = (),
    ) -> int:
        """SLIDE to ``pose[:2]``, PREDICT, DEPOSIT, DECAY with dt since the previous tick.

        The first tick has dt = 0. Returns the number of deposited cells.
        """
        if self._last_tick is None:
            dt = 0.0
        else:
            dt = now - self._last_tick
            if not dt >= 0.0:
                raise ValueError(f"time went backwards: {now} < {self._last_tick}")
        self.slide_to(pose[0], pose[1])
        self._last_tick = now
        self.predict(dt)
        updated = 0
        if footprint is not None or detections:
            updated = self.deposit(footprint, detections)
        self.decay(dt)
        return updated

    # ------------------------------------------------------------------- FUSE
    def fuse(
        self,
        ix: npt.ArrayLike,
        iy: npt.ArrayLike,
        mu_r: npt.ArrayLike,
        var_r: npt.ArrayLike,
        *,
        age: npt.ArrayLike,
        age_uncertainty: npt.ArrayLike = 0.0,
        rule: FusionRule = FusionRule.CI,
        inflation: float = 1.0,
    ) -> int:
        """Fuse a peer's cells (global indices) into the window; returns how many were fused.

        Per cell: ``var_r += q_drift · max(age + age_uncertainty, 0)`` (staleness,
        conservative: the age's uncertainty is added), then ``var_r *= inflation``
        (reputation), then ``rule``. The fused var is clamped to ``[var_min, var_max]``.
        ``age`` and ``age_uncertainty`` are scalars or per-cell arrays. Cells outside the
        window, with non-finite values or with ``var_r <= 0`` are skipped. If a cell
        appears twice, both copies are fused with the same own value and the last wins.
        """
        if not (math.isfinite(inflation) and inflation >= 1.0):
            raise ValueError(f"inflation must be finite and >= 1, got {inflation}")
        p = self.params
        lx, ly, inside = global_to_local(ix, iy, self._origin, p.width, p.height)
        mu_in = np.asarray(mu_r, dtype=np.float64)
        var_in = np.asarray(var_r, dtype=np.float64)
        stale = np.maximum(
            np.asarray(age, dtype=np.float64) + np.asarray(age_uncertainty, dtype=np.float64), 0.0
        )
        var_in = (var_in + p.q_drift * stale) * inflation
        if mu_in.shape != var_in.shape:
            mu_in, var_in = np.broadcast_arrays(mu_in, var_in)
        ok = inside & np.isfinite(mu_in) & np.isfinite(var_in) & (var_in > 0.0)
        sel = np.flatnonzero(ok)
        if sel.size == 0:
            return 0
        flat = ly[sel] * p.width + lx[sel]
        mu_flat = self._mu.reshape(-1)
        var_flat = self._var.reshape(-1)
        mu_new, var_new = SCALAR_RULES[rule](mu_flat[flat], var_flat[flat], mu_in[sel], var_in[sel])
        mu_flat[flat] = mu_new
        np.minimum(var_new, p.var_max, out=var_new)
        var_flat[flat] = np.maximum(var_new, p.var_min, out=var_new)
        return int(sel.size)

    # -------------------------------------------------------------- BROADCAST
    def select_patch(self, max_cells: int) -> CellBlock:
        """Cells worth broadcasting, at most ``max_cells``, most important first.

        A cell qualifies if ``|var - var_sent| > patch_var_change``, or if
        ``mu > patch_mu_threshold`` and ``|mu - mu_sent| > patch_mu_change``. A cell
        never sent is compared with the prior ``(0, var_max)``, which every peer
        already assumes. Priority: cells with ``mu > patch_mu_threshold`` first by
        descending mu, then the others by descending ``|var - var_sent|``. Call
        :meth:`mark_sent` with what was actually sent.
        """
        if max_cells < 0:
            raise ValueError("max_cells must be >= 0")
        p = self.params
        mu = self._mu.reshape(-1)
        var = self._var.reshape(-1)
        dvar = np.abs(var - self._sent_var.reshape(-1))
        hot = mu > p.patch_mu_threshold
        qualifies = (dvar > p.patch_var_change) | (
            hot & (np.abs(mu - self._sent_mu.reshape(-1)) > p.patch_mu_change)
        )
        idx = np.flatnonzero(qualifies)
        score = np.where(hot[idx], 2.0 + mu[idx], dvar[idx] / p.var_max)
        if idx.size > max_cells:
            keep = np.argpartition(-score, max_cells - 1)[:max_cells] if max_cells else idx[:0]
            idx, score = idx[keep], score[keep]
        order = np.argsort(-score, kind="stable")
        return self._block(idx[order])

    def mark_sent(self, cells: CellBlock) -> None:
        """Remember the values a peer now holds for these cells (as sent, e.g. quantised)."""
        p = self.params
        lx, ly, inside = global_to_local(cells.ix, cells.iy, self._origin, p.width, p.height)
        self._sent_mu[ly[inside], lx[inside]] = np.asarray(cells.mu)[inside]
        self._sent_var[ly[inside], lx[inside]] = np.asarray(cells.var)[inside]

    def snapshot(self) -> CellBlock:
        """Every cell of the window (for SNAPSHOT and logs), row by row."""
        return self._block(np.arange(self.params.width * self.params.height))

    def assign(self, cells: CellBlock) -> int:
        """Overwrite cells in the window (restore a snapshot or a replayed state).

        var is clamped into ``[var_min, var_max]``; non-finite cells are skipped.
        Returns how many cells were written.
        """
        p = self.params
        lx, ly, inside = global_to_local(cells.ix, cells.iy, self._origin, p.width, p.height)
        mu = np.asarray(cells.mu, dtype=np.float64)
        var = np.asarray(cells.var, dtype=np.float64)
        ok = inside & np.isfinite(mu) & np.isfinite(var)
        self._mu[ly[ok], lx[ok]] = mu[ok]
        self._var[ly[ok], lx[ok]] = np.clip(var[ok], p.var_min, p.var_max)
        return int(np.count_nonzero(ok))

    def _block(self, flat: npt.NDArray[np.intp]) -> CellBlock:
        ly, lx = np.divmod(flat, self.params.width)
        return CellBlock(
            ix=(lx + self._origin[0]).astype(np.int16),
            iy=(ly + self._origin[1]).astype(np.int16),
            mu=self._mu.reshape(-1)[flat],
            var=self._var.reshape(-1)[flat],
        )
