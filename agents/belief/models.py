"""Motion models of the target, one small class per model over a common state.

Every model acts on the same five-element state ``s = [x, y, vx, vy, ω]``
(metres, m/s, rad/s) so that an interacting multiple model (:mod:`.imm`) can
mix them without conversions; the wire TRACK carries the first four. Each
model gives its transition ``f(s, dt)``, the Jacobian ``F = ∂f/∂s`` and the
process noise ``Q(dt)``; :meth:`MotionModel.predict` is the (extended) Kalman
prediction ``(f(s), F P Fᵀ + Q)``.

- :class:`ConstantVelocity`: the textbook continuous white-noise acceleration
  model (Bar-Shalom, Li, Kirubarajan 2001, §6.2.2) on ``[x, y, vx, vy]``; the
  turn rate is not part of its motion and is carried as a random walk.
- :class:`CoordinatedTurn`: the coordinated turn with the turn rate as a
  state, in Cartesian velocity form (ibid. §11.7.1, eq. 11.7.1-4), predicted
  as an EKF.

Why the Cartesian ``(x, y, vx, vy, ω)`` form and not ``(x, y, v, heading, ω)``:
the first four elements mean the same in both models, so mixing and the
published 4-state are plain slices, and the state is regular at zero speed
(a target that has just been seen, or stops, has no heading; the polar form's
covariance is singular there).

The process noise of both is the continuous white-noise acceleration density
``q`` on each axis (``Q`` of the CV model on the kinematic block) plus a
turn-rate density ``q_turn`` on ω; for the coordinated turn this is the usual
approximation that ignores the rotation of the noise during one step.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

STATE_DIM = 5
"""``[x, y, vx, vy, ω]``."""

KINEMATIC = slice(0, 4)
"""The published part of the state, ``[x, y, vx, vy]``."""


def cv_transition(dt: float) -> FloatArray:
    """F(dt) of the 4-state constant-velocity model."""
    F = np.eye(4)
    F[0, 2] = F[1, 3] = dt
    return F


def _white_accel(dt: float, q: float) -> tuple[float, float, float]:
    """The position, cross and velocity terms of :func:`cv_process_noise` (uses |dt|)."""
    a = abs(dt)
    return q * a**3 / 3.0, q * a**2 / 2.0, q * a


def cv_process_noise(dt: float, q: float) -> FloatArray:
    """Q(dt) of white acceleration noise with spectral density q (uses |dt|), 4-state."""
    p, c, v = _white_accel(dt, q)
    return np.array([[p, 0.0, c, 0.0], [0.0, p, 0.0, c], [c, 0.0, v, 0.0], [0.0, c, 0.0, v]])


def cv_predict(
    x: npt.ArrayLike, P: npt.ArrayLike, dt: float, q: float
) -> tuple[FloatArray, FloatArray]:
    """``(F x, F P Fᵀ + Q)`` on a 4-state. A negative dt predicts backwards but adds Q(|dt|)."""
    F = cv_transition(dt)
    x_ = F @ np.asarray(x, dtype=np.float64)
    P_ = F @ np.asarray(P, dtype=np.float64) @ F.T + cv_process_noise(dt, q)
    return x_, 0.5 * (P_ + P_.T)


class MotionModel:
    """A motion model on the five-element state; subclasses give ``f``, ``F`` and ``Q``."""

    name = "model"

    def __init__(self, accel_psd: float, turn_psd: float) -> None:
        if not (math.isfinite(accel_psd) and accel_psd > 0.0):
            raise ValueError(f"accel_psd must be finite and > 0, got {accel_psd}")
        if not (math.isfinite(turn_psd) and turn_psd >= 0.0):
            raise ValueError(f"turn_psd must be finite and >= 0, got {turn_psd}")
        self.accel_psd = float(accel_psd)
        self.turn_psd = float(turn_psd)

    def transition(self, s: FloatArray, dt: float) -> tuple[FloatArray, FloatArray]:
        """``(f(s, dt), ∂f/∂s)``."""
        raise NotImplementedError

    def noise(self, dt: float) -> FloatArray:
        """Q(dt): white acceleration on the kinematic block, a random walk on ω."""
        p, c, v = _white_accel(dt, self.accel_psd)
        w = self.turn_psd * abs(dt)
        return np.array([[p, 0.0, c, 0.0, 0.0], [0.0, p, 0.0, c, 0.0], [c, 0.0, v, 0.0, 0.0],
                         [0.0, c, 0.0, v, 0.0], [0.0, 0.0, 0.0, 0.0, w]])

    def predict(self, s: FloatArray, P: FloatArray, dt: float) -> tuple[FloatArray, FloatArray]:
        """``(f(s), F P Fᵀ + Q)``, symmetrised."""
        fs, F = self.transition(s, dt)
        P_ = F @ P @ F.T + self.noise(dt)
        return fs, 0.5 * (P_ + P_.T)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(accel_psd={self.accel_psd!r}, turn_psd={self.turn_psd!r})"


class ConstantVelocity(MotionModel):
    """Nearly constant velocity; ω is carried unchanged (it does not move the target)."""

    name = "cv"

    def transition(self, s: FloatArray, dt: float) -> tuple[FloatArray, FloatArray]:
        F = np.eye(STATE_DIM)
        F[0, 2] = F[1, 3] = dt
        return F @ s, F


def _turn_terms(w: float, dt: float) -> tuple[float, float, float, float]:
    """``sin(ωT)/ω``, ``(1 - cos ωT)/ω`` and their derivatives in ω, stable as ω → 0."""
    wt = w * dt
    if abs(wt) < 1e-4:
        # Taylor series: the closed forms cancel catastrophically near ω = 0.
        s = dt - w * w * dt**3 / 6.0
        c = w * dt * dt / 2.0 - w**3 * dt**4 / 24.0
        ds = -w * dt**3 / 3.0
        dc = dt * dt / 2.0 - w * w * dt**4 / 8.0
        return s, c, ds, dc
    sn, cs = math.sin(wt), math.cos(wt)
    s = sn / w
    c = (1.0 - cs) / w
    ds = (dt * cs - s) / w
    dc = (dt * sn - c) / w
    return s, c, ds, dc


class CoordinatedTurn(MotionModel):
    """Coordinated turn at the (estimated) rate ω: the velocity rotates by ωT in a step.

    ``x' = x + s·vx − c·vy``, ``y' = y + c·vx + s·vy``,
    ``vx' = cos(ωT)·vx − sin(ωT)·vy``, ``vy' = sin(ωT)·vx + cos(ωT)·vy``, ``ω' = ω``,
    with ``s = sin(ωT)/ω`` and ``c = (1 - cos ωT)/ω`` (→ T and 0 as ω → 0: the CV model).
    """

    name = "ct"

    def transition(self, s: FloatArray, dt: float) -> tuple[FloatArray, FloatArray]:
        x, y, vx, vy, w = np.asarray(s, dtype=np.float64).tolist()
        sw, cw, dsw, dcw = _turn_terms(w, dt)
        cos_, sin_ = math.cos(w * dt), math.sin(w * dt)
        out = np.array(
            [
                x + sw * vx - cw * vy,
                y + cw * vx + sw * vy,
                cos_ * vx - sin_ * vy,
                sin_ * vx + cos_ * vy,
                w,
            ]
        )
        F = np.array([
            [1.0, 0.0, sw, -cw, dsw * vx - dcw * vy],
            [0.0, 1.0, cw, sw, dcw * vx + dsw * vy],
            [0.0, 0.0, cos_, -sin_, -dt * (sin_ * vx + cos_ * vy)],
            [0.0, 0.0, sin_, cos_, dt * (cos_ * vx - sin_ * vy)],
            [0.0, 0.0, 0.0, 0.0, 1.0],
        ])
        return out, F


__all__ = [
    "KINEMATIC",
    "STATE_DIM",
    "ConstantVelocity",
    "CoordinatedTurn",
    "MotionModel",
    "cv_predict",
    "cv_process_noise",
    "cv_transition",
]
