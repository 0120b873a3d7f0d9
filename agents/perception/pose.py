"""Per-tag pose: PnP with IPPE_SQUARE, both solutions kept, ambiguity flagged.

:func:`solve_tag` runs ``cv2.solvePnPGeneric(..., flags=SOLVEPNP_IPPE_SQUARE)``
on a detection's corners (distortion-aware: the lens model is passed to
OpenCV) and keeps both solutions sorted by reprojection error. The tag is
**ambiguous** when the two rotations differ by more than 10 degrees and the
second solution's error is within 10 % of the first's, or (``ambiguity_quantile``)
small enough that the corner noise explains it: with sub-pixel errors on both
(0.10 against 0.13 px on a far square-on tag) a 10 % ratio says nothing
about which is right. The best solution must reproject within 2 px.

From a tag pose and the map, :func:`car_pose_from_tag` gives the car's planar
pose (x, y, theta) with a 3x3 covariance: the corner noise sigma
(``pixel_sigma``, raised to twice the RMS residual when the fit says the
corners are worse, and inflated for a weak decision margin) through the PnP
Jacobian (``cv2.projectPoints``) to the six pose parameters, then through the
numerical Jacobian of the map. :func:`sighting_from_corners` gives a range
and bearing in the car frame from the tag's vertical edges and the camera
mount, and :func:`refine_planar` the car pose that explains every corner of
several tags at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt
from scipy.special import chdtri

from agents.perception.detect import TagDetection
from agents.perception.tagmap import Intrinsics, Transform

FloatArray = npt.NDArray[np.float64]

PNP_FAILED = "pnp_failed"
REPROJECTION = "reprojection"
AMBIGUOUS = "ambiguous"
IMPLAUSIBLE = "implausible_pose"
DEGENERATE = "degenerate"


@dataclass(frozen=True)
class PoseParams:
    max_reprojection_px: float = 2.0
    ambiguity_ratio: float = 1.1
    """Second solution's error within this factor of the first's ..."""
    ambiguity_angle: float = math.radians(10.0)
    """... and rotations further apart than this: ambiguous."""
    ambiguity_quantile: float = 0.99
    """Also ambiguous when the second solution fits within the corner noise: its
    whitened residual passes this χ²(2) quantile (0 disables this test)."""
    pixel_sigma: float = 0.5
    """Corner noise (px, 1 sigma) assumed at least; twice the RMS residual when larger."""
    margin_full: float = 50.0
    """Decision margin at and above which a tag's covariance is not inflated."""
    max_tilt: float = math.radians(15.0)
    """A tag pose that implies a car tilted more than this is implausible."""
    max_floor_offset: float = 0.1
    """Another robot seen through its tag must sit within this (m) of the floor.
    (Not applied to wall tags: a far tag's noisy tilt moves the implied car up
    or down by distance x tilt; the joint planar fit then holds it to the floor.)"""
    range_floor: float = 0.01
    range_floor_frac: float = 0.01
    bearing_floor: float = 0.004
    """Floors (m, fraction of range, rad) under the sighting sigmas: lens-model error."""

    def __post_init__(self) -> None:
        if not (self.max_reprojection_px > 0 and self.pixel_sigma > 0 and self.margin_full > 0):
            raise ValueError("reprojection gate, pixel sigma and margin_full must be > 0")
        if self.ambiguity_ratio < 1.0:
            raise ValueError("ambiguity_ratio must be >= 1")
        if not 0.0 <= self.ambiguity_quantile < 1.0:
            raise ValueError("ambiguity_quantile must be in [0, 1)")

    def noise_floor_px(self, sigma: float) -> float:
        """RMS reprojection error (4 corners, 2 dof left) that corner noise ``sigma`` explains."""
        if self.ambiguity_quantile == 0.0:
            return 0.0
        return sigma * math.sqrt(float(chdtri(2, 1.0 - self.ambiguity_quantile)) / 4.0)


def rodrigues(rvec: FloatArray) -> FloatArray:
    """The rotation matrix of a rotation vector."""
    R, _ = cv2.Rodrigues(np.asarray(rvec, dtype=np.float64))
    return np.asarray(R, dtype=np.float64)


