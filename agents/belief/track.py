"""Constant-velocity Kalman track of the target, state ``[x, y, vx, vy]``.

The motion model is the textbook continuous white-noise acceleration model
with spectral density ``q`` per axis::

    F(dt) = [[1, 0, dt, 0], [0, 1, 0, dt], [0, 0, 1, 0], [0, 0, 0, 1]]
    Q(dt) = q · [[dt³/3·I, dt²/2·I], [dt²/2·I, dt·I]]

Measurements are positions (``H = [I 0]``), gated on the normalised
innovation squared against χ²(2). Peer tracks are predicted from their time to
now with the same model (the principled staleness penalty) and fused by
matrix covariance intersection.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from agents.belief.fusion import FusionRule, MatrixFusion, ci_matrix, naive_matrix
from agents.belief.grid import GridPeak
from agents.belief.params import TrackParams

FloatArray = npt.NDArray[np.float64]


def cv_transition(dt: float) -> FloatArray:
    """F(dt) of the constant-velocity model."""
    F = np.eye(4)
    F[0, 2] = F[1, 3] = dt
    return F


def cv_process_noise(dt: float, q: float) -> FloatArray:
    """Q(dt) of white acceleration noise with spectral density q (uses |dt|)."""
    a = abs(dt)
    Q = np.zeros((4, 4))
    Q[0, 0] = Q[1, 1] = q * a**3 / 3.0
    Q[0, 2] = Q[2, 0] = Q[1, 3] = Q[3, 1] = q * a**2 / 2.0
    Q[2, 2] = Q[3, 3] = q * a
    return Q


def cv_predict(
    x: npt.ArrayLike, P: npt.ArrayLike, dt: float, q: float
) -> tuple[FloatArray, FloatArray]:
    """``(F x, F P Fᵀ + Q)``. A negative dt predicts backwards but still adds Q(|dt|)."""
    F = cv_transition(dt)
    x_ = F @ np.asarray(x, dtype=np.float64)
    P_ = F @ np.asarray(P, dtype=np.float64) @ F.T + cv_process_noise(dt, q)
    return x_, 0.5 * (P_ + P_.T)


class UpdateReason(StrEnum):
    """Why a measurement was or was not used."""

    INITIALISED = "initialised"
    ACCEPTED = "accepted"
    GATED = "gated"
    REINITIALISED = "reinitialised"
    STALE = "stale"
    INVALID = "invalid"
    NOT_INITIALISED = "not_initialised"
    PEAK_WEAK = "peak_weak"
    HOLDOFF = "holdoff"


@dataclass(frozen=True)
class UpdateResult:
    """What a measurement did; ``nis`` is NaN when no innovation was computed."""

    accepted: bool
    reason: UpdateReason
    nis: float = math.nan


def _valid_covariance(R: FloatArray) -> bool:
    """Finite, symmetric (to rounding) and positive definite 2×2."""
    (a, b), (c, d) = R.tolist()
    if not all(math.isfinite(v) for v in (a, b, c, d)):
        return False
    return abs(b - c) <= 1e-9 * (abs(a) + abs(d)) and a > 0.0 and a * d - b * c > 0.0


@dataclass(frozen=True)
class PeerFusion:
    """Result of :meth:`TrackFilter.fuse_peer`: ω on the own state, or adoption of the peer's."""

    w: float
    adopted: bool


