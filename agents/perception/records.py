"""What the perception pipeline says of one frame: the record of each stage (for the log), the
result it hands on (the batch), and other robots seen through their tags."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from agents.observations import ObservationBatch

FloatArray = npt.NDArray[np.float64]

@dataclass(frozen=True)
class TagOutcome:
    """What became of one detected (or gate-rejected) tag in one frame."""

    tag_id: int
    role: str
    reason: str  # "" when used
    margin: float = 0.0
    edge_px: float = 0.0
    reproj_px: float = 0.0
    reproj2_px: float = 0.0  # the second PnP solution's error
    rotation_gap: float = 0.0  # rad between the two solutions
    ambiguous: bool = False
    resolved_by: str = ""  # "prediction" or "mount" for an ambiguous tag that was used
    range: float | None = None
    bearing: float | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.tag_id, "role": self.role, "reason": self.reason}
        if self.margin:
            out.update(margin=round(self.margin, 1), edge_px=round(self.edge_px, 1))
        if self.reproj_px:
            out["reproj_px"] = round(self.reproj_px, 3)
        if self.reproj2_px:
            out["reproj2_px"] = round(self.reproj2_px, 3)
            out["gap_deg"] = round(math.degrees(self.rotation_gap), 1)
        if self.ambiguous:
            out["ambiguous"] = True
        if self.resolved_by:
            out["resolved_by"] = self.resolved_by
        if self.range is not None and self.bearing is not None:
            out.update(range=round(self.range, 4), bearing=round(self.bearing, 5))
        return out


@dataclass(frozen=True)
class FrameRecord:
    """One frame's trace: stage times (``clock`` readings), outcomes and reasons."""

    t_capture: float
    synchronized: bool
    t_start: float
    t_detected: float
    t_posed: float
    t_done: float
    detections: int
    tags: tuple[TagOutcome, ...]
    pose_reason: str  # "" when a pose fix was produced
    target_reason: str  # "" when the target was sighted
    members: tuple[int, ...] = ()
    outliers: tuple[int, ...] = ()
    cliques: tuple[tuple[int, ...], ...] = ()
    frame_reason: str = ""  # the whole frame was refused

    @property
    def detect_ms(self) -> float:
        return (self.t_detected - self.t_start) * 1e3

    @property
    def pose_ms(self) -> float:
        return (self.t_posed - self.t_detected) * 1e3

    def as_dict(self) -> dict[str, Any]:
        return {
            "t_capture": self.t_capture,
            "synchronized": self.synchronized,
            "detect_ms": round(self.detect_ms, 3),
            "pose_ms": round(self.pose_ms, 3),
            "total_ms": round((self.t_done - self.t_start) * 1e3, 3),
            "detections": self.detections,
            "tags": [t.as_dict() for t in self.tags],
            "pose_reason": self.pose_reason,
            "target_reason": self.target_reason,
            "members": list(self.members),
            "outliers": list(self.outliers),
            "cliques": [list(c) for c in self.cliques],
            "frame_reason": self.frame_reason,
        }


@dataclass(frozen=True, eq=False)
class RobotSighting:
    """Another robot's pose in this car's frame, seen through the tag it carries."""

    robot: str
    tag_id: int
    pose: FloatArray  # x, y, theta of the other car in this car's frame
    cov: FloatArray
    t_capture: float
    synchronized: bool


@dataclass(frozen=True)
class FrameResult:
    batch: ObservationBatch | None  # None only when the whole frame was refused
    record: FrameRecord
    robots: tuple[RobotSighting, ...] = ()
