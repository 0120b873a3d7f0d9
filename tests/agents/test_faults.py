"""The fault vocabulary: link-fault statistics, determinism, partition, text forms, Byzantine."""

from __future__ import annotations

import math
import tomllib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from agents.faults import (
    BurstLoss,
    Byzantine,
    ByzantineSpec,
    FaultKind,
    FaultSpecError,
    JitterShape,
    LinkFaults,
    LinkModel,
    Stage,
    format_byzantine,
    format_faults,
    names_resolver,
    parse_byzantine,
    parse_faults,
)
from agents.observations import Detection
from protocol.swarm import Cells, Message, Patch, Track
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


# --- text and mapping forms -------------------------------------------------------------


def test_the_brief_example_parses_to_the_right_values() -> None:
    spec = parse_faults(
        "drop=0.3 burst=0.05,0.5,1.0 delay=50ms jitter=10ms dup=0.01 reorder=0.05 corrupt=0.001"
    )
    assert spec == LinkFaults(
        drop=0.3,
        burst=BurstLoss(0.05, 0.5, 1.0, 0.0),
        delay=0.05,
        jitter=0.01,
        duplicate=0.01,
        reorder=0.05,
        corrupt=0.001,
    )
    assert format_faults(spec) == (
        "drop=0.3 burst=0.05,0.5 delay=50ms jitter=10ms dup=0.01 reorder=0.05 corrupt=0.001"
    )


def test_units_percentages_and_options() -> None:
    spec = parse_faults(
        "drop=30% delay=0.5s jitter=250us,normal reorder=0.1,100ms corrupt=0.01,4 "
        "duplicate=0.2 partition=walnut,hazel|oak"
    )
    assert spec.drop == 0.3
    assert spec.delay == 0.5
    assert spec.jitter == 250e-6 and spec.jitter_shape is JitterShape.NORMAL
    assert (spec.reorder, spec.reorder_hold) == (0.1, 0.1)
    assert (spec.corrupt, spec.corrupt_bytes) == (0.01, 4)
    assert spec.duplicate == 0.2
    assert spec.partition == (("walnut", "hazel"), ("oak",))
    assert parse_faults(format_faults(spec)) == spec


def test_clear_means_no_faults() -> None:
    assert parse_faults("clear") == LinkFaults()
    assert parse_faults("  ") == LinkFaults()
    assert LinkFaults().is_clear and format_faults(LinkFaults()) == "clear"
    assert parse_byzantine("clear") == ByzantineSpec()
    assert format_byzantine(ByzantineSpec()) == "clear"
    assert not parse_faults("delay=1ms").is_clear


@pytest.mark.parametrize(
    ("text", "token", "problem"),
    [
        ("drop=1.5", "drop=1.5", "probability in [0, 1]"),
        ("drop=abc", "drop=abc", "must be a number"),
        ("drop=-5%", "drop=-5%", "probability"),
        ("dorp=0.1", "dorp=0.1", "did you mean 'drop'"),
        ("delay=50", "delay=50", "needs a unit"),
        ("delay=50min", "delay=50min", "duration"),
        ("delay=2h", "delay=2h", "duration"),
        ("delay=-1ms", "delay=-1ms", "in [0, 60]"),
        ("delay=120s", "delay=120s", "in [0, 60]"),
        ("jitter=1ms,gauss", "jitter=1ms,gauss", "uniform or normal"),
        ("burst=0.1", "burst=0.1", "2 to 4"),
        ("burst=0,0.5", "burst=0,0.5", "must be > 0"),
        ("corrupt=0.1,0", "corrupt=0.1,0", "1..64"),
        ("partition=a,b", "partition=a,b", "two groups"),
        ("partition=a|b,a", "partition=a|b,a", "two partition groups"),
        ("drop=0.1 drop=0.2", "drop=0.2", "already set"),
        ("dup=0.1 duplicate=0.2", "duplicate=0.2", "already set"),
        ("clear drop=0.1", "clear", "cannot be combined"),
        ("drop", "drop", "key=value"),
        ("drop=0.1 =3", "=3", "key=value"),
    ],
)
def test_bad_link_tokens_are_named(text: str, token: str, problem: str) -> None:
    with pytest.raises(FaultSpecError) as err:
        parse_faults(text)
    assert err.value.token == token
    assert problem in str(err.value)
    assert repr(token) in str(err.value)


