"""Motion models against their textbook formulas (Bar-Shalom, Li, Kirubarajan 2001)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.belief.models import (
    ConstantVelocity,
    CoordinatedTurn,
    cv_predict,
    cv_process_noise,
    cv_transition,
)


def _numeric_jacobian(model: CoordinatedTurn, s: np.ndarray, dt: float) -> np.ndarray:
    J = np.zeros((5, 5))
    for k in range(5):
        h = 1e-6 * max(1.0, abs(s[k]))
        up, down = s.copy(), s.copy()
        up[k] += h
        down[k] -= h
        J[:, k] = (model.transition(up, dt)[0] - model.transition(down, dt)[0]) / (2 * h)
    return J


def test_cv_noise_is_the_continuous_white_acceleration_q() -> None:
    dt, q = 0.3, 0.7
    Q1 = q * np.array([[dt**3 / 3, dt**2 / 2], [dt**2 / 2, dt]])
    Q = cv_process_noise(dt, q)
    assert np.allclose(Q[np.ix_([0, 2], [0, 2])], Q1)
    assert np.allclose(Q[np.ix_([1, 3], [1, 3])], Q1)
    assert np.allclose(Q[np.ix_([0, 2], [1, 3])], 0.0)
    assert np.allclose(cv_transition(dt) @ [1, 2, 3, 4], [1.9, 3.2, 3, 4])


def test_five_state_cv_moves_the_kinematics_and_keeps_the_turn_rate() -> None:
    model = ConstantVelocity(0.4, 0.05)
    s = np.array([1.0, 2.0, 0.5, -0.25, 0.3])
    P = np.diag([0.01, 0.02, 0.1, 0.2, 0.5])
    x, P1 = model.predict(s, P, 0.5)
    assert np.allclose(x, [1.25, 1.875, 0.5, -0.25, 0.3])
    _, P4 = cv_predict(s[:4], P[:4, :4], 0.5, 0.4)
    assert np.allclose(P1[:4, :4], P4)
    assert P1[4, 4] == pytest.approx(0.5 + 0.05 * 0.5)
    assert np.allclose(P1[:4, 4], 0.0)


def test_coordinated_turn_is_the_closed_form_rotation() -> None:
    """Bar-Shalom eq. 11.7.1-4: position along the arc, velocity rotated by ωT."""
    model = CoordinatedTurn(0.1, 0.05)
    w, T = 0.8, 0.4
    s = np.array([1.0, -1.0, 0.6, 0.8, w])
    x, _ = model.transition(s, T)
    sn, cs = math.sin(w * T), math.cos(w * T)
    assert x[0] == pytest.approx(1.0 + sn / w * 0.6 - (1 - cs) / w * 0.8)
    assert x[1] == pytest.approx(-1.0 + (1 - cs) / w * 0.6 + sn / w * 0.8)
    assert x[2] == pytest.approx(cs * 0.6 - sn * 0.8)
    assert x[3] == pytest.approx(sn * 0.6 + cs * 0.8)
    assert x[4] == w
    # A full circle comes back to the start at the same speed.
    period = 2 * math.pi / w
    back, _ = model.transition(s, period)
    assert np.allclose(back[:4], s[:4], atol=1e-9)
    radius = 1.0 / w  # |v| / ω
    half, _ = model.transition(s, period / 2)
    assert math.dist(half[:2], s[:2]) == pytest.approx(2 * radius)


@pytest.mark.parametrize("w", [0.9, -1.7, 1e-3, 1e-7, 0.0])
def test_coordinated_turn_jacobian_matches_finite_differences(w: float) -> None:
    model = CoordinatedTurn(0.1, 0.05)
    s = np.array([0.3, 0.4, 0.9, -0.5, w])
    _, F = model.transition(s, 0.25)
    assert np.allclose(F, _numeric_jacobian(model, s, 0.25), atol=1e-6)


def test_coordinated_turn_tends_to_constant_velocity_as_the_rate_vanishes() -> None:
    s = np.array([0.3, 0.4, 0.9, -0.5, 0.0])
    P = np.diag([0.01, 0.01, 0.1, 0.1, 0.2])
    ct = CoordinatedTurn(0.3, 0.05)
    cv = ConstantVelocity(0.3, 0.05)
    x_ct, P_ct = ct.predict(s, P, 0.3)
    x_cv, P_cv = cv.predict(s, P, 0.3)
    assert np.allclose(x_ct, x_cv)
    # Only the turn rate's own column differs (it moves the state sideways in a turn).
    assert np.allclose(P_ct[:4, :4] - P_cv[:4, :4], 0.0, atol=0.02)


def test_models_refuse_bad_noise() -> None:
    with pytest.raises(ValueError):
        ConstantVelocity(0.0, 0.1)
    with pytest.raises(ValueError):
        CoordinatedTurn(0.1, -1.0)
