"""Clock offset estimator: the uncertainty is a true bound under drift and asymmetric delay."""

from __future__ import annotations

import math
import random

import pytest

from protocol.clock import (
    DEFAULT_MAX_UNCERTAINTY,
    DEFAULT_RESOLUTION,
    ClockOffsetEstimator,
    ClockReject,
    ClockSample,
    NoClockSample,
)


class RemoteClock:
    """remote(t) = t + offset0 + drift * (t - t_start), t on the local clock."""

    def __init__(self, offset0: float, drift: float, t_start: float, resolution: float = 0.0):
        self.offset0, self.drift, self.t_start = offset0, drift, t_start
        self.resolution = resolution

    def true_offset(self, t: float) -> float:
        return self.offset0 + self.drift * (t - self.t_start)

    def read(self, t: float) -> float:
        value = t + self.true_offset(t)
        if self.resolution:  # e.g. the car's u64 microsecond uptime, truncated
            value = math.floor(value / self.resolution) * self.resolution
        return value


def exchange(remote: RemoteClock, t1: float, out: float, hold: float, back: float):
    t2 = remote.read(t1 + out)
    t3 = remote.read(t1 + out + hold)
    return t1, t2, t3, t1 + out + hold + back


def out_delay(rng: random.Random) -> float:
    d = 0.0008 + rng.expovariate(1 / 0.004)  # exponential, mean ~5 ms
    if rng.random() < 0.1:
        d += rng.uniform(0.0, 0.3)  # Wi-Fi retries
    return d


def back_delay(rng: random.Random) -> float:
    d = 0.002 + rng.lognormvariate(math.log(0.01), 0.9)  # heavier tail, other median
    if rng.random() < 0.05:
        d += rng.uniform(0.05, 0.4)
    return d


def run_trial(seed: int, probes: int = 60):
    rng = random.Random(seed)
    start = rng.uniform(0.0, 1e5)
    remote = RemoteClock(rng.uniform(-1e5, 1e5), rng.uniform(-500e-6, 500e-6), start,
                         resolution=rng.choice([0.0, 1e-6]))
    est = ClockOffsetEstimator()
    t = start
    checked = synced = 0
    for _ in range(probes):
        t += rng.uniform(0.1, 1.5)
        t1, t2, t3, t4 = exchange(remote, t, out_delay(rng), rng.uniform(0.0, 0.003),
                                  back_delay(rng))
        est.add_sample(t1, t2, t3, t4)
        t = t4
        for q in (t4, t4 + rng.uniform(0, 2.0), t4 + rng.expovariate(1 / 30.0)):
            u = est.uncertainty_at_time(q)
            if math.isinf(u):
                continue
            error = abs(est.offset_at_time(q) - remote.true_offset(q))
            assert error <= u, (seed, q, error, u)
            checked += 1
            synced += est.synchronized_at_time(q)
    return est, checked, synced


def test_true_offset_always_inside_the_uncertainty():
    checked = synced = 0
    for seed in range(150):
        _, c, s = run_trial(seed)
        checked += c
        synced += s
    assert checked > 150 * 60 * 2
    assert synced / checked > 0.5  # a true bound, and still a useful one


def test_bound_is_tight_for_one_sided_delay():
    # All the delay on the way out: the error is exactly round_trip / 2.
    remote = RemoteClock(5.0, 0.0, 0.0)
    est = ClockOffsetEstimator(resolution=0.0, drift_ppm=0.0)
    assert est.add_sample(*exchange(remote, 10.0, 0.040, 0.0, 0.0))
    error = abs(est.offset_at_time(10.04) - remote.true_offset(10.04))
    assert error == pytest.approx(0.020)
    assert est.uncertainty_at_time(10.04) == pytest.approx(0.020)


def test_drift_within_the_exchange_is_covered():
    # 1000 ppm, a long hold and one-sided delay: the rtt/2 + age term alone is too small.
    remote = RemoteClock(0.0, 1000e-6, 0.0)
    est = ClockOffsetEstimator(resolution=0.0)
    t1, t2, t3, t4 = exchange(remote, 100.0, 0.0, 0.2, 0.0004)
    assert est.add_sample(t1, t2, t3, t4)
    error = abs(est.offset_at_time(t4) - remote.true_offset(t4))
    naive = est.best_sample_at_time(t4).round_trip / 2
    assert error > naive
    assert error <= est.uncertainty_at_time(t4)


