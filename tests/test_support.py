"""The test helpers themselves must be right, or every test built on them lies."""

from __future__ import annotations

import pytest

from tests.support.clock import FakeClock
from tests.support.network import BROADCAST, FakeNetwork, SeededFaults


def test_fake_clock_moves_only_forward() -> None:
    clock = FakeClock(10.0)
    assert clock() == 10.0
    assert clock.advance(0.5) == 10.5
    assert clock.advance_to(12.0) == 12.0
    with pytest.raises(ValueError):
        clock.advance(-1.0)


def test_network_delivers_in_time_order_and_broadcasts_to_the_port() -> None:
    net = FakeNetwork(SeededFaults(seed=1, delay=0.1))
    a, b, c = ("127.0.0.1", 5000), ("127.0.0.2", 5000), ("127.0.0.3", 6000)
    for addr in (a, b, c):
        net.bind(addr)
    net.send(a, (BROADCAST, 5000), b"hello", now=0.0)
    assert net.run_until(0.05) == []
    delivered = net.run_until(0.1)
    assert sorted(d.dst for d in delivered) == [a, b]
    assert net.receive(b) == [(b"hello", a, 0.1)]
    assert net.receive(c) == []


def test_seeded_faults_match_their_rates_and_repeat_for_a_seed() -> None:
    n = 20_000
    faults = SeededFaults(seed=7, drop=0.3, duplicate=0.1, delay=0.01, jitter=0.02)
    fates = [faults(("a", 1), ("b", 1), b"x") for _ in range(n)]
    dropped = sum(1 for f in fates if not f) / n
    duplicated = sum(1 for f in fates if len(f) == 2) / n
    assert abs(dropped - 0.3) < 0.015
    assert abs(duplicated - 0.07) < 0.01  # 0.1 of the 0.7 that survive
    delays = [d for f in fates for d, _ in f]
    assert min(delays) >= 0.01 and max(delays) <= 0.03
    again = SeededFaults(seed=7, drop=0.3, duplicate=0.1, delay=0.01, jitter=0.02)
    assert [again(("a", 1), ("b", 1), b"x") for _ in range(n)] == fates