def object_points(size: float) -> FloatArray:
    """The square's corners in the tag frame, in IPPE_SQUARE order."""
    h = size / 2.0
    return np.array([[-h, h, 0.0], [h, h, 0.0], [h, -h, 0.0], [-h, -h, 0.0]])


@dataclass(frozen=True, eq=False)
class PnPSolution:
    rvec: FloatArray
    tvec: FloatArray
    reproj_px: float  # RMS over the four corners

    @property
    def transform(self) -> Transform:
        return Transform(rodrigues(self.rvec), self.tvec)

    @property
    def params(self) -> FloatArray:
        return np.concatenate([self.rvec, self.tvec])


@dataclass(frozen=True, eq=False)
class TagPose:
    """Both PnP solutions of one tag (best first) and what they say about each other."""

    detection: TagDetection
    size: float
    solutions: tuple[PnPSolution, ...]
    ambiguous: bool
    rotation_gap: float  # rad between the two solutions' rotations
    pose_cov: FloatArray  # 6x6 covariance of (rvec, tvec) of the best solution
    pixel_sigma: float  # the corner noise the covariance assumed

    @property
    def best(self) -> PnPSolution:
        return self.solutions[0]


@dataclass(frozen=True)
class PoseFailure:
    tag_id: int
    reason: str
    value: float = 0.0


def rotation_angle(Ra: FloatArray, Rb: FloatArray) -> float:
    """Angle (rad) of the rotation taking ``Ra`` to ``Rb``."""
    c = (float(np.trace(Ra.T @ Rb)) - 1.0) / 2.0
    return math.acos(max(-1.0, min(1.0, c)))


def _pose_covariance(
    sol: PnPSolution, obj: FloatArray, camera: Intrinsics, sigma: float
) -> FloatArray | None:
    _, jac = cv2.projectPoints(obj, sol.rvec, sol.tvec, camera.matrix, camera.dist_coeffs)
    J = np.asarray(jac, dtype=np.float64)[:, :6]
    info = J.T @ J
    if not np.all(np.isfinite(info)) or np.linalg.cond(info) > 1e12:
        return None
    cov = np.linalg.inv(info) * sigma * sigma
    return np.asarray(0.5 * (cov + cov.T), dtype=np.float64)


def solve_tag(
    det: TagDetection, size: float, camera: Intrinsics, params: PoseParams
) -> TagPose | PoseFailure:
    """IPPE_SQUARE on one detection; a :class:`PoseFailure` names what went wrong."""
    obj = object_points(size)
    img = np.ascontiguousarray(det.corners.reshape(4, 1, 2))
    try:
        n, rvecs, tvecs, errors = cv2.solvePnPGeneric(
            obj, img, camera.matrix, camera.dist_coeffs, flags=cv2.SOLVEPNP_IPPE_SQUARE
        )
    except cv2.error:
        return PoseFailure(det.tag_id, PNP_FAILED)
    if n < 1 or errors is None:
        return PoseFailure(det.tag_id, PNP_FAILED)
    errs = np.asarray(errors, dtype=np.float64).ravel()
    sols = sorted(
        (
            PnPSolution(
                np.asarray(rvecs[k], dtype=np.float64).ravel(),
                np.asarray(tvecs[k], dtype=np.float64).ravel(),
                float(errs[k]),
            )
            for k in range(n)
        ),
        key=lambda s: s.reproj_px,
    )
    sols = [s for s in sols if np.all(np.isfinite(s.params)) and s.tvec[2] > 0.0]
    if not sols:
        return PoseFailure(det.tag_id, PNP_FAILED)
    best = sols[0]
    if best.reproj_px > params.max_reprojection_px:
        return PoseFailure(det.tag_id, REPROJECTION, best.reproj_px)
    sigma = max(params.pixel_sigma, 2.0 * best.reproj_px)
    sigma *= max(1.0, params.margin_full / max(det.margin, 1e-6)) ** 0.5
    ambiguous, gap = False, 0.0
    if len(sols) > 1:
        second = sols[1]
        gap = rotation_angle(best.transform.R, second.transform.R)
        close = second.reproj_px <= params.ambiguity_ratio * best.reproj_px
        within_noise = second.reproj_px <= params.noise_floor_px(sigma)
        ambiguous = (close or within_noise) and gap > params.ambiguity_angle
    cov = _pose_covariance(best, obj, camera, sigma)
    if cov is None:
        return PoseFailure(det.tag_id, DEGENERATE)
    return TagPose(det, size, tuple(sols), ambiguous, gap, cov, sigma)


