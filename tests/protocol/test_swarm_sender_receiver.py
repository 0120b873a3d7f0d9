"""Swarm sender and receiver: the replay window (duplicates, reordering within it, too old,
per sender and epoch, never moved by a rejected datagram, least recently used evicted);
sequence numbers; snapshots chunked and reassembled."""

from __future__ import annotations

import math

import numpy as np
import pytest

from protocol.swarm import (
    Patch,
    Ping,
    RejectReason,
    Snapshot,
    SnapshotAssembler,
    SnapshotDrop,
    SwarmReceiver,
    SwarmSender,
    encode,
)
from protocol.swarm.codec import to_wire
from protocol.swarm.replay import ReplayGuard, ReplayWindow
from tests.protocol.swarmwire import KEY, SWARM, craft, decode, msg, reason_of

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
