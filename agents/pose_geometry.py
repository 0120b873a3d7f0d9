"""The pose filter's geometry: the motion step, a landmark's range and bearing, a sighted
point's world position (and the detection it makes), and the pose that explains
simultaneous tag sightings.

Pure functions of numbers; :func:`solve_pose_from_tags` refuses rather than
guesses and says why (``too_few_tags``, ``residual_gate``, ``ambiguous``,
``degenerate``, ``too_uncertain``). :mod:`agents.localization` uses them all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import chdtri

from agents.checks import require
from agents.observations import Detection, TagSighting

FloatArray = npt.NDArray[np.float64]

# Reasons the solver gives (the localizer counts them with its own).
OK = ""
DEGENERATE = "degenerate"
TOO_FEW_TAGS = "too_few_tags"
RESIDUAL_GATE = "residual_gate"
AMBIGUOUS = "ambiguous"
TOO_UNCERTAIN = "too_uncertain"

def wrap_angle(a: float) -> float:
    """``a`` wrapped to (-pi, pi]."""
    w = math.remainder(a, math.tau)
    return math.pi if w == -math.pi else w


@dataclass(frozen=True, eq=False)
class PoseSolution:
    """Outcome of solving a pose from tag sightings alone; ``reason`` is "" on success."""

    ok: bool
    reason: str
    pose: FloatArray | None = None
    cov: FloatArray | None = None
    chi2: float | None = None
    dof: int = 0


def motion_step(
    state: FloatArray, v: float, omega: float, dt: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """One midpoint step: (new state, F = ∂f/∂state, G = ∂f/∂(v, omega))."""
    th = float(state[2])
    thm = th + 0.5 * omega * dt
    c, s = math.cos(thm), math.sin(thm)
    new = np.array(
        [state[0] + v * dt * c, state[1] + v * dt * s, wrap_angle(th + omega * dt)]
    )
    F = np.array([[1.0, 0.0, -v * dt * s], [0.0, 1.0, v * dt * c], [0.0, 0.0, 1.0]])
    G = np.array(
        [
            [dt * c, -0.5 * v * dt * dt * s],
            [dt * s, 0.5 * v * dt * dt * c],
            [0.0, dt],
        ]
    )
    return new, F, G


def compose(
    state: FloatArray, offset: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``state ⊕ offset`` (a pose given in ``state``'s own frame), ∂/∂state and ∂/∂offset."""
    th = float(state[2])
    c, s = math.cos(th), math.sin(th)
    dx, dy = float(offset[0]), float(offset[1])
    pose = np.array(
        [state[0] + c * dx - s * dy, state[1] + s * dx + c * dy, wrap_angle(th + offset[2])]
    )
    J_state = np.array([[1.0, 0.0, -s * dx - c * dy], [0.0, 1.0, c * dx - s * dy],
                        [0.0, 0.0, 1.0]])
    J_offset = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    return pose, J_state, J_offset


def relative(origin: FloatArray, pose: FloatArray) -> FloatArray:
    """``pose`` in ``origin``'s own frame (origin⁻¹ ⊕ pose): ``compose(origin, ·)`` undone."""
    th = float(origin[2])
    c, s = math.cos(th), math.sin(th)
    dx, dy = float(pose[0]) - float(origin[0]), float(pose[1]) - float(origin[1])
    return np.array([c * dx + s * dy, -s * dx + c * dy, wrap_angle(float(pose[2]) - th)])


def range_bearing(
    state: FloatArray, landmark: tuple[float, float], camera_forward: float = 0.0
) -> tuple[FloatArray, FloatArray]:
    """Predicted (range, bearing) of ``landmark`` from ``state`` and its 2x3 Jacobian.

    Raises ``ValueError`` when the landmark sits on the camera (range ≈ 0).
    """
    th = float(state[2])
    ct, st = math.cos(th), math.sin(th)
    a = camera_forward
    dx = landmark[0] - (state[0] + a * ct)
    dy = landmark[1] - (state[1] + a * st)
    q = dx * dx + dy * dy
    require(q > 1e-12, "landmark coincides with the camera")
    r = math.sqrt(q)
    z = np.array([r, wrap_angle(math.atan2(dy, dx) - th)])
    H = np.array(
        [
            [-dx / r, -dy / r, a * (dx * st - dy * ct) / r],
            [dy / q, -dx / q, -a * (dx * ct + dy * st) / q - 1.0],
        ]
    )
    return z, H


