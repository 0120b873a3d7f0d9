"""What a run's logs say about convergence, measured against the world's ground truth.

Everything here takes a loaded :class:`~tools.replay.load.RunDir` (or arrays)
and returns numbers; figures and the report only present them.

Sources, per agent (protocol/RUNLOG.md):

- the track: every TRACK datagram the agent sent (``tx``, 5 Hz and at once
  after a fused detection: mean, covariance and the time they refer to) plus
  the track of each ``belief`` record (1 Hz);
- the grid: the ``belief`` records (1 Hz): mu and var arrays, mean var, pose;
- the wire: ``tx`` (every datagram sent, with its kind) and ``rx`` (``ok``
  false with a ``reason`` for every rejected one);
- the world's ``truth`` (20 Hz), interpolated to the agent's times: both logs
  are written on CLOCK_MONOTONIC, so their times compare directly.

The agent's belief at time t is its newest track known at t (by log time),
predicted to t with the track filter's own constant-velocity model; that
gives every agent a value on one common 10 Hz time base, on which errors,
NEES, agreement and "fraction of time" are computed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations, pairwise
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.stats import chi2

from agents.belief.params import GridParams, TrackParams
from agents.belief.track import cv_predict
from protocol.runlog import rejection
from protocol.swarm.messages import Track, from_upper_triangle
from tools.replay.load import (
    Line,
    ProcessLog,
    Progress,
    RunDir,
    datagram_bytes,
    decode_own,
    float32_grid,
    swarm_id_of,
)

FloatArray = npt.NDArray[np.float64]

STEP = 0.1  # the common time base, s
SETTLE = 20.0  # "after 20 s": errors are also summarised from this time on (run-relative)
COVERAGE_VAR = 0.5  # a cell counts as searched while its var is below this (var_max is 1)
NEES_CONFIDENCE = 0.95  # two-sided chi-square bounds
DETECTION_TRACK_WINDOW = 0.5  # s: the TRACK that carries a detection follows it within this
SPEED_TOLERANCE = 0.10  # the seed's claim: speed within 10 % at the moments of detection
CONFIDENT_UNCERTAINTY = 0.25  # trace(P)/4 of a confident track (AgentConfig's default)
TRACK_MAX_AGE = 3.0  # s: an older track is no belief (AgentConfig.track_max_age)
STAGES = ("capture", "receipt", "decode", "detection", "pose", "decision", "drive")


def nees_bounds(dof: int, confidence: float = NEES_CONFIDENCE) -> tuple[float, float]:
    """Two-sided chi-square bounds of a single-run NEES with ``dof`` degrees of freedom."""
    tail = (1.0 - confidence) / 2.0
    return float(chi2.ppf(tail, dof)), float(chi2.ppf(1.0 - tail, dof))


def summary(values: npt.ArrayLike) -> dict[str, float | int | None]:
    """Median, 95th percentile, mean, max and count of the finite values."""
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {"n": 0, "median": None, "p95": None, "mean": None, "max": None}
    return {
        "n": int(v.size),
        "median": float(np.median(v)),
        "p95": float(np.percentile(v, 95)),
        "mean": float(v.mean()),
        "max": float(v.max()),
    }


# ---------------------------------------------------------------- ground truth


@dataclass(frozen=True)
class Truth:
    """The world's truth log: target [x, y, vx, vy] and each car's [x, y, yaw], by time."""

    t: FloatArray
    target: FloatArray
    cars: dict[str, FloatArray]

    def _interp(self, values: FloatArray, times: npt.ArrayLike) -> FloatArray:
        tq = np.atleast_1d(np.asarray(times, dtype=np.float64))
        out = np.full((tq.size, values.shape[1]), np.nan)
        if self.t.size == 0:
            return out
        inside = (tq >= self.t[0]) & (tq <= self.t[-1])
        for k in range(values.shape[1]):
            out[inside, k] = np.interp(tq[inside], self.t, values[:, k])
        return out

    def target_at(self, times: npt.ArrayLike) -> FloatArray:
        """Target state at ``times`` (linear interpolation; NaN outside the log)."""
        return self._interp(self.target, times)

    def car_at(self, name: str, times: npt.ArrayLike) -> FloatArray:
        """Car ``name``'s [x, y, yaw] at ``times`` (NaN when unknown)."""
        values = self.cars.get(name)
        if values is None:
            return np.full((np.atleast_1d(np.asarray(times)).size, 3), np.nan)
        return self._interp(values, times)


