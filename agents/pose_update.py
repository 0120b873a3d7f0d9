"""The pose filter's measurement updates, on its state (x, y, theta, b, s): pure functions of
the state, the covariance and the measurement (:class:`~agents.localization.PoseEKF`
decides when and counts the refusals).

- :func:`pose_update`: a measurement of the pose (``H`` with 3 columns: a tag's range and
  bearing, a pose fix), gated on its NIS; the residual bias b and the scale error s move
  by their covariance with the pose.
- :func:`bias_update`: a still car's gyro sample, b plus noise (a scalar update; gated by
  :mod:`agents.gyro_bias`, which knows the gyro).

Both one Kalman step in Joseph form, the heading wrapped.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from agents.pose_geometry import DEGENERATE, OK, wrap_angle
from agents.pose_motion import BIAS, STATE_SIZE

FloatArray = npt.NDArray[np.float64]

GATED = "gated"


class Step(NamedTuple):
    """An update's outcome: the new state and covariance (None when refused), the NIS when
    it was computed, and the reason (``ok``, ``gated``, ``degenerate``)."""

    x: FloatArray | None
    P: FloatArray | None
    nis: float | None
    reason: str


def pose_update(x: FloatArray, P: FloatArray, nu: FloatArray, H: FloatArray, R: FloatArray,
                *, gate: float) -> Step:
    """Innovation ``nu`` of a measurement ``H`` (3 columns: the pose) with noise ``R``,
    refused when its NIS exceeds ``gate`` or its covariance is singular."""
    H = np.hstack([H, np.zeros((H.shape[0], STATE_SIZE - 3))])
    S = H @ P @ H.T + R
    try:
        nis = float(nu @ np.linalg.solve(S, nu))
    except np.linalg.LinAlgError:
        return Step(None, None, None, DEGENERATE)
    if not math.isfinite(nis) or nis > gate:
        return Step(None, None, nis, GATED)
    x, P = _joseph(x, P, nu, H, R, S=S)
    return Step(x, P, nis, OK)


def bias_update(x: FloatArray, P: FloatArray, z: float, r: float) -> tuple[FloatArray,
                                                                            FloatArray]:
    """A still car's gyro sample ``z``: the residual bias plus noise of variance ``r``."""
    H = np.zeros((1, STATE_SIZE))
    H[0, BIAS] = 1.0
    R = np.array([[r]])
    return _joseph(x, P, np.array([z - float(x[BIAS])]), H, R, S=H @ P @ H.T + R)


def _joseph(x: FloatArray, P: FloatArray, nu: FloatArray, H: FloatArray, R: FloatArray, *,
            S: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The Kalman step of innovation ``nu`` (covariance ``S``), the heading wrapped, the
    covariance in Joseph form."""
    K = np.linalg.solve(S, H @ P).T  # P Hᵀ S⁻¹, S symmetric
    x = x + K @ nu
    x[2] = wrap_angle(float(x[2]))
    IKH = np.eye(STATE_SIZE) - K @ H
    P = IKH @ P @ IKH.T + K @ R @ K.T
    return x, 0.5 * (P + P.T)


__all__ = ["GATED", "Step", "bias_update", "pose_update"]
