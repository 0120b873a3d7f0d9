"""What the swarm codec refuses: a truncated, oversized, non-finite, mistyped, misshapen,
out-of-range, foreign or forged datagram, each with its own reason, the checks in
SWARM.md's order; on the sender's side, what the wire cannot carry."""

from __future__ import annotations

import math

import numpy as np
import pytest

from protocol.swarm import (
    Bye,
    Cells,
    Heartbeat,
    Message,
    Mode,
    Patch,
    Ping,
    Pong,
    RejectReason,
    Snapshot,
    Track,
    encode,
)
from protocol.swarm.codec import pack, seal, to_wire
from tests.protocol.swarmwire import KEY, SWARM, cells, craft, decode, heartbeat, msg, reason_of

# --- rejections with their own reason ------------------------------------------------------


def test_truncated_datagrams():
    data = encode(msg(heartbeat()), KEY)
    assert reason_of(b"") == RejectReason.TOO_SHORT
    assert reason_of(data[:16]) == RejectReason.TOO_SHORT
    assert reason_of(data[:-1]) == RejectReason.BAD_MAC  # a cut MAC no longer verifies
    payload = pack(to_wire(msg(heartbeat())))
    for cut in (1, 5, len(payload) // 2, len(payload) - 1):
        assert reason_of(seal(payload[:cut], KEY)) == RejectReason.MALFORMED


def test_oversized_datagram():
    big = msg(Patch(100, 99.0, cells(150)))
    data = encode(big, KEY, limit=65000)
    assert len(data) > 1200
    assert reason_of(data) == RejectReason.TOO_LONG
    assert decode(data, limit=65000) == big
    assert reason_of(b"\x00" * 1201) == RejectReason.TOO_LONG


def test_trailing_bytes():
    payload = pack(to_wire(msg(heartbeat())))
    assert reason_of(seal(payload + b"\x00", KEY)) == RejectReason.TRAILING_BYTES
    assert reason_of(seal(payload + payload, KEY)) == RejectReason.TRAILING_BYTES


def test_nan_and_infinity_anywhere():
    for path in ((6,), (7, 0), (7, 2), (7, 3, 1)):
        for bad in (math.nan, math.inf, -math.inf):
            wire = to_wire(msg(heartbeat()))
            target = wire
            for i in path[:-1]:
                target = target[i]
            target[path[-1]] = bad
            assert reason_of(craft(wire)) == RejectReason.NOT_FINITE, (path, bad)
    for word in (0x7E00, 0x7C00, 0xFC00):  # float16 NaN, +inf, -inf in mu and in var
        raw_mu = bytearray(Cells.from_arrays([1], [1], [0.0], [1.0]).to_bytes())
        raw_var = bytearray(raw_mu)
        raw_mu[4:6] = word.to_bytes(2, "big")
        raw_var[6:8] = word.to_bytes(2, "big")
        for raw in (raw_mu, raw_var):
            wire = to_wire(msg(Patch(100, 99.0, Cells.empty())))
            wire[7][2] = bytes(raw)
            assert reason_of(craft(wire)) == RejectReason.NOT_FINITE


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ((2,), "swarm"), ((3,), 5), ((3,), b"walnut"), ((4,), 1.5), ((5,), None),
        ((5,), False), ((6,), 100), ((6,), "100"), ((7, 0), 1), ((7, 4), 1.0),
        ((7, 7), {"rx": "3"}), ((7, 7), {b"rx": 3}), ((7, 3, 0), 0),
    ],
)
def test_wrong_types(path, value):
    wire = to_wire(msg(heartbeat()))
    target = wire
    for i in path[:-1]:
        target = target[i]
    target[path[-1]] = value
    assert reason_of(craft(wire)) == RejectReason.BAD_TYPE


def test_wrong_shapes_and_versions():
    wire = to_wire(msg(Ping(1)))
    assert reason_of(craft(wire[:-1])) == RejectReason.BAD_SHAPE
    assert reason_of(craft([])) == RejectReason.BAD_SHAPE
    assert reason_of(craft("hello")) == RejectReason.BAD_SHAPE
    assert reason_of(craft([*wire[:7], 1])) == RejectReason.BAD_SHAPE  # body not an array
    assert reason_of(craft([*wire[:7], [1, 2]])) == RejectReason.BAD_SHAPE
    assert reason_of(craft([2, *wire[1:]])) == RejectReason.BAD_VERSION
    assert reason_of(craft([2, 1])) == RejectReason.BAD_VERSION  # version before arity
    assert reason_of(craft([wire[0], 9, *wire[2:]])) == RejectReason.UNKNOWN_KIND
    assert reason_of(craft([wire[0], 0, *wire[2:]])) == RejectReason.UNKNOWN_KIND