def truth_of(run: RunDir) -> Truth | None:
    """The truth of the run, or None when the world log has none."""
    if run.world is None:
        return None
    names = run.car_names()
    times: list[float] = []
    target: list[list[float]] = []
    cars: dict[str, list[list[float]]] = {name: [] for name in names.values()}
    for line in run.world.events("truth"):
        tg = line.get("target")
        if not isinstance(tg, dict):
            continue
        try:
            state = [float(tg["x"]), float(tg["y"]), float(tg["vx"]), float(tg["vy"])]
        except (KeyError, TypeError, ValueError):
            continue
        times.append(float(line["t"]))
        target.append(state)
        seen: dict[str, list[float]] = {}
        for car in line.get("cars") or []:
            try:
                name = names.get(int(car["id"]), f"car{int(car['id'])}")
                seen[name] = [float(car["x"]), float(car["y"]), float(car["yaw"])]
            except (KeyError, TypeError, ValueError):
                continue
        for name in seen.keys() - cars.keys():
            cars[name] = [[math.nan] * 3] * (len(times) - 1)
        for name, rows in cars.items():
            rows.append(seen.get(name, [math.nan] * 3))
    if not times:
        return None
    order = np.argsort(np.asarray(times), kind="stable")
    car_arrays = {}
    for name, rows in cars.items():
        arr = np.asarray(rows, dtype=np.float64)[order]
        arr[:, 2] = _unwrap_nan(arr[:, 2])
        car_arrays[name] = arr
    return Truth(
        np.asarray(times, dtype=np.float64)[order],
        np.asarray(target, dtype=np.float64)[order],
        car_arrays,
    )


def _unwrap_nan(angles: FloatArray) -> FloatArray:
    out = angles.copy()
    ok = np.isfinite(out)
    out[ok] = np.unwrap(out[ok])
    return out


# ---------------------------------------------------------------- the track


@dataclass(frozen=True)
class TrackSamples:
    """Track states an agent published: when it logged them, the time they refer to, x, P."""

    t_log: FloatArray
    t: FloatArray
    x: FloatArray  # (n, 4)
    P: FloatArray  # (n, 4, 4)

    def __len__(self) -> int:
        return int(self.t.size)


def _empty_samples() -> TrackSamples:
    return TrackSamples(np.zeros(0), np.zeros(0), np.zeros((0, 4)), np.zeros((0, 4, 4)))


def recorded_track(log: ProcessLog, swarm_id: int | None) -> TrackSamples:
    """The agent's own TRACK datagrams and the tracks of its belief records, by log time."""
    rows: list[tuple[float, float, FloatArray, FloatArray]] = []
    for line in log.lines:
        event = line["event"]
        if event == "tx" and line.get("kind") == "track" and swarm_id is not None:
            data = datagram_bytes(line)
            msg = decode_own(data, swarm_id) if data is not None else None
            if msg is not None and isinstance(msg.body, Track):
                body = msg.body
                x = np.asarray(body.mean, dtype=np.float64)
                rows.append((line["t"], body.t_ref, x, from_upper_triangle(body.cov, 4)))
        elif event == "belief" and isinstance(line.get("track"), dict):
            tr = line["track"]
            try:
                x = np.asarray(tr["x"], dtype=np.float64).reshape(4)
                P = np.asarray(tr["P"], dtype=np.float64).reshape(4, 4)
                rows.append((line["t"], float(tr["t"]), x, P))
            except (KeyError, TypeError, ValueError):
                continue
    if not rows:
        return _empty_samples()
    rows.sort(key=lambda r: (r[0], r[1]))
    kept = [rows[0]]
    for row in rows[1:]:
        last = kept[-1]
        if row[1] == last[1] and np.array_equal(row[2], last[2]):
            continue  # the belief record repeats the TRACK sent at the same tick
        kept.append(row)
    return TrackSamples(
        np.array([r[0] for r in kept]),
        np.array([r[1] for r in kept]),
        np.stack([r[2] for r in kept]),
        np.stack([r[3] for r in kept]),
    )