@pytest.mark.parametrize(
    ("text", "token", "problem"),
    [
        ("bias=2", "bias=2", "two comma-separated"),
        ("bias=2,x", "bias=2,x", "must be a number"),
        ("noise=-1", "noise=-1", "noise must be in"),
        ("replay=5", "replay=5", "needs a unit"),
        ("overconfident=0.5", "overconfident=0.5", "must be in [1,"),
        ("at=both", "at=both", "send or sense"),
        ("lie=1", "lie=1", "unknown key"),
        ("drop=0.1", "drop=0.1", "unknown key"),
    ],
)
def test_bad_byzantine_tokens_are_named(text: str, token: str, problem: str) -> None:
    with pytest.raises(FaultSpecError) as err:
        parse_byzantine(text)
    assert err.value.token == token
    assert problem in str(err.value)


def test_the_same_keys_as_a_toml_table() -> None:
    table = tomllib.loads(
        """
        [out]
        drop = 0.3
        burst = [0.05, 0.5, 1.0]
        delay = "50ms"
        jitter = [0.01, "normal"]
        dup = 0.01
        reorder = [0.05, 0.1]
        partition = [["walnut", "hazel"], ["oak"]]

        [liar]
        bias = [2, 0]
        noise = 0.3
        replay = 5
        overconfident = 10
        at = "sense"
        """
    )
    spec = LinkFaults.from_mapping(table["out"])
    assert spec == parse_faults(
        "drop=0.3 burst=0.05,0.5,1 delay=50ms jitter=10ms,normal dup=0.01 reorder=0.05,100ms "
        "partition=walnut,hazel|oak"
    )
    liar = ByzantineSpec.from_mapping(table["liar"])
    assert liar == parse_byzantine("bias=2,0 noise=0.3 replay=5s overconfident=10 at=sense")
    with pytest.raises(FaultSpecError, match=r"'drop=1\.5'"):
        LinkFaults.from_mapping({"drop": 1.5})
    with pytest.raises(FaultSpecError, match="boolean"):
        LinkFaults.from_mapping({"drop": True})
    with pytest.raises(FaultSpecError, match="unknown key"):
        ByzantineSpec.from_mapping({"bais": [1, 0]})


probability = st.one_of(st.just(0.0), st.just(1.0), st.floats(0.0, 1.0))
positive_probability = st.floats(1e-6, 1.0)
duration = st.one_of(
    st.just(0.0), st.floats(0.0, 60.0), st.integers(0, 60_000).map(lambda ms: ms / 1000)
)
names = st.text("abcdefghijklmnopqrstuvwxyz0123456789_-.", min_size=1, max_size=8)


@st.composite
def link_faults(draw: st.DrawFn) -> LinkFaults:
    burst = draw(
        st.none()
        | st.builds(BurstLoss, positive_probability, positive_probability, probability, probability)
    )
    groups = draw(st.lists(names, min_size=0, max_size=6, unique=True))
    cut = draw(st.integers(1, max(1, len(groups) - 1)))
    partition = (tuple(groups[:cut]), tuple(groups[cut:])) if len(groups) >= 2 else ()
    return LinkFaults(
        drop=draw(probability),
        burst=burst,
        delay=draw(duration),
        jitter=draw(duration),
        jitter_shape=draw(st.sampled_from(JitterShape)),
        duplicate=draw(probability),
        reorder=draw(probability),
        reorder_hold=draw(duration),
        corrupt=draw(probability),
        corrupt_bytes=draw(st.integers(1, 64)),
        partition=partition,
    )


@settings(max_examples=300, deadline=None)
@given(link_faults())
def test_link_faults_text_and_mapping_round_trip(spec: LinkFaults) -> None:
    assert parse_faults(format_faults(spec)) == spec
    assert LinkFaults.from_mapping(spec.to_mapping()) == spec


@settings(max_examples=300, deadline=None)
@given(
    st.builds(
        ByzantineSpec,
        bias=st.tuples(st.floats(-1000, 1000), st.floats(-1000, 1000)),
        noise=st.floats(0, 100),
        replay=st.one_of(st.floats(0, 3600), st.integers(0, 10_000).map(lambda ms: ms / 1000)),
        overconfident=st.floats(1, 1e6),
        at=st.sampled_from(Stage),
    )
)
def test_byzantine_text_and_mapping_round_trip(spec: ByzantineSpec) -> None:
    assert parse_byzantine(format_byzantine(spec)) == spec
    assert ByzantineSpec.from_mapping(spec.to_mapping()) == spec


def test_the_brief_byzantine_example() -> None:
    spec = parse_byzantine("bias=2,0 noise=0.3 replay=5s overconfident=10")
    assert spec == ByzantineSpec(bias=(2.0, 0.0), noise=0.3, replay=5.0, overconfident=10.0)
    assert spec.at is Stage.SEND
    assert format_byzantine(spec) == "bias=2,0 noise=0.3 replay=5s overconfident=10"
    assert parse_byzantine("bias=0.5m,-1m overconfident=10x") == ByzantineSpec(
        bias=(0.5, -1.0), overconfident=10.0
    )


