"""The track family: what an agent believed of the target, on the common time base, against the
truth: errors, uncertainty and NEES consistency, and the agreement between two agents.

Between the states an agent published, the series predicts the newest one to the time base
as a peer predicts a received track (constant velocity with the agent's ``accel_psd``, the
manoeuvre mode's noise: the wire carries no mode). Errors are measured on that prediction.
Consistency is measured twice: ``nees4``/``nees2`` judge the newest published state at the
time it refers to, against the truth then: the agent's own estimate, made by its own filter
(the IMM, whose prediction between updates mixes its modes), with no model of the replay's
in between; ``peer_nees4``/``peer_nees2`` judge the prediction, which adds the CV
extrapolation's covariance (for a target declared to accelerate at 5 m/s², 0.25 (m/s)² of
velocity variance over 0.1 s) and so measures what a peer would hold, not the filter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.stats import chi2

from agents.belief.params import TrackParams
from agents.belief.track import cv_predict, position_spread
from agents.config import AgentConfig, Sensing, default_confident_spread
from protocol.swarm.fields import from_upper_triangle
from protocol.swarm.messages import Track
from tools.replay.load import ProcessLog, datagram_bytes, decode_own
from tools.replay.metrics.common import SETTLE, FloatArray, summary
from tools.replay.metrics.truth import Truth

NEES_CONFIDENCE = 0.95  # two-sided chi-square bounds
CONFIDENT_SPREAD = default_confident_spread(Sensing())  # m: a confident track, by default
TRACK_MAX_AGE = AgentConfig.track_max_age  # s: an older track is no belief

def nees_bounds(dof: int, confidence: float = NEES_CONFIDENCE) -> tuple[float, float]:
    """Two-sided chi-square bounds of a single-run NEES with ``dof`` degrees of freedom."""
    tail = (1.0 - confidence) / 2.0
    return float(chi2.ppf(tail, dof)), float(chi2.ppf(1.0 - tail, dof))


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
    """An agent's track on a time base: NaN where it had none (or only a stale one).

    ``t_state``, ``x_state``, ``P_state``: the state each row was predicted from, at its own
    time (None: the rows are the agent's own states at ``t``, as a re-run samples them)."""

    t: FloatArray
    x: FloatArray  # (n, 4)
    P: FloatArray  # (n, 4, 4)
    t_state: FloatArray | None = None
    x_state: FloatArray | None = None
    P_state: FloatArray | None = None

    @property
    def uncertainty(self) -> FloatArray:
        """trace(P)/4, as the seed plots it."""
        return np.trace(self.P, axis1=1, axis2=2) / 4.0

    @property
    def spread(self) -> FloatArray:
        """m: the position's standard deviation along its most uncertain direction."""
        return position_spread(self.P)

    @property
    def valid(self) -> npt.NDArray[np.bool_]:
        return np.isfinite(self.x[:, 0])


def resample(
    samples: TrackSamples,
    times: FloatArray,
    accel_psd: float = TrackParams().accel_psd,
    *,
    max_age: float = TRACK_MAX_AGE,
    until: float = math.inf,
    dropped: npt.ArrayLike = (),
) -> TrackSeries:
    """At each time, the newest sample logged by then, predicted to that time with the
    agent's own motion model (``accel_psd``: its ``track.accel_psd``).

    The agent holds no track after it dropped it (``dropped``: the log times of its
    ``track_dropped`` events) until it logs a new one, nor after ``until`` (its last log
    line: a stopped agent believes nothing), nor more than ``max_age`` after the time of
    its newest sample (a guard for logs without drop events). Where it holds one, the
    series is finite; elsewhere NaN (:attr:`TrackSeries.valid` is the held mask).
    """
    n = times.size
    x = np.full((n, 4), np.nan)
    P = np.full((n, 4, 4), np.nan)
    t_state = np.full(n, np.nan)
    x_state = np.full((n, 4), np.nan)
    P_state = np.full((n, 4, 4), np.nan)
    drops = np.sort(np.asarray(dropped, dtype=np.float64).ravel())
    if len(samples):
        idx = np.searchsorted(samples.t_log, times, side="right") - 1
        for k in range(n):
            i = idx[k]
            if i < 0 or times[k] > until:
                continue
            dt = float(times[k] - samples.t[i])
            if dt > max_age:
                continue
            # a drop after the sample was logged and by now: the track is gone
            j = int(np.searchsorted(drops, samples.t_log[i], side="right"))
            if j < drops.size and drops[j] <= times[k]:
                continue
            x[k], P[k] = cv_predict(samples.x[i], samples.P[i], max(dt, 0.0), accel_psd)
            t_state[k], x_state[k], P_state[k] = samples.t[i], samples.x[i], samples.P[i]
    return TrackSeries(times, x, P, t_state, x_state, P_state)


def outside_room(samples: TrackSamples, size_x: float, size_y: float) -> dict[str, Any]:
    """The logged estimates whose position lies outside the room [0, size_x] × [0, size_y]:
    how many, of how many, and the farthest one's distance to the room (m)."""
    if not len(samples):
        return {"n": 0, "outside": 0, "max_m": 0.0}
    px, py = samples.x[:, 0], samples.x[:, 1]
    ox = np.maximum(np.maximum(-px, px - size_x), 0.0)
    oy = np.maximum(np.maximum(-py, py - size_y), 0.0)
    d = np.hypot(ox, oy)
    return {"n": len(samples), "outside": int(np.count_nonzero(d > 0.0)),
            "max_m": float(d.max())}


@dataclass(frozen=True)
class TrackErrors:
    """A track series against the truth."""

    t: FloatArray  # absolute times
    pos_err: FloatArray
    vel_err: FloatArray
    speed: FloatArray
    true_speed: FloatArray
    uncertainty: FloatArray
    nees4: FloatArray  # the published state at its own time (see the module docstring)
    nees2: FloatArray
    peer_nees4: FloatArray  # its prediction to ``t``, as a peer predicts it
    peer_nees2: FloatArray


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
    if series.t_state is None or series.x_state is None or series.P_state is None:
        d_own, P_own = d, series.P
    else:
        held = np.isfinite(series.t_state)
        d_own = np.full_like(d, np.nan)
        d_own[held] = series.x_state[held] - truth.target_at(series.t_state[held])
        P_own = series.P_state
    return TrackErrors(
        t=series.t,
        pos_err=np.hypot(d[:, 0], d[:, 1]),
        vel_err=np.hypot(d[:, 2], d[:, 3]),
        speed=np.hypot(series.x[:, 2], series.x[:, 3]),
        true_speed=np.hypot(true[:, 2], true[:, 3]),
        uncertainty=series.uncertainty,
        nees4=_nees(d_own, P_own),
        nees2=_nees(d_own[:, :2], P_own[:, :2, :2]),
        peer_nees4=_nees(d, series.P),
        peer_nees2=_nees(d[:, :2], series.P[:, :2, :2]),
    )


def fraction_inside(values: FloatArray, bounds: tuple[float, float]) -> float | None:
    v = values[np.isfinite(values)]
    if v.size == 0:
        return None
    return float(np.mean((v >= bounds[0]) & (v <= bounds[1])))


NEES_DOF: dict[str, int] = {"nees4": 4, "nees2": 2, "peer_nees4": 4, "peer_nees2": 2}
"""The NEES series of :class:`TrackErrors`, by name, and their degrees of freedom."""


def consistency(values: FloatArray, bounds: tuple[float, float]) -> dict[str, Any]:
    """A NEES series' mean, its bounds and the fraction of it inside them."""
    return {"mean": summary(values)["mean"], "bounds": bounds,
            "fraction_inside": fraction_inside(values, bounds)}


def error_summary(errors: TrackErrors, t_start: float, settle: float = SETTLE) -> dict[str, Any]:
    """Position/velocity error, uncertainty and NEES consistency, overall and after ``settle``."""
    late = errors.t - t_start >= settle
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
        **{key: consistency(getattr(errors, key), nees_bounds(dof))
           for key, dof in NEES_DOF.items()},
    }


def agreement(a: TrackSeries, b: TrackSeries) -> FloatArray:
    """Distance between two agents' track positions at common times (NaN: either has none)."""
    return np.hypot(a.x[:, 0] - b.x[:, 0], a.x[:, 1] - b.x[:, 1])
