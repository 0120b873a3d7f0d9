"""Anti-replay: a 64-entry sliding window per (sender, epoch), a bounded number of them."""

from __future__ import annotations

from collections import OrderedDict

from protocol.swarm.errors import RejectReason, SwarmDecodeError

WINDOW_SIZE = 64
DEFAULT_MAX_WINDOWS = 256


class ReplayWindow:
    """The newest accepted sequence number and a bitmap of the 63 before it.

    Bit ``i`` of the bitmap is set when ``top - i`` was accepted. A sequence number
    newer than ``top`` is always fresh; one 64 or more behind ``top`` is too old.
    """

    __slots__ = ("_bits", "_top")

    def __init__(self) -> None:
        self._top = -1
        self._bits = 0

    @property
    def top(self) -> int:
        """The newest accepted sequence number (-1 before the first)."""
        return self._top

    def check(self, seq: int) -> RejectReason | None:
        """Why ``seq`` must be refused, or None; changes nothing."""
        if seq > self._top:
            return None
        behind = self._top - seq
        if behind >= WINDOW_SIZE:
            return RejectReason.TOO_OLD
        if self._bits >> behind & 1:
            return RejectReason.DUPLICATE
        return None

    def accept(self, seq: int) -> None:
        """Record ``seq``; call only after :meth:`check` returned None."""
        if seq > self._top:
            shift = seq - self._top
            mask = (1 << WINDOW_SIZE) - 1
            self._bits = ((self._bits << shift) | 1) & mask if shift < WINDOW_SIZE else 1
            self._top = seq
        else:
            self._bits |= 1 << (self._top - seq)


class ReplayGuard:
    """Replay windows keyed by (sender, epoch); the least recently used beyond a bound go.

    Evicting a window forgets which numbers it saw, so a datagram of an evicted
    (sender, epoch) would be accepted again: keep ``max_windows`` well above the
    number of live peers.
    """

    def __init__(self, max_windows: int = DEFAULT_MAX_WINDOWS) -> None:
        if isinstance(max_windows, bool) or not isinstance(max_windows, int):
            raise TypeError("max_windows must be an int")
        if not 1 <= max_windows <= 65536:
            raise ValueError(f"max_windows must be within 1..65536, got {max_windows}")
        self.max_windows = max_windows
        self._windows: OrderedDict[tuple[str, int], ReplayWindow] = OrderedDict()
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._windows)

    def __contains__(self, key: object) -> bool:
        return key in self._windows

    def check(self, sender: str, epoch: int, seq: int) -> None:
        """Raise :class:`SwarmDecodeError` (``duplicate``/``too_old``); changes nothing."""
        window = self._windows.get((sender, epoch))
        if window is None:
            return
        reason = window.check(seq)
        if reason is not None:
            raise SwarmDecodeError(reason, f"{sender}/{epoch} seq {seq}, newest {window.top}")

    def accept(self, sender: str, epoch: int, seq: int) -> None:
        """Record an accepted datagram; call only after :meth:`check` passed."""
        key = (sender, epoch)
        window = self._windows.get(key)
        if window is None:
            window = self._windows[key] = ReplayWindow()
            while len(self._windows) > self.max_windows:
                self._windows.popitem(last=False)
                self.evicted += 1
        else:
            self._windows.move_to_end(key)
        window.accept(seq)
