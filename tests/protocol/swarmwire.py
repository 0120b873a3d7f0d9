"""The swarm codec tests' datagrams: the key and swarm they are sealed for, messages and
bodies to seal, a wire form sealed as it stands, and the reason a datagram is rejected for."""

from __future__ import annotations

import numpy as np
import pytest

from protocol.errors import ProtocolError
from protocol.swarm import (
    Cells,
    Heartbeat,
    Message,
    Mode,
    SwarmDecodeError,
    SwarmReceiver,
    decode_datagram,
    swarm_id_from_name,
)
from protocol.swarm.codec import pack, seal

KEY = bytes(range(32))
SWARM = swarm_id_from_name("test-swarm")


def msg(body, seq: int = 1, t_sent: float = 100.0, sender: str = "walnut", epoch: int = 7):
    return Message(SWARM, sender, epoch, seq, t_sent, body)


def heartbeat() -> Heartbeat:
    return Heartbeat(1.0, -2.0, 0.5, (0.1, 0.0, 0.0, 0.1, 0.0, 0.01), Mode.TRACK, -32, 5,
                     (("rx", 3), ("tx", 4)))


def cells(n: int = 3, offset: int = 0) -> Cells:
    i = np.arange(n) + offset
    return Cells.from_arrays(i, -i, i / 10.0, 0.5 + i / 100.0)


def decode(data: bytes, **kw) -> Message:
    return decode_datagram(data, KEY, SWARM, **kw)


def reason_of(data: bytes, receiver: SwarmReceiver | None = None) -> str:
    with pytest.raises(SwarmDecodeError) as info:
        if receiver is None:
            decode(data)
        else:
            receiver.decode(data)
    assert isinstance(info.value, ProtocolError)
    return info.value.reason


def craft(wire) -> bytes:
    return seal(pack(wire), KEY)