def numeric_jacobian(
    f: Callable[[FloatArray], FloatArray], x: FloatArray, angular: tuple[int, ...], eps: float
) -> FloatArray:
    """Central differences of ``f`` at ``x``; outputs listed in ``angular`` are wrapped."""
    y0 = f(x)
    J = np.empty((y0.size, x.size))
    for k in range(x.size):
        dx = np.zeros_like(x)
        dx[k] = eps
        d = f(x + dx) - f(x - dx)
        for i in angular:
            d[i] = math.remainder(float(d[i]), math.tau)
        J[:, k] = d / (2.0 * eps)
    return J


@dataclass(frozen=True, eq=False)
class CarPose:
    """A planar car pose implied by one tag, with its covariance and plausibility."""

    pose: FloatArray  # x, y, theta
    cov: FloatArray  # 3x3
    floor_offset: float  # height of the implied car frame above the floor, m
    tilt: float  # rad between the implied car's z and the world's z


def planar_pose(T_world_car: Transform) -> tuple[FloatArray, float, float]:
    R, t = T_world_car.R, T_world_car.t
    theta = math.atan2(float(R[1, 0]), float(R[0, 0]))
    tilt = math.acos(max(-1.0, min(1.0, float(R[2, 2]))))
    return np.array([t[0], t[1], theta]), float(t[2]), tilt


def relative_car_pose(
    sol: PnPSolution,
    pose_cov: FloatArray,
    T_car_cam: Transform,
    T_other_tag: Transform,
    params: PoseParams,
) -> tuple[FloatArray, FloatArray] | None:
    """Another car's planar pose in this car's frame, seen through the tag it carries.

    ``T_other_tag`` is the tag's mount on the other car. None when the implied
    car is off the floor or tilted (the same plausibility as a wall tag's).
    """

    def transform(p: FloatArray) -> Transform:
        return T_car_cam @ Transform(rodrigues(p[:3]), p[3:]) @ T_other_tag.inverse()

    def f(p: FloatArray) -> FloatArray:
        return planar_pose(transform(p))[0]

    pose, floor_offset, tilt = planar_pose(transform(sol.params))
    if abs(floor_offset) > params.max_floor_offset or tilt > params.max_tilt:
        return None
    J = numeric_jacobian(f, sol.params, (2,), 1e-6)
    cov = J @ pose_cov @ J.T
    return pose, 0.5 * (cov + cov.T)


def car_from_camera(
    T_cam_tag: Transform, T_world_tag: Transform, T_car_cam: Transform
) -> Transform:
    """``T_world_car`` from a tag seen by the camera."""
    return T_world_tag @ T_cam_tag.inverse() @ T_car_cam.inverse()


def car_pose_from_tag(
    sol: PnPSolution,
    pose_cov: FloatArray,
    T_world_tag: Transform,
    T_car_cam: Transform,
) -> CarPose:
    """The car pose this PnP solution implies, covariance propagated from ``pose_cov``."""

    def f(p: FloatArray) -> FloatArray:
        T = car_from_camera(Transform(rodrigues(p[:3]), p[3:]), T_world_tag, T_car_cam)
        return planar_pose(T)[0]

    x0 = sol.params
    pose, floor_offset, tilt = planar_pose(car_from_camera(sol.transform, T_world_tag, T_car_cam))
    J = numeric_jacobian(f, x0, (2,), 1e-6)
    cov = J @ pose_cov @ J.T
    return CarPose(pose, 0.5 * (cov + cov.T), floor_offset, tilt)


def range_bearing_in_car(point_cam: FloatArray, T_car_cam: Transform) -> FloatArray:
    """(horizontal range, bearing) of a camera-frame point from the optical centre."""
    d = T_car_cam.R @ point_cam
    return np.array([math.hypot(float(d[0]), float(d[1])), math.atan2(float(d[1]), float(d[0]))])