class TrackFilter:
    """A CV Kalman filter with gating, grid-peak pseudo-measurements and peer CI.

    Gating cannot lock the filter out: after ``max_consecutive_gated`` detections
    in a row fail the gate, the filter re-initialises on the newest of them
    (position from the detection, zero velocity with ``init_velocity_var``).
    Grid-peak pseudo-measurements never count towards that (the grid may lag).
    """

    def __init__(self, params: TrackParams | None = None) -> None:
        self.params = params if params is not None else TrackParams()
        self._F = np.eye(4)
        self.reset()

    def reset(self) -> None:
        """Forget the track (the next detection or peer track initialises it again)."""
        self._x = np.zeros(4)
        self._P = np.eye(4)
        self._t = math.nan
        self._initialised = False
        self._updates = 0
        self._gated_in_row = 0
        self._reinits = 0
        self._last_detection_t = -math.inf

    # ----------------------------------------------------------------- state
    @property
    def initialised(self) -> bool:
        return self._initialised

    @property
    def time(self) -> float:
        """Time the state refers to (NaN before initialisation)."""
        return self._t

    @property
    def state(self) -> FloatArray:
        return self._x.copy()

    @property
    def covariance(self) -> FloatArray:
        return self._P.copy()

    @property
    def position(self) -> FloatArray:
        return self._x[:2].copy()

    @property
    def velocity(self) -> FloatArray:
        return self._x[2:].copy()

    @property
    def speed(self) -> float:
        return math.hypot(self._x[2], self._x[3])

    @property
    def uncertainty(self) -> float:
        """trace(P) / 4 (the figure the seed plots)."""
        return float(np.trace(self._P)) / 4.0

    @property
    def update_count(self) -> int:
        """Measurements incorporated (initialisations included)."""
        return self._updates

    @property
    def reinit_count(self) -> int:
        return self._reinits

    @property
    def consecutive_gated(self) -> int:
        return self._gated_in_row

    # --------------------------------------------------------------- predict
    def predict_to(self, t: float) -> None:
        """Propagate the state to time ``t``; a time at or before the state's is a no-op."""
        if not self._initialised:
            return
        dt = t - self._t
        if not dt > 0.0:
            return
        F = self._F
        F[0, 2] = F[1, 3] = dt
        self._x = F @ self._x
        P = F @ self._P @ F.T
        q = self.params.accel_psd
        P[0, 0] += q * dt**3 / 3.0
        P[1, 1] += q * dt**3 / 3.0
        c = q * dt**2 / 2.0
        P[0, 2] += c
        P[2, 0] += c
        P[1, 3] += c
        P[3, 1] += c
        P[2, 2] += q * dt
        P[3, 3] += q * dt
        self._P = P
        self._t = t

    # ---------------------------------------------------------------- update
    def update_position(self, z: npt.ArrayLike, R: npt.ArrayLike, t: float) -> UpdateResult:
        """A position detection ``z`` (m) with covariance ``R`` (2×2, m²) captured at ``t``.

        The first detection initialises the track. A detection older than the state
        (up to ``max_measurement_lag``) is moved to the state's time along the
        estimated velocity, with ``lag²·P_vv`` and the process noise of the lag added
        to R (an approximation that ignores the position-velocity correlation); older
        ones are refused as ``stale``. A gated detection that triggers re-initialisation
        returns ``accepted=True`` with reason ``reinitialised``.
        """
        z_ = np.asarray(z, dtype=np.float64).reshape(2)
        R_ = np.asarray(R, dtype=np.float64).reshape(2, 2)
        if not (_valid_covariance(R_) and math.isfinite(z_[0]) and math.isfinite(z_[1])):
            return UpdateResult(False, UpdateReason.INVALID)
        if not math.isfinite(t):
            return UpdateResult(False, UpdateReason.INVALID)
        if not self._initialised:
            self._initialise(z_, R_, t)
            return UpdateResult(True, UpdateReason.INITIALISED)
        z_, R_, stale = self._align(z_, R_, t)
        if stale:
            return UpdateResult(False, UpdateReason.STALE)
        accepted, nis = self._kalman_update(z_, R_)
        if accepted:
            self._gated_in_row = 0
            self._last_detection_t = self._t
            return UpdateResult(True, UpdateReason.ACCEPTED, nis)
        self._gated_in_row += 1
        if self._gated_in_row >= self.params.max_consecutive_gated:
            # Re-initialise on the raw measurement at its own capture time.
            self._initialise(
                np.asarray(z, dtype=np.float64).reshape(2),
                np.asarray(R, dtype=np.float64).reshape(2, 2),
                t,
            )
            self._reinits += 1
            return UpdateResult(True, UpdateReason.REINITIALISED, nis)
        return UpdateResult(False, UpdateReason.GATED, nis)

    def update_from_grid_peak(self, peak: GridPeak, t: float) -> UpdateResult:
        """Use the grid's peak cell (captured at ``t``) as a pseudo-measurement if confident.

        Used only when the track is initialised, ``mu >= peak_min_mu``,
        ``var <= peak_max_var`` and no detection was accepted in the last
        ``peak_holdoff`` seconds (the grid already holds those detections; fusing its
        peak right after them would count them twice).
        ``R = (c²/12 + peak_var_to_m2 · var) · I``; gated like a detection.
        """
        p = self.params
        if not self._initialised:
            return UpdateResult(False, UpdateReason.NOT_INITIALISED)
        if not (peak.mu >= p.peak_min_mu and peak.var <= p.peak_max_var):
            return UpdateResult(False, UpdateReason.PEAK_WEAK)
        if t - self._last_detection_t < p.peak_holdoff:
            return UpdateResult(False, UpdateReason.HOLDOFF)
        r = peak.cell_size * peak.cell_size / 12.0 + p.peak_var_to_m2 * peak.var
        z_, R_, stale = self._align(np.array([peak.x, peak.y]), r * np.eye(2), t)
        if stale:
            return UpdateResult(False, UpdateReason.STALE)
        accepted, nis = self._kalman_update(z_, R_)
        return UpdateResult(
            accepted, UpdateReason.ACCEPTED if accepted else UpdateReason.GATED, nis
        )

    def _initialise(self, z: FloatArray, R: FloatArray, t: float) -> None:
        self._x = np.array([z[0], z[1], 0.0, 0.0])
        P = np.zeros((4, 4))
        P[:2, :2] = 0.5 * (R + R.T)
        P[2, 2] = P[3, 3] = self.params.init_velocity_var
        self._P = P
        self._t = t
        self._initialised = True
        self._updates += 1
        self._gated_in_row = 0
        self._last_detection_t = t

    def _align(self, z: FloatArray, R: FloatArray, t: float) -> tuple[FloatArray, FloatArray, bool]:
        """Bring a measurement captured at ``t`` to the state's time (predicting the state)."""
        if t >= self._t:
            self.predict_to(t)
            return z, R, False
        lag = self._t - t
        if lag > self.params.max_measurement_lag:
            return z, R, True
        q = self.params.accel_psd
        z_now = z + lag * self._x[2:]
        R_now = R + (lag * lag) * self._P[2:, 2:] + (q * lag**3 / 3.0) * np.eye(2)
        return z_now, R_now, False

    def _kalman_update(self, z: FloatArray, R: FloatArray) -> tuple[bool, float]:
        P = self._P
        y = z - self._x[:2]
        S = P[:2, :2] + R
        det = S[0, 0] * S[1, 1] - S[0, 1] * S[1, 0]
        if not det > 0.0:
            return False, math.inf
        S_inv = np.array([[S[1, 1], -S[0, 1]], [-S[1, 0], S[0, 0]]]) / det
        nis = float(y @ S_inv @ y)
        if not nis <= self.params.gate:
            return False, nis
        K = P[:, :2] @ S_inv
        self._x = self._x + K @ y
        # Joseph form: (I - K H) P (I - K H)ᵀ + K R Kᵀ, symmetric and PSD in floating point.
        A = np.eye(4)
        A[:, :2] -= K
        P_new = A @ P @ A.T + K @ R @ K.T
        self._P = 0.5 * (P_new + P_new.T)
        self._updates += 1
        return True, nis

    # ------------------------------------------------------------------ peers
    def fuse_peer(
        self,
        x_peer: npt.ArrayLike,
        P_peer: npt.ArrayLike,
        t_peer: float,
        now: float,
        *,
        inflation: float = 1.0,
        rule: FusionRule = FusionRule.CI,
    ) -> PeerFusion:
        """Predict a peer's track from ``t_peer`` to now, then fuse it.

        By matrix CI (the default), or under the named alternatives kept for
        comparison: ``NAIVE`` (information sum, as if the estimates were
        independent) and ``MAX_CONFIDENCE`` (keep the one with the smaller trace).
        ``P_peer`` is first multiplied by ``inflation`` (reputation). The own state is
        predicted to ``max(now, own time)`` as well. Without an own track, the
        predicted peer track is adopted (a late joiner starts from its peers).
        """
        if not (math.isfinite(inflation) and inflation >= 1.0):
            raise ValueError(f"inflation must be finite and >= 1, got {inflation}")
        if not (
            np.all(np.isfinite(x_peer))
            and np.all(np.isfinite(P_peer))
            and math.isfinite(t_peer)
            and math.isfinite(now)
        ):
            raise ValueError("peer track and times must be finite")
        t_fuse = now if not self._initialised else max(now, self._t)
        Pp_in = np.asarray(P_peer, dtype=np.float64) * inflation
        xp, Pp = cv_predict(x_peer, Pp_in, t_fuse - t_peer, self.params.accel_psd)
        if not self._initialised:
            self._x, self._P, self._t = xp, Pp, t_fuse
            self._initialised = True
            return PeerFusion(w=0.0, adopted=True)
        self.predict_to(t_fuse)
        if rule is FusionRule.CI:
            fused = ci_matrix(self._x, self._P, xp, Pp, self.params.ci_criterion)
        elif rule is FusionRule.NAIVE:
            fused = naive_matrix(self._x, self._P, xp, Pp)
        elif np.trace(Pp) < np.trace(self._P):  # MAX_CONFIDENCE: the peer's is tighter
            fused = MatrixFusion(xp, Pp, 0.0)
        else:
            fused = MatrixFusion(self._x, self._P, 1.0)
        self._x, self._P = fused.x, fused.P
        return PeerFusion(w=fused.w, adopted=False)
