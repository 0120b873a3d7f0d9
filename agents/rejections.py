"""Count every rejection, log only a sample: a flood must not fill the disk."""

from __future__ import annotations

import math

DEFAULT_INTERVAL = 1.0


class RejectionSampler:
    """Lets one record per reason per ``interval`` through; the others are tallied.

    :meth:`admit` answers how many rejections a record stands for (itself plus
    those suppressed since the reason's last record), or None when suppressed;
    :meth:`flush` gives the tallies still pending once their interval is over (or
    all of them, ``final=True``). Sans-IO: the caller passes ``now``.
    """

    def __init__(self, interval: float = DEFAULT_INTERVAL) -> None:
        if not (math.isfinite(interval) and interval >= 0.0):
            raise ValueError("interval must be finite and >= 0")
        self.interval = interval
        self._last: dict[str, float] = {}
        self._pending: dict[str, int] = {}

    def admit(self, reason: str, now: float) -> int | None:
        if now - self._last.get(reason, -math.inf) < self.interval:
            self._pending[reason] = self._pending.get(reason, 0) + 1
            return None
        self._last[reason] = now
        return 1 + self._pending.pop(reason, 0)

    def flush(self, now: float, *, final: bool = False) -> list[tuple[str, int]]:
        out = []
        for reason in sorted(self._pending):
            if final or now - self._last[reason] >= self.interval:
                out.append((reason, self._pending.pop(reason)))
                self._last[reason] = now
        return out
