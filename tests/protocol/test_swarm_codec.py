"""Swarm codec: round trips, rejection reasons, replay window, sender and receiver."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import ProtocolError
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
    RejectReason,
    Snapshot,
    SnapshotAssembler,
    SnapshotDrop,
    SwarmDecodeError,
    SwarmReceiver,
    SwarmSender,
    Track,
    decode_datagram,
    encode,
    from_upper_triangle,
    swarm_id_from_name,
    upper_triangle,
)
from protocol.swarm.codec import pack, seal, to_wire
from protocol.swarm.fields import NAME_CHARACTERS
from protocol.swarm.replay import ReplayGuard, ReplayWindow

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


# --- replay window --------------------------------------------------------------------------


def datagram(seq: int, epoch: int = 7, sender: str = "walnut") -> bytes:
    return encode(msg(Ping(seq), seq=seq, epoch=epoch, sender=sender), KEY)


def test_replay_duplicate_rejected():
    r = SwarmReceiver(KEY, SWARM)
    d = datagram(5)
    assert r.receive_datagram(d, ("127.0.0.1", 9), 1.0) is not None
    assert r.receive_datagram(d, ("127.0.0.1", 9), 1.1) is None
    assert r.counters[RejectReason.DUPLICATE] == 1
    assert r.last_rejection is not None and r.last_rejection.reason == RejectReason.DUPLICATE
    assert r.last_rejection.addr == ("127.0.0.1", 9)


def test_reordering_within_window_accepted():
    r = SwarmReceiver(KEY, SWARM)
    order = [10, 3, 7, 60, 4, 11, 66, 5, 8]  # all within 63 of the newest at arrival
    for seq in order:
        assert r.decode(datagram(seq)).seq == seq
    for seq in order:
        assert reason_of(datagram(seq), r) == RejectReason.DUPLICATE
    assert reason_of(datagram(2), r) == RejectReason.TOO_OLD  # 64 behind 66


def test_too_old_and_window_edges():
    r = SwarmReceiver(KEY, SWARM)
    r.decode(datagram(100))
    assert reason_of(datagram(36), r) == RejectReason.TOO_OLD  # 64 behind
    assert r.decode(datagram(37)).seq == 37  # 63 behind: inside the window
    assert reason_of(datagram(37), r) == RejectReason.DUPLICATE
    r.decode(datagram(1000))  # a jump forward forgets the old bitmap
    assert reason_of(datagram(100), r) == RejectReason.TOO_OLD
    assert r.decode(datagram(999)).seq == 999


def test_windows_are_per_sender_and_epoch():
    r = SwarmReceiver(KEY, SWARM)
    for epoch, sender in [(7, "walnut"), (8, "walnut"), (7, "hazel")]:
        assert r.decode(datagram(5, epoch, sender)).seq == 5
    assert reason_of(datagram(5, 8, "walnut"), r) == RejectReason.DUPLICATE


def test_rejected_datagram_never_advances_the_window():
    r = SwarmReceiver(KEY, SWARM)
    r.decode(datagram(10))
    wire = to_wire(msg(Ping(1), seq=500))
    wire[2] = SWARM ^ 1  # wrong swarm, valid MAC, seq far ahead
    assert reason_of(craft(wire), r) == RejectReason.WRONG_SWARM
    wire = to_wire(msg(Ping(1), seq=11))
    wire[6] = math.nan
    assert reason_of(craft(wire), r) == RejectReason.NOT_FINITE
    assert r.decode(datagram(11)).seq == 11  # seq 11 not marked by the NaN datagram
    assert r.decode(datagram(9)).seq == 9  # 500 did not slide the window
    assert r.replay._windows[("walnut", 7)].top == 11


def test_replay_guard_evicts_least_recently_used():
    g = ReplayGuard(max_windows=3)
    for epoch in range(3):
        g.accept("walnut", epoch, 1)
    g.accept("walnut", 0, 2)  # touch epoch 0
    g.accept("walnut", 3, 1)  # evicts epoch 1, the least recently used
    assert ("walnut", 1) not in g and ("walnut", 0) in g and len(g) == 3
    assert g.evicted == 1
    r = SwarmReceiver(KEY, SWARM, max_windows=256)
    for e in range(300):
        r.decode(datagram(1, epoch=e))
    assert len(r.replay) == 256
    with pytest.raises(ValueError):
        ReplayGuard(0)


def test_replay_window_bitmap_model() -> None:
    rng = np.random.default_rng(3)
    w = ReplayWindow()
    seen: set[int] = set()
    top = -1
    for seq in map(int, rng.integers(0, 400, 3000)):
        expected = (
            None if seq > top else RejectReason.TOO_OLD if top - seq >= 64
            else RejectReason.DUPLICATE if seq in seen else None
        )
        assert w.check(seq) == expected
        if expected is None:
            w.accept(seq)
            seen.add(seq)
            top = max(top, seq)


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


# --- sender, receiver, snapshot assembly ----------------------------------------------------


def test_sender_numbers_and_receiver_accepts():
    s = SwarmSender(KEY, SWARM, "hazel", 42)
    r = SwarmReceiver(KEY, SWARM)
    out = [s.seal(Ping(i), now=float(i)) for i in range(3)]
    n = 500
    out += s.patch_datagrams(np.arange(n), np.zeros(n, int), np.full(n, 0.5), np.full(n, 0.1),
                             cell_size_mm=100, t_ref=2.5, now=3.0)
    got = [r.receive_datagram(d, ("127.0.0.1", 1), 3.0) for d in out]
    assert all(m is not None for m in got)
    assert [m.seq for m in got if m] == list(range(len(out)))
    assert s.next_seq == len(out)
    assert sum(len(m.body.cells) for m in got if m and isinstance(m.body, Patch)) == n
    assert r.accepted == len(out) and r.counters.total == 0
    with pytest.raises(ValueError):
        s.patch_datagrams([0], [0], [1e9], [1.0], cell_size_mm=100, t_ref=2.5, now=3.0)
    assert s.next_seq == len(out)  # a refused patch consumes no sequence numbers


def test_sender_stops_at_the_end_of_the_sequence_space():
    s = SwarmSender(KEY, SWARM, "hazel", 42, first_seq=2**32 - 1)
    s.seal(Ping(1), 0.0)
    with pytest.raises(OverflowError):
        s.seal(Ping(2), 0.0)


def test_construction_is_validated():
    with pytest.raises(ValueError):
        SwarmReceiver(b"short", SWARM)
    with pytest.raises(ValueError):
        SwarmReceiver(KEY, SWARM, limit=65001)
    with pytest.raises(ValueError):
        SwarmReceiver(KEY, 2**32)
    with pytest.raises(ValueError):
        SwarmSender(KEY, SWARM, "", 1)


def test_snapshot_assembly():
    s = SwarmSender(KEY, SWARM, "hazel", 42)
    r = SwarmReceiver(KEY, SWARM)
    a = SnapshotAssembler()
    w, h = 64, 64
    jj, ii = np.mgrid[0:h, 0:w]
    ix, iy = ii.ravel() - 10, jj.ravel() + 3
    mu = np.linspace(0, 1, w * h)
    var = np.linspace(0.01, 2, w * h)
    datagrams = s.snapshot_datagrams(ix, iy, mu, var, snapshot_id=9, origin_ix=-10, origin_iy=3,
                                     width=w, height=h, cell_size_mm=100, t_ref=5.0, now=5.5)
    assert len(datagrams) > 1 and all(len(d) <= 1200 for d in datagrams)
    messages = [r.decode(d) for d in datagrams]
    assert {m.body.chunk_count for m in messages if isinstance(m.body, Snapshot)} == {
        len(datagrams)
    }
    results = [a.add(m, 6.0) for m in reversed(messages)]
    assert all(x is None for x in results[:-1])
    whole = results[-1]
    assert whole is not None and len(whole.cells) == w * h
    order = np.lexsort((whole.cells.ix, whole.cells.iy))
    assert np.array_equal(whole.cells.ix[order], ix.astype(np.int16))
    assert np.array_equal(whole.cells.var[order], var.astype(np.float16))
    assert len(a) == 0
    a.add(messages[0], 10.0)
    a.add(messages[1], 30.0)  # the first chunk expired meanwhile
    assert a.drops[SnapshotDrop.EXPIRED] == 1


def test_snapshot_of_an_empty_window_is_one_chunk():
    s = SwarmSender(KEY, SWARM, "hazel", 42)
    (d,) = s.snapshot_datagrams([], [], [], [], snapshot_id=1, origin_ix=0, origin_iy=0,
                                width=64, height=64, cell_size_mm=100, t_ref=0.0, now=0.0)
    m = decode(d)
    assert isinstance(m.body, Snapshot) and m.body.chunk_count == 1 and len(m.body.cells) == 0
    whole = SnapshotAssembler().add(m, 0.0)
    assert whole is not None and len(whole.cells) == 0