@dataclass(frozen=True)
class TrackSeries:
    """An agent's track on a time base: NaN where it had none (or only a stale one)."""

    t: FloatArray
    x: FloatArray  # (n, 4)
    P: FloatArray  # (n, 4, 4)

    @property
    def uncertainty(self) -> FloatArray:
        """trace(P)/4, as the seed plots it."""
        return np.trace(self.P, axis1=1, axis2=2) / 4.0

    @property
    def valid(self) -> npt.NDArray[np.bool_]:
        return np.isfinite(self.x[:, 0])


def resample(
    samples: TrackSamples,
    times: FloatArray,
    accel_psd: float = TrackParams().accel_psd,
    max_age: float = TRACK_MAX_AGE,
    until: float = math.inf,
) -> TrackSeries:
    """At each time, the newest sample logged by then, predicted to that time.

    No belief after ``until`` (the agent's last log line: a stopped agent believes nothing).
    """
    n = times.size
    x = np.full((n, 4), np.nan)
    P = np.full((n, 4, 4), np.nan)
    if len(samples):
        idx = np.searchsorted(samples.t_log, times, side="right") - 1
        for k in range(n):
            i = idx[k]
            if i < 0 or times[k] > until:
                continue
            dt = float(times[k] - samples.t[i])
            if dt > max_age:
                continue
            x[k], P[k] = cv_predict(samples.x[i], samples.P[i], max(dt, 0.0), accel_psd)
    return TrackSeries(times, x, P)


@dataclass(frozen=True)
class TrackErrors:
    """A track series against the truth."""

    t: FloatArray  # absolute times
    pos_err: FloatArray
    vel_err: FloatArray
    speed: FloatArray
    true_speed: FloatArray
    uncertainty: FloatArray
    nees4: FloatArray
    nees2: FloatArray


def _nees(d: FloatArray, P: FloatArray) -> FloatArray:
    out = np.full(d.shape[0], np.nan)
    ok = np.isfinite(d).all(axis=1) & np.isfinite(P).all(axis=(1, 2))
    for k in np.flatnonzero(ok):
        try:
            out[k] = float(d[k] @ np.linalg.solve(P[k], d[k]))
        except np.linalg.LinAlgError:
            continue
    return out


def track_errors(series: TrackSeries, truth: Truth) -> TrackErrors:
    true = truth.target_at(series.t)
    d = series.x - true
    return TrackErrors(
        t=series.t,
        pos_err=np.hypot(d[:, 0], d[:, 1]),
        vel_err=np.hypot(d[:, 2], d[:, 3]),
        speed=np.hypot(series.x[:, 2], series.x[:, 3]),
        true_speed=np.hypot(true[:, 2], true[:, 3]),
        uncertainty=series.uncertainty,
        nees4=_nees(d, series.P),
        nees2=_nees(d[:, :2], series.P[:, :2, :2]),
    )


def fraction_inside(values: FloatArray, bounds: tuple[float, float]) -> float | None:
    v = values[np.isfinite(values)]
    if v.size == 0:
        return None
    return float(np.mean((v >= bounds[0]) & (v <= bounds[1])))


def error_summary(errors: TrackErrors, t_start: float, settle: float = SETTLE) -> dict[str, Any]:
    """Position/velocity error, uncertainty and NEES consistency, overall and after ``settle``."""
    late = errors.t - t_start >= settle
    b4, b2 = nees_bounds(4), nees_bounds(2)
    unc_late = errors.uncertainty[late & np.isfinite(errors.uncertainty)]
    return {
        "position_error_m": summary(errors.pos_err),
        "position_error_after_settle_m": summary(errors.pos_err[late]),
        "velocity_error_mps": summary(errors.vel_err),
        "velocity_error_after_settle_mps": summary(errors.vel_err[late]),
        "uncertainty": summary(errors.uncertainty),
        "uncertainty_after_settle": summary(errors.uncertainty[late]),
        "uncertainty_after_settle_below_0_15": (
            float(np.mean(unc_late < 0.15)) if unc_late.size else None
        ),
        "nees4": {
            "mean": summary(errors.nees4)["mean"],
            "bounds": b4,
            "fraction_inside": fraction_inside(errors.nees4, b4),
        },
        "nees2": {
            "mean": summary(errors.nees2)["mean"],
            "bounds": b2,
            "fraction_inside": fraction_inside(errors.nees2, b2),
        },
    }