def _edge_geometry(
    rays: FloatArray, size: float, origin: FloatArray, offset: float
) -> FloatArray | None:
    """(range, bearing) of the point ``offset`` behind a vertical tag, from its corner rays.

    ``rays`` are the four corner directions (IPPE order: bottom-left,
    bottom-right, top-right, top-left) in the car frame. Each vertical edge
    of the tag is a segment of known length ``size``; the elevation angles of
    its two ends give its horizontal distance, its azimuth its direction.
    """
    edges = []
    for bottom, top in ((rays[0], rays[3]), (rays[1], rays[2])):
        hb, ht = bottom[:2] / np.linalg.norm(bottom[:2]), top[:2] / np.linalg.norm(top[:2])
        h = hb + ht
        h = h / np.linalg.norm(h)
        tan_b = bottom[2] / float(bottom[:2] @ h)
        tan_t = top[2] / float(top[:2] @ h)
        spread = tan_t - tan_b
        if spread <= 1e-9:
            return None
        edges.append(origin + (size / spread) * h)
    left, right = edges
    centre = 0.5 * (left + right)
    across = right - left
    width = float(np.linalg.norm(across))
    if width <= 1e-9:
        return None
    into = np.array([-across[1], across[0]]) / width  # the viewer's right turned 90° left
    point = centre + offset * into - origin
    return np.array([math.hypot(float(point[0]), float(point[1])),
                     math.atan2(float(point[1]), float(point[0]))])  # fmt: skip


def sighting_from_corners(
    corners: FloatArray,
    size: float,
    camera: Intrinsics,
    T_car_cam: Transform,
    *,
    offset: float,
    sigma_px: float,
    params: PoseParams,
) -> tuple[float, float, float, float] | None:
    """(range, bearing, sigma_range, sigma_bearing) of a vertical tag, or None if degenerate.

    Range and bearing are horizontal, from the camera's optical centre, in the
    car frame; ``offset`` m behind the tag's centre (0 for the centre, the
    column's axis for the target). They come from the tag's vertical edges
    through the measured mount (the camera's height, pitch and roll), not from
    the tag's full PnP pose, so they hold whichever of an ambiguous tag's two
    solutions is right, and do not shrink with a spurious tilt. Sigmas: corner
    noise ``sigma_px`` through the numerical Jacobian, plus the floors.
    """
    eps = 1e-3
    base = np.asarray(corners, dtype=np.float64).reshape(4, 2)
    batch = [base]
    for k in range(8):
        for sign in (1.0, -1.0):
            c = base.copy().reshape(-1)
            c[k] += sign * eps
            batch.append(c.reshape(4, 2))
    pts = np.concatenate(batch).reshape(-1, 1, 2)
    crit = (cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 20, 1e-10)
    norm = cv2.undistortPoints(pts, camera.matrix, camera.dist_coeffs, criteria=crit).reshape(-1, 2)
    rays_cam = np.concatenate([norm, np.ones((norm.shape[0], 1))], axis=1)
    rays = rays_cam @ T_car_cam.R.T
    origin = T_car_cam.t[:2]
    z = _edge_geometry(rays[0:4], size, origin, offset)
    if z is None:
        return None
    J = np.empty((2, 8))
    for k in range(8):
        hi = _edge_geometry(rays[4 + 8 * k : 8 + 8 * k], size, origin, offset)
        lo = _edge_geometry(rays[8 + 8 * k : 12 + 8 * k], size, origin, offset)
        if hi is None or lo is None:
            return None
        d = hi - lo
        d[1] = math.remainder(float(d[1]), math.tau)
        J[:, k] = d / (2 * eps)
    cov = (J @ J.T) * sigma_px * sigma_px
    rng = float(z[0])
    sigma_r = math.hypot(
        math.sqrt(max(float(cov[0, 0]), 0.0)), params.range_floor + params.range_floor_frac * rng
    )
    sigma_b = math.hypot(math.sqrt(max(float(cov[1, 1]), 0.0)), params.bearing_floor)
    return rng, float(z[1]), sigma_r, sigma_b


# --------------------------------------------------------------------------- joint planar fit


@dataclass(frozen=True, eq=False)
class TagCorners:
    """One tag's corners: where the map puts them and where the image shows them."""

    tag_id: int
    world: FloatArray  # 4x3, metres
    image: FloatArray  # 4x2, pixels
    sigma: float  # corner noise, px


def world_corners(T_world_tag: Transform, size: float) -> FloatArray:
    return T_world_tag.apply(object_points(size))


