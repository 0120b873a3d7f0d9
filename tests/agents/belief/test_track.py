"""The IMM track filter: its textbook limits, exact late detections, the consider term, the
room and speed limits, gating and peer fusion."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from agents.belief.constraints import FreeSpace
from agents.belief.fusion import FusionRule, ci_matrix, naive_matrix
from agents.belief.models import cv_predict, cv_process_noise, cv_transition
from agents.belief.params import TrackParams
from agents.belief.track import TrackFilter

H = np.hstack([np.eye(2), np.zeros((2, 2))])

# Both modes the same constant-velocity model (q_ct = (0.5 a)² = a²·0.25 = q_cv, no turn rate
# and no turn-rate noise): the IMM is then one Kalman filter, checked against the textbook.
SINGLE = TrackParams(max_speed=50.0, max_accel=0.2, cv_manoeuvre_time=0.25,
                     ct_accel_fraction=0.5, turn_rate_psd=0.0, init_turn_rate_var=1e-300)
Q_SINGLE = 0.01  # 0.2² · 0.25


def _started(params: TrackParams = SINGLE) -> TrackFilter:
    track = TrackFilter(params)
    track.update_position([1.0, 2.0], np.diag([0.04, 0.09]), t=0.0)
    return track


def test_first_detection_initialises_with_a_velocity_variance_within_the_speed_limit() -> None:
    track = TrackFilter(TrackParams(max_speed=1.0))
    assert not track.initialised
    result = track.update_position([1.0, 2.0], np.diag([0.04, 0.09]), t=5.0)
    assert result.accepted and result.reason == "initialised"
    assert track.initialised and track.time == 5.0 and track.update_count == 1
    assert np.allclose(track.state, [1.0, 2.0, 0.0, 0.0])
    assert np.allclose(np.diag(track.covariance), [0.04, 0.09, 1.0, 1.0])  # min(4, 1²)
    assert track.mode_probabilities == pytest.approx([0.5, 0.5])


def test_with_one_model_predict_is_f_p_ft_plus_q() -> None:
    track = _started()
    track.update_position([1.1, 2.05], np.diag([0.04, 0.09]), t=0.5)
    x0, P0 = track.state, track.covariance
    track.predict_to(1.25)
    F, Q = cv_transition(0.75), cv_process_noise(0.75, Q_SINGLE)
    assert np.allclose(track.state, F @ x0)
    assert np.allclose(track.covariance, F @ P0 @ F.T + Q)
    assert track.time == 1.25
    assert np.allclose(cv_predict(x0, P0, 0.75, Q_SINGLE)[1], F @ P0 @ F.T + Q)
    # Showing a later time does not change the posterior: the same prediction again.
    assert np.allclose(track.state_at(1.25)[1], F @ P0 @ F.T + Q)


def test_with_one_model_update_is_the_textbook_kalman_update() -> None:
    track = _started()
    x0, P0 = track.state_at(0.4)
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


def test_the_imm_locks_on_to_a_turn_and_gets_its_speed_and_rate() -> None:
    """A target on a 1.5 m circle at 1 m/s, seen at 10 Hz with 3 cm noise."""
    rng = np.random.default_rng(7)
    track = TrackFilter(TrackParams(max_speed=1.0, max_accel=0.67))
    w = 1.0 / 1.5
    errors, rates = [], []
    for k in range(300):
        t = 0.1 * k
        truth = np.array([1.5 * math.cos(w * t), 1.5 * math.sin(w * t)])
        track.update_position(truth + rng.normal(0, 0.03, 2), np.eye(2) * 0.03**2, t)
        if k > 100:
            errors.append(abs(track.speed - 1.0))
            rates.append(track.turn_rate)
    assert track.mode_probabilities[1] > 0.8  # the turn mode
    assert float(np.mean(rates)) == pytest.approx(w, abs=0.05)
    assert float(np.mean(np.array(errors) <= 0.1)) > 0.9


def test_a_straight_steady_target_is_tracked() -> None:
    rng = np.random.default_rng(42)
    heading = math.radians(35)
    v = np.array([math.cos(heading), math.sin(heading)])
    start = np.array([-2.0, 0.5])
    sigma = 0.05
    track = TrackFilter(TrackParams(max_accel=0.5))
    for k in range(101):  # 10 s at 10 Hz
        t = 0.1 * k
        truth = start + v * t
        track.update_position(truth + rng.normal(0, sigma, 2), np.eye(2) * sigma**2, t)
    truth = start + v * 10.0
    assert np.linalg.norm(track.position - truth) < 0.05
    assert abs(track.speed - 1.0) < 0.05
    assert np.linalg.norm(track.velocity - v) < 0.08
    assert track.uncertainty < 0.02
    assert track.update_count >= 99 and track.reinit_count == 0  # a 99 % gate


def test_a_late_detection_is_processed_exactly_at_its_capture_time() -> None:
    """In order, or after a later one (or a peer fusion): the same posterior."""
    rng = np.random.default_rng(5)
    params = TrackParams(max_speed=2.0, max_accel=1.0)
    zs = [(0.1 * k, np.array([0.1 * k, 0.02 * k]) + rng.normal(0, 0.02, 2)) for k in range(12)]
    R = np.eye(2) * 0.02**2
    peer = (np.array([1.05, 0.2, 1.0, 0.2]), np.eye(4) * 0.01)

    in_order = TrackFilter(params)
    for t, z in zs[:10]:
        in_order.update_position(z, R, t)
    in_order.update_position(zs[10][1], R, zs[10][0])
    in_order.fuse_peer(*peer, t_peer=1.0, now=1.05)
    in_order.update_position(zs[11][1], R, zs[11][0])

    crossed = TrackFilter(params)
    for t, z in zs[:10]:
        crossed.update_position(z, R, t)
    crossed.fuse_peer(*peer, t_peer=1.0, now=1.05)  # the peer's TRACK arrives first ...
    crossed.update_position(zs[11][1], R, zs[11][0])
    result = crossed.update_position(zs[10][1], R, zs[10][0])  # ... and the 1.0 s detection last
    assert result.accepted
    for t in (1.1, 1.7):
        in_order.predict_to(t)
        crossed.predict_to(t)
        assert np.allclose(crossed.state, in_order.state, atol=1e-12)
        assert np.allclose(crossed.covariance, in_order.covariance, atol=1e-12)
    assert np.allclose(crossed.mode_probabilities, in_order.mode_probabilities)


def test_a_detection_older_than_the_kept_updates_is_refused_as_stale() -> None:
    track = _started()
    for k in range(1, 31):
        track.update_position([1.0 + 0.1 * k, 2.0], np.eye(2) * 0.001, 0.1 * k)
    x0 = track.state
    assert track.update_position([1.1, 2.0], np.eye(2) * 0.001, 0.5).reason == "stale"
    assert np.array_equal(track.state, x0)


def test_the_pose_error_is_not_averaged_away() -> None:
    """Twenty detections through one pose error: with the consider term the position variance
    keeps that error's size; treated as independent noise it shrinks as 1/n."""
    C = np.eye(2) * 0.03**2  # the robot's own pose error, seen in every detection
    Rs = np.eye(2) * 0.01**2
    params = TrackParams(max_accel=0.3, pose_error_time=5.0)
    considered, naive = TrackFilter(params), TrackFilter(params)
    for k in range(20):
        t = 0.05 * k
        considered.update_position([1.0, 1.0], C + Rs, t, consider=C)
        naive.update_position([1.0, 1.0], C + Rs, t)
    var_considered = float(np.trace(considered.covariance[:2, :2])) / 2
    var_naive = float(np.trace(naive.covariance[:2, :2])) / 2
    assert var_considered > 0.6 * C[0, 0]
    assert var_considered > 2.5 * var_naive


