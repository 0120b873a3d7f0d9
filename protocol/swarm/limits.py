"""What a received message may claim: the receiver's plausibility rules (SWARM.md §10).

A datagram that passes every check of the decoder is authentic and well formed,
not sane: any key holder can still claim a target at 3e38 m or a belief from
1e300 s ago. These pure functions judge a decoded body against what the
receiver knows (its room, its clock, its grid) and name the first rule broken.
They never raise on any value the decoder lets through.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from protocol.swarm.messages import (
    Body,
    Heartbeat,
    Look,
    Message,
    Mode,
    Patch,
    Snapshot,
    Track,
    from_upper_triangle,
)


class Implausible(StrEnum):
    """Why a receiver refused a valid message's content (counted like decoder reasons)."""

    TIME = "implausible_time"  # t_sent or t_ref, on our clock, too old or in the future
    POSITION = "implausible_position"  # a position outside the room plus the margin
    VELOCITY = "implausible_velocity"  # faster than any target may move
    COVARIANCE = "implausible_covariance"  # not positive definite, or outside floor/ceiling
    CELLS = "implausible_cells"  # a cell's mu or var outside what the grid can hold
    LOOK = "implausible_look"  # a camera reaching farther than any camera of the swarm


@dataclass(frozen=True)
class ClaimLimits:
    """The bounds one receiver applies; every member of a swarm should use the same.

    Units: metres, seconds, m/s; variances in m² or (m/s)² (track) and in the
    grid's own unit (cells: ``mu`` is a presence level in [0, 1]).
    """

    x_min: float
    x_max: float
    y_min: float
    y_max: float
    max_speed: float = 10.0
    max_age: float = 5.0
    max_ahead: float = 1.0
    var_floor: float = 1e-6
    var_ceiling: float = 1e4
    cell_mu_min: float = -0.01
    cell_mu_max: float = 1.01
    cell_var_min: float = 5e-7
    cell_var_max: float = 4.0
    max_look_range: float = 10.0

    def __post_init__(self) -> None:
        values = [getattr(self, f) for f in self.__dataclass_fields__]
        if not all(isinstance(v, int | float) and math.isfinite(v) for v in values):
            raise ValueError("claim limits must be finite numbers")
        if not (self.x_min < self.x_max and self.y_min < self.y_max):
            raise ValueError("claim limits: the extent must have x_min < x_max, y_min < y_max")
        if not (self.max_speed > 0 and self.max_age > 0 and self.max_ahead >= 0):
            raise ValueError("claim limits: max_speed, max_age > 0 and max_ahead >= 0")
        if not self.max_look_range > 0:
            raise ValueError("claim limits: max_look_range must be > 0")
        if not 0 < self.var_floor < self.var_ceiling:
            raise ValueError("claim limits: need 0 < var_floor < var_ceiling")
        if not (self.cell_mu_min < self.cell_mu_max and 0 < self.cell_var_min < self.cell_var_max):
            raise ValueError("claim limits: bad cell bounds")

    @classmethod
    def for_room(
        cls, width: float, height: float, *, margin: float = 1.0, **overrides: float
    ) -> ClaimLimits:
        """Limits for a room [0, width] × [0, height], positions allowed ``margin`` outside."""
        return cls(-margin, width + margin, -margin, height + margin, **overrides)


def check_time(t_local: float, now: float, limits: ClaimLimits) -> Implausible | None:
    """A t_ref mapped to the receiver's clock must lie in [now - max_age, now + max_ahead]."""
    if not (now - limits.max_age <= t_local <= now + limits.max_ahead):
        return Implausible.TIME
    return None


def check_position(x: float, y: float, limits: ClaimLimits) -> Implausible | None:
    if not (limits.x_min <= x <= limits.x_max and limits.y_min <= y <= limits.y_max):
        return Implausible.POSITION
    return None


def check_track(
    mean: npt.ArrayLike, cov: npt.NDArray[np.float64], limits: ClaimLimits
) -> Implausible | None:
    """A [x, y, vx, vy] estimate: in the room, not too fast, a sane covariance."""
    x = np.asarray(mean, dtype=np.float64)
    reason = check_position(float(x[0]), float(x[1]), limits)
    if reason is not None:
        return reason
    if math.hypot(float(x[2]), float(x[3])) > limits.max_speed:
        return Implausible.VELOCITY
    return check_covariance(cov, limits)


def check_covariance(cov: npt.NDArray[np.float64], limits: ClaimLimits) -> Implausible | None:
    """Symmetric, finite, every eigenvalue within [var_floor, var_ceiling]."""
    P = np.asarray(cov, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] != P.shape[1] or not np.isfinite(P).all():
        return Implausible.COVARIANCE
    # np.allclose(P, P.T, rtol=0.0, atol=...) without its overhead: the same test.
    if not (np.abs(P - P.T) <= 1e-9 * max(1.0, float(np.abs(P).max()))).all():
        return Implausible.COVARIANCE
    eig = np.linalg.eigvalsh(P)
    if not (eig[0] >= limits.var_floor and eig[-1] <= limits.var_ceiling):
        return Implausible.COVARIANCE
    return None


def check_cells(
    mu: npt.ArrayLike, var: npt.ArrayLike, limits: ClaimLimits
) -> Implausible | None:
    """Every cell's mu and var within the grid's meaning (whole message refused otherwise)."""
    m = np.asarray(mu, dtype=np.float64)
    v = np.asarray(var, dtype=np.float64)
    if not m.size:
        return None
    if m.min() < limits.cell_mu_min or m.max() > limits.cell_mu_max:
        return Implausible.CELLS
    if v.min() < limits.cell_var_min or v.max() > limits.cell_var_max:
        return Implausible.CELLS
    return None


def check_look(body: Look, limits: ClaimLimits) -> Implausible | None:
    """Every look's camera in the room (plus the margin), then the range within bounds."""
    for r in body.looks:
        reason = check_position(r.x_cm / 100.0, r.y_cm / 100.0, limits)
        if reason is not None:
            return reason
    if body.range_m > limits.max_look_range:
        return Implausible.LOOK
    return None


def check_content(body: Body, limits: ClaimLimits) -> Implausible | None:
    """The rules that need no clock: HEARTBEAT position (unless LOST_POSE), TRACK
    position, speed and covariance, PATCH and SNAPSHOT cells, LOOK positions and range."""
    if isinstance(body, Heartbeat):
        return None if body.mode is Mode.LOST_POSE else check_position(body.x, body.y, limits)
    if isinstance(body, Track):
        return check_track(body.mean, from_upper_triangle(body.cov, 4), limits)
    if isinstance(body, Patch | Snapshot):
        return check_cells(body.cells.mu, body.cells.var, limits)
    if isinstance(body, Look):
        return check_look(body, limits)
    return None


def judge(
    message: Message, now: float, limits: ClaimLimits,
    to_local: Callable[[float], float] | None,
) -> Implausible | None:
    """Every rule for one message, in SWARM.md's order: its content, then ``t_sent``, then
    ``t_ref`` (and a LOOK's oldest look), each mapped to the receiver's clock by
    ``to_local`` (None: no mapping yet, so no time rule can run; they run when the
    mapping exists)."""
    reason = check_content(message.body, limits)
    if reason is not None or to_local is None:
        return reason
    times = [message.t_sent]
    if isinstance(message.body, Track | Patch | Snapshot | Look):
        times.append(message.body.t_ref)
    if isinstance(message.body, Look):
        times.append(message.body.oldest)
    for t in times:
        reason = check_time(to_local(t), now, limits)
        if reason is not None:
            return reason
    return None
