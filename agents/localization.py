"""Planar pose EKF on (x, y, theta): duty model + gyro predict, tag and pose-fix updates.

State: world position (m) and heading (rad, wrapped to (-pi, pi]); heading 0
faces +x, counter-clockwise positive. Two more elements, never reported as the pose, are
the gyro's errors (how they turn the heading: :mod:`agents.pose_motion`): what is left of
its bias in the rates given (the rate less the bias learnt so far, :mod:`agents.gyro_bias`),
learnt from tags while the car moves and from still samples (:meth:`PoseEKF.sample_at`
``still``), 0 with ``bias_prior_var`` at each new pose and handed back when the pose is
lost (:meth:`PoseEKF.take_lost_bias`); and its scale error, learnt from tags while the car
turns, kept from one pose to the next (:attr:`PoseEKF.gyro_scale`; before any pose, 0
with ``LocalizerParams.gyro_scale_std``).

**Predict** (:meth:`PoseEKF.predict`, :meth:`PoseEKF.predict_to`): the motion model
of :mod:`agents.pose_motion` (duties through the drive model, or the gyro's rate; rate
errors correlated over ``error_correlation_time``; how 10 Hz samples and a car's
integrated angle become the rate over each interval) over the inputs held since the last
step. The settings are :class:`~agents.localizer_params.LocalizerParams`.

**Updates**: a tag is a range-bearing landmark, gated at χ²(2) = 9.21 on the
normalised innovation squared (NIS); a pose fix is gated at χ²(3) = 11.34.

**Refusing rather than guessing.** There is no pose until a pose fix arrives or
sightings of at least two mapped tags have a least-squares solution that passes its
residual gate and is unique (:func:`solve_pose_from_tags`): in one batch, or one tag at a
time while the robot turns, from a *local frame* (the same state, flagged, never
reported as a pose: :mod:`agents.turn_frame`) that is dropped once its own uncertainty
passes ``init_max_position_trace`` or ``max_heading_var``. The pose is *lost* again
(``has_pose`` false, ``lost_reason`` set, counted in ``counters``) when:

- ``covariance_exceeded``: the position covariance trace exceeds ``max_position_trace``
  or the heading variance ``max_heading_var`` (no tag seen for a long time);
- ``inconsistent_tags``: ``max_consecutive_rejections`` tag sightings in a row failed the
  gate (the pose is probably wrong, and a wrong pose is worse than none).

**Time.** The filter keeps its own time ``t`` and the inputs of the last ``max_lag``
seconds (:mod:`agents.pose_history`); a batch captured before ``t`` is applied at its
capture time, the inputs since replayed; which batches are refused is
:func:`~agents.pose_history.admit`'s (all counted).

The low-level :meth:`PoseEKF.update_tag` and :meth:`PoseEKF.update_pose_fix` apply at
the filter's current time; :meth:`PoseEKF.update_batch` is the time-aware entry point.
The geometry (motion step, range-bearing model, the pose from tags) is
:mod:`agents.pose_geometry`.

What is pure lives beside the filter: the record of held inputs and the time rules
(:mod:`agents.pose_history`), the motion model (:mod:`agents.pose_motion`), the
measurement updates (:mod:`agents.pose_update`), the solves from tags
(:mod:`agents.turn_frame`), the settings and the result types
(:mod:`agents.localization_results`, named from here too).

Why one module of ~590 lines, over the ~500 of the rest: it is one estimator. What is
left here is what reads or changes the filter's own state (the pose, its time, the held
inputs, the losses it declares), and a split would hand that state across modules.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from agents.checks import require
from agents.drive_model import DriveModel
from agents.localization_results import BatchResult, UpdateResult
from agents.localizer_params import LocalizerParams
from agents.observations import Detection, ObservationBatch, PoseFix, TagSighting
from agents.pose_geometry import (
    DEGENERATE,
    OK,
    TOO_UNCERTAIN,
    Offset,
    PoseSolution,
    range_bearing,
    sighting_detection,
    wrap_angle,
)
from agents.pose_history import InputHistory, Segment, admit
from agents.pose_motion import (
    BIAS,
    SCALE,
    HeldInputs,
    check_sample,
    full_state,
    integrate,
    learn_wander,
    ramped,
    split,
)
from agents.pose_update import GATED, bias_update, pose_update
from agents.turn_frame import TurnFrame, solve_batch
from protocol.errors import RejectCounters

FloatArray = npt.NDArray[np.float64]

# Reasons (update results, counters, lost_reason), beside the pose solver's.
NO_POSE = "no_pose"
UNKNOWN_TAG = "unknown_tag"
COVARIANCE_EXCEEDED = "covariance_exceeded"
INCONSISTENT_TAGS = "inconsistent_tags"
TAGS_IN_FIX = "tags_in_fix"
EMPTY = "empty"
TURN_FRAME_EXPIRED = "turn_frame_expired"


# --------------------------------------------------------------------------- filter


class PoseEKF:
    """EKF on (x, y, theta) against mapped tags; see the module docstring for the rules.

    ``landmarks`` maps tag id -> world (x, y) of the tag's centre. ``t0`` is the
    agent-clock time the filter starts at. Counters of every refusal are in
    ``counters`` (a :class:`~protocol.errors.RejectCounters`).
    """

    def __init__(
        self,
        landmarks: Mapping[int, tuple[float, float]],
        drive: DriveModel | None = None,
        params: LocalizerParams | None = None,
        t0: float = 0.0,
        bias_psd: float = 0.0,
    ) -> None:
        require(math.isfinite(t0), "t0 must be finite")
        require(math.isfinite(bias_psd) and bias_psd >= 0.0, "bias_psd must be finite and >= 0")
        self.landmarks: dict[int, tuple[float, float]] = {}
        for tag_id, (lx, ly) in landmarks.items():
            require(math.isfinite(lx) and math.isfinite(ly), f"landmark {tag_id} not finite")
            self.landmarks[int(tag_id)] = (float(lx), float(ly))
        self.drive = drive if drive is not None else DriveModel()
        self.params = params if params is not None else LocalizerParams()
        self.counters = RejectCounters()
        self.lost_reason: str = NO_POSE
        self._t = float(t0)
        self._x: FloatArray | None = None
        self._P: FloatArray | None = None
        self._t_last_update = -math.inf
        self._consecutive_rejections = 0
        self._history = InputHistory()
        self._held: HeldInputs | None = None
        self._rate_psd: float | None = None
        self._local = False  # _x, _P: dead reckoning from the first sighting without a pose
        self._turn = TurnFrame()
        self.bias_psd = bias_psd
        self.bias_prior_var = 0.0
        """rad²/s²: the variance of the gyro's residual bias a new pose starts with (the
        bias learnt so far is the caller's, :mod:`agents.gyro_bias`; 0: none modelled)."""
        self._lost_bias: tuple[float, float] | None = None
        self._scale = (0.0, self.params.gyro_scale_std**2)  # kept while there is no pose

    # ---------------------------------------------------------------- state

    @property
    def t(self) -> float:
        """The time the state refers to, on the agent's clock."""
        return self._t

    @property
    def rate_psd(self) -> float:
        """rad²/s³: the gyro rate's wander about its ramp between samples, learnt from
        consecutive samples (0 before two)."""
        return 0.0 if self._rate_psd is None else self._rate_psd

    @property
    def held(self) -> HeldInputs | None:
        """The inputs held now: the newest sample and when it was taken (None before one)."""
        return self._held

    @property
    def has_pose(self) -> bool:
        return self._x is not None and not self._local

    @property
    def pose(self) -> tuple[float, float, float] | None:
        """(x, y, theta), or None while there is no pose."""
        if self._x is None or self._local:
            return None
        return float(self._x[0]), float(self._x[1]), float(self._x[2])

    @property
    def cov(self) -> FloatArray | None:
        """A copy of the pose's 3x3 covariance, or None while there is no pose."""
        return None if self._P is None or self._local else self._P[:3, :3].copy()

    @property
    def bias_residual(self) -> tuple[float, float] | None:
        """(estimate, variance) of what is left of the gyro's bias in the rates given
        (rad/s, rad²/s²), while there is a pose (None otherwise)."""
        if self._x is None or self._P is None or self._local:
            return None
        return float(self._x[BIAS]), float(self._P[BIAS, BIAS])

    @property
    def gyro_scale(self) -> tuple[float, float]:
        """(estimate, variance) of the gyro's scale error: the filter's while there is a
        pose, else the last pose's (0 and the prior's before any)."""
        if self._x is None or self._P is None or self._local:
            return self._scale
        return float(self._x[SCALE]), float(self._P[SCALE, SCALE])

    def take_lost_bias(self) -> tuple[float, float] | None:
        """:attr:`bias_residual` as it was when the pose was last lost, once (None after)."""
        lost, self._lost_bias = self._lost_bias, None
        return lost

    def set_pose(self, x: float, y: float, theta: float, cov: npt.ArrayLike) -> None:
        """Impose a known pose at the filter's time (tests, a surveyed start)."""
        fix = PoseFix(x, y, theta, np.asarray(cov, dtype=np.float64))
        self._set(np.array([fix.x, fix.y, wrap_angle(fix.theta)]), np.array(fix.cov))

    def _set(self, x: FloatArray, P: FloatArray) -> None:
        """A new pose ``x``, ``P`` (3); the residual bias 0 with ``bias_prior_var``, the
        scale error as last known."""
        self._x, self._P = full_state(x, P, bias_var=self.bias_prior_var, scale=self._scale)
        self._local = False
        self._turn.clear()
        self.lost_reason = OK
        self._consecutive_rejections = 0
        self._t_last_update = self._t

    def lose_pose(self, reason: str) -> None:
        """Forget the pose (``has_pose`` false) with a named, counted reason."""
        if not self.has_pose:
            return
        self.lost_reason = reason
        self.counters.count(f"pose_lost_{reason}")
        self._forget()

    def _forget(self) -> None:
        """No state, now or in the history (a rewind must not bring it back)."""
        residual = self.bias_residual
        if residual is not None:
            self._lost_bias = residual
        self._scale = self.gyro_scale
        self._x, self._P = None, None
        self._local = False
        self._turn.clear()
        for seg in self._history:
            seg.x0, seg.P0 = None, None

    def _check_loss(self) -> None:
        if self._P is None:
            return
        p = self.params
        if self._local:
            if (
                float(self._P[0, 0] + self._P[1, 1]) > p.init_max_position_trace
                or float(self._P[2, 2]) > p.max_heading_var
            ):
                self.counters.count(TURN_FRAME_EXPIRED)
                self._forget()
            return
        if (
            float(self._P[0, 0] + self._P[1, 1]) > p.max_position_trace
            or float(self._P[2, 2]) > p.max_heading_var
        ):
            self.lose_pose(COVARIANCE_EXCEEDED)

    # ---------------------------------------------------------------- predict

    def _integrate(self, x: FloatArray, P: FloatArray, t0: float, dt: float,
                   u: HeldInputs) -> tuple[FloatArray, FloatArray]:
        """The state and covariance at ``t0 + dt`` from those at ``t0`` under inputs ``u``."""
        return integrate(x, P, t0, dt, u, params=self.params, drive=self.drive,
                         bias_psd=self.bias_psd)

    def predict(
        self, dt: float, duty_left: float, duty_right: float, gyro_z: float | None = None
    ) -> None:
        """Advance by ``dt`` seconds with these duties held (and this gyro rate, if any)."""
        require(math.isfinite(dt) and dt >= 0.0, f"dt must be finite and >= 0, got {dt}")
        self.predict_to(self._t + dt, duty_left, duty_right, gyro_z)

    def predict_to(
        self, t: float, duty_left: float, duty_right: float, gyro_z: float | None = None,
        gyro_error: float | None = None, *, new_sample: bool = False,
        interval: tuple[float, float] | None = None,
    ) -> None:
        """Advance to time ``t`` (not before the filter time) with these inputs held
        (``gyro_error``: the rate's error σ, rad/s, when it is known better than
        ``LocalizerParams.gyro_error``: the rate less a learnt bias).

        Inputs that differ from the last ones, or any when ``new_sample`` (the car's
        telemetry brought them: a quantized gyro may read the same value twice), are a
        new sample taken at the filter's time: the interval since the previous sample is
        integrated again on the ramp between the two (back to the last update at most),
        lifted to ``interval``'s mean rate when the car's angle gave one, and the rate's
        wander is estimated from the change (:func:`~agents.pose_motion.ramped`).
        """
        check_sample(t, duty_left, duty_right, gyro_z, gyro_error, interval)
        require(t >= self._t, f"predict_to({t}) is before the filter time {self._t}")
        if new_sample or self._held is None or self._held.sample() != (
                duty_left, duty_right, gyro_z, gyro_error):
            self._new_sample(duty_left, duty_right, gyro_z, gyro_error, interval)
        assert self._held is not None
        self._advance(t, self._held)

    def sample_time(self, t: float) -> float:
        """The time :meth:`sample_at` would place a sample taken at ``t``."""
        end = self._t
        start = self._history.start
        earliest = max(self._t_last_update, end if start is None else start)
        if self._held is not None:
            earliest = max(earliest, self._held.sampled_at)
        return min(max(t, earliest), end)

    def sample_at(
        self, t: float, duty_left: float, duty_right: float, gyro_z: float | None, *,
        gyro_error: float | None = None, interval: tuple[float, float] | None = None,
        still: tuple[float, float] | None = None,
    ) -> float:
        """New inputs the car sampled at time ``t``: held from then on, the prediction since
        ``t`` integrated again under them (telemetry arrives a link's delay after the car
        took it). ``t`` is moved up to the last update, the previous sample or the oldest
        history kept, whichever is latest, and down to the filter time; returns the time
        used. Otherwise as :meth:`predict_to` with ``new_sample``.

        ``still``: the car stood still, so the sample is its residual bias plus noise: that
        rate and the noise's variance, an update of the residual bias at ``t`` (kept, and
        applied again after any rewind to before it; not a limit on later rewinds as tags
        are)."""
        check_sample(t, duty_left, duty_right, gyro_z, gyro_error, interval)
        require(still is None or (math.isfinite(still[0]) and math.isfinite(still[1])
                                  and still[1] > 0.0),
                "still must be a finite rate and a variance > 0, or None")
        end, t = self._t, self.sample_time(t)
        if t < end:
            self._rewind(t)  # the segments after t are integrated again under the new inputs
        self._new_sample(duty_left, duty_right, gyro_z, gyro_error, interval,
                         still=still is not None)
        if still is not None:
            self._history.add_still(t, *still)
            self._still_update(*still)
        assert self._held is not None
        self._advance(end, self._held)
        return t

    def _new_sample(self, duty_left: float, duty_right: float, gyro_z: float | None,
                    gyro_error: float | None = None,
                    interval: tuple[float, float] | None = None, *,
                    still: bool = False) -> None:
        old, now = self._held, self._t
        if old is not None and old.gyro_z is not None and gyro_z is not None:
            span = now - old.sampled_at
            if span > 0.0:
                slope = (gyro_z - old.gyro_z) / span
                self._rate_psd = learn_wander(self._rate_psd, slope, span,
                                              self.params.rate_change_window)
                self._ramp(old, gyro_z, slope, interval, still=still and old.still)
        psd = 0.0 if self._rate_psd is None else self._rate_psd
        self._held = HeldInputs(duty_left, duty_right, gyro_z, now, rate_psd=psd,
                             gyro_error=gyro_error, still=still)

    def _ramp(self, old: HeldInputs, rate: float, slope: float,
              interval: tuple[float, float] | None, *, still: bool = False) -> None:
        """Integrate again, since ``old`` was sampled (back to the last update or the oldest
        history kept at most), with its rate ramped to the new one (:func:`ramped`)."""
        kept = self._history.start
        start = max(old.sampled_at, self._t_last_update, -math.inf if kept is None else kept)
        if self._x is None or start >= self._t:
            return
        inputs = ramped(old, rate, slope, self._t, psd=self.rate_psd, interval=interval,
                        partial=start > old.sampled_at, still=still)
        self._replay([replace(seg, inputs=inputs) for seg in self._rewind(start)])

    def _advance(self, t1: float, u: HeldInputs) -> None:
        if t1 <= self._t:
            return
        seg = Segment(
            self._t,
            t1,
            u,
            None if self._x is None else self._x.copy(),
            None if self._P is None else self._P.copy(),
        )
        if self._x is not None and self._P is not None:
            self._x, self._P = self._integrate(self._x, self._P, self._t, t1 - self._t, u)
        self._t = t1
        self._history.append(seg)
        self._history.trim(max(self._t - self.params.max_lag, self._t_last_update))
        self._check_loss()

    # ---------------------------------------------------------------- updates

    def update_tag(self, landmark_xy: tuple[float, float], sighting: TagSighting) -> UpdateResult:
        """Range-bearing update at the filter's time, gated at ``params.tag_gate``."""
        if self._x is None or self._P is None or self._local:
            self.counters.count(NO_POSE)
            return UpdateResult(False, NO_POSE)
        try:
            z_hat, H = range_bearing(self._x, landmark_xy, self.params.camera_forward)
        except ValueError:
            self.counters.count(DEGENERATE)
            return UpdateResult(False, DEGENERATE)
        nu = np.array([sighting.range - z_hat[0], wrap_angle(sighting.bearing - z_hat[1])])
        return self._tally(self._kalman(nu, H, sighting.noise_cov, self.params.tag_gate))

    def _tally(self, result: UpdateResult) -> UpdateResult:
        """Count gated updates in a row; too many and the pose is dropped as inconsistent."""
        if result.accepted:
            self._consecutive_rejections = 0
        elif result.reason == GATED:
            self._consecutive_rejections += 1
            if self._consecutive_rejections >= self.params.max_consecutive_rejections:
                self.lose_pose(INCONSISTENT_TAGS)
        return result

    def update_pose_fix(self, fix: PoseFix) -> UpdateResult:
        """Full-pose update at the filter's time, gated at ``params.pose_fix_gate``.

        Without a pose, a fix initialises the filter (accepted, NIS None) unless
        its position trace exceeds ``init_max_position_trace`` (``too_uncertain``).
        Gated fixes count towards ``max_consecutive_rejections`` like tags.
        """
        if self._x is None or self._local:
            if float(fix.cov[0, 0] + fix.cov[1, 1]) > self.params.init_max_position_trace:
                self.counters.count(f"init_{TOO_UNCERTAIN}")
                return UpdateResult(False, TOO_UNCERTAIN)
            self._set(np.array([fix.x, fix.y, wrap_angle(fix.theta)]), np.array(fix.cov))
            return UpdateResult(True)
        nu = np.array(
            [fix.x - self._x[0], fix.y - self._x[1], wrap_angle(fix.theta - float(self._x[2]))]
        )
        return self._tally(
            self._kalman(nu, np.eye(3), np.array(fix.cov), self.params.pose_fix_gate)
        )

    def _kalman(self, nu: FloatArray, H: FloatArray, R: FloatArray, gate: float) -> UpdateResult:
        """A gated update of the pose (:func:`~agents.pose_update.pose_update`)."""
        assert self._x is not None and self._P is not None
        step = pose_update(self._x, self._P, nu, H, R, gate=gate)
        if step.x is None or step.P is None:
            self.counters.count(step.reason)
            return UpdateResult(False, step.reason, step.nis)
        self._x, self._P = step.x, step.P
        self._t_last_update = self._t
        return UpdateResult(True, OK, step.nis)

    def initialize_from_tags(self, sightings: Sequence[TagSighting]) -> PoseSolution:
        """Solve the pose at the filter's time from simultaneous sightings of mapped tags."""
        sol = solve_batch(self.landmarks, self.params, sightings)
        if sol.ok and sol.pose is not None and sol.cov is not None:
            self._set(sol.pose.copy(), sol.cov.copy())
        else:
            self.counters.count(f"init_{sol.reason}")
        return sol

    def _initialize_while_turning(self, sightings: Sequence[TagSighting]) -> bool:
        """Add mapped sightings to the local frame (started here if there is none) and solve
        for the pose from the latest sighting of each tag; True when that sets the pose."""
        if self._x is None or self._P is None:
            self._x, self._P = full_state(np.zeros(3), np.zeros((3, 3)), bias_var=0.0,
                                          scale=self._scale)
            self._local = True
            self._turn.clear()
            self._t_last_update = self._t  # nothing rewinds to before the frame began
        here = Offset(self._x[:3].copy(), self._P[:3, :3].copy())
        self._turn.add(here, sightings)
        solved = self._turn.solve(self.landmarks, self.params, here)
        if isinstance(solved, str):
            self.counters.count(solved)
            return False
        self._set(*solved)
        return True

    # ---------------------------------------------------------------- time-aware entry

    def _rewind(self, t: float) -> list[Segment]:
        """Move the filter back to time ``t`` inside the history; return the segments to replay."""
        seg, rest = self._history.cut(t)
        if seg.x0 is not None and seg.P0 is not None:
            self._x, self._P = self._integrate(seg.x0, seg.P0, seg.t0, t - seg.t0, seg.inputs)
        else:
            self._x, self._P = None, None
        self._t = t
        return rest

    def _replay(self, segments: list[Segment]) -> None:
        """Integrate ``segments`` from the filter's time, with the still samples kept after
        it applied again at their times (each at the start of its segment)."""
        done = self._t
        for seg in segments:
            for z, r in self._history.stills(done, seg.t0):
                self._still_update(z, r)
            done = max(done, seg.t0)
            self._advance(seg.t1, seg.inputs)
        for z, r in self._history.stills(done, self._t):
            self._still_update(z, r)

    def _still_update(self, z: float, r: float) -> None:
        """A still sample (:func:`~agents.pose_update.bias_update`), when there is a pose."""
        if self._x is not None and self._P is not None and not self._local:
            self._x, self._P = bias_update(self._x, self._P, z, r)

    def update_batch(self, batch: ObservationBatch) -> BatchResult:
        """Apply one observation batch at its capture time; initialise if there is no pose.

        A pose fix takes precedence: it updates (or initialises) the pose and the batch's
        tags are not applied again (counted as ``tags_in_fix``): the fix was computed from
        them. Unknown tag ids are ignored and counted. Without a pose, two or more mapped
        tags are solved for an initial pose, in this batch or across the turn frame's. The
        result carries the target's :class:`Detection` when the batch has a target
        sighting and there is a pose at capture time."""
        if batch.pose_fix is None and not batch.tags and batch.target is None:
            return BatchResult(False, EMPTY)
        t, reason = admit(batch.t_capture, batch.synchronized, now=self._t,
                          last_update=self._t_last_update if self._x is not None else None,
                          kept_from=self._history.start, params=self.params)
        if t is None:
            self.counters.count(reason)
            return BatchResult(False, reason)
        changes_state = batch.pose_fix is not None or bool(batch.tags)
        replay = self._rewind(t) if changes_state and t < self._t else []
        replay = [seg if (u := split(seg.inputs, t)) is seg.inputs else replace(seg, inputs=u)
                  for seg in replay]
        had_pose = self.has_pose
        initialized = False
        tag_results: list[tuple[int, UpdateResult]] = []
        fix_result: UpdateResult | None = None
        known: list[TagSighting] = []
        for s in batch.tags:
            if s.tag_id in self.landmarks:
                known.append(s)
            else:
                self.counters.count(UNKNOWN_TAG)
        if batch.pose_fix is not None:
            fix_result = self.update_pose_fix(batch.pose_fix)
            initialized = not had_pose and fix_result.accepted
            if known:
                self.counters.count(TAGS_IN_FIX, len(known))
        elif not had_pose:
            if len(known) >= 2:
                initialized = self.initialize_from_tags(known).ok
            if known and not initialized:
                initialized = self._initialize_while_turning(known)
        else:
            for s in known:
                if self._x is None:
                    break
                tag_results.append((s.tag_id, self.update_tag(self.landmarks[s.tag_id], s)))
        self._replay(replay)
        detection = None
        if batch.target is not None:
            detection = self._detection(batch.target, t, batch.t_capture)
        return BatchResult(
            True,
            OK,
            initialized=initialized,
            tag_results=tuple(tag_results),
            pose_fix_result=fix_result,
            detection=detection,
        )

    # ---------------------------------------------------------------- queries

    def pose_at(self, t: float) -> tuple[FloatArray, FloatArray] | None:
        """(state, covariance) at time ``t`` within the kept history, without changing the filter.

        None when there is no pose at that time, when ``t`` is older than the
        history or later than the filter time plus ``order_tolerance``.
        """
        if (
            self._x is None
            or self._P is None
            or self._local
            or t > self._t + self.params.order_tolerance
        ):
            return None
        if t >= self._t:
            return self._x[:3].copy(), self._P[:3, :3].copy()
        seg = self._history.containing(t)
        if seg is None or seg.x0 is None or seg.P0 is None:
            return None
        x, P = self._integrate(seg.x0, seg.P0, seg.t0, t - seg.t0, seg.inputs)
        return x[:3], P[:3, :3]

    def detection_from_sighting(self, sighting: TagSighting, t: float) -> Detection | None:
        """The sighted target in world coordinates, captured at ``t``; None without a pose then.

        Covariance ``J P Jᵀ + G R Gᵀ``: the robot's own pose uncertainty (J =
        ∂p/∂pose) plus the sensor noise (G = ∂p/∂(range, bearing)). A refusal is
        counted as ``detection_no_pose``.
        """
        return self._detection(sighting, t, t)

    def _detection(self, sighting: TagSighting, t_pose: float, t_stamp: float) -> Detection | None:
        at = self.pose_at(t_pose)
        if at is None:
            self.counters.count(f"detection_{NO_POSE}")
            return None
        return sighting_detection(at[0], at[1], sighting, t_stamp, self.params.camera_forward)