def test_a_consider_split_that_is_not_part_of_r_is_ignored() -> None:
    a, b = _started(), _started()
    R = np.eye(2) * 0.01
    a.update_position([1.1, 2.0], R, 0.1, consider=np.eye(2) * 0.02)  # larger than R
    b.update_position([1.1, 2.0], R, 0.1)
    assert np.allclose(a.state, b.state) and np.allclose(a.covariance, b.covariance)


def test_a_lost_track_stays_in_the_room_under_the_speed_limit_and_widens() -> None:
    space = FreeSpace(5.0, 5.0, [(2.5, 4.0, 1.0, 1.0)], margin=0.075)
    track = TrackFilter(TrackParams(max_speed=1.0, max_accel=1.0), space)
    for k in range(10):  # heading for the east wall at 1 m/s
        track.update_position([3.5 + 0.1 * k, 1.0], np.eye(2) * 1e-4, 0.1 * k)
    previous = np.trace(track.covariance[:2, :2])
    for k in range(1, 60):
        track.predict_to(0.9 + 0.1 * k)
        x, P = track.state, track.covariance
        assert 0.075 - 1e-9 <= x[0] <= 4.925 + 1e-9 and 0.075 - 1e-9 <= x[1] <= 4.925 + 1e-9
        assert math.hypot(x[2], x[3]) <= 1.0 + 1e-9
        assert np.linalg.eigvalsh(P[2:, 2:]).max() <= 1.0 + 1e-9
        assert np.trace(P[:2, :2]) >= previous - 1e-12
        assert np.all(np.linalg.eigvalsh(P) > 0)
        previous = np.trace(P[:2, :2])
    assert track.state[0] == pytest.approx(4.925)  # stopped at the wall, not through it


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


