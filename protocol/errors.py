"""One error root for "the peer sent garbage", and the counters that tally it.

Every decoder in ``protocol`` raises only its own subclass of
:class:`ProtocolError`, carrying a short, stable, named ``reason``. Drivers
catch ``ProtocolError`` in one place and count ``reason`` in a
:class:`RejectCounters`; nothing else may escape a decoder.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping


class ProtocolError(Exception):
    """Bytes from the network were rejected; ``reason`` names the check that failed."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = str(reason)
        self.detail = detail
        super().__init__(f"{self.reason}: {detail}" if detail else self.reason)


class RejectCounters:
    """Tallies rejections by reason; cheap enough to call on every datagram."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()

    def count(self, reason: str, n: int = 1) -> None:
        self._counts[str(reason)] += n

    def __getitem__(self, reason: str) -> int:
        return self._counts[str(reason)]

    @property
    def total(self) -> int:
        return sum(self._counts.values())

    def as_dict(self) -> dict[str, int]:
        return dict(sorted(self._counts.items()))

    def merge(self, other: Mapping[str, int]) -> None:
        for reason, n in other.items():
            self._counts[reason] += n
