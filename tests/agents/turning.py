"""A car turning on the spot under a pose filter, a pose fix every 2 s: what the gyro-error
states' tests (test_bias_state, test_gyro_scale) drive the filter through."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from agents.localization import PoseEKF
from agents.observations import ObservationBatch, PoseFix
from agents.pose_geometry import wrap_angle

DT = 0.1  # telemetry at 10 Hz
FIX_EVERY = 20  # telemetries: a fix every 2 s


class Fixes(NamedTuple):
    """The heading errors and σs just before each fix after ``measured_after``, and the
    times of the fixes the filter refused."""

    errors: list[float]
    sigmas: list[float]
    refused: list[float]


def turn_with_fixes(ekf: PoseEKF, rng: np.random.Generator, *,
                    turned: Callable[[float, float], float], reading: Callable[[float], float],
                    gyro_error: float, fix_cov: npt.NDArray[np.float64],
                    seconds: float = 40.0, measured_after: float = 10.0) -> Fixes:
    """Drive ``ekf`` (its pose set at heading 0 at t = 0) for ``seconds``: the gyro reads
    ``reading(t)`` at each telemetry (given with ``gyro_error``), the car truly turns
    ``turned(t0, t1)`` between two, and a pose fix of covariance ``fix_cov`` (its heading
    drawn from ``rng`` about the truth) comes every 2 s."""
    truth = 0.0
    out = Fixes([], [], [])
    for k in range(1, round(seconds / DT) + 1):
        t = k * DT
        truth += turned(t - DT, t)
        ekf.predict_to(t, -0.5, 0.5, ekf.held.gyro_z if ekf.held else None, gyro_error)
        ekf.sample_at(t, -0.5, 0.5, reading(t), gyro_error=gyro_error)
        if k % FIX_EVERY:
            continue
        pose, P = ekf.pose, ekf.cov
        assert pose is not None and P is not None
        if t > measured_after:
            out.errors.append(wrap_angle(pose[2] - truth))
            out.sigmas.append(math.sqrt(float(P[2, 2])))
        theta = truth + float(rng.normal(0.0, math.sqrt(float(fix_cov[2, 2]))))
        result = ekf.update_batch(ObservationBatch(t, True, pose_fix=PoseFix(
            2.5, 2.5, wrap_angle(theta), fix_cov)))
        assert result.pose_fix_result is not None
        if not result.pose_fix_result.accepted:
            out.refused.append(t)
    return out
