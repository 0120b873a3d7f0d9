"""A fake monotonic clock for deterministic, virtual-time tests."""

from __future__ import annotations


class FakeClock:
    """A monotonic clock that moves only when the test says so.

    Call it like ``time.monotonic`` (``clock()``) or read ``clock.now``.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def __call__(self) -> float:
        return self._now

    @property
    def now(self) -> float:
        return self._now

    def advance(self, dt: float) -> float:
        """Move forward by ``dt`` seconds and return the new time."""
        if dt < 0:
            raise ValueError(f"a monotonic clock cannot go back (dt={dt})")
        self._now += dt
        return self._now

    def advance_to(self, t: float) -> float:
        """Move forward to the absolute time ``t``."""
        return self.advance(t - self._now)
