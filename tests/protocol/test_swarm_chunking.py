"""Chunking cell sets into datagrams: every chunk fits, nothing is lost, <= 8.5 bytes a cell."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.swarm import (
    Cells,
    Message,
    Patch,
    Snapshot,
    SwarmReceiver,
    SwarmSender,
    encode,
    patch_capacity,
    patch_messages,
    swarm_id_from_name,
)
from protocol.swarm.cells import bin_header_size, cells_that_fit
from protocol.swarm.codec import encoded_size

KEY = b"k" * 32
SWARM = swarm_id_from_name("chunk-test")


def random_cells(rng: np.random.Generator, n: int):
    flat = rng.choice(2**32, size=n, replace=False)  # distinct (ix, iy) pairs
    ix = (flat >> 16).astype(np.int64) - 2**15
    iy = (flat & 0xFFFF).astype(np.int64) - 2**15
    mu = rng.uniform(-1000, 1000, n)
    var = rng.uniform(1e-3, 60000, n)
    return ix, iy, mu, var


def received_cells(datagrams: list[bytes], limit: int) -> Cells:
    r = SwarmReceiver(KEY, SWARM, limit=limit)
    parts = []
    for d in datagrams:
        m = r.decode(d)
        assert isinstance(m.body, Patch | Snapshot)
        parts.append(m.body.cells)
    return Cells.concatenate(parts)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 5000), seed=st.integers(0, 2**32 - 1),
       limit=st.sampled_from([1200, 1500, 9000, 65000]), first_seq=st.sampled_from([0, 2**20]))
def test_random_cell_sets_split_fit_and_decode_back(n, seed, limit, first_seq):
    rng = np.random.default_rng(seed)
    ix, iy, mu, var = random_cells(rng, n)
    s = SwarmSender(KEY, SWARM, "walnut", 123456789, limit=limit, first_seq=first_seq)
    datagrams = s.patch_datagrams(ix, iy, mu, var, cell_size_mm=100, t_ref=1.0, now=2.0)
    assert all(len(d) <= limit for d in datagrams)
    got = received_cells(datagrams, limit)
    assert got == Cells.from_arrays(ix, iy, mu, var)  # exactly, after float16 rounding
    assert np.array_equal(got.mu, mu.astype(np.float16))
    # as few datagrams as the capacity allows
    cap = patch_capacity(cell_size_mm=100, t_ref=1.0, swarm_id=SWARM, sender="walnut",
                         epoch=123456789, t_sent=2.0, limit=limit)
    assert len(datagrams) == -(-n // cap)


def test_full_patch_costs_at_most_8_5_bytes_per_cell():
    # Worst-case header widths: u32 swarm id, epoch and seq all need 5 bytes.
    n = 1000
    rng = np.random.default_rng(0)
    cells = Cells.from_arrays(*random_cells(rng, n))
    messages = patch_messages(cells, cell_size_mm=100, t_ref=1e6, swarm_id=2**32 - 1,
                              sender="walnut", epoch=2**32 - 1, first_seq=2**32 - 20,
                              t_sent=1e6 + 0.5)
    full = encode(messages[0], KEY)
    per_cell = len(full) / len(messages[0].body.cells)
    print(f"full PATCH: {len(full)} bytes, {len(messages[0].body.cells)} cells, "
          f"{per_cell:.3f} bytes/cell")
    assert len(full) <= 1200
    assert len(messages[0].body.cells) == 142
    assert per_cell <= 8.5


def test_capacity_is_exact():
    # One more cell than the capacity would not fit.
    for limit in (1200, 1201, 1207, 4096, 65000):
        cap = patch_capacity(cell_size_mm=100, t_ref=1.0, swarm_id=SWARM, sender="walnut",
                             epoch=1, t_sent=2.0, limit=limit)
        rng = np.random.default_rng(limit)
        cells = Cells.from_arrays(*random_cells(rng, cap + 1))
        fits = Message(SWARM, "walnut", 1, 2**32 - 1, 2.0, Patch(100, 1.0, cells.slice(0, cap)))
        over = Message(SWARM, "walnut", 1, 2**32 - 1, 2.0, Patch(100, 1.0, cells))
        assert encoded_size(fits) <= limit < encoded_size(over)


def test_bin_header_arithmetic():
    assert [bin_header_size(n) for n in (0, 255, 256, 65535, 65536)] == [2, 2, 3, 3, 5]
    assert cells_that_fit(1200, 61) == 142  # 61 + 3 + 142 * 8 == 1200
    assert cells_that_fit(1200, 62) == 141
    assert cells_that_fit(300, 40) == 32  # 40 + 2 + 32 * 8 == 298: bin 8 still suffices
    assert cells_that_fit(100, 98) == 0


def test_snapshot_chunks_fit_at_every_limit():
    w = h = 64
    jj, ii = np.mgrid[0:h, 0:w]
    rng = np.random.default_rng(1)
    for limit in (1200, 65000):
        s = SwarmSender(KEY, SWARM, "walnut-with-a-long-name-32-bytes", 2**32 - 1, limit=limit,
                        first_seq=2**31)
        datagrams = s.snapshot_datagrams(
            ii.ravel(), jj.ravel(), rng.random(w * h), rng.random(w * h) + 0.1,
            snapshot_id=2**32 - 1, origin_ix=0, origin_iy=0, width=w, height=h,
            cell_size_mm=100, t_ref=1.0, now=1.0,
        )
        assert all(len(d) <= limit for d in datagrams)
        assert len(received_cells(datagrams, limit)) == w * h


def test_empty_patch_sends_nothing():
    s = SwarmSender(KEY, SWARM, "walnut", 1)
    assert s.patch_datagrams([], [], [], [], cell_size_mm=100, t_ref=0.0, now=0.0) == []
    assert s.next_seq == 0


def test_refuses_unsendable_cells_at_encode_time():
    s = SwarmSender(KEY, SWARM, "walnut", 1)
    with pytest.raises(ValueError, match="int16"):
        s.patch_datagrams([0, 70000], [0, 0], [0.0, 0.0], [1.0, 1.0], cell_size_mm=100,
                          t_ref=0.0, now=0.0)
    with pytest.raises(ValueError, match="float16"):
        s.patch_datagrams([0], [0], [0.0], [1e5], cell_size_mm=100, t_ref=0.0, now=0.0)