# ---------------------------------------------------------------- detections


@dataclass(frozen=True)
class DetectionSpeed:
    """The track's speed in the TRACK sent with an accepted detection, and the truth's."""

    t: float  # the time the track refers to
    speed: float
    true_speed: float

    @property
    def relative_error(self) -> float:
        return (self.speed - self.true_speed) / self.true_speed if self.true_speed > 0 else math.nan


def detection_speeds(
    log: ProcessLog, samples: TrackSamples, truth: Truth | None
) -> list[DetectionSpeed]:
    """Speed estimates at the moments of detection (updates of a running track only)."""
    if truth is None or not len(samples):
        return []
    out: list[DetectionSpeed] = []
    for det in log.events("detection"):
        if not det.get("accepted") or det.get("reason") != "accepted":
            continue
        t_det = det.get("t_det")
        if not isinstance(t_det, int | float):
            continue
        i = int(np.searchsorted(samples.t_log, det["t"], side="left"))
        while i < len(samples) and samples.t[i] < t_det - 1e-9:
            i += 1
        if i >= len(samples) or samples.t_log[i] - det["t"] > DETECTION_TRACK_WINDOW:
            continue
        vx, vy = samples.x[i, 2], samples.x[i, 3]
        true = truth.target_at(samples.t[i])[0]
        if not np.isfinite(true).all():
            continue
        out.append(
            DetectionSpeed(float(samples.t[i]), math.hypot(vx, vy), math.hypot(true[2], true[3]))
        )
    return out


def detection_summary(
    log: ProcessLog, t_start: float, speeds: Sequence[DetectionSpeed]
) -> dict[str, Any]:
    dets = log.events("detection")
    verdicts: dict[str, int] = {}
    for d in dets:
        key = str(d.get("reason", "?"))
        verdicts[key] = verdicts.get(key, 0) + 1
    firsts = [d["t_det"] for d in dets if isinstance(d.get("t_det"), int | float)]
    accepted = [
        d["t_det"] for d in dets if d.get("accepted") and isinstance(d.get("t_det"), int | float)
    ]
    rel = np.array([abs(s.relative_error) for s in speeds])
    return {
        "detections": len(dets),
        "verdicts": dict(sorted(verdicts.items())),
        "time_to_first_detection_s": (min(firsts) - t_start) if firsts else None,
        "time_to_first_accepted_detection_s": (min(accepted) - t_start) if accepted else None,
        "speed_at_detection": {
            "n": len(speeds),
            "abs_relative_error": summary(rel),
            "within_10_percent": float(np.mean(rel <= SPEED_TOLERANCE)) if rel.size else None,
            "speed_mps": summary([s.speed for s in speeds]),
        },
    }


# ---------------------------------------------------------------- the grid


@dataclass(frozen=True)
class GridRecord:
    """One ``belief`` record: the window (float32 as logged, widened) and what came with it."""

    t: float
    origin: tuple[int, int]
    mu: FloatArray
    var: FloatArray
    mean_var: float
    pose: tuple[float, float, float] | None

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


def grid_records(log: ProcessLog) -> list[GridRecord]:
    out: list[GridRecord] = []
    for line in log.events("belief"):
        try:
            shape = (int(line["shape"][0]), int(line["shape"][1]))
            origin = (int(line["origin"][0]), int(line["origin"][1]))
        except (KeyError, TypeError, ValueError, IndexError):
            continue
        mu = float32_grid(line.get("mu_f32"), shape)
        var = float32_grid(line.get("var_f32"), shape)
        if mu is None or var is None:
            continue
        pose = line.get("pose")
        mean_var = line.get("mean_var")
        out.append(
            GridRecord(
                float(line["t"]),
                origin,
                mu,
                var,
                float(mean_var) if isinstance(mean_var, int | float) else float(var.mean()),
                (float(pose[0]), float(pose[1]), float(pose[2]))
                if isinstance(pose, list) and len(pose) == 3
                else None,
            )
        )
    return out


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


