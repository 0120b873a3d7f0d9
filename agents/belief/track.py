"""The target's track: an IMM of constant velocity and coordinated turn on ``[x, y, vx, vy, ω]``.

The estimator (Bar-Shalom, Li, Kirubarajan 2001, §11.6.6 and §11.7):

- **Modes**: :class:`~agents.belief.models.ConstantVelocity` and
  :class:`~agents.belief.models.CoordinatedTurn` (turn rate as a state, EKF),
  switching as a continuous-time Markov chain with mean sojourn times
  ``params.sojourn``; their process noises come from the target's declared
  ``max_accel`` (:class:`~agents.belief.params.TrackParams`). What is published
  (``state``, ``covariance``: the wire TRACK's ``[x, y, vx, vy]``) is the
  moment-matched combination of the modes.
- **Constraints**: every mode's prediction is kept inside the room and out of
  known obstacles (the target's centre, :class:`~agents.belief.constraints.FreeSpace`)
  and under ``max_speed``; what a constraint moves is added to the covariance
  (:func:`~agents.belief.constraints.constrain`), so a lost track widens in
  place instead of flying off.
- **Exact late detections**: the filter keeps the posterior of its newest
  update, and the estimate at any later time is a prediction *from that
  posterior* (``predict_to`` only moves the time the estimate is shown at). A
  detection captured after the newest update is applied at its capture time,
  exactly. One captured before it (a peer track was fused meanwhile, or
  detections crossed) rewinds: the filter keeps the posterior before every
  update of the last ``max_measurement_lag`` seconds, applies the late
  detection at its own time and re-applies the later updates in order (with
  the verdicts they had). Older ones are refused as ``stale``.
- **The robot's own pose error is a consider term**: a detection's covariance
  is ``C + R`` with ``C = J P_pose Jᵀ`` the part due to the robot's pose
  error, which is the same error for detections close in time. The filter
  does not estimate it (Schmidt–Kalman): it keeps each mode's cross-covariance
  ``S = Cov(state error, b)`` with the pose-induced offset ``b``, decays it
  with the pose error's correlation time between detections, and uses it in
  the gain and the covariance update, so repeated detections through the
  same pose error are not averaged as if independent.
- **Gating**: the normalised innovation squared of the combined prediction
  against χ²(2); after ``max_consecutive_gated`` gated detections in a row the
  filter re-initialises on the newest one.
- **Peers**: a received 4-state track is predicted to now with the CV model
  of ``accel_psd`` (the wire carries no mode) under the same constraints, then
  fused into each mode by covariance intersection on the kinematic part; the
  turn rate and the cross-covariances follow by linear regression on it.

Why one module of ~600 lines: it is one estimator. The rewind of a late detection,
the consider term, the limits and peer fusion all act on the same kept posteriors
(:class:`_Posterior`, :class:`_Step`); the models, the IMM maths and the limits are
their own modules, and so are the results its updates return
(:mod:`agents.belief.track_results`, named from here too).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from agents.belief.constraints import FreeSpace, constrain
from agents.belief.fusion import FusionRule, ci_matrix, naive_matrix
from agents.belief.imm import (
    gaussian_likelihood,
    mix,
    moment_match,
    posterior_mode_probabilities,
    switching_matrix,
)
from agents.belief.models import (
    KINEMATIC,
    STATE_DIM,
    ConstantVelocity,
    CoordinatedTurn,
    MotionModel,
    cv_predict,
    cv_process_noise,
    cv_transition,
)
from agents.belief.params import TrackParams
from agents.belief.track_results import PeerFusion, UpdateReason, UpdateResult

FloatArray = npt.NDArray[np.float64]

H = np.hstack([np.eye(2), np.zeros((2, STATE_DIM - 2))])
H.flags.writeable = False
_EYE4 = np.eye(4)
_EYE4.flags.writeable = False
_EYE5 = np.eye(STATE_DIM)
_EYE5.flags.writeable = False


def position_spread(P: npt.ArrayLike) -> FloatArray:
    """m: the position's standard deviation along its most uncertain direction, for one
    covariance of a ``[x, y, ...]`` state or a stack of them (the leading axes kept)."""
    P_ = np.asarray(P, dtype=np.float64)
    a, b, d = P_[..., 0, 0], 0.5 * (P_[..., 0, 1] + P_[..., 1, 0]), P_[..., 1, 1]
    return np.sqrt(np.maximum(0.0, 0.5 * (a + d) + np.sqrt(0.25 * (a - d) ** 2 + b * b)))


def _valid_covariance(R: FloatArray) -> bool:
    """Finite, symmetric (to rounding) and positive semi-definite 2×2 (definite unless zero)."""
    (a, b), (c, d) = R.tolist()
    if not all(math.isfinite(v) for v in (a, b, c, d)):
        return False
    return abs(b - c) <= 1e-9 * (abs(a) + abs(d)) and a > 0.0 and a * d - b * c > 0.0


def _psd2(C: FloatArray) -> bool:
    (a, b), (c, d) = C.tolist()
    return (all(math.isfinite(v) for v in (a, b, c, d)) and abs(b - c) <= 1e-9 * (abs(a) + abs(d))
            and a >= 0.0 and d >= 0.0 and a * d - b * c >= -1e-18)


def _inv2(S: FloatArray) -> FloatArray | None:
    (a, b), (c, d) = S.tolist()  # Python floats: the same IEEE operations, less overhead
    det = a * d - b * c
    if not (det > 0.0 and a > 0.0):
        return None
    return np.array([[d, -b], [-c, a]]) / det


@dataclass
class _Posterior:
    """Every mode's estimate at time ``t``, with the cross-covariances of the consider term."""

    t: float
    xs: list[FloatArray]
    Ps: list[FloatArray]
    Ss: list[FloatArray]  # STATE_DIM × 2: Cov(state error, pose-induced detection offset)
    mu: FloatArray

    def copy(self) -> _Posterior:
        return _Posterior(self.t, [x.copy() for x in self.xs], [P.copy() for P in self.Ps],
                          [S.copy() for S in self.Ss], self.mu.copy())

    def combined(self) -> tuple[FloatArray, FloatArray]:
        return moment_match(self.mu, self.xs, self.Ps)


