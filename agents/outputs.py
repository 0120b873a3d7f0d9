"""What the core gives out: messages to send, its newest decision, its log records.

:class:`~agents.core.AgentCore` collects them in :class:`Outputs` and its driver drains them
(``take_outputs``). A message to send is a swarm message body, or cells the driver chunks
into PATCH (:class:`OutPatch`, broadcast) or SNAPSHOT (:class:`OutSnapshot`, to one peer)
datagrams.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents.belief import CellBlock
from agents.navigation import NavDecision
from agents.peers import Address
from protocol.swarm import Body


@dataclass(frozen=True)
class OutPatch:
    """Cells to broadcast as PATCH datagrams (the driver chunks them)."""

    cells: CellBlock
    t_ref: float


@dataclass(frozen=True)
class OutSnapshot:
    """The whole window for one peer, as SNAPSHOT datagrams."""

    cells: CellBlock
    snapshot_id: int
    origin: tuple[int, int]
    width: int
    height: int
    t_ref: float


Outgoing = Body | OutPatch | OutSnapshot


@dataclass(frozen=True)
class Send:
    """One message to send: ``to`` is None for a broadcast, else a peer's address."""

    to: Address | None
    body: Outgoing


@dataclass(frozen=True)
class Record:
    """One log record: its event's name and its fields."""

    event: str
    fields: dict[str, Any]


@dataclass
class Outputs:
    """What the core gave out since it was last drained, in order."""

    sends: list[Send] = field(default_factory=list)
    decision: NavDecision | None = None
    records: list[Record] = field(default_factory=list)
