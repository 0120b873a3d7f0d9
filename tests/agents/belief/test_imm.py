"""IMM steps against Bar-Shalom, Li and Kirubarajan (2001), §11.6.6, written out longhand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.belief.imm import (
    gaussian_likelihood,
    mix,
    mixing_probabilities,
    moment_match,
    posterior_mode_probabilities,
    switching_matrix,
)


def test_switching_matrix_is_a_continuous_time_markov_chain() -> None:
    Pi = switching_matrix(0.5, [2.0, 4.0])
    assert Pi[0, 0] == pytest.approx(math.exp(-0.25))
    assert Pi[1, 1] == pytest.approx(math.exp(-0.125))
    assert np.allclose(Pi.sum(axis=1), 1.0)
    assert np.allclose(switching_matrix(0.0, [2.0, 4.0]), np.eye(2))
    three = switching_matrix(1.0, [1.0, 2.0, 3.0])
    assert three[0, 1] == pytest.approx(three[0, 2]) == pytest.approx((1 - math.exp(-1)) / 2)


def test_mixing_is_the_textbook_formula() -> None:
    mu = np.array([0.3, 0.7])
    Pi = np.array([[0.9, 0.1], [0.2, 0.8]])
    xs = [np.array([0.0, 1.0]), np.array([1.0, 0.0])]
    Ps = [np.diag([0.1, 0.2]), np.diag([0.3, 0.4])]
    cbar, x0, P0, M = mix(mu, Pi, xs, Ps)
    for j in range(2):
        c = sum(Pi[i, j] * mu[i] for i in range(2))
        assert cbar[j] == pytest.approx(c)
        w = [Pi[i, j] * mu[i] / c for i in range(2)]
        assert M[:, j] == pytest.approx(w)
        xj = w[0] * xs[0] + w[1] * xs[1]
        Pj = sum(w[i] * (Ps[i] + np.outer(xs[i] - xj, xs[i] - xj)) for i in range(2))
        assert np.allclose(x0[j], xj) and np.allclose(P0[j], Pj)


def test_mixing_every_mode_at_once_is_each_moment_match_bit_for_bit() -> None:
    # mix() batches the modes; the filter's results (and the run logs) stay bit-identical
    # only while it does exactly what moment_match(M[:, j], ...) does for each mode j.
    rng = np.random.default_rng(12)
    for trial in range(300):
        m = 1 + trial % 3
        xs = [rng.normal(size=5) * 10.0 ** rng.uniform(-3, 2) for _ in range(m)]
        xs[0][1] = -0.0
        Ps = [a @ a.T * 10.0 ** rng.uniform(-4, 1) for a in rng.normal(size=(m, 5, 5))]
        mu = rng.dirichlet(np.ones(m))
        _, x0, P0, M = mix(mu, switching_matrix(0.1, [2.0, 1.0, 3.0][:m]), xs, Ps)
        for j in range(m):
            x, P = moment_match(M[:, j], xs, Ps)
            assert x.tobytes() == x0[j].tobytes() and P.tobytes() == P0[j].tobytes()


def test_a_mode_nothing_flows_into_keeps_its_own_estimate() -> None:
    cbar, M = mixing_probabilities(np.array([1.0, 0.0]), np.eye(2))
    assert cbar == pytest.approx([1.0, 0.0])
    assert np.allclose(M, np.eye(2))


def test_combination_is_moment_matching() -> None:
    w = np.array([0.25, 0.75])
    xs = [np.array([1.0, 0.0]), np.array([0.0, 2.0])]
    Ps = [np.eye(2) * 0.1, np.eye(2) * 0.2]
    x, P = moment_match(w, xs, Ps)
    assert np.allclose(x, [0.25, 1.5])
    expected = sum(w[i] * (Ps[i] + np.outer(xs[i] - x, xs[i] - x)) for i in range(2))
    assert np.allclose(P, expected)


def test_likelihood_and_mode_update() -> None:
    nu = np.array([0.1, -0.2])
    S = np.array([[0.04, 0.01], [0.01, 0.09]])
    expected = math.exp(-0.5 * nu @ np.linalg.solve(S, nu)) / (
        2 * math.pi * math.sqrt(np.linalg.det(S)))
    assert gaussian_likelihood(nu, S) == pytest.approx(expected)
    assert gaussian_likelihood(nu, -S) == 0.0
    cbar = np.array([0.4, 0.6])
    mu = posterior_mode_probabilities(cbar, [2.0, 1.0])
    assert mu == pytest.approx([0.8 / 1.4, 0.6 / 1.4])
    # Both likelihoods underflowing leaves the prediction; a floor keeps a mode alive.
    assert posterior_mode_probabilities(cbar, [0.0, 0.0]) == pytest.approx(cbar)
    floored = posterior_mode_probabilities(cbar, [1.0, 0.0], floor=0.01)
    assert floored[1] == pytest.approx(0.01 / 1.01)
