"""From one decoded camera frame to an :class:`~agents.observations.ObservationBatch`.

Sans-IO: :meth:`Pipeline.process` takes the grey image, its capture time on
the agent's clock (and whether that time is synchronised) and, optionally,
the tracker's predicted pose; it returns a
:class:`~agents.perception.records.FrameResult`: the batch, a
:class:`~agents.perception.records.FrameRecord` of what each stage did, and
any sightings of other robots' tags (for :mod:`agents.perception.chain`). The only clock it reads is
the injected ``clock``, and only to time its stages for the record; no
output depends on it.

Stages, each refusing rather than guessing (every refusal is a named reason,
counted in ``Pipeline.counters`` and listed in the record):

1. **detect** (:mod:`~agents.perception.detect`): Hamming 0, margin ≥ 20,
   edge ≥ 20 px; ids not in the map are ``unknown_tag``; wall tags whose
   entry is not measured are ``unmeasured_tag``.
2. **pose** (:mod:`~agents.perception.pose`): IPPE_SQUARE per tag,
   reprojection ≤ 2 px, both solutions kept. Each solution implies a car
   pose through the tag's map transform and the camera mount; one whose car
   frame is off the floor or tilted is implausible. An ambiguous tag is
   resolved by the prediction (the solution nearer the predicted pose, which
   must itself be within the consensus gate of it: ``prediction_mismatch``
   otherwise), or when exactly one solution is physically plausible
   (``resolved_by = "mount"``), or it is not used for the pose (``ambiguous``).
3. **consensus** (:mod:`~agents.perception.consensus`): the largest clique
   of agreeing tags, fused; contradictory equal cliques give no pose.
4. **joint fit**: the car pose refined on every corner of the clique's tags
   (planar: the camera at its measured mount, weighted by each tag's corner
   noise); every member must reproject within 2 px at the joint pose
   (``joint_reprojection``). Its covariance, plus a small floor for the
   model error, is the :class:`~agents.observations.PoseFix`'s.
5. **target**: the target's tag gives the range and bearing of its column's
   axis from the camera's optical centre (car frame; ARENA.md's contract),
   from the tag's vertical edges and the mount
   (:func:`~agents.perception.pose.sighting_from_corners`), so an ambiguous
   target tag is still measured right. Two faces seen at once are fused when
   they agree (``target_inconsistent`` when not).

Without a pose fix (and unless the tags contradicted each other), the wall
tags that passed every per-tag gate (ambiguous ones and those whose PnP
solutions both missed the prediction included; outliers of the consensus
and implausible ones not) are reported
as range-bearing sightings (same method as the target), which the EKF gates
on its own. An unmeasured camera mount yields nothing at all
(``mount_unmeasured``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from agents.observations import ObservationBatch, ObservationError, PoseFix, TagSighting
from agents.perception.consensus import (
    CONTRADICTORY,
    Candidate,
    ConsensusParams,
    compatible,
    consensus,
    difference,
)
from agents.perception.detect import DetectParams, TagDetection, TagDetector
from agents.perception.pose import (
    AMBIGUOUS,
    IMPLAUSIBLE,
    CarPose,
    PoseFailure,
    PoseParams,
    TagCorners,
    TagPose,
    car_pose_from_tag,
    refine_planar,
    relative_car_pose,
    sighting_from_corners,
    solve_tag,
    world_corners,
)
from agents.perception.records import FrameRecord, FrameResult, RobotSighting, TagOutcome
from agents.perception.tagmap import Intrinsics, TagMap, TagRole
from protocol.errors import RejectCounters

FloatArray = npt.NDArray[np.float64]

OK = ""
UNKNOWN_TAG = "unknown_tag"
UNMEASURED_TAG = "unmeasured_tag"
MOUNT_UNMEASURED = "mount_unmeasured"
FRAME_SIZE = "frame_size"
PREDICTION_MISMATCH = "prediction_mismatch"
OUTLIER = "outlier"
JOINT_FIT_FAILED = "joint_fit_failed"
JOINT_REPROJECTION = "joint_reprojection"
TARGET_INCONSISTENT = "target_inconsistent"
NOT_SEEN = "not_seen"
NO_TARGET = "no_target_in_map"
ROBOT_UNMEASURED = "robot_tag_unmeasured"
TOO_UNCERTAIN = "too_uncertain"


@dataclass(frozen=True)
class PipelineParams:
    detect: DetectParams = field(default_factory=DetectParams)
    pose: PoseParams = field(default_factory=PoseParams)
    consensus: ConsensusParams = field(default_factory=ConsensusParams)
    undistort_image: bool = False
    """Detect on an undistorted image (straight tag edges) instead of the raw one."""
    max_joint_rms_px: float = 2.0
    fix_floor_position: float = 0.005
    fix_floor_heading: float = math.radians(0.3)
    """Added (as sigmas) to every pose fix's covariance: lens and map error."""
    max_fix_position_sigma: float = 0.03
    max_fix_heading_sigma: float = math.radians(2.0)
    """A pose fix less certain than this (largest position sigma, m; heading sigma,
    rad) is refused as ``too_uncertain``; its tags go out as range-bearing sightings."""
    report_tags: bool = True
    """Report wall tags as range-bearing sightings when there is no pose fix."""

    def __post_init__(self) -> None:
        if self.max_joint_rms_px <= 0 or self.fix_floor_position < 0 or self.fix_floor_heading < 0:
            raise ValueError("joint gate must be > 0 and floors >= 0")