def test_out_of_range_values():
    def with_field(body, path, value):
        wire = to_wire(msg(body))
        target = wire
        for i in path[:-1]:
            target = target[i]
        target[path[-1]] = value
        return craft(wire)

    hb = heartbeat()
    for path, value in [
        ((2,), 2**32), ((2,), -1), ((4,), 2**32), ((5,), -1), ((3,), "x" * 33),
        ((3,), "bad\nname"), ((7, 2), -3.5), ((7, 3, 0), -0.1), ((7, 4), 4),
        ((7, 5), -40000), ((7, 6), 2**15), ((7, 7), {"": 1}), ((7, 7), {"rx": 2**32}),
    ]:
        assert reason_of(with_field(hb, path, value)) == RejectReason.OUT_OF_RANGE, path
    track = Track((0.0,) * 4, (1.0,) * 10, 99.0, 1)
    assert reason_of(with_field(track, (7, 1, 9), -1.0)) == RejectReason.OUT_OF_RANGE
    assert reason_of(with_field(track, (7, 3), -1)) == RejectReason.OUT_OF_RANGE
    snap = Snapshot(1, 0, 1, 32760, 0, 4, 4, 100, 99.0, Cells.empty())
    assert reason_of(with_field(snap, (7, 5), 9)) == RejectReason.OUT_OF_RANGE
    assert reason_of(with_field(snap, (7, 2), 0)) == RejectReason.OUT_OF_RANGE


def test_wrong_swarm():
    other = Message(SWARM ^ 1, "walnut", 7, 1, 100.0, Ping(1))
    assert reason_of(encode(other, KEY)) == RejectReason.WRONG_SWARM


def test_wrong_key():
    assert reason_of(encode(msg(Ping(1)), bytes(32))) == RejectReason.BAD_MAC


def test_checks_run_in_order():
    # A datagram wrong in several ways reports the earliest check in SWARM.md's order.
    wire = to_wire(Message(SWARM ^ 1, "walnut", 7, 1, 100.0, Ping(1)))
    wire[6] = math.nan
    assert reason_of(craft(wire)) == RejectReason.NOT_FINITE  # before wrong_swarm
    wire[5] = 1.0
    assert reason_of(craft(wire)) == RejectReason.BAD_TYPE  # types before values
    assert reason_of(craft(wire) + b"x" * 2000) == RejectReason.TOO_LONG  # size first
    assert reason_of(seal(pack(wire) + b"\x00", KEY)) == RejectReason.TRAILING_BYTES


# --- sender-side refusals -------------------------------------------------------------------


def test_cells_refuse_what_the_wire_cannot_carry():
    with pytest.raises(ValueError, match="int16"):
        Cells.from_arrays([40000], [0], [0.0], [1.0])
    with pytest.raises(ValueError, match="int16"):
        Cells.from_arrays([0], [-32769], [0.0], [1.0])
    with pytest.raises(ValueError, match="float16"):
        Cells.from_arrays([0], [0], [70000.0], [1.0])
    with pytest.raises(ValueError, match="float16"):
        Cells.from_arrays([0], [0], [0.0], [1e6])
    with pytest.raises(ValueError, match="finite"):
        Cells.from_arrays([0], [0], [math.nan], [1.0])
    with pytest.raises(ValueError, match="var"):
        Cells.from_arrays([0], [0], [0.0], [1e-9])  # underflows to 0 in float16
    with pytest.raises(ValueError, match="integers"):
        Cells.from_arrays([0.5], [0], [0.0], [1.0])
    with pytest.raises(ValueError, match="twice"):
        Cells.from_arrays([1, 1], [2, 2], [0.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="equal lengths"):
        Cells.from_arrays([1, 2], [2], [0.0], [1.0])
    c = Cells.from_arrays([1], [2], [0.1], [0.2])
    assert c.mu[0] == np.float16(0.1) and not c.mu.flags.writeable


def test_messages_refuse_bad_fields():
    for make in [
        lambda: msg(Ping(-1)),
        lambda: msg(Ping(1), sender=""),
        lambda: msg(Ping(1), sender="x" * 33),
        lambda: msg(Ping(1), t_sent=math.inf),
        lambda: msg(Patch(100, 200.0, Cells.empty()), t_sent=100.0),
        lambda: Pong(1, 0.0, 2.0, 1.0),
        lambda: Heartbeat(0.0, 0.0, 0.0, (1.0,) * 5, Mode.IDLE, 0, 0),
        lambda: Heartbeat(0.0, 0.0, 0.0, (1.0,) * 6, Mode.IDLE, 0, 0,
                          {f"c{i}": i for i in range(17)}),
        lambda: Snapshot(1, 0, 1, 0, 0, 2, 2, 100, 0.0, Cells.from_arrays([2], [0], [0], [1])),
        lambda: Bye("x" * 65),
    ]:
        with pytest.raises(ValueError):
            make()


def test_encode_refuses_oversized():
    with pytest.raises(ValueError, match="exceeds"):
        encode(msg(Patch(100, 99.0, cells(300))), KEY)