def pose_errors(grids: Sequence[GridRecord], truth: Truth, car: str) -> FloatArray:
    out = np.full(len(grids), np.nan)
    for k, g in enumerate(grids):
        if g.pose is None:
            continue
        true = truth.car_at(car, g.t)[0]
        out[k] = math.hypot(g.pose[0] - true[0], g.pose[1] - true[1])
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


def room_mean_var(grids: Sequence[GridRecord], room_cells: tuple[int, int] | None) -> FloatArray:
    """Each record's mean var over the cells in the room (the logged window mean if unknown)."""
    out = np.full(len(grids), np.nan)
    for k, g in enumerate(grids):
        if room_cells is None:
            out[k] = g.mean_var
            continue
        inside = g.inside(room_cells)
        if inside.any():
            out[k] = float(g.var[inside].mean())
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


# ---------------------------------------------------------------- the wire


@dataclass
class Wire:
    """Datagrams an agent sent and received."""

    tx_t: FloatArray
    tx_bytes: FloatArray
    tx_by_kind: dict[str, dict[str, int]]
    tx_broadcast: int
    tx_unicast: int
    rx_ok: int
    rx_ok_bytes: int
    rejected: dict[str, int]
    stop_counters: dict[str, int]
    core_counters: dict[str, int]

    def per_second(self, t0: float, t1: float) -> tuple[FloatArray, FloatArray]:
        """Bytes sent in each whole second from ``t0`` (bin starts, bytes)."""
        n = max(1, math.ceil(t1 - t0))
        edges = t0 + np.arange(n + 1, dtype=np.float64)
        counts, _ = np.histogram(self.tx_t, bins=edges, weights=self.tx_bytes)
        return edges[:-1], counts.astype(np.float64)


def wire_of(log: ProcessLog) -> Wire:
    tx_t: list[float] = []
    tx_bytes: list[int] = []
    by_kind: dict[str, dict[str, int]] = {}
    broadcast = unicast = rx_ok = rx_ok_bytes = 0
    rejected: dict[str, int] = {}
    stop: dict[str, int] = {}
    core: dict[str, int] = {}
    for line in log.lines:
        event = line["event"]
        if event == "tx":
            data = datagram_bytes(line)
            n = len(data) if data is not None else 0
            tx_t.append(line["t"])
            tx_bytes.append(n)
            kind = by_kind.setdefault(str(line.get("kind", "?")), {"datagrams": 0, "bytes": 0})
            kind["datagrams"] += 1
            kind["bytes"] += n
            if line.get("to") is None:
                broadcast += 1
            else:
                unicast += 1
        elif event == "rx" and line.get("ok"):
            data = datagram_bytes(line)
            rx_ok += 1
            rx_ok_bytes += len(data) if data is not None else 0
        elif (refused := rejection(line)) is not None:
            rejected[refused[0]] = rejected.get(refused[0], 0) + refused[1]
        elif event == "stop" and isinstance(line.get("counters"), dict):
            stop = {str(k): int(v) for k, v in line["counters"].items()}
        elif event == "belief" and isinstance(line.get("counters"), dict):
            core = {str(k): int(v) for k, v in line["counters"].items()}
    return Wire(
        np.asarray(tx_t, dtype=np.float64),
        np.asarray(tx_bytes, dtype=np.float64),
        dict(sorted(by_kind.items())),
        broadcast,
        unicast,
        rx_ok,
        rx_ok_bytes,
        dict(sorted(rejected.items())),
        stop,
        core,
    )


def wire_summary(wire: Wire, duration: float) -> dict[str, Any]:
    total = float(wire.tx_bytes.sum())
    n = int(wire.tx_bytes.size)
    return {
        "tx_datagrams": n,
        "tx_bytes": int(total),
        "tx_broadcast": wire.tx_broadcast,
        "tx_unicast": wire.tx_unicast,
        "tx_datagrams_per_s": n / duration if duration > 0 else None,
        "tx_bytes_per_s": total / duration if duration > 0 else None,
        "tx_by_kind": wire.tx_by_kind,
        "rx_accepted": wire.rx_ok,
        "rx_accepted_bytes": wire.rx_ok_bytes,
        "rx_rejected": wire.rejected,
        "rx_rejected_total": sum(wire.rejected.values()),
        "stop_counters": wire.stop_counters,
        "core_counters": wire.core_counters,
    }


