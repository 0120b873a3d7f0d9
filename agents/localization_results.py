"""What the pose filter's updates return: :class:`UpdateResult` and :class:`BatchResult`.

Their own module so that :mod:`agents.localization` holds the filter alone; it names them
too, and every import from there keeps working. A ``reason`` is one of the filter's (or
the pose solver's) reason strings; ``OK`` ("") when accepted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agents.observations import Detection
from agents.pose_geometry import OK


@dataclass(frozen=True)
class UpdateResult:
    """Outcome of one measurement update; ``reason`` is "" when accepted."""

    accepted: bool
    reason: str = OK
    nis: float | None = None


@dataclass(frozen=True)
class BatchResult:
    """What :meth:`~agents.localization.PoseEKF.update_batch` did with one batch.

    ``applied`` means the batch passed the time checks (``reason`` names the one
    it failed otherwise); what each sighting did is in ``tag_results``.
    """

    applied: bool
    reason: str = OK
    initialized: bool = False
    tag_results: tuple[tuple[int, UpdateResult], ...] = ()
    pose_fix_result: UpdateResult | None = None
    detection: Detection | None = field(default=None, compare=False)