def target_position(
    state: FloatArray, sighting: TagSighting, camera_forward: float = 0.0
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """World position of a sighted point, J = ∂p/∂state (2x3) and G = ∂p/∂(range, bearing)."""
    th = float(state[2])
    ct, st = math.cos(th), math.sin(th)
    phi = th + sighting.bearing
    cp, sp = math.cos(phi), math.sin(phi)
    r, a = sighting.range, camera_forward
    p = np.array([state[0] + a * ct + r * cp, state[1] + a * st + r * sp])
    J = np.array([[1.0, 0.0, -a * st - r * sp], [0.0, 1.0, a * ct + r * cp]])
    G = np.array([[cp, -r * sp], [sp, r * cp]])
    return p, J, G


def sighting_detection(state: FloatArray, P: FloatArray, sighting: TagSighting, t: float,
                       camera_forward: float = 0.0) -> Detection:
    """The target a sighting places from a pose (x, y, θ) with covariance ``P``, seen at
    ``t``: covariance J P Jᵀ (the pose's part, kept as ``pose_cov``) + G N Gᵀ (the
    sighting's own noise N)."""
    p, J, G = target_position(state, sighting, camera_forward)
    pose_cov = J @ P @ J.T
    cov = pose_cov + G @ sighting.noise_cov @ G.T
    return Detection(float(p[0]), float(p[1]), 0.5 * (cov + cov.T), t,
                     0.5 * (pose_cov + pose_cov.T))


def _circle_candidates(
    la: tuple[float, float], ra: float, lb: tuple[float, float], rb: float
) -> list[tuple[float, float]]:
    """Intersections of two circles; the closest point when they do not meet."""
    ex, ey = lb[0] - la[0], lb[1] - la[1]
    d = math.hypot(ex, ey)
    if d < 1e-9:
        return []
    ex, ey = ex / d, ey / d
    along = (ra * ra - rb * rb + d * d) / (2.0 * d)
    h2 = ra * ra - along * along
    bx, by = la[0] + along * ex, la[1] + along * ey
    if h2 <= 0.0:
        return [(bx, by)]
    h = math.sqrt(h2)
    return [(bx - h * ey, by + h * ex), (bx + h * ey, by - h * ex)]


def _residuals(
    state: FloatArray,
    observations: Sequence[tuple[tuple[float, float], TagSighting]],
    camera_forward: float,
    offsets: Sequence[Offset] | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Whitened residuals (measured - predicted) and whitened Jacobian of the predictions.

    With ``offsets``, sighting k was taken from ``state ⊕ offsets[k].pose``; the offset's
    covariance joins the sensor noise before whitening.
    """
    res = np.empty(2 * len(observations))
    jac = np.empty((2 * len(observations), 3))
    for k, (lm, s) in enumerate(observations):
        if offsets is None:
            z, H = range_bearing(state, lm, camera_forward)
            res[2 * k] = (s.range - z[0]) / s.sigma_range
            res[2 * k + 1] = wrap_angle(s.bearing - z[1]) / s.sigma_bearing
            jac[2 * k] = H[0] / s.sigma_range
            jac[2 * k + 1] = H[1] / s.sigma_bearing
            continue
        pose, J_state, J_offset = compose(state, offsets[k].pose)
        z, H = range_bearing(pose, lm, camera_forward)
        H_offset = H @ J_offset
        S = s.noise_cov + H_offset @ offsets[k].cov @ H_offset.T
        W = np.linalg.inv(np.linalg.cholesky(S))
        nu = np.array([s.range - z[0], wrap_angle(s.bearing - z[1])])
        res[2 * k : 2 * k + 2] = W @ nu
        jac[2 * k : 2 * k + 2] = W @ H @ J_state
    return res, jac


@dataclass(frozen=True, eq=False)
class Offset:
    """Where a sighting was taken from, in the frame of the pose being solved for: a pose
    (x, y, theta) and its 3x3 covariance (the dead reckoning between the two)."""

    pose: FloatArray
    cov: FloatArray


def solve_pose_from_tags(
    observations: Sequence[tuple[tuple[float, float], TagSighting]],
    camera_forward: float = 0.0,
    quantile: float = 0.99,
    max_position_trace: float = 0.02,
    max_iterations: int = 20,
    *,
    offsets: Sequence[Offset] | None = None,
) -> PoseSolution:
    """The pose that explains simultaneous sightings of mapped tags, or a refusal.

    Every pair of sightings gives candidate camera positions (circle
    intersections; the mirror solution is kept as a candidate), each with the
    heading its bearings imply. Every candidate is refined by Gauss-Newton on
    all sightings. Solutions whose whitened residual sum passes the
    ``quantile`` of χ²(2n - 3) are kept; the answer is refused when none pass
    (``residual_gate``), when two distinct ones pass (``ambiguous``), when the
    geometry does not determine the pose (``degenerate``) or when the
    covariance ``(Jᵀ R⁻¹ J)⁻¹`` is too wide (``too_uncertain``).

    ``offsets`` (one per sighting) solve for one pose from sightings taken at others: the
    k-th from ``pose ⊕ offsets[k].pose``, known to ``offsets[k].cov`` (a robot turning
    on the spot sees one tag at a time). The candidates then take each bearing's heading
    less its offset's, and Gauss-Newton works out the rest.
    """
    require(offsets is None or len(offsets) == len(observations), "one offset per sighting")
    n = len(observations)
    if n < 2:
        return PoseSolution(False, TOO_FEW_TAGS)
    dof = 2 * n - 3
    gate = float(chdtri(dof, 1.0 - quantile))
    a = camera_forward

    starts: list[FloatArray] = []
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)][:10]
    for i, j in pairs:
        (li, si), (lj, sj) = observations[i], observations[j]
        for cx, cy in _circle_candidates(li, si.range, lj, sj.range):
            turn = (0.0, 0.0) if offsets is None else (offsets[i].pose[2], offsets[j].pose[2])
            hs = [
                math.atan2(lm[1] - cy, lm[0] - cx) - s.bearing - float(d)
                for lm, s, d in ((li, si, turn[0]), (lj, sj, turn[1]))
            ]
            th = math.atan2(sum(math.sin(h) for h in hs), sum(math.cos(h) for h in hs))
            starts.append(np.array([cx - a * math.cos(th), cy - a * math.sin(th), th]))

    solutions: list[tuple[float, FloatArray, FloatArray]] = []
    for start in starts:
        x = start
        try:
            for _ in range(max_iterations):
                res, jac = _residuals(x, observations, a, offsets)
                step = np.linalg.lstsq(jac, res, rcond=None)[0]
                x = x + step
                x[2] = wrap_angle(float(x[2]))
                if float(np.max(np.abs(step))) < 1e-9:
                    break
            res, jac = _residuals(x, observations, a, offsets)
        except ValueError:
            continue
        chi2 = float(res @ res)
        if math.isfinite(chi2) and chi2 <= gate:
            solutions.append((chi2, x, jac))
    if not solutions:
        return PoseSolution(False, RESIDUAL_GATE, dof=dof)
    solutions.sort(key=lambda item: item[0])
    chi2, best, jac = solutions[0]
    for _, other, _ in solutions[1:]:
        if (
            math.hypot(other[0] - best[0], other[1] - best[1]) > 0.05
            or abs(wrap_angle(float(other[2] - best[2]))) > 0.05
        ):
            return PoseSolution(False, AMBIGUOUS, chi2=chi2, dof=dof)
    info = jac.T @ jac
    if np.linalg.cond(info) > 1e12:
        return PoseSolution(False, DEGENERATE, chi2=chi2, dof=dof)
    cov = np.linalg.inv(info)
    cov = 0.5 * (cov + cov.T)
    if float(cov[0, 0] + cov[1, 1]) > max_position_trace:
        return PoseSolution(False, TOO_UNCERTAIN, chi2=chi2, dof=dof)
    return PoseSolution(True, OK, pose=best, cov=cov, chi2=chi2, dof=dof)