# ---------------------------------------------------------------- latency budget


@dataclass(frozen=True)
class Latency:
    """Per-stage latencies (s) when the logs carry stage timestamps, and what else was derived."""

    stages: dict[str, FloatArray]  # "capture→receipt": values, from per-stage records
    derived: dict[str, FloatArray]  # from the events every run has
    records: int  # how many per-stage records were found


def _stage_times(line: Line) -> dict[str, float]:
    """A line's stage timestamps: fields ``t_<stage>`` or a ``stages`` {stage: t} object."""
    found: dict[str, float] = {}
    nested = line.get("stages")
    for stage in STAGES:
        value = nested.get(stage) if isinstance(nested, dict) else None
        if value is None:
            value = line.get(f"t_{stage}")
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            found[stage] = float(value)
    return found


def latency(logs: Iterable[ProcessLog]) -> Latency:
    """The per-stage latency budget, and what can be derived from any run.

    A camera frame's ``obs`` line carries its stage stamps (capture, receipt, decode,
    detection, pose); the next ``decision`` and the DRIVE sent after it complete
    the chain, as the decision and the DRIVE carry that frame's information.
    """
    stages: dict[str, list[float]] = {}
    derived: dict[str, list[float]] = {
        "capture→receipt (synchronized obs)": [],
        "receipt→decision (frames with the target)": [],
        "decision→DRIVE sent": [],
    }
    records = 0

    def add(times: dict[str, float]) -> None:
        present = [s for s in STAGES if s in times]
        for a, b in pairwise(present):
            stages.setdefault(f"{a}→{b}", []).append(times[b] - times[a])
        if len(present) > 2:
            stages.setdefault(f"{present[0]}→{present[-1]}", []).append(
                times[present[-1]] - times[present[0]]
            )

    for log in logs:
        pending_obs: list[float] = []
        pending_decision: float | None = None
        frames: list[dict[str, float]] = []  # stamped frames waiting for their decision
        decided: list[dict[str, float]] = []  # ... and for the DRIVE after it
        for line in log.lines:
            times = _stage_times(line)
            event = line["event"]
            if len(times) >= 2:
                records += 1
                if event == "obs":
                    frames.append(times)
                else:
                    add(times)
            if event == "obs":
                tc = line.get("t_capture")
                if line.get("synchronized") and isinstance(tc, int | float):
                    derived["capture→receipt (synchronized obs)"].append(line["t"] - tc)
                if line.get("target") is not None:
                    pending_obs.append(line["t"])
            elif event == "decision":
                for t in pending_obs:
                    derived["receipt→decision (frames with the target)"].append(line["t"] - t)
                pending_obs = []
                pending_decision = line["t"]
                for f in frames:
                    f["decision"] = line["t"]
                decided += frames
                frames = []
            elif event == "car_tx" and line.get("kind") == "drive":
                if pending_decision is not None:
                    derived["decision→DRIVE sent"].append(line["t"] - pending_decision)
                    pending_decision = None
                for f in decided:
                    f["drive"] = line["t"]
                    add(f)
                decided = []
    return Latency(
        {k: np.asarray(v) for k, v in stages.items()},
        {k: np.asarray(v) for k, v in derived.items() if v},
        records,
    )


def latency_summary(lat: Latency) -> dict[str, Any]:
    def ms(values: FloatArray) -> dict[str, float | int | None]:
        s = summary(values * 1000.0)
        return {"n": s["n"], "median_ms": s["median"], "p95_ms": s["p95"]}

    return {
        "stage_records": lat.records,
        "stages": {k: ms(v) for k, v in lat.stages.items()},
        "derived": {k: ms(v) for k, v in lat.derived.items()},
    }


# ---------------------------------------------------------------- the whole run


