"""The matched-sensor reference (tools/replay/metrics/matched.py): its draws are what the log's
covariances say, and the filter it feeds is consistent exactly when its model matches the
motion."""

from __future__ import annotations

import numpy as np
import pytest

from agents.belief.models import cv_process_noise, cv_transition
from agents.belief.params import TrackParams
from tools.replay.metrics import Truth, fraction_inside, nees_bounds
from tools.replay.metrics.detections import Sighting
from tools.replay.metrics.matched import matched_draws, matched_nees, seed_of

STEP = 0.01  # s: the truth's grid

def _cv_only(accel_psd: float) -> TrackParams:
    """A pure constant-velocity filter of density ``accel_psd``: the turn mode never entered
    (no initial share, no switching within a run's length, no floor), no speed to reach."""
    return TrackParams(max_accel=(accel_psd / 0.1) ** 0.5, cv_manoeuvre_time=0.1,
                       initial_turn=0.0, sojourn_cv=1e9, mode_floor=0.0, max_speed=1e3)


def _truth(accel_psd: float, seconds: float, seed: int) -> Truth:
    """A target whose acceleration is white noise of density ``accel_psd`` (sampled exactly on
    the grid), from (0, 0) at 0.5 m/s east; ``accel_psd`` 0 is a straight line."""
    rng = np.random.default_rng(seed)
    n = round(seconds / STEP) + 1
    F, Q = cv_transition(STEP), cv_process_noise(STEP, max(accel_psd, 1e-300))
    L = np.linalg.cholesky(Q) if accel_psd > 0 else np.zeros((4, 4))
    x = np.array([0.0, 0.0, 0.5, 0.0])
    states = np.empty((n, 4))
    for k in range(n):
        states[k] = x
        x = F @ x + L @ rng.standard_normal(4)
    return Truth(STEP * np.arange(n, dtype=np.float64), states, {})


def _sightings(times: np.ndarray, cov: np.ndarray) -> list[Sighting]:
    return [Sighting(float(t), 0.0, 0.0, cov, False) for t in times]


def test_the_draws_are_the_truth_plus_noise_of_the_logged_covariance() -> None:
    truth = Truth(np.array([0.0, 100.0]), np.array([[1.0, 2.0, 0.0, 0.0]] * 2), {})
    cov = np.array([[0.04, 0.015], [0.015, 0.01]])
    rows = _sightings(np.linspace(0.0, 99.0, 4000), cov)
    rows.insert(10, Sighting(5.0, 0.0, 0.0, np.array([[1.0, 2.0], [2.0, 1.0]]), False))  # not PD
    rows.insert(20, Sighting(500.0, 0.0, 0.0, cov, False))  # no truth then
    draws = matched_draws(rows, truth, seed=3)
    assert len(draws) == 4000
    assert [d[0] for d in draws] == sorted(d[0] for d in draws)
    z = np.array([d[1] for d in draws]) - [1.0, 2.0]
    assert z.mean(axis=0) == pytest.approx([0.0, 0.0], abs=0.01)
    assert np.cov(z.T) == pytest.approx(cov, rel=0.1, abs=1e-3)
    nis = np.einsum("ni,ij,nj->n", z, np.linalg.inv(cov), z)
    assert nis.mean() == pytest.approx(2.0, abs=0.15)
    again = matched_draws(rows, truth, seed=3)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(draws, again, strict=True))


def test_a_filter_whose_model_matches_the_motion_is_consistent_and_one_that_does_not_is_not(
) -> None:
    q, seconds = 0.05, 300.0
    params = _cv_only(q)
    assert params.q_cv == pytest.approx(q)
    cov = np.diag([0.02, 0.01])
    times = np.round(np.arange(0.1, seconds, 0.1), 6)
    held = np.ones(times.size, dtype=bool)
    held[:100] = False  # the first 10 s, not judged
    b4 = nees_bounds(4)
    means, inside = {}, {}
    for name, psd in (("matched", q), ("straight", 0.0)):
        truth = _truth(psd, seconds + 1.0, seed=11)
        out = matched_nees(_sightings(times, cov), truth, times, held, params=params, space=None,
                           seed=5)
        n4 = out["nees4"]
        assert np.isnan(n4[:100]).all() and np.isfinite(n4[100:]).all()
        means[name], inside[name] = float(n4[100:].mean()), fraction_inside(n4, b4)
    # Textbook: a Kalman filter whose model is the truth's has NEES4 ~ chi-square(4).
    assert 3.4 <= means["matched"] <= 4.6, means
    assert inside["matched"] is not None and inside["matched"] >= 0.9, inside
    # The same filter on a target that never accelerates: its covariance exceeds its errors.
    assert means["straight"] < 0.75 * means["matched"], means


def test_the_seed_is_fixed_per_agent() -> None:
    assert seed_of("walnut") == seed_of("walnut") != seed_of("hazel")


@pytest.mark.parametrize("q", [5.0, 0.05])
def test_on_noiseless_motion_a_steady_filter_claims_twice_its_errors_whatever_its_noise(
        q: float) -> None:
    """Why the suite's NEES sits near 2 (docs/evidence.md §4): in steady state the lag a
    filter's process noise allows and the measurement noise it averages are of one size, so
    on a target that never accelerates its NEES4 mean is about half of 4 for any q > 0."""
    cov = np.diag([0.02, 0.01])
    times = np.round(np.arange(0.1, 300.0, 0.1), 6)
    held = np.ones(times.size, dtype=bool)
    held[:100] = False
    out = matched_nees(_sightings(times, cov), _truth(0.0, 301.0, seed=11), times, held,
                       params=_cv_only(q), space=None, seed=5)
    assert 1.8 <= float(np.nanmean(out["nees4"])) <= 2.5
    inside = fraction_inside(out["nees4"], nees_bounds(4))
    assert inside is not None and inside < 0.9
