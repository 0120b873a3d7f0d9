"""Link faults as the wire meets them: drop, Gilbert-Elliott bursts, jitter, duplicates,
reordering and corruption at their stated rates; the same seed, the same fate; partitions;
fault events; the hook that serves the test network."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from agents.faults import (
    BurstLoss,
    FaultKind,
    JitterShape,
    LinkFaults,
    LinkModel,
    names_resolver,
    parse_faults,
)
from tests.support.clock import FakeClock
from tests.support.network import FakeNetwork

A, B = ("127.0.1.1", 47000), ("127.0.1.2", 47000)
PAYLOAD = bytes(range(64))


def route_many(model: LinkModel, n: int, data: bytes = PAYLOAD) -> list[list[tuple[float, bytes]]]:
    return [model.route(data, A, B, now=i * 0.01) for i in range(n)]


def binomial_tol(p: float, n: int, sigmas: float = 5.0) -> float:
    return sigmas * math.sqrt(p * (1 - p) / n)


# --- network fault statistics ----------------------------------------------------------


def test_drop_rate_matches_probability() -> None:
    n, p = 20_000, 0.3
    model = LinkModel(LinkFaults(drop=p), seed=1)
    lost = sum(not out for out in route_many(model, n))
    assert abs(lost / n - p) < binomial_tol(p, n)
    assert model.counters["drop"] == lost
    assert model.counters["routed"] == n
    assert model.counters["delivered"] == n - lost


def test_no_fault_delivers_everything_at_once_unchanged() -> None:
    model = LinkModel(LinkFaults(), seed=1)
    assert all(out == [(0.0, PAYLOAD)] for out in route_many(model, 1000))
    assert model.take_events() == []


def _loss_runs(lost: list[bool]) -> list[int]:
    runs, current = [], 0
    for x in lost:
        if x:
            current += 1
        elif current:
            runs.append(current)
            current = 0
    return runs


def test_gilbert_elliott_burst_length_and_stationary_loss() -> None:
    burst = BurstLoss(enter=0.05, leave=0.25)
    n = 40_000
    model = LinkModel(LinkFaults(burst=burst), seed=7)
    lost = [not out for out in route_many(model, n)]
    runs = _loss_runs(lost)
    # With loss 1 in the bad state and 0 in the good one, a loss run is a bad-state visit.
    assert burst.mean_burst_length == 4.0
    assert abs(np.mean(runs) - 4.0) < 0.4
    assert abs(sum(lost) / n - burst.stationary_loss) < 0.02
    assert burst.stationary_loss == pytest.approx(0.05 / 0.30)
    assert model.counters["burst"] == sum(lost)
    assert abs(model.counters["burst_episodes"] - len(runs)) <= 1
    # Losses come in bursts: far more runs of 4+ than independent loss would give.
    p = sum(lost) / n
    assert sum(r >= 4 for r in runs) / len(runs) > 5 * p**3


def test_gilbert_elliott_partial_loss_in_both_states() -> None:
    burst = BurstLoss(enter=0.1, leave=0.3, loss_bad=0.6, loss_good=0.05)
    n = 40_000
    model = LinkModel(LinkFaults(burst=burst), seed=3)
    loss = sum(not out for out in route_many(model, n)) / n
    expected = 0.25 * 0.6 + 0.75 * 0.05
    assert burst.stationary_loss == pytest.approx(expected)
    assert abs(loss - expected) < 0.02


def test_burst_state_is_per_link() -> None:
    model = LinkModel(LinkFaults(burst=BurstLoss(0.5, 0.5)), seed=2)
    for i in range(200):
        model.route(b"x", A, B, i)
        model.route(b"x", B, A, i)
    starts = [e for e in model.take_events() if e.kind is FaultKind.BURST_START]
    assert {(e.src, e.dst) for e in starts} == {(A, B), (B, A)}


def test_uniform_jitter_is_uniform_around_the_delay() -> None:
    n = 20_000
    model = LinkModel(LinkFaults(delay=0.05, jitter=0.01), seed=4)
    delays = np.array([out[0][0] for out in route_many(model, n)])
    assert delays.min() >= 0.04 and delays.max() <= 0.06
    assert abs(delays.mean() - 0.05) < 5 * 0.01 / math.sqrt(3 * n)
    assert stats.kstest(delays, stats.uniform(loc=0.04, scale=0.02).cdf).pvalue > 1e-3


def test_normal_jitter_has_the_given_sigma() -> None:
    n = 20_000
    spec = LinkFaults(delay=0.05, jitter=0.01, jitter_shape=JitterShape.NORMAL)
    delays = np.array([out[0][0] for out in route_many(LinkModel(spec, seed=5), n)])
    assert abs(delays.mean() - 0.05) < 5 * 0.01 / math.sqrt(n)
    assert abs(delays.std() - 0.01) < 0.0003
    assert stats.kstest(delays, stats.norm(loc=0.05, scale=0.01).cdf).pvalue > 1e-3


def test_jitter_never_makes_a_negative_delay() -> None:
    spec = LinkFaults(jitter=0.01, jitter_shape=JitterShape.NORMAL)
    delays = np.array([out[0][0] for out in route_many(LinkModel(spec, seed=6), 10_000)])
    assert delays.min() == 0.0
    assert abs(np.mean(delays == 0.0) - 0.5) < binomial_tol(0.5, 10_000)


def test_duplicate_rate_and_independent_copies() -> None:
    n, p = 20_000, 0.1
    model = LinkModel(LinkFaults(duplicate=p, delay=0.02, jitter=0.01), seed=8)
    outs = route_many(model, n)
    doubled = [out for out in outs if len(out) == 2]
    assert all(len(out) in (1, 2) for out in outs)
    assert abs(len(doubled) / n - p) < binomial_tol(p, n)
    assert model.counters["duplicate"] == len(doubled)
    assert model.counters["delivered"] == n + len(doubled)
    assert all(a[1] == b[1] == PAYLOAD for a, b in doubled)
    assert sum(a[0] != b[0] for a, b in doubled) == len(doubled)


def test_reorder_rate_and_hold() -> None:
    n, p = 20_000, 0.05
    model = LinkModel(LinkFaults(reorder=p, reorder_hold=0.1), seed=9)
    delays = np.array([out[0][0] for out in route_many(model, n)])
    held = delays == 0.1
    assert np.all(held | (delays == 0.0))
    assert abs(held.mean() - p) < binomial_tol(p, n)
    assert model.counters["reorder"] == int(held.sum())


def test_reorder_changes_arrival_order_on_the_test_network() -> None:
    clock = FakeClock(0.0)
    model = LinkModel(LinkFaults(reorder=0.2, reorder_hold=0.05), seed=10)
    net = FakeNetwork(model.hook(clock))
    net.bind(A)
    net.bind(B)
    n = 500
    for i in range(n):
        net.send(A, B, i.to_bytes(4, "big"), clock.now)
        clock.advance(0.01)  # five datagrams are sent during one hold
    net.run_until(clock.now + 1.0)
    order = [int.from_bytes(data, "big") for data, _, _ in net.receive(B)]
    assert sorted(order) == list(range(n))  # nothing lost, nothing doubled
    assert order != sorted(order)
    # A held datagram is overtaken unless the four sent after it were all held too.
    overtaken = {seq for k, seq in enumerate(order) if max(order[: k + 1]) > seq}
    held = model.counters["reorder"]
    assert held * 0.9 <= len(overtaken) <= held  # the last few sent have nothing behind them
    assert abs(held / n - 0.2) < binomial_tol(0.2, n)


def test_corruption_rate_and_bit_flips() -> None:
    n, p, k = 20_000, 0.05, 3
    model = LinkModel(LinkFaults(corrupt=p, corrupt_bytes=k), seed=11)
    outs = [out[0][1] for out in route_many(model, n)]
    changed = [data for data in outs if data != PAYLOAD]
    assert abs(len(changed) / n - p) < binomial_tol(p, n)
    assert model.counters["corrupt"] == len(changed)
    for data in changed:
        assert len(data) == len(PAYLOAD)
        diff = [a ^ b for a, b in zip(data, PAYLOAD, strict=True)]
        assert sum(d != 0 for d in diff) == k
        assert all(bin(d).count("1") == 1 for d in diff if d)


def test_corrupting_a_short_datagram_flips_what_there_is() -> None:
    model = LinkModel(LinkFaults(corrupt=1.0, corrupt_bytes=8), seed=12)
    ((_, data),) = model.route(b"ab", A, B, 0.0)
    assert data != b"ab" and len(data) == 2
    assert model.route(b"", A, B, 0.0) == [(0.0, b"")]


def test_same_seed_same_fate_and_events() -> None:
    spec = parse_faults(
        "drop=0.2 burst=0.05,0.5 delay=5ms jitter=2ms dup=0.1 reorder=0.1 corrupt=0.1"
    )

    def run(seed: int) -> tuple[list[list[tuple[float, bytes]]], list[dict[str, object]]]:
        model = LinkModel(spec, seed=seed)
        outs = route_many(model, 2000)
        return outs, [e.as_record() for e in model.take_events()]

    assert run(3) == run(3)
    assert run(3)[0] != run(4)[0]


def test_a_higher_drop_rate_loses_a_superset_with_the_same_seed() -> None:
    def lost(p: float) -> set[int]:
        model = LinkModel(LinkFaults(drop=p, burst=BurstLoss(0.01, 0.5)), seed=21)
        return {i for i, out in enumerate(route_many(model, 5000)) if not out}

    low, high = lost(0.1), lost(0.3)
    assert low < high


def test_partition_drops_exactly_cross_group_traffic() -> None:
    addresses = {(f"127.0.1.{i}", 47000): name for i, name in enumerate("abcde", 1)}
    spec = parse_faults("partition=a,b|c|d")
    model = LinkModel(spec, seed=1, resolve=names_resolver(addresses))
    group = {"a": 0, "b": 0, "c": 1, "d": 2}
    broadcast = ("127.255.255.255", 47000)
    expected_cut = 0
    for src, s_name in addresses.items():
        for dst, d_name in [*addresses.items(), (broadcast, None)]:
            out = model.route(b"hello", src, dst, 0.0)
            g1, g2 = group.get(s_name), group.get(d_name or "")
            cut = g1 is not None and g2 is not None and g1 != g2
            expected_cut += cut
            assert out == ([] if cut else [(0.0, b"hello")]), (s_name, d_name)
    assert model.counters["partition"] == expected_cut == 10  # ordered pairs across groups


def test_partition_by_name_endpoints_without_a_resolver() -> None:
    model = LinkModel(parse_faults("partition=walnut|hazel"), seed=1)
    assert model.route(b"x", "walnut", "hazel", 0.0) == []
    assert model.route(b"x", "walnut", "walnut", 0.0) == [(0.0, b"x")]
    assert model.route(b"x", "oak", "hazel", 0.0) == [(0.0, b"x")]


def test_events_name_kind_time_and_size_and_are_drained() -> None:
    model = LinkModel(LinkFaults(drop=1.0), seed=1, max_events=3)
    for i in range(5):
        model.route(b"12345", A, B, now=10.0 + i)
    events = model.take_events()
    assert [(e.kind, e.t, e.size) for e in events] == [
        (FaultKind.DROP, 10.0 + i, 5) for i in (2, 3, 4)
    ]
    assert events[0].as_record()["src"] == list(A)
    assert model.counters["events_lost"] == 2
    assert model.take_events() == []


def test_set_spec_changes_faults_and_logs_the_change() -> None:
    model = LinkModel(LinkFaults(), seed=1)
    assert model.route(b"x", A, B, 0.0) == [(0.0, b"x")]
    model.set_spec(parse_faults("drop=1"), now=1.0)
    assert model.route(b"x", A, B, 2.0) == []
    kinds = [(e.kind, e.detail) for e in model.take_events()]
    assert kinds == [(FaultKind.SPEC, "drop=1"), (FaultKind.DROP, "")]


def test_hook_serves_the_test_network_corruption_included() -> None:
    clock = FakeClock(5.0)
    model = LinkModel(LinkFaults(delay=0.03), seed=1)
    net = FakeNetwork(model.hook(clock))
    net.bind(A)
    net.bind(B)
    net.send(A, B, b"hi", clock.now)
    assert net.next_delivery_at() == pytest.approx(5.03)
    model.set_spec(LinkFaults(corrupt=1.0), now=5.0)
    net.send(A, B, b"data", clock.now)
    delivered = {d.data for d in net.run_until(6.0)}
    assert b"hi" in delivered and b"data" not in delivered
    (corrupted,) = delivered - {b"hi"}
    assert len(corrupted) == 4