def test_fuse_peer_predicts_a_stale_peer_state_before_ci() -> None:
    rng = np.random.default_rng(3)
    own = TrackFilter(SINGLE)
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
    track = TrackFilter(SINGLE)
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


def test_copy_is_independent() -> None:
    track = _started()
    other = track.copy()
    other.update_position([1.2, 2.1], np.eye(2) * 0.01, 0.2)
    assert track.update_count == 1 and other.update_count == 2
    assert not np.allclose(track.state, other.state)


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
    def filt() -> TrackFilter:
        f = TrackFilter(SINGLE)
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


def test_a_kept_prediction_is_never_served_for_a_changed_posterior() -> None:
    """The last prediction is reused only for the same posterior and time: after a detection,
    a peer fusion or a late detection (a rewind), the estimate at a time asked before is
    predicted anew, exactly as by a filter that was never asked in between."""
    space = FreeSpace(5.0, 5.0, [(2.5, 1.0, 0.4, 0.4)], margin=0.1)
    # The peer's track is fused at the newest update's time (it arrives "before" it), so
    # nothing else is predicted between the two questions; the detection at 0.08 rewinds.
    inputs = [("det", (1.0, 1.0), 0.0), ("det", (1.1, 1.0), 0.1), ("peer", (1.2, 1.0), 0.05),
              ("det", (1.05, 1.0), 0.08), ("det", (1.3, 1.05), 0.3)]

    def feed(f: TrackFilter, kind: str, z: tuple[float, float], t: float) -> None:
        if kind == "det":
            f.update_position(z, np.eye(2) * 0.01, t, consider=np.eye(2) * 0.002)
        else:
            f.fuse_peer([*z, 1.0, 0.0], np.eye(4) * 0.05, t - 0.05, t)

    asked = TrackFilter(space=space)
    shown = []
    for k, (kind, z, t) in enumerate(inputs):
        feed(asked, kind, z, t)
        x, P = asked.state_at(0.4)
        x2, P2 = asked.state_at(0.4)  # the kept one
        assert np.array_equal(x, x2) and np.array_equal(P, P2)
        quiet = TrackFilter(space=space)
        for item in inputs[: k + 1]:
            feed(quiet, *item)
        xq, Pq = quiet.state_at(0.4)
        assert np.array_equal(x, xq) and np.array_equal(P, Pq)
        shown.append(x)
    assert all(not np.array_equal(a, b) for a, b in itertools.pairwise(shown))
