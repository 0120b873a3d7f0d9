"""What the sensors report to the agent, validated on construction.

All positions are metres in the world frame, angles radians. A bearing is in
the car frame, counter-clockwise positive from the forward axis, measured from
the camera's optical centre projected onto the floor; a range is the planar
(floor) distance from that point. Times are seconds on the agent's clock.

Construction refuses anything non-finite, a non-positive sigma or a covariance
that is not symmetric positive semi-definite, raising :class:`ObservationError`
with a named ``reason`` (it is both a :class:`~protocol.errors.ProtocolError`,
so a driver can count it like any other rejected input, and a ``ValueError``).

Covariances are stored as read-only ``float64`` arrays; the classes that hold
them compare by identity (``eq=False``), since element-wise array equality has
no single truth value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from protocol.errors import ProtocolError

FloatArray = npt.NDArray[np.float64]

NOT_FINITE = "not_finite"
BAD_SIGMA = "bad_sigma"
BAD_RANGE = "bad_range"
BAD_BEARING = "bad_bearing"
BAD_TAG_ID = "bad_tag_id"
BAD_COVARIANCE = "bad_covariance"
DUPLICATE_TAG = "duplicate_tag"
BAD_TYPE = "bad_type"

_SYMMETRY_TOL = 1e-9
_PSD_TOL = 1e-12


class ObservationError(ProtocolError, ValueError):
    """An observation was refused; ``reason`` names the failed check."""


def _finite(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ObservationError(BAD_TYPE, f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ObservationError(NOT_FINITE, f"{name} = {value}")


def _sigma(name: str, value: float) -> None:
    _finite(name, value)
    if value <= 0.0:
        raise ObservationError(BAD_SIGMA, f"{name} must be > 0, got {value}")


def checked_covariance(cov: Any, n: int, name: str = "cov") -> FloatArray:
    """A read-only ``n×n`` float64 copy of ``cov``, or :class:`ObservationError`.

    Requires finite entries, symmetry (relative tolerance 1e-9) and eigenvalues
    no lower than ``-1e-12·max(1, trace)``. The stored copy is symmetrised exactly.
    """
    try:
        a = np.array(cov, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ObservationError(BAD_COVARIANCE, f"{name}: {exc}") from None
    if a.shape != (n, n):
        raise ObservationError(BAD_COVARIANCE, f"{name} must be {n}x{n}, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ObservationError(NOT_FINITE, f"{name} has a non-finite entry")
    scale = max(1.0, float(np.max(np.abs(a))))
    if not (np.abs(a - a.T) <= _SYMMETRY_TOL * scale).all():  # np.allclose, rtol=0
        raise ObservationError(BAD_COVARIANCE, f"{name} is not symmetric")
    a = 0.5 * (a + a.T)
    if float(np.min(np.linalg.eigvalsh(a))) < -_PSD_TOL * max(1.0, float(np.trace(a))):
        raise ObservationError(BAD_COVARIANCE, f"{name} is not positive semi-definite")
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class TagSighting:
    """Range and bearing to one AprilTag, with the sensor's 1-sigma noise."""

    tag_id: int
    range: float
    bearing: float
    sigma_range: float
    sigma_bearing: float

    def __post_init__(self) -> None:
        if isinstance(self.tag_id, bool) or not isinstance(self.tag_id, int) or self.tag_id < 0:
            raise ObservationError(BAD_TAG_ID, f"tag_id must be an int >= 0, got {self.tag_id!r}")
        _finite("range", self.range)
        if self.range <= 0.0:
            raise ObservationError(BAD_RANGE, f"range must be > 0, got {self.range}")
        _finite("bearing", self.bearing)
        if abs(self.bearing) > math.pi:
            raise ObservationError(BAD_BEARING, f"bearing must be in [-pi, pi], got {self.bearing}")
        _sigma("sigma_range", self.sigma_range)
        _sigma("sigma_bearing", self.sigma_bearing)

    @property
    def noise_cov(self) -> FloatArray:
        """R = diag(sigma_range², sigma_bearing²)."""
        return np.diag([self.sigma_range**2, self.sigma_bearing**2])


@dataclass(frozen=True, eq=False)
class PoseFix:
    """A full pose (x, y, theta) with its 3x3 covariance, e.g. from multi-tag PnP."""

    x: float
    y: float
    theta: float
    cov: FloatArray

    def __post_init__(self) -> None:
        _finite("x", self.x)
        _finite("y", self.y)
        _finite("theta", self.theta)
        cov = checked_covariance(self.cov, 3)
        if np.any(np.diag(cov) <= 0.0):
            raise ObservationError(BAD_COVARIANCE, "a pose fix needs a positive variance per axis")
        object.__setattr__(self, "cov", cov)


@dataclass(frozen=True, eq=False)
class Detection:
    """A world-frame target position with its 2x2 covariance, captured at ``t``.

    ``pose_cov``, when known, is the part of ``cov`` due to the robot's own pose error
    (``J P Jᵀ``): the same error for every detection until the pose is corrected, which
    the track treats as a consider term.
    """

    x: float
    y: float
    cov: FloatArray
    t: float
    pose_cov: FloatArray | None = None

    def __post_init__(self) -> None:
        _finite("x", self.x)
        _finite("y", self.y)
        _finite("t", self.t)
        object.__setattr__(self, "cov", checked_covariance(self.cov, 2))
        if self.pose_cov is not None:
            object.__setattr__(self, "pose_cov", checked_covariance(self.pose_cov, 2, "pose_cov"))


@dataclass(frozen=True)
class ObservationBatch:
    """Everything one camera frame (or one synthetic report) yielded.

    ``t_capture`` is the capture time mapped to the agent's clock;
    ``synchronized`` is false when the car clock was not synchronised and
    ``t_capture`` is only the receipt time. Tag ids within a batch are unique.
    """

    t_capture: float
    synchronized: bool
    tags: tuple[TagSighting, ...] = ()
    target: TagSighting | None = None
    pose_fix: PoseFix | None = None

    def __post_init__(self) -> None:
        _finite("t_capture", self.t_capture)
        if not isinstance(self.synchronized, bool):
            raise ObservationError(BAD_TYPE, "synchronized must be a bool")
        tags = tuple(self.tags)
        if not all(isinstance(s, TagSighting) for s in tags):
            raise ObservationError(BAD_TYPE, "tags must be TagSighting instances")
        ids = [s.tag_id for s in tags]
        if len(set(ids)) != len(ids):
            raise ObservationError(DUPLICATE_TAG, f"tag ids repeat within one batch: {ids}")
        if self.target is not None and not isinstance(self.target, TagSighting):
            raise ObservationError(BAD_TYPE, "target must be a TagSighting or None")
        if self.pose_fix is not None and not isinstance(self.pose_fix, PoseFix):
            raise ObservationError(BAD_TYPE, "pose_fix must be a PoseFix or None")
        object.__setattr__(self, "tags", tags)