@dataclass
class _Step:
    """An update kept for re-processing: a detection or a fused peer track, and the posterior
    before it."""

    t: float
    kind: str  # "detection" or "peer"
    before: _Posterior
    z: FloatArray = field(default_factory=lambda: np.zeros(2))
    R: FloatArray = field(default_factory=lambda: np.zeros((2, 2)))
    C: FloatArray = field(default_factory=lambda: np.zeros((2, 2)))
    rule: FusionRule = FusionRule.CI
    x_peer: FloatArray = field(default_factory=lambda: np.zeros(4))
    P_peer: FloatArray = field(default_factory=lambda: np.zeros((4, 4)))


class TrackFilter:
    """The IMM track with gating, exact late detections, constraints and peer CI (module doc)."""

    def __init__(self, params: TrackParams | None = None, space: FreeSpace | None = None) -> None:
        self.params = params if params is not None else TrackParams()
        self.space = space
        p = self.params
        self.models: tuple[MotionModel, ...] = (
            ConstantVelocity(p.q_cv, p.turn_rate_psd),
            CoordinatedTurn(p.q_ct, p.turn_rate_psd),
        )
        self.reset()

    def reset(self) -> None:
        """Forget the track (the next detection or peer track initialises it again)."""
        self._post: _Posterior | None = None
        self._steps: list[_Step] = []
        self._view_t = math.nan
        self._view: tuple[FloatArray, FloatArray, FloatArray] | None = None
        self._memo: tuple[_Posterior, float, _Posterior] | None = None
        self._updates = 0
        self._gated_in_row = 0
        self._reinits = 0

    # ----------------------------------------------------------------- state
    @property
    def initialised(self) -> bool:
        return self._post is not None

    @property
    def time(self) -> float:
        """Time the shown estimate refers to (NaN before initialisation)."""
        return self._view_t

    @property
    def posterior_time(self) -> float:
        """Time of the newest update (NaN before initialisation)."""
        return math.nan if self._post is None else self._post.t

    def _shown(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        if self._view is None:
            if self._post is None:
                self._view = (np.zeros(4), np.eye(4), np.zeros(len(self.models)))
            else:
                prior = self._predicted(self._post, self._view_t)
                x, P = prior.combined()
                self._view = (x[KINEMATIC].copy(), P[KINEMATIC, KINEMATIC].copy(), prior.mu)
        return self._view

    @property
    def state(self) -> FloatArray:
        """``[x, y, vx, vy]`` at :attr:`time` (the IMM's moment-matched estimate)."""
        return self._shown()[0].copy()

    @property
    def covariance(self) -> FloatArray:
        return self._shown()[1].copy()

    @property
    def mode_probabilities(self) -> FloatArray:
        """Probability of each mode (constant velocity, coordinated turn) at :attr:`time`."""
        return self._shown()[2].copy()

    @property
    def turn_rate(self) -> float:
        """The combined estimate's turn rate ω, rad/s, at :attr:`time` (NaN without a track)."""
        if self._post is None:
            return math.nan
        x, _ = self._predicted(self._post, self._view_t).combined()
        return float(x[4])

    @property
    def position(self) -> FloatArray:
        return self._shown()[0][:2].copy()

    @property
    def velocity(self) -> FloatArray:
        return self._shown()[0][2:].copy()

    @property
    def speed(self) -> float:
        x = self._shown()[0]
        return math.hypot(x[2], x[3])

    @property
    def position_spread(self) -> float:
        """m: the standard deviation of the position along its most uncertain direction."""
        return float(position_spread(self._shown()[1]))

    @property
    def uncertainty(self) -> float:
        """trace(P) / 4 of the published 4-state (the figure the seed plots)."""
        return float(np.trace(self._shown()[1])) / 4.0

    @property
    def update_count(self) -> int:
        """Own measurements incorporated (initialisations included)."""
        return self._updates

    @property
    def reinit_count(self) -> int:
        return self._reinits

    @property
    def consecutive_gated(self) -> int:
        return self._gated_in_row

    def state_at(self, t: float) -> tuple[FloatArray, FloatArray]:
        """``(x, P)`` of the published 4-state predicted to ``t`` (the posterior itself for a
        ``t`` at or before the newest update), without changing the filter."""
        if self._post is None:
            raise ValueError("no track")
        x, P = self._predicted(self._post, t).combined()
        return x[KINEMATIC].copy(), P[KINEMATIC, KINEMATIC].copy()

    def copy(self) -> TrackFilter:
        """An independent filter in the same state."""
        other = TrackFilter(self.params, self.space)
        other._post = None if self._post is None else self._post.copy()
        other._steps = [
            _Step(s.t, s.kind, s.before.copy(), s.z.copy(), s.R.copy(), s.C.copy(), s.rule,
                  s.x_peer.copy(), s.P_peer.copy())
            for s in self._steps
        ]
        other._view_t = self._view_t
        other._updates, other._gated_in_row, other._reinits = (
            self._updates, self._gated_in_row, self._reinits)
        return other

    # --------------------------------------------------------------- predict
    def predict_to(self, t: float) -> None:
        """Show the estimate at ``t`` from now on; a time at or before the shown one is a no-op.

        The posterior is not changed: a prediction is always made from the newest update.
        """
        if self._post is None or not t > self._view_t:
            return
        self._view_t = t
        self._view = None

    def _predicted(self, post: _Posterior, t: float) -> _Posterior:
        """The IMM prediction of ``post`` to ``t`` (mixing, mode-matched prediction, limits).

        The last one is kept: a peer's TRACK is checked against the prediction to the time
        it is then fused at (posteriors are never changed in place, so ``is`` identifies one).
        """
        dt = t - post.t
        if not dt > 0.0:
            return post
        memo = self._memo
        if memo is not None and memo[0] is post and memo[1] == t:
            return memo[2]
        p = self.params
        cbar, x0, P0, M = mix(post.mu, switching_matrix(dt, p.sojourn), post.xs, post.Ps)
        decay = math.exp(-dt / p.pose_error_time)
        xs, Ps, Ss = [], [], []
        for j, model in enumerate(self.models):
            S0 = np.zeros((STATE_DIM, 2))  # Σ_i M[i, j] S_i, summed in this order
            for i in range(len(self.models)):
                S0 = S0 + M[i, j] * post.Ss[i]
            fx, F = model.transition(x0[j], dt)
            Pj = F @ P0[j] @ F.T + model.noise(dt)
            xj, Pj, _ = constrain(fx, 0.5 * (Pj + Pj.T), self.space, p.max_speed)
            xs.append(xj)
            Ps.append(Pj)
            Ss.append(decay * (F @ S0))
        prior = _Posterior(t, xs, Ps, Ss, cbar)
        self._memo = (post, t, prior)
        return prior

    # ---------------------------------------------------------------- update
    def update_position(
        self, z: npt.ArrayLike, R: npt.ArrayLike, t: float, *, consider: npt.ArrayLike | None = None
    ) -> UpdateResult:
        """A position detection ``z`` (m) with covariance ``R`` (2×2, m²) captured at ``t``.

        ``consider`` (2×2, m²): the part of ``R`` due to the robot's own pose error (a consider
        term; the rest of R is the sensor's own, independent noise). The first detection
        initialises the track; see the module docstring for late ones. A gated detection
        that triggers re-initialisation returns ``accepted=True``, reason ``reinitialised``.
        """
        z_ = np.asarray(z, dtype=np.float64).reshape(2)
        R_ = np.asarray(R, dtype=np.float64).reshape(2, 2)
        if not (_valid_covariance(R_) and math.isfinite(z_[0]) and math.isfinite(z_[1])):
            return UpdateResult(False, UpdateReason.INVALID)
        if not math.isfinite(t):
            return UpdateResult(False, UpdateReason.INVALID)
        C_ = np.zeros((2, 2)) if consider is None else np.asarray(consider, np.float64)
        C_ = 0.5 * (C_.reshape(2, 2) + C_.reshape(2, 2).T)
        if not (_psd2(C_) and _valid_covariance(R_ - C_)):
            C_ = np.zeros((2, 2))  # no usable split: all of R as independent noise
        R_s = R_ - C_
        if self._post is None:
            self._initialise(z_, R_, t)
            return UpdateResult(True, UpdateReason.INITIALISED)
        step = _Step(t, "detection", self._post, z=z_, R=R_s, C=C_)
        if t >= self._post.t:
            prior = self._predicted(self._post, t)
            accepted, nis = self._gate(prior, z_, R_s, C_)
            if accepted:
                self._post = self._update(prior, z_, R_s, C_)
                self._steps.append(step)
        else:
            # Rewind to the posterior before the first kept update newer than t.
            k = bisect.bisect_right([s.t for s in self._steps], t)
            base = self._steps[k].before if k < len(self._steps) else self._post
            if base.t > t:
                return UpdateResult(False, UpdateReason.STALE)
            prior = self._predicted(base, t)
            accepted, nis = self._gate(prior, z_, R_s, C_)
            if accepted:
                step.before = base
                post = self._update(prior, z_, R_s, C_)
                later = self._steps[k:]
                self._steps = [*self._steps[:k], step]
                for s in later:
                    s.before = post
                    post = self._apply(post, s)
                    self._steps.append(s)
                self._post = post
        if accepted:
            self._updates += 1
            self._gated_in_row = 0
            self._after_change(t)
            return UpdateResult(True, UpdateReason.ACCEPTED, nis)
        self._gated_in_row += 1
        if self._gated_in_row >= self.params.max_consecutive_gated:
            self._initialise(z_, R_, t)
            self._reinits += 1
            return UpdateResult(True, UpdateReason.REINITIALISED, nis)
        return UpdateResult(False, UpdateReason.GATED, nis)

    def _after_change(self, t: float) -> None:
        """Drop kept steps older than the lag window; the shown estimate is recomputed."""
        assert self._post is not None
        horizon = self._post.t - self.params.max_measurement_lag
        while self._steps and self._steps[0].t < horizon:
            self._steps.pop(0)
        self._view_t = t if math.isnan(self._view_t) else max(self._view_t, t, self._post.t)
        self._view = None

    def _initialise(self, z: FloatArray, R: FloatArray, t: float) -> None:
        p = self.params
        x = np.array([z[0], z[1], 0.0, 0.0, 0.0])
        P = np.zeros((STATE_DIM, STATE_DIM))
        P[:2, :2] = 0.5 * (R + R.T)
        P[2, 2] = P[3, 3] = min(p.init_velocity_var, p.max_speed**2)
        P[4, 4] = p.init_turn_rate_var
        self._start(x, P, t)
        self._updates += 1

    def _start(self, x: FloatArray, P: FloatArray, t: float) -> None:
        n = len(self.models)
        self._post = _Posterior(t, [x.copy() for _ in range(n)], [P.copy() for _ in range(n)],
                                [np.zeros((STATE_DIM, 2)) for _ in range(n)],
                                np.array(self.params.initial_modes, dtype=np.float64))
        self._steps = []
        self._gated_in_row = 0
        self._view_t = t if math.isnan(self._view_t) else max(self._view_t, t)
        self._view = None

    def _innovation(self, prior: _Posterior, j: int, z: FloatArray, R_s: FloatArray,
                    C: FloatArray) -> tuple[FloatArray, FloatArray]:
        S = prior.Ss[j]
        P = prior.Ps[j]
        nu = z - prior.xs[j][:2]
        Sx = P[:2, :2] + S[:2, :] + S[:2, :].T + C + R_s
        return nu, 0.5 * (Sx + Sx.T)

    def _gate(self, prior: _Posterior, z: FloatArray, R_s: FloatArray,
              C: FloatArray) -> tuple[bool, float]:
        """NIS of the combined prediction against the gate."""
        x, P = prior.combined()
        S = np.zeros((STATE_DIM, 2))  # Σ μ_j S_j, summed in this order
        for m, s in zip(prior.mu, prior.Ss, strict=True):
            S = S + m * s
        nu = z - x[:2]
        Sx = P[:2, :2] + S[:2, :] + S[:2, :].T + C + R_s
        inv = _inv2(0.5 * (Sx + Sx.T))
        if inv is None:
            return False, math.inf
        nis = float(nu @ inv @ nu)
        return nis <= self.params.gate, nis

    def _update(self, prior: _Posterior, z: FloatArray, R_s: FloatArray,
                C: FloatArray) -> _Posterior:
        """Every mode's Schmidt–Kalman update (Joseph form) and the mode probabilities."""
        xs, Ps, Ss, lik = [], [], [], []
        eye = _EYE5
        for j in range(len(self.models)):
            S_xb = self._consistent_cross(prior.Ps[j], prior.Ss[j], C)
            P = prior.Ps[j]
            nu = z - prior.xs[j][:2]
            Sx = P[:2, :2] + S_xb[:2, :] + S_xb[:2, :].T + C + R_s
            Sx = 0.5 * (Sx + Sx.T)
            inv = _inv2(Sx)
            if inv is None:
                xs.append(prior.xs[j].copy())
                Ps.append(P.copy())
                Ss.append(S_xb.copy())
                lik.append(0.0)
                continue
            K = (P[:, :2] + S_xb) @ inv
            A = eye - K @ H
            AS = A @ S_xb @ K.T
            P_new = A @ P @ A.T - AS - AS.T + K @ (C + R_s) @ K.T
            xs.append(prior.xs[j] + K @ nu)
            Ps.append(0.5 * (P_new + P_new.T))
            Ss.append(S_xb - K @ (S_xb[:2, :] + C))
            lik.append(gaussian_likelihood(nu, Sx))
        mu = posterior_mode_probabilities(prior.mu, lik, self.params.mode_floor)
        return _Posterior(prior.t, xs, Ps, Ss, mu)

    @staticmethod
    def _consistent_cross(P: FloatArray, S: FloatArray, C: FloatArray) -> FloatArray:
        """``S`` shrunk, if needed, so that ``[[P, S], [Sᵀ, C]]`` is positive semi-definite.

        The decayed cross-covariance of the previous detection's offset can exceed what the
        new one's (smaller) variance ``C`` allows; then ``α S`` with the largest α that fits.
        """
        if not np.any(S):
            return S
        try:
            M = S.T @ np.linalg.solve(P, S)
        except np.linalg.LinAlgError:
            return np.zeros_like(S)
        # Largest generalised eigenvalue of (M, C): the factor by which Sᵀ P⁻¹ S exceeds C.
        Cinv = _inv2(C)
        if Cinv is None:
            return np.zeros_like(S)
        lam = float(np.max(np.linalg.eigvals(Cinv @ M).real))
        if lam <= 0.99:
            return S
        return S * math.sqrt(0.99 / lam)

    def _apply(self, post: _Posterior, step: _Step) -> _Posterior:
        """Re-apply a kept update after a late detection was inserted before it."""
        prior = self._predicted(post, step.t)
        if step.kind == "detection":
            return self._update(prior, step.z, step.R, step.C)
        return self._fuse(prior, step.x_peer, step.P_peer, step.rule)[0]

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
        """Predict a peer's ``[x, y, vx, vy]`` track from ``t_peer`` to now, then fuse it.

        By matrix CI (the default), or under the named alternatives kept for comparison:
        ``NAIVE`` (information sum, as if the estimates were independent) and
        ``MAX_CONFIDENCE`` (keep the one with the smaller trace). ``P_peer`` is first
        multiplied by ``inflation`` (reputation). The fusion is an update at
        ``max(now, newest update)``; without an own track, the predicted peer track is
        adopted (a late joiner starts from its peers).
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
        t_fuse = now if self._post is None else max(now, self._post.t)
        xp, Pp = self.predict_peer(x_peer, np.asarray(P_peer, np.float64) * inflation,
                                   t_fuse - t_peer)
        if self._post is None:
            x = np.zeros(STATE_DIM)
            x[KINEMATIC] = xp
            P = np.zeros((STATE_DIM, STATE_DIM))
            P[KINEMATIC, KINEMATIC] = Pp
            P[4, 4] = self.params.init_turn_rate_var
            self._start(x, P, t_fuse)
            return PeerFusion(w=0.0, adopted=True)
        step = _Step(t_fuse, "peer", self._post, rule=rule, x_peer=xp, P_peer=Pp)
        prior = self._predicted(self._post, t_fuse)
        self._post, w = self._fuse(prior, xp, Pp, rule)
        self._steps.append(step)
        self._after_change(t_fuse)
        return PeerFusion(w=w, adopted=False)

    def predict_peer(
        self, x: npt.ArrayLike, P: npt.ArrayLike, dt: float
    ) -> tuple[FloatArray, FloatArray]:
        """A received 4-state predicted by ``dt`` (CV with ``accel_psd``, then the limits)."""
        xp, Pp = cv_predict(x, P, dt, self.params.accel_psd)
        xp, Pp, _ = constrain(xp, Pp, self.space, self.params.max_speed)
        return xp, Pp

    def _fuse(self, prior: _Posterior, xp: FloatArray, Pp: FloatArray,
              rule: FusionRule) -> tuple[_Posterior, float]:
        """Fuse a 4-state into every mode's kinematic part; ω and S follow by regression."""
        xs, Ps, Ss = [], [], []
        ws = []
        for j in range(len(self.models)):
            x5, P5, S5 = prior.xs[j], prior.Ps[j], prior.Ss[j]
            xa, Pa = x5[KINEMATIC], P5[KINEMATIC, KINEMATIC]
            # Pa⁻¹ is inverted once per mode, after the fusion rule (which may refuse Pa first).
            if rule is FusionRule.CI:
                fused = ci_matrix(xa, Pa, xp, Pp, self.params.ci_criterion)
                xf, Pf, w = fused.x, fused.P, fused.w
                Pa_inv = np.linalg.inv(Pa)
                Wa = w * Pf @ Pa_inv
            elif rule is FusionRule.NAIVE:
                fused = naive_matrix(xa, Pa, xp, Pp)
                xf, Pf, w = fused.x, fused.P, 1.0
                Pa_inv = np.linalg.inv(Pa)
                Wa = Pf @ Pa_inv
            elif np.trace(Pp) < np.trace(Pa):  # MAX_CONFIDENCE: the peer's is tighter
                xf, Pf, w, Wa = xp.copy(), Pp.copy(), 0.0, np.zeros((4, 4))
                Pa_inv = np.linalg.inv(Pa)
            else:
                xf, Pf, w, Wa = xa.copy(), Pa.copy(), 1.0, np.eye(4)
                Pa_inv = np.linalg.inv(Pa)
            L = P5[:, KINEMATIC] @ Pa_inv  # regression of the state on its kinematics
            x_new = x5 + L @ (xf - xa)
            P_new = P5 + L @ (Pf - Pa) @ L.T
            S_new = S5 - L @ (_EYE4 - Wa) @ S5[KINEMATIC, :]
            xs.append(x_new)
            Ps.append(0.5 * (P_new + P_new.T))
            Ss.append(S_new)
            ws.append(w)
        mu = prior.mu.copy()
        w_out = float(sum(m * w for m, w in zip(mu, ws, strict=True)))
        return _Posterior(prior.t, xs, Ps, Ss, mu), w_out


__all__ = [
    "PeerFusion",
    "TrackFilter",
    "UpdateReason",
    "UpdateResult",
    "cv_predict",
    "cv_process_noise",
    "cv_transition",
]