@dataclass
class AgentAnalysis:
    name: str
    swarm_id: int | None
    samples: TrackSamples
    series: TrackSeries
    errors: TrackErrors | None
    grids: list[GridRecord]
    speeds: list[DetectionSpeed]
    wire: Wire
    coverage: dict[str, Any]
    grid_var: FloatArray  # mean var per belief record (in the room when known)
    peak_errors: FloatArray
    pose_errors: FloatArray
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass
class Analysis:
    run: RunDir
    truth: Truth | None
    times: FloatArray
    cell_size: float
    agents: dict[str, AgentAnalysis]
    agreement: dict[tuple[str, str], FloatArray]
    overlap: dict[tuple[str, str], dict[str, FloatArray]]
    latency: Latency
    coverage_var: float
    room_cells: tuple[int, int] | None
    swarm: dict[str, Any] = field(default_factory=dict)

    @property
    def t_start(self) -> float:
        return self.run.t_start

    def rel(self, t: npt.ArrayLike) -> FloatArray:
        """Run-relative seconds."""
        return np.asarray(t, dtype=np.float64) - self.t_start


def analyse_agent(
    run: RunDir,
    log: ProcessLog,
    truth: Truth | None,
    times: FloatArray,
    *,
    cell_size: float,
    coverage_var: float,
    room_cells: tuple[int, int] | None,
) -> AgentAnalysis:
    t_start = run.t_start
    swarm_id = swarm_id_of(log)
    samples = recorded_track(log, swarm_id)
    series = resample(samples, times, until=log.t_last if log.t_last is not None else math.inf)
    grids = grid_records(log)
    speeds = detection_speeds(log, samples, truth)
    wire = wire_of(log)
    cov = coverage(grids, coverage_var, room_cells)
    grid_var = room_mean_var(grids, room_cells)
    errors = track_errors(series, truth) if truth is not None else None
    peak = grid_peak_errors(grids, truth, cell_size, TrackParams().peak_min_mu) if truth else None
    pose = pose_errors(grids, truth, log.name) if truth else None
    t_first, t_last = log.t_first or t_start, log.t_last or t_start
    ever = int(cov["ever"][-1]) if len(cov["ever"]) else 0
    unc = series.uncertainty
    confident = np.flatnonzero(unc <= CONFIDENT_UNCERTAINTY)
    m: dict[str, Any] = {
        "active_s": [t_first - t_start, t_last - t_start],
        "events": len(log.lines),
        "damaged_lines": log.stats.bad_lines,
        "track_samples": len(samples),
        "belief_records": len(grids),
        "time_with_track_fraction": float(np.mean(series.valid)) if times.size else None,
        "time_to_confident_track_s": (
            float(times[confident[0]] - t_start) if confident.size else None
        ),
        "track_uncertainty": summary(unc),
        "grid_mean_var": summary(grid_var),
        "grid_mean_var_last": float(grid_var[-1]) if grid_var.size else None,
        "grid_mean_var_over": "room" if room_cells is not None else "window",
        "coverage": {
            "var_below": coverage_var,
            "over": "room" if room_cells is not None else "window",
            "searched_now_cells": summary(cov["now"]),
            "searched_ever_cells": ever,
            "searched_ever_m2": ever * cell_size**2,
            "searched_ever_room_fraction": (
                ever / (room_cells[0] * room_cells[1]) if room_cells is not None else None
            ),
        },
        "wire": wire_summary(wire, t_last - t_first),
    }
    m.update(detection_summary(log, t_start, speeds))
    if errors is not None:
        m["errors"] = error_summary(errors, t_start)
    if peak is not None:
        m["grid_peak_error_m"] = summary(peak)
    if pose is not None:
        m["pose_error_m"] = summary(pose)
    return AgentAnalysis(
        log.name,
        swarm_id,
        samples,
        series,
        errors,
        grids,
        speeds,
        wire,
        cov,
        grid_var,
        peak if peak is not None else np.zeros(0),
        pose if pose is not None else np.zeros(0),
        m,
    )


def agreement(a: TrackSeries, b: TrackSeries) -> FloatArray:
    """Distance between two agents' track positions at common times (NaN: either has none)."""
    return np.hypot(a.x[:, 0] - b.x[:, 0], a.x[:, 1] - b.x[:, 1])


