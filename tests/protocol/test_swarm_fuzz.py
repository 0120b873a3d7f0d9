"""Fuzzing the decoder: nothing but SwarmDecodeError may ever escape it."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.swarm import Message, SwarmDecodeError, SwarmReceiver, decode_datagram
from protocol.swarm.codec import pack, seal, to_wire
from tools.vectors.swarm import KEY, SWARM_ID, valid_messages

PAYLOADS = [pack(to_wire(m)) for _, _, m in valid_messages()]
WIRES = [to_wire(m) for _, _, m in valid_messages()]


def decode_or_reject(data: bytes) -> Message | None:
    try:
        return decode_datagram(data, KEY, SWARM_ID)
    except SwarmDecodeError:
        return None


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=1300))
def test_arbitrary_bytes(data):
    assert decode_or_reject(data) is None  # forging a MAC by chance does not happen


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=1300))
def test_arbitrary_bytes_signed_with_the_right_key(data):
    decode_or_reject(seal(data, KEY))


@st.composite
def mutated_payloads(draw):
    payload = bytearray(draw(st.sampled_from(PAYLOADS)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate", "extend"]))
        pos = draw(st.integers(0, max(0, len(payload) - 1)))
        if op == "flip" and payload:
            payload[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and payload:
            payload[pos] = draw(st.integers(0, 255))
        elif op == "insert":
            payload[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete" and payload:
            del payload[pos:pos + draw(st.integers(1, 8))]
        elif op == "truncate":
            del payload[pos:]
        elif op == "extend":
            payload += draw(st.binary(min_size=1, max_size=8))
    return bytes(payload)


@settings(max_examples=500, deadline=None)
@given(payload=mutated_payloads())
def test_mutated_valid_datagrams_resigned(payload):
    r = SwarmReceiver(KEY, SWARM_ID)
    r.receive_datagram(seal(payload, KEY), None, 0.0)
    assert r.accepted + r.counters.total == 1


msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=70)
    | st.binary(max_size=80),
    lambda children: st.lists(children, max_size=12)
    | st.dictionaries(st.text(max_size=5) | st.integers(0, 3), children, max_size=17),
    max_leaves=30,
)


@st.composite
def mutated_wires(draw):
    """A valid envelope with one field (at any depth) replaced by an arbitrary value."""
    wire = draw(st.sampled_from(WIRES))
    wire = [list(x) if isinstance(x, list) else x for x in wire]
    wire[7] = list(wire[7])
    target = wire
    if draw(st.booleans()) and wire[7]:
        target = wire[7]
    i = draw(st.integers(0, len(target) - 1))
    target[i] = draw(msgpack_values)
    return wire


@settings(max_examples=300, deadline=None)
@given(wire=mutated_wires())
def test_structured_mutations_signed(wire):
    decode_or_reject(seal(pack(wire), KEY))


@settings(max_examples=150, deadline=None)
@given(value=msgpack_values)
def test_arbitrary_msgpack_objects_signed(value):
    decode_or_reject(seal(pack(value), KEY))


def test_special_floats_in_every_float_field():
    for wire in WIRES:
        for i, field in enumerate(wire[7]):
            if isinstance(field, float):
                for bad in (math.nan, math.inf, -math.inf):
                    mutated = [*wire[:7], [*wire[7][:i], bad, *wire[7][i + 1:]]]
                    assert decode_or_reject(seal(pack(mutated), KEY)) is None
