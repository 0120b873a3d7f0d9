"""How well an agent knows its own pose: its estimate against the world's truth.

:func:`pose_errors` reads the pose each ``belief`` record logged (1 Hz): position errors
only, since the logs carry no pose covariance. The localizer's consistency is measured
on a re-run (:mod:`tools.replay.rerun`), which reads the localizer's pose and
covariance after every tick. Each sample is compared with the car's true [x, y, yaw] at
the time the estimate refers to (the localizer's own time): the position and heading
errors, and the NEES of the heading alone (1 dof) and of the whole pose (3 dof) against
their two-sided 95 % chi-square bounds. Only samples with a pose count; ``held`` says how
often there was one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tools.replay.metrics.common import SETTLE, FloatArray, summary
from tools.replay.metrics.grid import GridRecord
from tools.replay.metrics.track import fraction_inside, nees_bounds
from tools.replay.metrics.truth import Truth


@dataclass(frozen=True)
class PoseSeries:
    """A localizer sampled over a run: the time each estimate refers to, [x, y, θ] (NaN
    without a pose) and the 3×3 covariance (NaN likewise)."""

    t: FloatArray
    pose: FloatArray  # (n, 3)
    P: FloatArray  # (n, 3, 3)


def pose_errors(grids: Sequence[GridRecord], truth: Truth, car: str) -> FloatArray:
    """The position error of the pose each belief record logged (NaN: no pose then)."""
    out = np.full(len(grids), np.nan)
    for k, g in enumerate(grids):
        if g.pose is None:
            continue
        true = truth.car_at(car, g.t)[0]
        out[k] = math.hypot(g.pose[0] - true[0], g.pose[1] - true[1])
    return out


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
    P = series.P[ok]
    out["position"][ok] = np.hypot(e[:, 0], e[:, 1])
    out["heading"][ok] = e[:, 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        out["nees1"][ok] = e[:, 2] ** 2 / P[:, 2, 2]
    out["nees3"][ok] = np.einsum("ni,ni->n", e, np.linalg.solve(P, e[:, :, None])[:, :, 0])
    return out


def localizer_summary(series: PoseSeries, truth: Truth, car: str, t_start: float,
                 settle: float = SETTLE) -> dict[str, Any]:
    """``held`` (the fraction of samples with a pose), the errors (heading in degrees) over
    the run and after ``settle``, and both NEES: mean and the fraction inside the bounds."""
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


__all__ = ["PoseSeries", "localizer_errors", "localizer_summary", "pose_errors"]