def test_offset_formula_and_smallest_bound_wins():
    s = ClockSample(10.0, 110.5, 110.6, 11.0)
    assert s.offset == pytest.approx(100.05)
    assert s.round_trip == pytest.approx(0.9)
    est = ClockOffsetEstimator()
    est.add_sample(0.0, 100.01, 100.01, 0.02)  # rtt 20 ms
    est.add_sample(1.0, 101.002, 101.002, 1.004)  # rtt 4 ms: the estimate
    est.add_sample(2.0, 102.03, 102.03, 2.05)  # rtt 50 ms
    assert est.offset_at_time(3.0) == pytest.approx(100.0)
    assert est.best_sample_at_time(3.0) == ClockSample(1.0, 101.002, 101.002, 1.004)


def test_an_aged_fast_probe_gives_way_to_a_fresher_one_with_a_smaller_bound():
    """The bound grows with a sample's age (1000 ppm: 1 ms a second): a 10 ms probe 14 s old
    (bound ~19 ms) gives way to a 30 ms probe just taken (bound ~15 ms)."""
    est = ClockOffsetEstimator(max_samples=32, resolution=0.0)
    est.add_sample(0.0, 100.005, 100.005, 0.010)
    est.add_sample(14.0, 114.02, 114.02, 14.030)
    assert est.best_sample_at_time(13.9).t1 == 0.0  # the 30 ms probe had not come back
    assert est.best_sample_at_time(14.1).t1 == 14.0
    assert est.fastest_round_trip_at_time(14.1) == pytest.approx(0.010)
    assert est.fastest_round_trip_at_time(-1.0) is None
    assert est.uncertainty_at_time(14.1) == pytest.approx(0.015 + 1e-3 * (0.07 + 1.5 * 0.03))


def test_a_fast_probe_keeps_the_mapping_synchronised_through_slow_ones():
    """One 10 ms probe, then 80 ms ones every 0.5 s (a jittery link): with 32 kept the
    mapping stays synchronised 15 s on the first; with 8 kept it is lost after 4 s."""
    for kept, still_synced in ((32, True), (8, False)):
        est = ClockOffsetEstimator(max_samples=kept)
        est.add_sample(0.0, 100.005, 100.005, 0.010)
        t = 0.0
        while t < 15.0:
            t += 0.5
            est.add_sample(t, 100.0 + t + 0.04, 100.0 + t + 0.04, t + 0.080)
        assert est.synchronized_at_time(t + 0.08) is still_synced, kept


def test_keeps_only_the_last_samples():
    est = ClockOffsetEstimator(max_samples=8)
    est.add_sample(0.0, 100.0005, 100.0005, 0.001)  # the best, then pushed out
    for k in range(1, 9):
        est.add_sample(float(k), 100.0 + k + 0.005, 100.0 + k + 0.005, k + 0.010)
    assert len(est.samples) == 8
    assert est.best_sample_at_time(10.0).t1 != 0.0


def test_samples_over_250ms_rejected_and_counted():
    est = ClockOffsetEstimator()
    assert not est.add_sample(0.0, 50.2, 50.2, 0.251)
    assert est.add_sample(1.0, 51.1, 51.1, 1.25)  # exactly 250 ms is allowed
    assert est.rejects[ClockReject.ROUND_TRIP_TOO_LONG] == 1


def test_other_rejections_have_their_own_reasons():
    est = ClockOffsetEstimator()
    assert not est.add_sample(0.0, 5.0, 5.0, math.nan)
    assert not est.add_sample(1.0, 5.0, 5.0, 0.5)  # t4 before t1
    assert not est.add_sample(1.0, 6.0, 5.0, 2.0)  # t3 before t2
    assert not est.add_sample(1.0, 5.0, 5.5, 1.1)  # remote held 0.5 s of a 0.1 s exchange
    assert est.rejects.as_dict() == {
        ClockReject.NOT_FINITE: 1, ClockReject.BAD_ORDER: 2,
        ClockReject.NEGATIVE_ROUND_TRIP: 1,
    }
    assert est.samples == ()