# --- Byzantine behaviours ---------------------------------------------------------------


COV4 = np.array(
    [[0.04, 0.01, 0.0, 0.0], [0.01, 0.05, 0.0, 0.0], [0.0, 0.0, 0.2, 0.02], [0.0, 0.0, 0.02, 0.3]]
)


def make_track(x: float, t: float, updates: int = 3) -> Track:
    cov = tuple(COV4[np.triu_indices(4)].tolist())
    return Track((x, 1.0, 0.5, -0.25), cov, t, updates)


def test_bias_moves_the_track_mean_by_exactly_the_vector() -> None:
    liar = Byzantine(parse_byzantine("bias=2,-0.5"), seed=1)
    honest = make_track(1.25, 10.0)
    out = liar.transform_track(honest, now=10.1)
    assert out.mean == (1.25 + 2.0, 1.0 - 0.5, 0.5, -0.25)
    assert out.cov == honest.cov and out.t_ref == honest.t_ref and out.updates == honest.updates
    assert liar.counters["track"] == 1


def test_noise_has_the_bias_as_mean_and_sigma_as_spread() -> None:
    liar = Byzantine(parse_byzantine("bias=1,0 noise=0.3"), seed=2)
    xs = np.array([liar.transform_track(make_track(0.0, 0.0), 0.0).mean[:2] for _ in range(4000)])
    assert np.allclose(xs.mean(axis=0), [1.0, 1.0], atol=5 * 0.3 / math.sqrt(4000))
    assert np.allclose(xs.std(axis=0), [0.3, 0.3], rtol=0.05)


def test_noise_is_deterministic_for_a_seed() -> None:
    def draws(seed: int) -> list[tuple[float, ...]]:
        liar = Byzantine(parse_byzantine("noise=0.3"), seed=seed)
        return [liar.transform_track(make_track(0.0, 0.0), 0.0).mean for _ in range(10)]

    assert draws(5) == draws(5) != draws(6)


def test_overconfident_divides_the_covariance() -> None:
    liar = Byzantine(parse_byzantine("overconfident=10"), seed=1)
    out = liar.transform_track(make_track(0.0, 0.0), 0.0)
    assert np.allclose(out.cov_matrix, COV4 / 10, rtol=1e-7, atol=0)  # float 32 on the wire
    assert out.mean == make_track(0.0, 0.0).mean


def test_replay_returns_the_belief_from_that_long_ago_restamped() -> None:
    liar = Byzantine(parse_byzantine("replay=2s"), seed=1)
    sent: list[Track] = []
    for i in range(50):  # 5 Hz for 10 s; the belief refers to 50 ms before sending
        now = 100.0 + i * 0.2
        sent.append(liar.transform_track(make_track(float(i), now - 0.05, updates=i), now))
    for i, out in enumerate(sent):
        j = max(0, i - 10)  # 2 s = 10 messages back; the oldest one until then
        assert out.mean[0] == float(j) and out.updates == j
        assert out.t_ref == pytest.approx(100.0 + i * 0.2 - 0.05 if i >= 10 else 99.95 + i * 0.2)
        Message(1, "liar", 1, i, 100.0 + i * 0.2, out)  # a valid message: t_ref <= t_sent
    assert liar.counters["replayed"] == 49
    assert len(liar._histories["track"]) <= 12  # bounded by the replay window


def test_replay_history_has_a_hard_bound() -> None:
    liar = Byzantine(parse_byzantine("replay=100s"), seed=1, max_history=5)
    for i in range(20):
        out = liar.transform_track(make_track(float(i), float(i)), float(i))
    assert out.mean[0] == 15.0
    assert liar.counters["history_overflow"] == 15


def test_stage_decides_between_liar_and_broken_sensor() -> None:
    cov = np.array([[0.01, 0.0], [0.0, 0.02]])
    liar = Byzantine(parse_byzantine("bias=2,0 overconfident=4"), seed=1)
    assert liar.transform_detection(1.0, 1.0, cov, 0.0)[:2] == (1.0, 1.0)
    assert liar.transform_track(make_track(0.0, 0.0), 0.0).mean[0] == 2.0
    broken = Byzantine(parse_byzantine("bias=2,0 overconfident=4 at=sense"), seed=1)
    x, y, c = broken.transform_detection(1.0, 1.0, cov, 0.0)
    assert (x, y) == (3.0, 1.0) and np.array_equal(c, cov / 4)
    assert broken.transform_track(make_track(0.0, 0.0), 0.0) == make_track(0.0, 0.0)
    det = Detection(1.0, 1.0, cov, 7.0)
    moved = broken.transform_observation(det, 7.1)
    assert (moved.x, moved.t) == (3.0, 7.0)
    assert liar.transform_observation(det, 7.1) is det


