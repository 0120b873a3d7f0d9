"""The pose from tags sighted one at a time while a robot without a pose turns (and, in
:func:`solve_batch`, from one batch's).

The pose filter (:class:`~agents.localization.PoseEKF`) dead-reckons from the first such
sighting in a *local frame*; :class:`TurnFrame` keeps the latest sighting of each mapped
tag with where the robot was then in that frame (its dead-reckoned offset), and solves
for the pose that explains them all (:func:`~agents.pose_geometry.solve_pose_from_tags`),
carried to where the robot is now. Pure: the filter owns the frame's state and counts the
reasons.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from agents.localizer_params import LocalizerParams
from agents.observations import TagSighting
from agents.pose_geometry import (
    TOO_FEW_TAGS,
    TOO_UNCERTAIN,
    Offset,
    PoseSolution,
    compose,
    solve_pose_from_tags,
)

FloatArray = npt.NDArray[np.float64]


class TurnFrame:
    """The latest sighting of each tag since the local frame began, with the robot's
    offset in the frame when it was taken."""

    def __init__(self) -> None:
        self.sightings: dict[int, tuple[Offset, TagSighting]] = {}

    def clear(self) -> None:
        self.sightings.clear()

    def add(self, here: Offset, sightings: Sequence[TagSighting]) -> None:
        """Sightings taken at offset ``here`` (each replaces its tag's older one)."""
        for s in sightings:
            self.sightings[s.tag_id] = (here, s)

    def solve(self, landmarks: Mapping[int, tuple[float, float]], params: LocalizerParams,
              here: Offset) -> tuple[FloatArray, FloatArray] | str:
        """The pose at offset ``here`` and its covariance (3), or the reason there is none
        (the counter's name: ``init_too_few_tags``, ``init_turning_...``)."""
        if len(self.sightings) < 2:
            return f"init_{TOO_FEW_TAGS}"
        ids = sorted(self.sightings)
        sol = solve_pose_from_tags(
            [(landmarks[i], self.sightings[i][1]) for i in ids],
            params.camera_forward,
            params.init_quantile,
            params.init_max_position_trace,
            offsets=[self.sightings[i][0] for i in ids],
        )
        if not (sol.ok and sol.pose is not None and sol.cov is not None):
            return f"init_turning_{sol.reason}"
        x, J_origin, J_here = compose(sol.pose, here.pose)
        P = J_origin @ sol.cov @ J_origin.T + J_here @ here.cov @ J_here.T
        P = 0.5 * (P + P.T)
        if float(P[0, 0] + P[1, 1]) > params.init_max_position_trace:
            return f"init_turning_{TOO_UNCERTAIN}"
        return x, P


def solve_batch(landmarks: Mapping[int, tuple[float, float]], params: LocalizerParams,
                sightings: Sequence[TagSighting]) -> PoseSolution:
    """The pose from simultaneous sightings, those of mapped tags (the batch's own solve,
    without a local frame)."""
    known = [(landmarks[s.tag_id], s) for s in sightings if s.tag_id in landmarks]
    return solve_pose_from_tags(known, params.camera_forward, params.init_quantile,
                                params.init_max_position_trace)


__all__ = ["TurnFrame", "solve_batch"]
