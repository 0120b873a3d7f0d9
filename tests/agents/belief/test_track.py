"""The constant-velocity track filter against the textbook Kalman equations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.belief.fusion import ci_matrix
from agents.belief.grid import GridPeak
from agents.belief.params import TrackParams
from agents.belief.track import TrackFilter, cv_predict, cv_process_noise, cv_transition

H = np.hstack([np.eye(2), np.zeros((2, 2))])


def _started(q: float = 0.5) -> TrackFilter:
    track = TrackFilter(TrackParams(accel_psd=q))
    track.update_position([1.0, 2.0], np.diag([0.04, 0.09]), t=0.0)
    return track


def test_process_noise_is_the_textbook_white_acceleration_q() -> None:
    dt, q = 0.3, 0.7
    Q1 = q * np.array([[dt**3 / 3, dt**2 / 2], [dt**2 / 2, dt]])
    Q = cv_process_noise(dt, q)
    assert np.allclose(Q[np.ix_([0, 2], [0, 2])], Q1)
    assert np.allclose(Q[np.ix_([1, 3], [1, 3])], Q1)
    assert np.allclose(Q[np.ix_([0, 2], [1, 3])], 0.0)
    assert np.allclose(cv_transition(dt) @ [1, 2, 3, 4], [1.9, 3.2, 3, 4])


def test_first_detection_initialises_with_a_large_velocity_variance() -> None:
    track = TrackFilter()
    assert not track.initialised
    result = track.update_position([1.0, 2.0], np.diag([0.04, 0.09]), t=5.0)
    assert result.accepted and result.reason == "initialised"
    assert track.initialised and track.time == 5.0 and track.update_count == 1
    assert np.allclose(track.state, [1.0, 2.0, 0.0, 0.0])
    assert np.allclose(np.diag(track.covariance), [0.04, 0.09, 4.0, 4.0])


def test_predict_matches_f_p_ft_plus_q() -> None:
    track = _started()
    track.update_position([1.1, 2.05], np.diag([0.04, 0.09]), t=0.5)
    x0, P0 = track.state, track.covariance
    track.predict_to(1.25)
    F, Q = cv_transition(0.75), cv_process_noise(0.75, 0.5)
    assert np.allclose(track.state, F @ x0)
    assert np.allclose(track.covariance, F @ P0 @ F.T + Q)
    assert track.time == 1.25
    assert np.allclose(cv_predict(x0, P0, 0.75, 0.5)[1], F @ P0 @ F.T + Q)


def test_update_matches_the_textbook_kalman_update() -> None:
    track = _started()
    track.predict_to(0.4)
    x0, P0 = track.state, track.covariance
    z, R = np.array([1.2, 1.9]), np.array([[0.05, 0.01], [0.01, 0.03]])
    result = track.update_position(z, R, t=0.4)
    S = H @ P0 @ H.T + R
    K = P0 @ H.T @ np.linalg.inv(S)
    y = z - H @ x0
    assert result.accepted and result.reason == "accepted"
    assert result.nis == pytest.approx(float(y @ np.linalg.solve(S, y)))
    assert np.allclose(track.state, x0 + K @ y)
    assert np.allclose(track.covariance, (np.eye(4) - K @ H) @ P0)
    assert track.update_count == 2


def test_converges_on_a_target_moving_at_one_metre_per_second() -> None:
    rng = np.random.default_rng(42)
    heading = math.radians(35)
    v = np.array([math.cos(heading), math.sin(heading)])
    start = np.array([-2.0, 0.5])
    sigma = 0.05
    track = TrackFilter(TrackParams(accel_psd=0.05))  # a straight, steady target
    for k in range(101):  # 10 s at 10 Hz
        t = 0.1 * k
        truth = start + v * t
        track.update_position(truth + rng.normal(0, sigma, 2), np.eye(2) * sigma**2, t)
    truth = start + v * 10.0
    assert np.linalg.norm(track.position - truth) < 0.05
    assert abs(track.speed - 1.0) < 0.05
    assert np.linalg.norm(track.velocity - v) < 0.08
    assert track.uncertainty < 0.02
    assert track.update_count == 101 and track.reinit_count == 0


def test_gating_rejects_a_ten_sigma_outlier_without_touching_the_state() -> None:
    track = _started()
    for k in range(1, 30):
        track.update_position([1.0 + 0.1 * k, 2.0], np.eye(2) * 0.01, 0.1 * k)
    track.predict_to(3.0)
    x0, P0 = track.state, track.covariance
    S = P0[:2, :2] + np.eye(2) * 0.01
    outlier = x0[:2] + 10.0 * math.sqrt(S[1, 1]) * np.array([0.0, 1.0])
    result = track.update_position(outlier, np.eye(2) * 0.01, 3.0)
    assert not result.accepted and result.reason == "gated"
    assert result.nis > 9.21
    assert np.array_equal(track.state, x0) and np.array_equal(track.covariance, P0)
    assert track.consecutive_gated == 1


def test_gating_cannot_lock_the_filter_out_forever() -> None:
    track = _started()
    for k in range(1, 20):
        track.update_position([1.0, 2.0], np.eye(2) * 0.001, 0.1 * k)
    # The target really jumped (e.g. a wrong data association earlier): 5 in a row re-initialise.
    reasons = [
        track.update_position([5.0, -3.0], np.eye(2) * 0.001, 2.0 + 0.1 * k).reason
        for k in range(5)
    ]
    assert reasons == ["gated"] * 4 + ["reinitialised"]
    assert np.allclose(track.position, [5.0, -3.0]) and track.reinit_count == 1
    assert track.update_position([5.0, -3.0], np.eye(2) * 0.001, 2.6).reason == "accepted"


def test_a_late_detection_is_moved_to_the_state_time_and_a_too_old_one_refused() -> None:
    track = _started()
    for k in range(1, 11):
        track.update_position([1.0 + 0.1 * k, 2.0], np.eye(2) * 0.001, 0.1 * k)
    track.predict_to(1.3)
    x0 = track.state
    result = track.update_position([2.1, 2.0], np.eye(2) * 0.001, 1.1)  # 0.2 s late
    assert result.accepted and track.time == 1.3
    # Carried forward along ~1 m/s, the late detection agrees with the prediction.
    assert abs(track.position[0] - x0[0]) < 0.02
    assert track.update_position([2.1, 2.0], np.eye(2) * 0.001, 0.2).reason == "stale"


def test_grid_peak_is_used_only_when_confident_and_not_right_after_a_detection() -> None:
    params = TrackParams(peak_min_mu=0.5, peak_max_var=0.1, peak_holdoff=0.5, peak_var_to_m2=0.25)
    track = TrackFilter(params)
    peak = GridPeak(ix=10, iy=20, x=1.05, y=2.05, mu=0.8, var=0.04, cell_size=0.1)
    assert track.update_from_grid_peak(peak, 0.0).reason == "not_initialised"
    track.update_position([1.0, 2.0], np.eye(2) * 0.04, t=0.0)
    assert track.update_from_grid_peak(peak, 0.2).reason == "holdoff"
    weak = GridPeak(ix=10, iy=20, x=1.05, y=2.05, mu=0.3, var=0.04, cell_size=0.1)
    assert track.update_from_grid_peak(weak, 1.0).reason == "peak_weak"
    vague = GridPeak(ix=10, iy=20, x=1.05, y=2.05, mu=0.8, var=0.5, cell_size=0.1)
    assert track.update_from_grid_peak(vague, 1.0).reason == "peak_weak"
    track.predict_to(1.0)
    x0, P0 = track.state, track.covariance
    result = track.update_from_grid_peak(peak, 1.0)
    assert result.accepted
    R = (0.1**2 / 12 + 0.25 * 0.04) * np.eye(2)
    K = P0 @ H.T @ np.linalg.inv(H @ P0 @ H.T + R)
    assert np.allclose(track.state, x0 + K @ (np.array([1.05, 2.05]) - x0[:2]))


def test_fuse_peer_predicts_a_stale_peer_state_before_ci() -> None:
    rng = np.random.default_rng(3)
    own = TrackFilter(TrackParams(accel_psd=0.01))
    for k in range(15, 31):  # target at 1 m/s along x, seen from 1.5 s to 3 s
        t = 0.1 * k
        own.update_position([t + rng.normal(0, 0.1), rng.normal(0, 0.1)], np.eye(2) * 0.01, t)
    own.predict_to(4.0)
    x_own, P_own = own.state, own.covariance
    # A peer's belief from t = 1.0 s, received at 4.0 s: 3 s stale.
    x_peer = np.array([1.0, 0.0, 1.0, 0.0])
    P_peer = np.diag([0.002, 0.002, 0.0005, 0.0005])
    result = own.fuse_peer(x_peer, P_peer, t_peer=1.0, now=4.0)
    xp, Pp = cv_predict(x_peer, P_peer, 3.0, own.params.accel_psd)
    expected = ci_matrix(x_own, P_own, xp, Pp, "trace")
    assert not result.adopted and result.w == pytest.approx(expected.w)
    assert 0.0 < result.w < 1.0
    assert np.allclose(own.state, expected.x) and np.allclose(own.covariance, expected.P)
    assert own.time == 4.0
    assert abs(own.position[0] - 4.0) < 0.1
    # Fusing the stale state as if it were current would drag the track back towards x = 1.
    unpredicted = ci_matrix(x_own, P_own, x_peer, P_peer, "trace")
    assert unpredicted.x[0] < 3.8


def test_fuse_peer_without_an_own_track_adopts_the_predicted_peer() -> None:
    track = TrackFilter()
    result = track.fuse_peer(
        [0.0, 0.0, 1.0, 0.5], np.eye(4) * 0.01, t_peer=2.0, now=2.5, inflation=2.0
    )
    assert result.adopted and track.initialised
    xp, Pp = cv_predict([0.0, 0.0, 1.0, 0.5], np.eye(4) * 0.02, 0.5, track.params.accel_psd)
    assert np.allclose(track.state, xp) and np.allclose(track.covariance, Pp)
    with pytest.raises(ValueError):
        track.fuse_peer([0.0, 0.0, 0.0, 0.0], np.eye(4), 2.5, 2.5, inflation=0.5)


def test_reset_forgets_the_track() -> None:
    track = _started()
    track.reset()
    assert not track.initialised and track.update_count == 0 and math.isnan(track.time)


def test_garbage_measurements_are_refused_not_used() -> None:
    track = _started()
    x0 = track.state
    assert track.update_position([math.nan, 0.0], np.eye(2), 1.0).reason == "invalid"
    assert track.update_position([1.0, 2.0], -np.eye(2), 1.0).reason == "invalid"
    assert track.update_position([1.0, 2.0], [[1.0, 0.5], [0.0, 1.0]], 1.0).reason == "invalid"
    assert np.array_equal(track.state, x0)
    with pytest.raises(ValueError):
        track.fuse_peer([math.inf, 0.0, 0.0, 0.0], np.eye(4), 0.0, 1.0)


def test_peer_fusion_rules_naive_and_max_confidence() -> None:
    import numpy as np

    from agents.belief import FusionRule, TrackFilter, naive_matrix

    def filt() -> TrackFilter:
        f = TrackFilter()
        f.update_position((1.0, 1.0), np.eye(2) * 0.04, 0.0)
        return f

    peer_x = np.array([1.2, 0.9, 0.0, 0.0])
    peer_P = np.diag([0.01, 0.01, 0.5, 0.5])
    a, b = filt(), filt()
    own_x, own_P = a.state.copy(), a.covariance.copy()
    a.fuse_peer(peer_x, peer_P, 0.0, 0.0, rule=FusionRule.NAIVE)
    expected = naive_matrix(own_x, own_P, peer_x, peer_P)
    assert np.allclose(a.state, expected.x) and np.allclose(a.covariance, expected.P)
    b.fuse_peer(peer_x, peer_P, 0.0, 0.0, rule=FusionRule.MAX_CONFIDENCE)
    chosen = peer_P if np.trace(peer_P) < np.trace(own_P) else own_P
    assert np.allclose(b.covariance, chosen)
    # Naive fusion claims more certainty than either input; CI never does.
    c = filt()
    c.fuse_peer(peer_x, peer_P, 0.0, 0.0, rule=FusionRule.CI)
    assert np.trace(a.covariance) < np.trace(c.covariance)
