"""How well an agent knows its own pose: its estimate against the world's truth.

Each ``belief`` record (1 Hz) logs the pose, the time it refers to and its covariance
(:func:`logged_poses`; older logs: the pose alone, at the record's time); a re-run
(:mod:`tools.replay.rerun`) reads the same from the localizer after every tick. Each
sample is compared with the car's true [x, y, yaw] at the time the estimate refers to
(the localizer's own time): the position and heading errors, and the NEES of the heading
alone (1 dof) and of the whole pose (3 dof) against their two-sided 95 % chi-square
bounds. Only samples with a pose count; ``held`` says how often there was one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tools.replay.load import Line, ProcessLog
from tools.replay.metrics.common import SETTLE, FloatArray, summary
from tools.replay.metrics.track import fraction_inside, nees_bounds
from tools.replay.metrics.truth import Truth


@dataclass(frozen=True)
class PoseSeries:
    """A localizer sampled over a run: the time each estimate refers to, [x, y, θ] (NaN
    without a pose) and the 3×3 covariance (NaN likewise)."""

    t: FloatArray
    pose: FloatArray  # (n, 3)
    P: FloatArray  # (n, 3, 3)


PoseRow = tuple[float, list[float], FloatArray]


def pose_row(line: Line) -> PoseRow:
    """One belief record's pose: the time it refers to (``pose_t``, else the record's), the
    pose and its covariance (NaN where the record has none)."""
    pose, cov, at = line.get("pose"), line.get("pose_cov"), line.get("pose_t")
    return (float(at) if isinstance(at, int | float) else float(line["t"]),
            list(pose) if isinstance(pose, list) else [math.nan] * 3,
            np.asarray(cov, dtype=np.float64) if isinstance(cov, list)
            else np.full((3, 3), np.nan))


def pose_series(rows: Iterable[PoseRow]) -> PoseSeries:
    """The rows of :func:`pose_row` as one series."""
    t, poses, covs = [], [], []
    for at, pose, cov in rows:
        t.append(at)
        poses.append(pose)
        covs.append(cov)
    n = len(t)
    return PoseSeries(np.asarray(t, dtype=np.float64),
                      np.asarray(poses, dtype=np.float64).reshape(n, 3),
                      np.stack(covs) if n else np.zeros((0, 3, 3)))


def logged_poses(log: ProcessLog) -> PoseSeries:
    """The pose each belief record logged (:func:`pose_row` of each)."""
    return pose_series(pose_row(line) for line in log.events("belief"))


def _wrapped(a: FloatArray) -> FloatArray:
    return np.remainder(a + math.pi, 2.0 * math.pi) - math.pi


def localizer_errors(series: PoseSeries, truth: Truth, car: str) -> dict[str, FloatArray]:
    """Per sample: ``position`` error (m), ``heading`` error (rad, wrapped), ``nees1`` of the
    heading and ``nees3`` of the pose (NaN where there is no pose or no truth)."""
    n = series.t.size
    out = {k: np.full(n, np.nan) for k in ("position", "heading", "nees1", "nees3")}
    if n == 0:
        return out
    true = truth.car_at(car, series.t)
    ok = np.isfinite(series.pose).all(axis=1) & np.isfinite(true).all(axis=1)
    if not ok.any():
        return out
    e = series.pose[ok] - true[ok]
    e[:, 2] = _wrapped(e[:, 2])
    out["position"][ok] = np.hypot(e[:, 0], e[:, 1])
    out["heading"][ok] = e[:, 2]
    P_ok = series.P[ok]
    # An older log has no covariance; a damaged one may hold a singular matrix: no NEES.
    finite = np.isfinite(P_ok).all(axis=(1, 2))
    known = np.zeros(finite.shape, dtype=bool)
    known[finite] = (np.linalg.det(P_ok[finite]) > 0.0) & (
        np.diagonal(P_ok[finite], axis1=1, axis2=2) > 0.0).all(axis=1)
    if known.any():
        rows = np.flatnonzero(ok)[known]
        e, P = e[known], series.P[rows]
        out["nees1"][rows] = e[:, 2] ** 2 / P[:, 2, 2]
        out["nees3"][rows] = np.einsum("ni,ni->n", e, np.linalg.solve(P, e[:, :, None])[:, :, 0])
    return out


def localizer_summary(series: PoseSeries, truth: Truth, car: str, t_start: float,
                      settle: float = SETTLE, *,
                      errors: dict[str, FloatArray] | None = None) -> dict[str, Any]:
    """``held`` (the fraction of samples with a pose), the errors (heading in degrees) over
    the run and after ``settle``, and both NEES: mean and the fraction inside the bounds.
    ``errors``: :func:`localizer_errors` of the same series, when already computed."""
    if errors is None:
        errors = localizer_errors(series, truth, car)
    late = series.t - t_start >= settle
    held = np.isfinite(series.pose).all(axis=1)
    heading_deg = np.degrees(np.abs(errors["heading"]))
    out: dict[str, Any] = {
        "held": float(held.mean()) if held.size else None,
        "position_error_m": summary(errors["position"]),
        "position_error_after_settle_m": summary(errors["position"][late]),
        "heading_error_deg": summary(heading_deg),
        "heading_error_after_settle_deg": summary(heading_deg[late]),
    }
    for key, dof in (("nees1", 1), ("nees3", 3)):
        bounds = nees_bounds(dof)
        out[key] = {"mean": summary(errors[key])["mean"], "bounds": bounds,
                    "fraction_inside": fraction_inside(errors[key], bounds)}
    return out


__all__ = ["PoseRow", "PoseSeries", "localizer_errors", "localizer_summary", "logged_poses",
           "pose_row", "pose_series"]