@dataclass(frozen=True, eq=False)
class PlanarFit:
    """The car pose that best explains every corner, the camera level at its mount."""

    pose: FloatArray  # x, y, theta
    cov: FloatArray  # 3x3, scaled up by χ²/dof when the residuals exceed the noise
    chi2: float
    dof: int
    rms_px: dict[int, float]  # per tag, RMS reprojection error at the fitted pose


def _camera_extrinsics(state: FloatArray, T_car_cam: Transform) -> tuple[FloatArray, FloatArray]:
    """(rvec, tvec) of the world in the camera frame for car state (x, y, theta)."""
    c, s = math.cos(float(state[2])), math.sin(float(state[2]))
    T_world_car = Transform(
        np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]),
        np.array([state[0], state[1], 0.0]),
    )
    T_cam_world = (T_world_car @ T_car_cam).inverse()
    rvec, _ = cv2.Rodrigues(T_cam_world.R)
    return np.asarray(rvec, dtype=np.float64).ravel(), T_cam_world.t.copy()


def refine_planar(
    start: FloatArray,
    tags: list[TagCorners],
    camera: Intrinsics,
    T_car_cam: Transform,
    max_iterations: int = 20,
) -> PlanarFit | None:
    """Weighted Gauss-Newton on (x, y, theta) over all corners; None if it does not converge.

    Residuals are whitened by each tag's corner sigma, so a tag with a weak
    decision margin or a poor PnP fit counts for less. The covariance is
    ``(JᵀJ)⁻¹`` of the whitened problem, times χ²/dof when that exceeds 1.
    """
    world = np.concatenate([t.world for t in tags]).reshape(-1, 1, 3)
    observed = np.concatenate([t.image for t in tags]).reshape(-1)
    weights = np.repeat([1.0 / t.sigma for t in tags], 8)

    def residuals(state: FloatArray) -> FloatArray:
        rvec, tvec = _camera_extrinsics(state, T_car_cam)
        proj, _ = cv2.projectPoints(world, rvec, tvec, camera.matrix, camera.dist_coeffs)
        return np.asarray((proj.reshape(-1) - observed) * weights, dtype=np.float64)

    def jacobian(state: FloatArray) -> FloatArray:
        J = np.empty((observed.size, 3))
        for k in range(3):
            dx = np.zeros(3)
            dx[k] = 1e-5
            J[:, k] = (residuals(state + dx) - residuals(state - dx)) / 2e-5
        return J

    x = np.asarray(start, dtype=np.float64).copy()
    r = residuals(x)
    cost = float(r @ r)
    converged = False
    for _ in range(max_iterations):
        step = np.linalg.lstsq(jacobian(x), -r, rcond=None)[0]
        if not np.all(np.isfinite(step)):
            return None
        for _ in range(8):  # halve a step that makes things worse (far from the minimum)
            trial = x + step
            trial[2] = math.remainder(float(trial[2]), math.tau)
            r_trial = residuals(trial)
            cost_trial = float(r_trial @ r_trial)
            if cost_trial <= cost * (1.0 + 1e-9):
                break
            step = step / 2.0
        else:
            converged = float(np.max(np.abs(step))) < 1e-6  # no descent left: at the minimum
            break
        x, r, cost = trial, r_trial, cost_trial
        if float(np.max(np.abs(step))) < 1e-6:
            converged = True
            break
    if not converged:
        return None
    rvec, tvec = _camera_extrinsics(x, T_car_cam)
    depth = world.reshape(-1, 3) @ rodrigues(rvec)[2] + tvec[2]
    if float(np.min(depth)) <= 0.0:
        return None  # converged to a pose that has the tags behind the camera
    r = residuals(x)
    J = jacobian(x)
    info = J.T @ J
    if np.linalg.cond(info) > 1e12:
        return None
    cov = np.linalg.inv(info)
    chi2 = float(r @ r)
    dof = r.size - 3
    if dof > 0 and chi2 > dof:
        cov = cov * (chi2 / dof)
    rms: dict[int, float] = {}
    raw = r / weights
    for k, t in enumerate(tags):
        e = raw[8 * k : 8 * k + 8]
        rms[t.tag_id] = float(math.sqrt(float(e @ e) / 4.0))
    return PlanarFit(x, 0.5 * (cov + cov.T), chi2, dof, rms)
