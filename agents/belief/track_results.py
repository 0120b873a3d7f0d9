"""What the track filter's updates return: :class:`UpdateResult` (a detection) and
:class:`PeerFusion` (a peer's track), with the reasons of :class:`UpdateReason`.

Their own module so that :mod:`agents.belief.track` holds the estimator alone; it names
them too, and every import from there keeps working.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum


class UpdateReason(StrEnum):
    """Why a measurement was or was not used."""

    INITIALISED = "initialised"
    ACCEPTED = "accepted"
    GATED = "gated"
    REINITIALISED = "reinitialised"
    STALE = "stale"
    INVALID = "invalid"
    NOT_INITIALISED = "not_initialised"


@dataclass(frozen=True)
class UpdateResult:
    """What a measurement did; ``nis`` is NaN when no innovation was computed."""

    accepted: bool
    reason: UpdateReason
    nis: float = math.nan


@dataclass(frozen=True)
class PeerFusion:
    """Result of :meth:`~agents.belief.track.TrackFilter.fuse_peer`: ω on the own state, or
    adoption of the peer's."""

    w: float
    adopted: bool