def _cells() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    ix = np.array([10, 11, 12, 32767], dtype=np.int16)
    iy = np.array([-5, -5, -4, 0], dtype=np.int16)
    mu = np.array([0.25, 0.5, 0.75, 0.125])
    var = np.array([0.5, 0.25, 0.125, 0.5])
    return ix, iy, mu, var


def test_bias_shifts_cells_and_their_mean_by_the_vector() -> None:
    liar = Byzantine(parse_byzantine("bias=0.3,-0.2"), seed=1)
    ix, iy, mu, var = _cells()
    out = liar.transform_cells(ix[:3], iy[:3], mu[:3], var[:3], 0.0, cell_size=0.1)
    assert out.ix.tolist() == [13, 14, 15] and out.iy.tolist() == [-7, -7, -6]
    assert np.array_equal(out.mu, mu[:3]) and np.array_equal(out.var, var[:3])
    c = 0.1

    def centroid(i: np.ndarray, j: np.ndarray, w: np.ndarray) -> np.ndarray:
        return np.array(
            [np.average((i + 0.5) * c, weights=w), np.average((j + 0.5) * c, weights=w)]
        )

    shift = centroid(out.ix, out.iy, out.mu) - centroid(ix[:3], iy[:3], mu[:3])
    assert np.allclose(shift, [0.3, -0.2], atol=1e-12)


def test_cells_shifted_off_the_lattice_are_dropped() -> None:
    liar = Byzantine(parse_byzantine("bias=0.1,0"), seed=1)
    out = liar.transform_cells(*_cells(), 0.0, cell_size=0.1)
    assert len(out.ix) == 3 and 32767 not in out.ix.tolist()
    assert liar.counters["cells_off_lattice"] == 1


def test_overconfident_divides_cell_variances_with_a_wire_floor() -> None:
    liar = Byzantine(parse_byzantine("overconfident=8"), seed=1)
    ix, iy, mu, var = _cells()
    var[0] = 1e-7
    out = liar.transform_cells(ix, iy, mu, var, 0.0, cell_size=0.1)
    assert np.array_equal(out.var[1:], var[1:] / 8)
    assert out.var[0] == 2.0**-24  # 1e-7 / 8 would round to 0 in float16
    assert Cells.from_arrays(out.ix, out.iy, out.mu, out.var).var.min() > 0


def test_transform_patch_gives_a_valid_shifted_overconfident_patch() -> None:
    ix, iy, mu, var = _cells()
    patch = Patch(100, 4.5, Cells.from_arrays(ix[:3], iy[:3], mu[:3], var[:3]))
    liar = Byzantine(parse_byzantine("bias=0.2,0 overconfident=2"), seed=1)
    out = liar.transform_patch(patch, now=5.0)
    assert out.t_ref == 4.5 and out.cell_size_mm == 100
    assert out.cells.ix.tolist() == [12, 13, 14]
    assert np.array_equal(out.cells.var, patch.cells.var / 2)
    assert np.array_equal(out.cells.mu, patch.cells.mu)


def test_patch_replay_restamps_the_old_patch() -> None:
    liar = Byzantine(parse_byzantine("replay=1s"), seed=1)
    patches = [
        Patch(100, t - 0.1, Cells.from_arrays([i], [0], [0.5], [0.25]))
        for i, t in enumerate(np.arange(10.0, 13.0, 0.5))
    ]
    outs = [liar.transform_patch(p, now=p.t_ref + 0.1) for p in patches]
    assert [o.cells.ix.tolist() for o in outs] == [[0], [0], [0], [1], [2], [3]]
    assert [o.t_ref for o in outs] == pytest.approx([p.t_ref for p in patches])


def test_cell_replay_and_honest_identity() -> None:
    liar = Byzantine(parse_byzantine("replay=0.5s"), seed=1)
    first = liar.transform_cells([1], [2], [0.5], [0.25], 0.0, cell_size=0.1)
    liar.transform_cells([3], [4], [0.5], [0.25], 0.25, cell_size=0.1)
    third = liar.transform_cells([5], [6], [0.5], [0.25], 0.5, cell_size=0.1)
    assert first.ix.tolist() == [1] and third.ix.tolist() == [1]
    honest = Byzantine(ByzantineSpec(), seed=1)
    track = make_track(1.0, 1.0)
    assert honest.transform_track(track, 1.0) is track
    with pytest.raises(ValueError, match="int16"):
        honest.transform_cells([40000], [0], [0.5], [0.25], 0.0, cell_size=0.1)