@dataclass(frozen=True, eq=False)
class PredictedPose:
    """The tracker's pose at the frame's capture time, used to resolve ambiguous tags."""

    x: float
    y: float
    theta: float
    cov: FloatArray | None = None

    @property
    def pose(self) -> FloatArray:
        return np.array([self.x, self.y, self.theta])


@dataclass
class _Tag:
    """Working state of one detected tag inside a frame."""

    det: TagDetection
    role: TagRole
    reason: str = OK
    pose: TagPose | None = None
    car: CarPose | None = None
    ambiguous: bool = False
    resolved_by: str = ""
    rb: tuple[float, float, float, float] | None = None


def _gray(image: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    if image.ndim == 2:
        return image
    if image.ndim == 3 and image.shape[2] == 3:
        return np.asarray(cv2.cvtColor(image, cv2.COLOR_BGR2GRAY), dtype=np.uint8)
    raise ValueError(f"expected a grey or BGR image, got shape {image.shape}")


class Pipeline:
    """Detection, per-tag pose, consensus, joint fit and target sighting for one camera."""

    def __init__(
        self,
        tag_map: TagMap,
        params: PipelineParams | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.map = tag_map
        self.params = params or PipelineParams()
        self.clock = clock
        self.detector = TagDetector(self.params.detect)
        self.counters = RejectCounters()
        self.frames = 0
        cam = tag_map.camera
        self._T_car_cam = tag_map.mount.transform()
        self._maps: tuple[Any, Any] | None = None
        self.intrinsics: Intrinsics = cam
        if self.params.undistort_image:
            self._maps = cv2.initUndistortRectifyMap(
                cam.matrix, cam.dist_coeffs, None, cam.matrix, (cam.width, cam.height), cv2.CV_16SC2
            )
            self.intrinsics = Intrinsics(cam.width, cam.height, cam.fx, cam.fy, cam.cx, cam.cy)
        target = tag_map.target
        self._multi = (target.tag_id,) if target is not None else ()

    # ------------------------------------------------------------------ entry

    def process(
        self,
        image: npt.NDArray[np.uint8],
        t_capture: float,
        synchronized: bool,
        predicted: PredictedPose | None = None,
    ) -> FrameResult:
        """Everything one frame says; see the module docstring for the stages."""
        t_start = self.clock()
        self.frames += 1
        cam = self.map.camera
        gray = _gray(image)
        if gray.shape != (cam.height, cam.width):
            self.counters.count(FRAME_SIZE)
            record = FrameRecord(
                t_capture, synchronized, t_start, t_start, t_start, self.clock(), 0, (),
                FRAME_SIZE, FRAME_SIZE, frame_reason=FRAME_SIZE,
            )  # fmt: skip
            return FrameResult(None, record)
        if self._maps is not None:
            gray = np.asarray(
                cv2.remap(gray, self._maps[0], self._maps[1], cv2.INTER_LINEAR), dtype=np.uint8
            )
        found = self.detector.detect(gray, self._multi)
        t_detected = self.clock()
        outcomes: list[TagOutcome] = []
        for rej in found.rejected:
            self.counters.count(rej.reason)
            outcomes.append(TagOutcome(rej.tag_id, self.map.role(rej.tag_id).value, rej.reason))
        tags = [self._solve(det) for det in found.accepted]
        world = [t for t in tags if t.role is TagRole.WORLD and t.reason == OK]
        pose_reason, fix, members, outliers, cliques = self._pose(world, predicted)
        target, target_reason = self._target([t for t in tags if t.role is TagRole.TARGET])
        if target_reason == NOT_SEEN and self.map.target is not None:
            refused = [r.reason for r in found.rejected if r.tag_id == self.map.target.tag_id]
            target_reason = refused[0] if refused else NOT_SEEN
        robots = self._robots(
            [t for t in tags if t.role is TagRole.ROBOT and t.reason == OK],
            t_capture,
            synchronized,
        )
        t_posed = self.clock()
        sightings: list[TagSighting] = []
        if (
            fix is None
            and self.params.report_tags
            and pose_reason != CONTRADICTORY
            and self._T_car_cam is not None
        ):
            for t in world:
                if t.reason in (OK, AMBIGUOUS, PREDICTION_MISMATCH) and t.rb is not None:
                    try:
                        sightings.append(TagSighting(t.det.tag_id, *t.rb))
                    except ObservationError as exc:
                        t.reason = exc.reason
        for t in tags:
            if t.reason:
                self.counters.count(t.reason)
            outcomes.append(self._outcome(t))
        batch = ObservationBatch(t_capture, synchronized, tuple(sightings), target, fix)
        record = FrameRecord(
            t_capture, synchronized, t_start, t_detected, t_posed, self.clock(),
            len(found.accepted) + len(found.rejected), tuple(outcomes), pose_reason,
            target_reason, members, outliers, cliques,
        )  # fmt: skip
        return FrameResult(batch, record, robots)

    # ------------------------------------------------------------------ stages

    def _solve(self, det: TagDetection) -> _Tag:
        role = self.map.role(det.tag_id)
        tag = _Tag(det, role)
        if role is TagRole.UNKNOWN:
            tag.reason = UNKNOWN_TAG
            return tag
        if role is TagRole.WORLD and self.map.world_transform(det.tag_id) is None:
            tag.reason = UNMEASURED_TAG
            return tag
        if self._T_car_cam is None:
            tag.reason = MOUNT_UNMEASURED
            return tag
        size = self.map.size(det.tag_id)
        assert size is not None
        solved = solve_tag(det, size, self.intrinsics, self.params.pose)
        if isinstance(solved, PoseFailure):
            tag.reason = solved.reason
            return tag
        tag.pose = solved
        tag.ambiguous = solved.ambiguous
        offset = 0.0
        if role is TagRole.TARGET and self.map.target is not None:
            offset = self.map.target.axis_offset
        if role is not TagRole.ROBOT:
            tag.rb = sighting_from_corners(
                det.corners, size, self.intrinsics, self._T_car_cam,
                offset=offset, sigma_px=solved.pixel_sigma, params=self.params.pose,
            )  # fmt: skip
        return tag

    def _plausible(self, car: CarPose) -> bool:
        return car.tilt <= self.params.pose.max_tilt

    def _choose(self, tag: _Tag, predicted: PredictedPose | None) -> None:
        """Pick the solution a world tag votes with (sets ``car``), or a reason not to."""
        assert tag.pose is not None and self._T_car_cam is not None
        T_world_tag = self.map.world_transform(tag.det.tag_id)
        assert T_world_tag is not None
        solutions = tag.pose.solutions if tag.pose.ambiguous else tag.pose.solutions[:1]
        cars = [
            car_pose_from_tag(sol, tag.pose.pose_cov, T_world_tag, self._T_car_cam)
            for sol in solutions
        ]
        if not tag.pose.ambiguous:
            if self._plausible(cars[0]):
                tag.car = cars[0]
            else:
                tag.reason = IMPLAUSIBLE
            return
        if predicted is None:
            tag.reason = AMBIGUOUS
            return
        plausible = [c for c in cars if self._plausible(c)]
        if not plausible:
            tag.reason = IMPLAUSIBLE
            return
        pred = predicted.pose
        gates = self.params.consensus

        def distance(c: CarPose) -> float:
            d = difference(c.pose, pred)
            return math.hypot(
                math.hypot(float(d[0]), float(d[1])) / gates.max_distance,
                float(d[2]) / gates.max_angle,
            )

        nearest = min(plausible, key=distance)
        if compatible(nearest.pose, pred, gates, nearest.cov, predicted.cov):
            tag.car, tag.resolved_by = nearest, "prediction"
        else:
            tag.reason = PREDICTION_MISMATCH

    def _pose(
        self, world: list[_Tag], predicted: PredictedPose | None
    ) -> tuple[str, PoseFix | None, tuple[int, ...], tuple[int, ...], tuple[tuple[int, ...], ...]]:
        if self._T_car_cam is None:
            return MOUNT_UNMEASURED, None, (), (), ()
        for tag in world:
            self._choose(tag, predicted)
        voters = [t for t in world if t.car is not None]
        result = consensus(
            [Candidate(t.det.tag_id, t.car.pose, t.car.cov) for t in voters if t.car is not None],
            self.params.consensus,
        )
        if not result.ok:
            if result.reason == CONTRADICTORY:
                for t in voters:
                    t.reason = CONTRADICTORY
            return result.reason, None, (), (), result.cliques
        assert result.pose is not None
        for t in voters:
            if t.det.tag_id in result.outliers:
                t.reason = OUTLIER
        members = [t for t in voters if t.det.tag_id in result.members]
        corners: list[TagCorners] = []
        for t in members:
            T = self.map.world_transform(t.det.tag_id)
            assert T is not None and t.pose is not None
            corners.append(
                TagCorners(
                    t.det.tag_id, world_corners(T, t.pose.size), t.det.corners, t.pose.pixel_sigma
                )
            )
        fit = refine_planar(result.pose, corners, self.intrinsics, self._T_car_cam)
        if fit is None:
            return JOINT_FIT_FAILED, None, result.members, result.outliers, result.cliques
        worst = max(fit.rms_px.values())
        if worst > self.params.max_joint_rms_px:
            return JOINT_REPROJECTION, None, result.members, result.outliers, result.cliques
        p = self.params
        cov = fit.cov + np.diag(
            [p.fix_floor_position**2, p.fix_floor_position**2, p.fix_floor_heading**2]
        )
        position_sigma = math.sqrt(float(np.max(np.linalg.eigvalsh(cov[:2, :2]))))
        if position_sigma > p.max_fix_position_sigma or cov[2, 2] > p.max_fix_heading_sigma**2:
            return TOO_UNCERTAIN, None, result.members, result.outliers, result.cliques
        try:
            fix = PoseFix(float(fit.pose[0]), float(fit.pose[1]), float(fit.pose[2]), cov)
        except ObservationError as exc:
            return exc.reason, None, result.members, result.outliers, result.cliques
        return OK, fix, result.members, result.outliers, result.cliques

    def _target(self, seen: list[_Tag]) -> tuple[TagSighting | None, str]:
        target = self.map.target
        if target is None:
            return None, NO_TARGET
        if not seen:
            return None, NOT_SEEN
        if self._T_car_cam is None:
            return None, MOUNT_UNMEASURED
        estimates = [t.rb for t in seen if t.reason == OK and t.rb is not None]
        if not estimates:
            reasons = sorted({t.reason for t in seen})
            return None, reasons[0]
        if len(estimates) > 1:
            first = estimates[0]
            for a in estimates[1:]:
                dr, db = a[0] - first[0], math.remainder(a[1] - first[1], math.tau)
                m2 = dr * dr / (a[2] ** 2 + first[2] ** 2) + db * db / (a[3] ** 2 + first[3] ** 2)
                if m2 > 13.8:  # χ²(2) at 99.9 %
                    for t in seen:
                        if t.reason == OK:
                            t.reason = TARGET_INCONSISTENT
                    return None, TARGET_INCONSISTENT
        wr = [1.0 / e[2] ** 2 for e in estimates]
        wb = [1.0 / e[3] ** 2 for e in estimates]
        r = sum(w * e[0] for w, e in zip(wr, estimates, strict=True)) / sum(wr)
        b0 = estimates[0][1]
        b = b0 + sum(
            w * math.remainder(e[1] - b0, math.tau) for w, e in zip(wb, estimates, strict=True)
        ) / sum(wb)
        try:
            sighting = TagSighting(
                target.tag_id,
                r,
                math.remainder(b, math.tau),
                sum(wr) ** -0.5,
                sum(wb) ** -0.5,
            )
        except ObservationError as exc:
            return None, exc.reason
        return sighting, OK

    def _robots(
        self, seen: list[_Tag], t_capture: float, synchronized: bool
    ) -> tuple[RobotSighting, ...]:
        out: list[RobotSighting] = []
        if self._T_car_cam is None:
            return ()
        for t in seen:
            spec = self.map.robot_tags[t.det.tag_id]
            T_car_tag = spec.transform()
            if T_car_tag is None:
                t.reason = ROBOT_UNMEASURED
                continue
            if t.pose is None:
                continue
            if t.pose.ambiguous:
                t.reason = AMBIGUOUS
                continue
            rel = relative_car_pose(
                t.pose.best, t.pose.pose_cov, self._T_car_cam, T_car_tag, self.params.pose
            )
            if rel is None:
                t.reason = IMPLAUSIBLE
                continue
            pose, cov = rel
            out.append(RobotSighting(spec.robot, t.det.tag_id, pose, cov, t_capture, synchronized))
        return tuple(out)

    def _outcome(self, t: _Tag) -> TagOutcome:
        rng = bearing = None
        if t.rb is not None:
            rng, bearing = t.rb[0], t.rb[1]
        reproj = reproj2 = gap = 0.0
        if t.pose is not None:
            reproj, gap = t.pose.best.reproj_px, t.pose.rotation_gap
            if len(t.pose.solutions) > 1:
                reproj2 = t.pose.solutions[1].reproj_px
        return TagOutcome(
            t.det.tag_id, t.role.value, t.reason, t.det.margin, t.det.edge_px, reproj, reproj2,
            gap, t.ambiguous, t.resolved_by, rng, bearing,
        )  # fmt: skip
