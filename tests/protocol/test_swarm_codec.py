"""Swarm codec round trips: every kind and random messages decode to what was encoded and
re-encode to the same bytes; the covariance helpers; the swarm id from a name."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.swarm import (
    Bye,
    Cells,
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
    Track,
    encode,
    from_upper_triangle,
    swarm_id_from_name,
    upper_triangle,
)
from protocol.swarm.fields import NAME_CHARACTERS
from tests.protocol.swarmwire import KEY, SWARM, cells, decode, heartbeat, msg

SAMPLES = [
    heartbeat(),
    Patch(100, 99.5, cells(5)),
    Patch(250, 99.5, Cells.empty()),
    Track((1.0, 2.0, 0.1, -0.1), tuple(float(v) for v in range(10)), 99.0, 12),
    Ping(0),
    Ping(2**32 - 1),
    Pong(9, 50.0, 70.0, 70.001),
    Snapshot(3, 0, 2, 0, -3, 4, 4, 100, 99.9, cells(3, 0).slice(0, 1)),
    Bye(),
    Bye("restarting: low battery"),
    Look(0, 99.0, 300, 1082, (LookRecord(0, 100, 200, 0),)),
    Look(2**32 - 2, 99.5, 65535, 6283,
         (LookRecord(65535, -32768, 32767, -32768), LookRecord(0, 0, 0, 32767))),
]


# --- round trips ---------------------------------------------------------------------------


@pytest.mark.parametrize("body", SAMPLES, ids=lambda b: type(b).__name__)
def test_round_trip_every_kind(body):
    m = msg(body)
    data = encode(m, KEY)
    assert len(data) <= 1200
    back = decode(data)
    assert back == m
    assert back.kind == body.KIND
    assert encode(back, KEY) == data  # deterministic and canonical


def test_every_kind_is_covered():
    assert {type(b).KIND for b in SAMPLES} == set(Kind)


def test_encode_is_deterministic():
    m = msg(heartbeat())
    assert encode(m, KEY) == encode(msg(heartbeat()), KEY)
    # counters given in any order encode the same
    a = Heartbeat(0.0, 0.0, 0.0, (0.0,) * 6, Mode.IDLE, 0, 0, {"b": 1, "a": 2})
    b = Heartbeat(0.0, 0.0, 0.0, (0.0,) * 6, Mode.IDLE, 0, 0, (("a", 2), ("b", 1)))
    assert encode(msg(a), KEY) == encode(msg(b), KEY)


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
u32 = st.integers(0, 2**32 - 1)
i16 = st.integers(-(2**15), 2**15 - 1)
nonneg = st.floats(0.0, 1e6)
f32 = st.floats(-1e30, 1e30)  # covariances and the track mean travel as float 32
printable = st.characters(min_codepoint=0x20, max_codepoint=0x7E)  # BYE reasons: SWARM.md §2
name = st.text(st.sampled_from(sorted(NAME_CHARACTERS)), min_size=1, max_size=8)


@st.composite
def bodies(draw):
    kind = draw(st.sampled_from(list(Kind)))
    t = draw(st.floats(0.0, 1e6))
    if kind is Kind.HEARTBEAT:
        return Heartbeat(draw(finite), draw(finite), draw(st.floats(-math.pi, math.pi)),
                         (draw(nonneg), draw(f32), draw(f32), draw(nonneg), draw(f32),
                          draw(nonneg)),
                         draw(st.sampled_from(list(Mode))), draw(i16), draw(i16),
                         draw(st.dictionaries(name, u32, max_size=16)))
    if kind in (Kind.PATCH, Kind.SNAPSHOT):
        n = draw(st.integers(0, 60))
        ix = draw(st.lists(st.integers(0, 9), min_size=n, max_size=n))
        iy = list(range(n))
        mu = draw(st.lists(st.floats(-60000, 60000), min_size=n, max_size=n))
        var = draw(st.lists(st.floats(1e-3, 6e4), min_size=n, max_size=n))
        c = Cells.from_arrays(np.array(ix, int), np.array(iy, int), mu, var)
        if kind is Kind.PATCH:
            return Patch(draw(st.integers(1, 65535)), t, c)
        return Snapshot(draw(u32), 0, draw(st.integers(1, 65535)), 0, 0, 10, 64,
                        draw(st.integers(1, 65535)), t, c)
    if kind is Kind.TRACK:
        cov = [draw(nonneg) if k in (0, 4, 7, 9) else draw(f32) for k in range(10)]
        return Track(tuple(draw(f32) for _ in range(4)), tuple(cov), t, draw(u32))
    if kind is Kind.PING:
        return Ping(draw(u32))
    if kind is Kind.PONG:
        return Pong(draw(u32), draw(st.floats(0.0, 4e9)), t, t + draw(st.floats(0, 1)))
    if kind is Kind.LOOK:
        n = draw(st.integers(1, 64))
        looks = draw(st.lists(st.tuples(st.integers(0, 65535), i16, i16, i16),
                              min_size=n, max_size=n))
        return Look(draw(st.integers(0, 2**32 - n)), t, draw(st.integers(1, 65535)),
                    draw(st.integers(1, 6283)), tuple(looks))
    return Bye(draw(st.text(printable, max_size=16)))


@settings(max_examples=150, deadline=None)
@given(body=bodies(), seq=u32, epoch=u32, sender=name)
def test_round_trip_random_messages(body, seq, epoch, sender):
    m = Message(SWARM, sender, epoch, seq, 2e6, body)
    data = encode(m, KEY)
    assert decode(data) == m
    assert encode(decode(data), KEY) == data


def test_covariance_helpers_round_trip():
    a = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
    tri = upper_triangle(a)
    assert tri == (4.0, 1.0, 0.5, 3.0, 0.2, 2.0)
    assert np.array_equal(from_upper_triangle(tri, 3), a)
    hb = Heartbeat(0.0, 0.0, 0.0, tri, Mode.SEARCH, 0, 0)
    assert np.array_equal(hb.cov_matrix, a.astype(np.float32).astype(np.float64))


def test_swarm_id_from_name_is_a_stable_u32():
    sid = swarm_id_from_name("stigmesh-golden")
    assert 0 <= sid < 2**32
    assert sid == swarm_id_from_name("stigmesh-golden")
    assert sid != swarm_id_from_name("stigmesh-golden2")
    with pytest.raises(ValueError):
        swarm_id_from_name("")
