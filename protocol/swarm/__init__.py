"""The swarm wire format: authenticated msgpack datagrams between agents (see SWARM.md)."""

from protocol.swarm.cells import Cells
from protocol.swarm.chunking import patch_capacity, patch_messages, snapshot_messages
from protocol.swarm.codec import decode_datagram, encode, encoded_size
from protocol.swarm.errors import FieldError, RejectReason, SwarmDecodeError
from protocol.swarm.fields import from_upper_triangle, upper_triangle
from protocol.swarm.messages import (
    DEFAULT_DATAGRAM_LIMIT,
    MAX_DATAGRAM_LIMIT,
    PROTOCOL_VERSION,
    Body,
    Bye,
    Heartbeat,
    Kind,
    Look,
    LookRecord,
    Message,
    Mode,
    Patch,
    Ping,
    Pong,
    Snapshot,
    SwarmId,
    Track,
    swarm_id_from_name,
)
from protocol.swarm.receiver import Rejection, SwarmReceiver
from protocol.swarm.replay import ReplayGuard, ReplayWindow
from protocol.swarm.sender import SwarmSender, random_epoch
from protocol.swarm.snapshot import SnapshotAssembler, SnapshotDrop, WholeSnapshot

__all__ = [
    "DEFAULT_DATAGRAM_LIMIT",
    "MAX_DATAGRAM_LIMIT",
    "PROTOCOL_VERSION",
    "Body",
    "Bye",
    "Cells",
    "FieldError",
    "Heartbeat",
    "Kind",
    "Look",
    "LookRecord",
    "Message",
    "Mode",
    "Patch",
    "Ping",
    "Pong",
    "RejectReason",
    "Rejection",
    "ReplayGuard",
    "ReplayWindow",
    "Snapshot",
    "SnapshotAssembler",
    "SnapshotDrop",
    "SwarmDecodeError",
    "SwarmId",
    "SwarmReceiver",
    "SwarmSender",
    "Track",
    "WholeSnapshot",
    "decode_datagram",
    "encode",
    "encoded_size",
    "from_upper_triangle",
    "patch_capacity",
    "patch_messages",
    "random_epoch",
    "snapshot_messages",
    "swarm_id_from_name",
    "upper_triangle",
]
