"""The one time-ordered event queue: what is due at a virtual (or any) time, in order.

Items are kept with the time they are due; :meth:`EventQueue.due` hands out,
earliest first, every item due by ``now`` (items due at the same time in the
order they were pushed), including those pushed while it runs. Sans-IO: it
never reads a clock. Lockstep's network, the agent's delayed datagrams and the
tests' virtual networks are all this queue.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class EventQueue(Generic[T]):
    """Items due at times; see the module docstring."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, T]] = []
        self._order = itertools.count()

    def push(self, at: float, item: T) -> None:
        """``item`` is due at ``at``."""
        heapq.heappush(self._heap, (at, next(self._order), item))

    def next_at(self) -> float | None:
        """When the earliest item is due (None: nothing waits)."""
        return self._heap[0][0] if self._heap else None

    def due(self, now: float) -> Iterator[T]:
        """Take every item due by ``now``, earliest first."""
        while self._heap and self._heap[0][0] <= now:
            yield heapq.heappop(self._heap)[2]

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)