def analyse(
    run: RunDir,
    *,
    cell_size: float = GridParams().cell_size,
    coverage_var: float = COVERAGE_VAR,
    room_cells: tuple[int, int] | None = None,
    progress: Progress | None = None,
) -> Analysis:
    """Every metric of the brief, per agent and between agents."""
    truth = truth_of(run)
    t0, t1 = run.t_start, run.t_end
    times: FloatArray = t0 + STEP * np.arange(
        max(1, math.floor((t1 - t0) / STEP) + 1), dtype=np.float64
    )
    agents: dict[str, AgentAnalysis] = {}
    for name, log in sorted(run.agents.items()):
        agents[name] = analyse_agent(
            run,
            log,
            truth,
            times,
            cell_size=cell_size,
            coverage_var=coverage_var,
            room_cells=room_cells,
        )
        if progress is not None:
            progress(
                f"analysed {name}: {len(log.lines)} events, {len(agents[name].samples)} track "
                f"samples, {len(agents[name].grids)} belief records"
            )
    pairs = list(combinations(sorted(agents), 2))
    agree = {(a, b): agreement(agents[a].series, agents[b].series) for a, b in pairs}
    overlap = {
        (a, b): coverage_overlap(agents[a].grids, agents[b].grids, coverage_var, room_cells)
        for a, b in pairs
    }
    lat = latency(run.agents.values())
    analysis = Analysis(
        run, truth, times, cell_size, agents, agree, overlap, lat, coverage_var, room_cells
    )
    analysis.swarm = _swarm_metrics(analysis)
    return analysis


def _swarm_metrics(an: Analysis) -> dict[str, Any]:
    late = an.times - an.t_start >= SETTLE
    out: dict[str, Any] = {"agreement_m": {}, "coverage_overlap": {}}
    for (a, b), d in an.agreement.items():
        both = np.isfinite(d)
        out["agreement_m"][f"{a}-{b}"] = {
            "all": summary(d),
            "after_settle": summary(d[late]),
            "time_both_tracking_fraction": float(np.mean(both)) if d.size else None,
        }
    for (a, b), ov in an.overlap.items():
        ever_a = an.agents[a].coverage["ever_cells"]
        ever_b = an.agents[b].coverage["ever_cells"]
        union = len(ever_a | ever_b)
        out["coverage_overlap"][f"{a}-{b}"] = {
            "jaccard_now": summary(ov["jaccard"]),
            "searched_both_now_cells": summary(ov["both"]),
            "ever_both_cells": len(ever_a & ever_b),
            "ever_either_cells": union,
            "ever_jaccard": len(ever_a & ever_b) / union if union else None,
        }
    ever_all: set[int] = set()
    for ag in an.agents.values():
        ever_all |= ag.coverage["ever_cells"]
    out["searched_ever_by_any_m2"] = len(ever_all) * an.cell_size**2
    if an.room_cells is not None:
        out["searched_ever_by_any_room_fraction"] = len(ever_all) / (
            an.room_cells[0] * an.room_cells[1]
        )
    firsts = [
        ag.metrics["time_to_first_detection_s"]
        for ag in an.agents.values()
        if ag.metrics.get("time_to_first_detection_s") is not None
    ]
    out["time_to_first_detection_s"] = min(firsts) if firsts else None
    return out


def run_metrics(an: Analysis) -> dict[str, Any]:
    """The machine-readable summary (metrics.json), without the per-sample arrays."""
    run = an.run
    start = run.world_start or {}
    return {
        "run": {
            "dir": str(run.path),
            "t_start": an.t_start,
            "duration_s": run.t_end - an.t_start,
            "arena": start.get("arena"),
            "sensing": start.get("sensing"),
            "seed": start.get("seed"),
            "agents": sorted(an.agents),
            "ground_truth": an.truth is not None,
            "notes": list(run.notes),
            "settle_s": SETTLE,
            "time_step_s": STEP,
        },
        "agents": {name: ag.metrics for name, ag in an.agents.items()},
        "swarm": an.swarm,
        "latency": latency_summary(an.latency),
    }


def jsonable(value: Any) -> Any:
    """Plain JSON values: NaN and infinity become null, tuples lists, numpy scalars numbers."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, set | frozenset):
        return len(value)
    return value
