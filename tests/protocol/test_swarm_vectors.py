"""The committed golden vectors: they decode, re-encode, reject, and match the generator."""

from __future__ import annotations

import json

import pytest

from protocol.swarm import Kind, RejectReason, SwarmDecodeError, SwarmReceiver, encode
from protocol.swarm.jsonform import message_from_json, message_to_json
from protocol.swarm.limits import ClaimLimits, Implausible, judge
from tools.vectors.swarm import VECTORS_PATH, build_vectors, main, render

VECTORS = json.loads(VECTORS_PATH.read_text(encoding="utf-8"))


def receiver(v) -> SwarmReceiver:
    return SwarmReceiver(bytes.fromhex(v["key_hex"]), v["swarm_id"], limit=v["limit"])


@pytest.mark.parametrize("v", VECTORS["valid"], ids=lambda v: v["name"])
def test_valid_vector_decodes_and_reencodes(v):
    data = bytes.fromhex(v["datagram_hex"])
    message = receiver(v).decode(data)
    assert message == message_from_json(v["message"])
    assert message_to_json(message) == v["message"]
    assert message.kind.name == v["kind"] and len(data) == v["length"]
    assert encode(message, bytes.fromhex(v["key_hex"])).hex() == v["datagram_hex"]


@pytest.mark.parametrize("v", VECTORS["invalid"], ids=lambda v: v["name"])
def test_invalid_vector_is_rejected_with_its_reason(v):
    r = receiver(v)
    for before in v["preceded_by_hex"]:
        r.decode(bytes.fromhex(before))
    with pytest.raises(SwarmDecodeError) as info:
        r.decode(bytes.fromhex(v["datagram_hex"]))
    assert info.value.reason == v["reason"]


def test_vectors_cover_every_kind_and_reason():
    assert {v["kind"] for v in VECTORS["valid"]} == {k.name for k in Kind}
    assert {v["reason"] for v in VECTORS["invalid"]} == {str(r) for r in RejectReason}


def test_committed_file_equals_generator_output():
    assert VECTORS_PATH.read_text(encoding="utf-8") == render(build_vectors())
    assert main(["--check"]) == 0


def test_bit_flips_of_every_valid_vector_are_rejected():
    for v in VECTORS["valid"]:
        r = receiver(v)
        data = bytearray.fromhex(v["datagram_hex"])
        for i in range(len(data) * 8):
            data[i // 8] ^= 1 << (i % 8)
            with pytest.raises(SwarmDecodeError):
                r.decode(bytes(data))
            data[i // 8] ^= 1 << (i % 8)
        assert r.counters.total == 0 and len(r.replay) == 0


IMPLAUSIBLE = VECTORS["implausible"]


@pytest.mark.parametrize("v", IMPLAUSIBLE["cases"], ids=lambda v: v["name"])
def test_implausible_vector_is_judged_with_its_reason(v):
    message = receiver(VECTORS).decode(bytes.fromhex(v["datagram_hex"]))  # valid on the wire
    limits = ClaimLimits(**IMPLAUSIBLE["limits"])
    offset = v["offset"]
    to_local = None if offset is None else (lambda t: t - offset)
    reason = judge(message, IMPLAUSIBLE["now"], limits, to_local)
    assert (None if reason is None else str(reason)) == v["reason"]


def test_implausible_vectors_cover_every_rule():
    assert {v["reason"] for v in IMPLAUSIBLE["cases"]} == {None, *(str(r) for r in Implausible)}
