"""Fusion rules against their textbook formulas; CI is never overconfident."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.belief.fusion import (
    ci_criterion_value,
    ci_matrix,
    ci_scalar,
    max_confidence_scalar,
    naive_matrix,
    naive_scalar,
)


def _random_spd(rng: np.random.Generator, n: int, scale: float = 1.0) -> np.ndarray:
    A = rng.normal(size=(n, n)) * scale
    return A @ A.T + 1e-3 * scale * scale * np.eye(n)


# ---------------------------------------------------------------- scalar rules
def test_ci_scalar_textbook() -> None:
    rng = np.random.default_rng(1)
    mu_a, mu_b = rng.normal(size=50), rng.normal(size=50)
    va, vb = rng.uniform(0.01, 2.0, 50), rng.uniform(0.01, 2.0, 50)
    mu, var = ci_scalar(mu_a, va, mu_b, vb)
    omega = vb / (va + vb)
    var_expected = 1.0 / (omega / va + (1.0 - omega) / vb)
    mu_expected = var_expected * (omega * mu_a / va + (1.0 - omega) * mu_b / vb)
    assert np.allclose(var, var_expected)
    assert np.allclose(mu, mu_expected)


def test_naive_scalar_textbook() -> None:
    mu, var = naive_scalar([0.2, 1.0], [0.5, 0.1], [0.6, 0.0], [0.5, 0.4])
    assert np.allclose(var, [0.25, 1.0 / (10.0 + 2.5)])
    assert np.allclose(mu, [0.25 * (0.4 + 1.2), (1.0 / 12.5) * (10.0 + 0.0)])


def test_max_confidence_scalar_keeps_the_smaller_variance() -> None:
    mu, var = max_confidence_scalar(
        [0.1, 0.2, 0.3], [0.5, 0.1, 0.2], [0.9, 0.8, 0.7], [0.4, 0.3, 0.2]
    )
    assert np.allclose(mu, [0.9, 0.2, 0.3])  # a tie keeps the first estimate
    assert np.allclose(var, [0.4, 0.1, 0.2])


@settings(max_examples=200, deadline=None)
@given(
    st.floats(-10, 10),
    st.floats(1e-6, 1e3),
    st.floats(-10, 10),
    st.floats(1e-6, 1e3),
)
def test_ci_scalar_var_lies_between_the_inputs(ma: float, va: float, mb: float, vb: float) -> None:
    mu, var = ci_scalar(ma, va, mb, vb)
    assert min(va, vb) * (1 - 1e-12) <= float(var) <= max(va, vb) * (1 + 1e-12)
    assert min(ma, mb) - 1e-9 <= float(mu) <= max(ma, mb) + 1e-9


@pytest.mark.parametrize("rho", np.linspace(-1.0, 1.0, 21))
def test_ci_scalar_is_consistent_for_any_correlation(rho: float) -> None:
    va, vb = 0.3, 0.7
    _, var = ci_scalar(0.0, va, 0.0, vb)
    omega = vb / (va + vb)
    ka = float(var) * omega / va
    kb = float(var) * (1.0 - omega) / vb
    true_var = ka * ka * va + kb * kb * vb + 2.0 * ka * kb * rho * np.sqrt(va * vb)
    assert float(var) >= true_var - 1e-12


# ----------------------------------------------------------------- matrix CI
@pytest.mark.parametrize("criterion", ["trace", "det"])
def test_ci_matrix_textbook_equations_at_the_chosen_w(criterion: str) -> None:
    rng = np.random.default_rng(7)
    for _ in range(30):
        Pa, Pb = _random_spd(rng, 4), _random_spd(rng, 4, scale=rng.uniform(0.1, 3.0))
        xa, xb = rng.normal(size=4), rng.normal(size=4)
        r = ci_matrix(xa, Pa, xb, Pb, criterion=criterion)
        Ia, Ib = np.linalg.inv(Pa), np.linalg.inv(Pb)
        P = np.linalg.inv(r.w * Ia + (1.0 - r.w) * Ib)
        x = P @ (r.w * Ia @ xa + (1.0 - r.w) * Ib @ xb)
        assert 0.0 <= r.w <= 1.0
        assert np.allclose(r.P, P, rtol=1e-9, atol=1e-12)
        assert np.allclose(r.x, x, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("criterion", ["trace", "det"])
def test_ci_matrix_w_minimises_the_criterion_over_a_dense_grid(criterion: str) -> None:
    rng = np.random.default_rng(11)
    grid = np.linspace(0.0, 1.0, 2001)
    interior = 0
    for _ in range(12):
        Pa, Pb = _random_spd(rng, 4), _random_spd(rng, 4, scale=rng.uniform(0.2, 2.0))
        r = ci_matrix(np.zeros(4), Pa, np.zeros(4), Pb, criterion=criterion)
        Ia, Ib = np.linalg.inv(Pa), np.linalg.inv(Pb)
        P_grid = np.linalg.inv(grid[:, None, None] * Ia + (1.0 - grid[:, None, None]) * Ib)
        if criterion == "trace":
            values = np.trace(P_grid, axis1=1, axis2=2)
        else:
            values = np.linalg.det(P_grid)
        best = float(values.min())
        chosen = ci_criterion_value(Pa, Pb, r.w, criterion)
        assert chosen <= best * (1.0 + 1e-9)
        assert abs(r.w - grid[int(values.argmin())]) <= 1e-3 + 1e-9
        interior += 0.0 < r.w < 1.0
    assert interior >= 6  # the search is exercised, not just its end points


def test_ci_matrix_end_points_when_one_estimate_dominates() -> None:
    P = np.diag([1.0, 2.0, 3.0, 4.0])
    r = ci_matrix(np.zeros(4), 0.01 * P, np.ones(4), P)
    assert r.w == 1.0
    assert np.allclose(r.P, 0.01 * P)
    r = ci_matrix(np.zeros(4), P, np.ones(4), 0.01 * P)
    assert r.w == 0.0
    assert np.allclose(r.x, np.ones(4))


def test_ci_matrix_refuses_a_non_positive_definite_covariance() -> None:
    with pytest.raises(np.linalg.LinAlgError):
        ci_matrix(np.zeros(2), -np.eye(2), np.zeros(2), np.eye(2))
    with pytest.raises(np.linalg.LinAlgError):
        ci_matrix(np.zeros(2), np.eye(2), np.zeros(2), np.diag([1.0, -1.0]))


def test_naive_matrix_textbook() -> None:
    rng = np.random.default_rng(3)
    Pa, Pb = _random_spd(rng, 4), _random_spd(rng, 4)
    xa, xb = rng.normal(size=4), rng.normal(size=4)
    r = naive_matrix(xa, Pa, xb, Pb)
    P = np.linalg.inv(np.linalg.inv(Pa) + np.linalg.inv(Pb))
    assert np.allclose(r.P, P)
    assert np.allclose(r.x, P @ (np.linalg.solve(Pa, xa) + np.linalg.solve(Pb, xb)))


def _fused_error_covariance(
    w: float, P: np.ndarray, Pa: np.ndarray, Pb: np.ndarray, J: np.ndarray
) -> np.ndarray:
    """True covariance of the fused error K_a e_a + K_b e_b for joint error covariance J."""
    K = np.hstack([P @ (w * np.linalg.inv(Pa)), P @ ((1.0 - w) * np.linalg.inv(Pb))])
    return K @ J @ K.T


def test_ci_is_never_overconfident_with_correlated_estimates() -> None:
    """For random joint covariances (with cross-correlation), P_CI - P_true is PSD."""
    rng = np.random.default_rng(2024)
    naive_overconfident = 0
    for _ in range(300):
        n = 4
        J = _random_spd(rng, 2 * n)  # joint covariance of (e_a, e_b), cross block included
        Pa, Pb = J[:n, :n], J[n:, n:]
        r = ci_matrix(np.zeros(n), Pa, np.zeros(n), Pb)
        true = _fused_error_covariance(r.w, r.P, Pa, Pb, J)
        gap = np.linalg.eigvalsh(r.P - true)
        assert gap.min() >= -1e-9 * np.trace(r.P)
        rn = naive_matrix(np.zeros(n), Pa, np.zeros(n), Pb)
        K = np.hstack([rn.P @ np.linalg.inv(Pa), rn.P @ np.linalg.inv(Pb)])
        naive_overconfident += np.linalg.eigvalsh(rn.P - K @ J @ K.T).min() < -1e-9
    # The check has teeth: naive fusion is overconfident on most of the same trials.
    assert naive_overconfident >= 150


def test_ci_monte_carlo_samples_stay_inside_the_claimed_covariance() -> None:
    """Sampled errors of strongly correlated estimates: the empirical covariance fits in P."""
    rng = np.random.default_rng(5)
    n = 4
    Pa = _random_spd(rng, n)
    Pb = _random_spd(rng, n)
    La, Lb = np.linalg.cholesky(Pa), np.linalg.cholesky(Pb)
    cross = 0.9 * La @ Lb.T  # correlation 0.9 between the whitened errors
    J = np.block([[Pa, cross], [cross.T, Pb]])
    truth = rng.normal(size=n)
    samples = rng.multivariate_normal(np.zeros(2 * n), J, size=5000)
    errors = np.empty((samples.shape[0], n))
    for k, e in enumerate(samples):
        r = ci_matrix(truth + e[:n], Pa, truth + e[n:], Pb)
        errors[k] = r.x - truth
    P = ci_matrix(truth, Pa, truth, Pb).P
    empirical = np.cov(errors.T)
    assert np.linalg.eigvalsh(P - empirical).min() >= -0.03 * np.trace(P) / n
    naive = naive_matrix(truth, Pa, truth, Pb).P
    assert np.linalg.eigvalsh(naive - empirical).min() < -0.03 * np.trace(naive) / n
