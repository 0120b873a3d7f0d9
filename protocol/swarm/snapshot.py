"""Reassembly of SNAPSHOT chunks into one whole window (sans-IO, bounded)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from protocol.errors import RejectCounters
from protocol.swarm.cells import Cells
from protocol.swarm.errors import FieldError
from protocol.swarm.messages import Message, Snapshot


class SnapshotDrop(StrEnum):
    """Why a partly received snapshot was thrown away."""

    MISMATCH = "snapshot_mismatch"  # chunks of one snapshot id disagree on the window
    OVERLAP = "snapshot_overlap"  # two chunks hold the same cell
    EXPIRED = "snapshot_expired"  # not complete within the timeout
    EVICTED = "snapshot_evicted"  # too many snapshots pending at once


@dataclass(frozen=True)
class WholeSnapshot:
    """Every chunk of one snapshot, joined."""

    sender: str
    epoch: int
    snapshot_id: int
    origin_ix: int
    origin_iy: int
    width: int
    height: int
    cell_size_mm: int
    t_ref: float
    cells: Cells


_Key = tuple[str, int, int]
_Layout = tuple[int, int, int, int, int, int, float]


def _layout(s: Snapshot) -> _Layout:
    return (s.chunk_count, s.origin_ix, s.origin_iy, s.width, s.height, s.cell_size_mm, s.t_ref)


@dataclass
class _Pending:
    started: float
    layout: _Layout
    chunks: dict[int, Cells]


class SnapshotAssembler:
    """Collects chunks per (sender, epoch, snapshot id) until all ``chunk_count`` arrived."""

    def __init__(self, *, max_pending: int = 16, timeout: float = 10.0) -> None:
        if not 1 <= max_pending <= 1024:
            raise ValueError(f"max_pending must be within 1..1024, got {max_pending}")
        if not 0.0 < timeout <= 600.0:
            raise ValueError(f"timeout must be within (0, 600] s, got {timeout}")
        self.max_pending = max_pending
        self.timeout = timeout
        self.drops = RejectCounters()
        self._pending: dict[_Key, _Pending] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def expire(self, now: float) -> None:
        """Forget snapshots that started more than ``timeout`` ago."""
        for key in [k for k, p in self._pending.items() if now - p.started > self.timeout]:
            del self._pending[key]
            self.drops.count(SnapshotDrop.EXPIRED)

    def add(self, message: Message, now: float) -> WholeSnapshot | None:
        """Take one SNAPSHOT message; return the whole snapshot when it completes."""
        body = message.body
        if not isinstance(body, Snapshot):
            raise TypeError("SnapshotAssembler.add takes SNAPSHOT messages")
        self.expire(now)
        key = (message.sender, message.epoch, body.snapshot_id)
        pending = self._pending.get(key)
        if pending is not None and pending.layout != _layout(body):
            del self._pending[key]
            self.drops.count(SnapshotDrop.MISMATCH)
            return None
        if pending is None:
            while len(self._pending) >= self.max_pending:
                oldest = min(self._pending, key=lambda k: self._pending[k].started)
                del self._pending[oldest]
                self.drops.count(SnapshotDrop.EVICTED)
            pending = self._pending[key] = _Pending(now, _layout(body), {})
        pending.chunks.setdefault(body.chunk_index, body.cells)
        if len(pending.chunks) < body.chunk_count:
            return None
        del self._pending[key]
        try:
            cells = Cells.concatenate([pending.chunks[i] for i in range(body.chunk_count)])
        except FieldError:
            self.drops.count(SnapshotDrop.OVERLAP)
            return None
        return WholeSnapshot(
            message.sender, message.epoch, body.snapshot_id, body.origin_ix, body.origin_iy,
            body.width, body.height, body.cell_size_mm, body.t_ref, cells,
        )
