"""The localizer's record of the inputs it held: the intervals back to the oldest time a
late observation or a late telemetry may still reach, each with the state at its start,
so the filter can rewind to a time inside them and replay what followed
(:class:`~agents.localization.PoseEKF`); and the still samples (updates of the gyro's
residual bias) within them, which a replay applies again.

:func:`admit` says when an observation batch is applied: a batch stamped with a capture
time older than the filter's time is applied *at its capture time* (the filter rewinds,
updates, and replays the recorded inputs). Observations must still arrive in capture
order: a batch older than the newest applied update by more than ``order_tolerance`` is
refused as ``out_of_order``; one older than the inputs kept (``max_lag``) as
``too_old``; one newer than the filter's time plus ``order_tolerance`` as
``from_future``; one whose clock is not synchronised as ``unsynchronized`` (unless
``use_unsynchronized``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from agents.localizer_params import LocalizerParams
from agents.pose_geometry import OK
from agents.pose_motion import HeldInputs

FloatArray = npt.NDArray[np.float64]

UNSYNCHRONIZED = "unsynchronized"
OUT_OF_ORDER = "out_of_order"
TOO_OLD = "too_old"
FROM_FUTURE = "from_future"


@dataclass
class Segment:
    """One interval of held inputs and the state at its start (None: no pose then)."""

    t0: float
    t1: float
    inputs: HeldInputs
    x0: FloatArray | None
    P0: FloatArray | None


class InputHistory:
    """Contiguous :class:`Segment` s, oldest first."""

    def __init__(self) -> None:
        self._segments: list[Segment] = []
        self._stills: list[tuple[float, float, float]] = []  # (t, rate, variance), in order

    def add_still(self, t: float, rate: float, variance: float) -> None:
        """A still sample applied at ``t`` (not before the last one kept)."""
        self._stills.append((t, rate, variance))

    def stills(self, after: float, until: float) -> list[tuple[float, float]]:
        """(rate, variance) of the still samples kept at times in (``after``, ``until``]."""
        return [(z, r) for t, z, r in self._stills if after < t <= until]

    def __iter__(self) -> Iterator[Segment]:
        return iter(self._segments)

    @property
    def start(self) -> float | None:
        """The oldest time kept (None: nothing kept)."""
        return self._segments[0].t0 if self._segments else None

    def append(self, segment: Segment) -> None:
        self._segments.append(segment)

    def trim(self, keep_from: float) -> None:
        """Drop the intervals that end by ``keep_from``."""
        k = 0
        while k < len(self._segments) and self._segments[k].t1 <= keep_from:
            k += 1
        if k:
            del self._segments[:k]
        # A rewind goes to the oldest start at most, whose state holds what came by then.
        start = self.start
        j = 0
        while j < len(self._stills) and (start is None or self._stills[j][0] <= start):
            j += 1
        if j:
            del self._stills[:j]

    def containing(self, t: float) -> Segment | None:
        """The interval holding time ``t`` (None: ``t`` is not kept)."""
        return next((s for s in self._segments if s.t0 <= t < s.t1), None)

    def cut(self, t: float) -> tuple[Segment, list[Segment]]:
        """Cut at ``t`` (kept): the interval holding it, whose state at ``t0`` the filter
        integrates to ``t``, and the inputs from ``t`` on to replay (without states); only
        what lies before ``t`` stays kept."""
        k = next(i for i, s in enumerate(self._segments) if s.t0 <= t < s.t1)
        seg = self._segments[k]
        rest = [Segment(t, seg.t1, seg.inputs, None, None), *self._segments[k + 1 :]]
        if t > seg.t0:
            del self._segments[k + 1 :]
            seg.t1 = t
        else:
            del self._segments[k:]
        return seg, rest


def admit(t_capture: float, synchronized: bool, *, now: float, last_update: float | None,
          kept_from: float | None, params: LocalizerParams) -> tuple[float | None, str]:
    """The time to apply an observation captured at ``t_capture`` at, or None and the
    reason it is refused. ``now``: the filter's time; ``last_update``: its last update's
    (None while it has no state); ``kept_from``: the oldest input kept (None: none)."""
    p = params
    if not synchronized and not p.use_unsynchronized:
        return None, UNSYNCHRONIZED
    if t_capture > now + p.order_tolerance:
        return None, FROM_FUTURE
    if last_update is not None and t_capture < last_update - p.order_tolerance:
        return None, OUT_OF_ORDER
    t = min(t_capture, now)
    if last_update is not None:
        t = max(t, last_update)
    if t < now and (kept_from is None or t < kept_from):
        return None, TOO_OLD
    return t, OK