def test_no_sync_with_only_bad_samples():
    est = ClockOffsetEstimator()
    for k in range(20):
        est.add_sample(float(k), k + 100.0, k + 100.0, k + 0.3)
    assert not est.synchronized_at_time(25.0)
    assert est.uncertainty_at_time(25.0) == math.inf
    with pytest.raises(NoClockSample):
        est.offset_at_time(25.0)
    with pytest.raises(NoClockSample):
        est.remote_to_local(125.0, 25.0)


def test_uncertainty_grows_with_age_until_unsynchronized():
    est = ClockOffsetEstimator()
    est.add_sample(10.0, 60.002, 60.002, 10.004)
    ages = [0.0, 1.0, 5.0, 10.0, 30.0]
    us = [est.uncertainty_at_time(10.004 + a) for a in ages]
    assert us == sorted(us) and us[0] < us[-1]
    assert us[1] - us[0] == pytest.approx(1000e-6)  # 1000 ppm of one second
    assert est.synchronized_at_time(10.004 + 10.0)
    assert not est.synchronized_at_time(10.004 + 30.0)


def test_queries_only_see_samples_that_had_arrived():
    est = ClockOffsetEstimator()
    est.add_sample(10.0, 60.002, 60.002, 10.004)
    assert est.uncertainty_at_time(10.0) == math.inf
    assert est.synchronized_at_time(10.004)


def test_conversions():
    est = ClockOffsetEstimator()
    est.add_sample(10.0, 60.002, 60.002, 10.004)  # remote = local + 50
    assert est.remote_to_local(70.0, 11.0) == pytest.approx(20.0)
    assert est.local_to_remote(20.0, 11.0) == pytest.approx(70.0)


def test_a_clock_jump_replaces_the_old_samples():
    remote = RemoteClock(50.0, 0.0, 0.0)
    est = ClockOffsetEstimator()
    for k in range(4):
        est.add_sample(*exchange(remote, float(k), 0.001, 0.0, 0.001))
    rebooted = RemoteClock(-3.0, 0.0, 0.0)  # the car rebooted: uptime restarted
    est.add_sample(*exchange(rebooted, 5.0, 0.01, 0.0, 0.01))  # worse rtt, but newer
    assert est.jumps == 1 and len(est.samples) == 1
    assert est.offset_at_time(6.0) == pytest.approx(-3.0)


def test_reset():
    est = ClockOffsetEstimator()
    est.add_sample(0.0, 1.0, 1.0, 0.01)
    est.reset()
    assert est.uncertainty_at_time(1.0) == math.inf


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_samples": 0}, {"max_samples": 65}, {"max_round_trip": 0.0},
        {"max_round_trip": math.nan}, {"drift_ppm": -1.0}, {"max_uncertainty": 0.0},
        {"max_uncertainty": math.inf}, {"resolution": -1e-6},
    ],
)
def test_constructor_validates(kwargs):
    with pytest.raises(ValueError):
        ClockOffsetEstimator(**kwargs)
    with pytest.raises(TypeError):
        ClockOffsetEstimator(max_samples=8.0)


def test_the_round_trip_limit_is_the_longest_that_synchronises() -> None:
    """What the agent's car_clock warning quotes: a sample just under the limit synchronises
    when fresh, one just over never does."""
    est = ClockOffsetEstimator()
    limit = est.round_trip_limit()
    assert limit == pytest.approx(2 * (DEFAULT_MAX_UNCERTAINTY - 3 * DEFAULT_RESOLUTION))
    under, over = ClockOffsetEstimator(), ClockOffsetEstimator()
    under.add_sample(1.0, 51.0, 51.0, 1.0 + limit - 0.001)
    over.add_sample(1.0, 51.0, 51.0, 1.0 + limit + 0.001)
    assert under.synchronized_at_time(1.0 + limit) and not over.synchronized_at_time(1.0 + limit)
