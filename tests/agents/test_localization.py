from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from agents.drive_model import DriveModel
from agents.localization import PoseEKF
from agents.localizer_params import CHI2_2DOF_99, LocalizerParams
from agents.observations import ObservationBatch, PoseFix, TagSighting
from agents.pose_geometry import (
    Offset,
    compose,
    range_bearing,
    solve_pose_from_tags,
    target_position,
    wrap_angle,
)

CHI2_2DOF_95 = 5.991
CHI2_3DOF_99 = 11.345
ROOM = 5.0
FOV = math.radians(62.0)
MAX_RANGE = 3.0
SIGMA_BEARING = math.radians(1.5)
CAMERA_FORWARD = 0.05


def sigma_range(r: float) -> float:
    return 0.03 + 0.02 * r


def wall_tags() -> tuple[dict[int, tuple[float, float]], dict[int, tuple[float, float]]]:
    """Tags every 1.25 m along the four walls of a 5 m room, with their inward normals."""
    tags: dict[int, tuple[float, float]] = {}
    normals: dict[int, tuple[float, float]] = {}
    k = 0
    for s in (0.625, 1.875, 3.125, 4.375):
        for x, y, n in ((s, 0.0, (0, 1)), (s, ROOM, (0, -1)), (0.0, s, (1, 0)), (ROOM, s, (-1, 0))):
            tags[k], normals[k] = (x, y), (float(n[0]), float(n[1]))
            k += 1
    return tags, normals


TAGS, NORMALS = wall_tags()


def camera(pose: np.ndarray) -> tuple[float, float]:
    return (
        pose[0] + CAMERA_FORWARD * math.cos(pose[2]),
        pose[1] + CAMERA_FORWARD * math.sin(pose[2]),
    )


def true_range_bearing(pose: np.ndarray, point: tuple[float, float]) -> tuple[float, float]:
    cx, cy = camera(pose)
    dx, dy = point[0] - cx, point[1] - cy
    return math.hypot(dx, dy), wrap_angle(math.atan2(dy, dx) - pose[2])


def sight_tags(pose: np.ndarray, rng: np.random.Generator) -> tuple[TagSighting, ...]:
    out = []
    cx, cy = camera(pose)
    for tid, (lx, ly) in TAGS.items():
        r, b = true_range_bearing(pose, (lx, ly))
        n = NORMALS[tid]
        facing = ((cx - lx) * n[0] + (cy - ly) * n[1]) / r
        if r > MAX_RANGE or abs(b) > FOV / 2 or facing < math.cos(math.radians(70)):
            continue
        sr = sigma_range(r)
        out.append(
            TagSighting(
                tid,
                r + float(rng.normal(0, sr)),
                wrap_angle(b + float(rng.normal(0, SIGMA_BEARING))),
                sr,
                SIGMA_BEARING,
            )
        )
    return tuple(out)


def sight_point(
    pose: np.ndarray, point: tuple[float, float], rng: np.random.Generator, tag_id: int = 99
) -> TagSighting | None:
    r, b = true_range_bearing(pose, point)
    if r > MAX_RANGE or abs(b) > FOV / 2:
        return None
    sr = sigma_range(r)
    return TagSighting(
        tag_id,
        r + float(rng.normal(0, sr)),
        wrap_angle(b + float(rng.normal(0, SIGMA_BEARING))),
        sr,
        SIGMA_BEARING,
    )


def est_of(ekf: PoseEKF) -> np.ndarray:
    pose = ekf.pose
    assert pose is not None
    return np.array(pose)


def cov_of(ekf: PoseEKF) -> np.ndarray:
    cov = ekf.cov
    assert cov is not None
    return cov


def put(ekf: PoseEKF, x: np.ndarray, P: np.ndarray) -> None:
    ekf.set_pose(float(x[0]), float(x[1]), float(x[2]), P)


# --------------------------------------------------------------------------- textbook equations


@pytest.mark.parametrize("gyro_error", [None, 0.005])
def test_one_predict_matches_the_textbook_ekf(gyro_error: float | None) -> None:
    """``gyro_error``: the sample's own rate error σ (a rate less a learnt bias), None: the
    parameters'."""
    drive = DriveModel(track=0.13, max_wheel_speed=0.5, deadband=0.25)
    params = LocalizerParams(max_step=1.0, camera_forward=0.0)
    ekf = PoseEKF(TAGS, drive, params, t0=10.0)
    x0 = np.array([1.0, 2.0, 0.3])
    P0 = np.array([[0.01, 0.002, 0.001], [0.002, 0.02, -0.001], [0.001, -0.001, 0.005]])
    put(ekf, x0, P0)
    dl, dr, gyro, dt = 0.6, 0.8, 0.4, 0.1
    ekf.predict_to(10.0 + dt, dl, dr, gyro, gyro_error)

    # Textbook: v from the deadband-linear duty model, yaw rate from the gyro.
    def speed(d: float) -> float:
        return 0.5 * (abs(d) - 0.25) / 0.75 * math.copysign(1, d) if abs(d) > 0.25 else 0.0

    v = 0.5 * (speed(dl) + speed(dr))
    w = gyro
    thm = x0[2] + w * dt / 2
    x_expected = x0 + np.array([v * dt * math.cos(thm), v * dt * math.sin(thm), w * dt])
    F = np.array([[1, 0, -v * dt * math.sin(thm)], [0, 1, v * dt * math.cos(thm)], [0, 0, 1]])
    G = np.array(
        [
            [dt * math.cos(thm), -v * dt * dt / 2 * math.sin(thm)],
            [dt * math.sin(thm), v * dt * dt / 2 * math.cos(thm)],
            [0, dt],
        ]
    )
    tau2 = 2 * params.error_correlation_time
    sv = params.speed_error_frac * abs(v) + params.speed_error_floor
    sw = params.gyro_error if gyro_error is None else gyro_error
    M = np.diag([tau2 * sv**2 / dt, tau2 * sw**2 / dt])
    # Isotropic diffusion, plus the turning skid-steer's stray centre of rotation: a velocity
    # error icr_offset·|w| per axis, correlated over τ (spectral density 2τσ²).
    slip = params.position_noise_density + tau2 * (params.icr_offset * w) ** 2
    Q = G @ M @ G.T + np.diag([slip * dt] * 2 + [0.0])
    P_expected = F @ P0 @ F.T + Q
    assert ekf.t == pytest.approx(10.1)
    assert np.allclose(est_of(ekf), x_expected)
    assert np.allclose(cov_of(ekf), P_expected)


def test_predict_without_gyro_uses_the_wheel_differential() -> None:
    drive = DriveModel()
    ekf = PoseEKF(TAGS, drive, LocalizerParams(max_step=1.0), t0=0.0)
    ekf.set_pose(1.0, 1.0, 0.0, np.eye(3) * 1e-4)
    ekf.predict(0.05, 0.3, 0.9)
    _, omega = drive.body_velocity(0.3, 0.9)
    assert est_of(ekf)[2] == pytest.approx(omega * 0.05)
    ekf2 = PoseEKF(TAGS, drive, LocalizerParams(max_step=1.0), t0=0.0)
    ekf2.set_pose(1.0, 1.0, 0.0, np.eye(3) * 1e-4)
    ekf2.predict(0.05, 0.3, 0.9, gyro_z=0.0)  # the gyro wins over the wheels
    assert est_of(ekf2)[2] == 0.0


def test_one_range_bearing_update_matches_the_textbook_ekf() -> None:
    params = LocalizerParams(camera_forward=0.0)
    ekf = PoseEKF(TAGS, DriveModel(), params)
    x0 = np.array([2.0, 1.0, 0.4])
    P0 = np.array([[0.02, 0.003, 0.002], [0.003, 0.03, -0.001], [0.002, -0.001, 0.01]])
    put(ekf, x0, P0)
    lm = (4.0, 2.5)
    s = TagSighting(7, 2.45, 0.25, 0.08, 0.03)
    result = ekf.update_tag(lm, s)

    dx, dy = lm[0] - x0[0], lm[1] - x0[1]
    q = dx * dx + dy * dy
    r = math.sqrt(q)
    z_hat = np.array([r, math.atan2(dy, dx) - x0[2]])
    H = np.array([[-dx / r, -dy / r, 0.0], [dy / q, -dx / q, -1.0]])
    R = np.diag([0.08**2, 0.03**2])
    S = H @ P0 @ H.T + R
    nu = np.array([s.range, s.bearing]) - z_hat
    K = P0 @ H.T @ np.linalg.inv(S)
    assert result.accepted
    assert result.nis == pytest.approx(float(nu @ np.linalg.inv(S) @ nu))
    assert np.allclose(est_of(ekf), x0 + K @ nu)
    assert np.allclose(cov_of(ekf), (np.eye(3) - K @ H) @ P0)


def test_bearing_innovation_wraps_across_pi() -> None:
    ekf = PoseEKF(TAGS, params=LocalizerParams(camera_forward=0.0))
    ekf.set_pose(2.0, 2.0, 0.0, np.diag([0.01, 0.01, 0.01]))
    # The landmark sits straight behind: predicted bearing is +pi; a reading of -pi + 0.01
    # is 0.01 rad away, not 2 pi.
    result = ekf.update_tag((1.0, 2.0), TagSighting(1, 1.0, -math.pi + 0.01, 0.05, 0.02))
    assert result.accepted
    assert result.nis is not None and result.nis < 1.0
    assert -math.pi < est_of(ekf)[2] <= math.pi


@pytest.mark.parametrize("a", [0.0, 0.05])
def test_jacobians_match_finite_differences(a: float) -> None:
    x = np.array([1.2, 0.7, 2.9])
    lm = (3.0, 2.0)
    _, H = range_bearing(x, lm, a)
    s = TagSighting(1, 2.0, 0.3, 0.1, 0.1)
    _, J, G = target_position(x, s, a)
    eps = 1e-6
    for k in range(3):
        dx = np.zeros(3)
        dx[k] = eps
        zp, _ = range_bearing(x + dx, lm, a)
        zm, _ = range_bearing(x - dx, lm, a)
        num = (zp - zm) / (2 * eps)
        num[1] = wrap_angle(float(zp[1] - zm[1])) / (2 * eps)
        assert np.allclose(H[:, k], num, atol=1e-6)
        pp, _, _ = target_position(x + dx, s, a)
        pm, _, _ = target_position(x - dx, s, a)
        assert np.allclose(J[:, k], (pp - pm) / (2 * eps), atol=1e-6)
    for k, (dr, db) in enumerate(((eps, 0.0), (0.0, eps))):
        sp = TagSighting(1, s.range + dr, s.bearing + db, 0.1, 0.1)
        sm = TagSighting(1, s.range - dr, s.bearing - db, 0.1, 0.1)
        pp, _, _ = target_position(x, sp, a)
        pm, _, _ = target_position(x, sm, a)
        assert np.allclose(G[:, k], (pp - pm) / (2 * eps), atol=1e-6)


# --------------------------------------------------------------------------- a simulated run


@dataclass
class RunStats:
    init_time: float
    position_rmse: float
    heading_rmse_deg: float
    worst_position: float
    nees_mean: float
    nees_over_99: float
    detections: int
    coverage_95: float
    accepted: int
    gated: int
    counters: dict[str, int]


def simulate_loop(seed: int, duration: float = 60.0, latency: float = 0.08) -> RunStats:
    """A robot driven along a circle for ``duration`` s in the 5 m room.

    Truth: wheels 10 % slower than the agent's duty model, 10 % skid loss in
    yaw, a gyro with 0.01 rad/s bias and 0.005 rad/s noise. The agent predicts
    at 10 Hz with the duties it sent and the gyro reading; each 10 Hz camera
    batch arrives ``latency`` s after capture. A target moves on a wider circle.
    """
    rng = np.random.default_rng(seed)
    nominal = DriveModel()
    truth = DriveModel(max_wheel_speed=0.9 * nominal.max_wheel_speed, deadband=nominal.deadband)
    ekf = PoseEKF(TAGS, nominal, LocalizerParams(camera_forward=CAMERA_FORWARD))
    pose = np.array([3.8, 2.5, math.pi / 2])
    duties = (0.0, 0.0)
    h, tick = 0.01, 0.1
    per_tick = round(tick / h)
    pending: list[tuple[float, ObservationBatch, tuple[float, float]]] = []
    errors, nees = [], []
    coverage: list[bool] = []
    init_time = math.nan
    accepted = gated = 0
    for i in range(1, round(duration / h) + 1):
        v, w = truth.body_velocity(*duties)
        w *= 0.9
        thm = pose[2] + 0.5 * w * h
        pose = np.array(
            [
                pose[0] + v * h * math.cos(thm),
                pose[1] + v * h * math.sin(thm),
                wrap_angle(pose[2] + w * h),
            ]
        )
        t = i * h
        if i % per_tick:
            continue
        ekf.predict_to(t, *duties, gyro_z=w + 0.01 + float(rng.normal(0, 0.005)))
        target = (2.5 + 2.0 * math.cos(0.05 * t + 2.0), 2.5 + 2.0 * math.sin(0.05 * t + 2.0))
        batch = ObservationBatch(
            t, True, sight_tags(pose, rng), target=sight_point(pose, target, rng)
        )
        pending.append((t + latency, batch, target))
        for due, b, tgt in [p for p in pending if p[0] <= t + 1e-9]:
            pending.remove((due, b, tgt))
            result = ekf.update_batch(b)
            if result.initialized and math.isnan(init_time):
                init_time = b.t_capture
            accepted += sum(r.accepted for _, r in result.tag_results)
            gated += sum(not r.accepted for _, r in result.tag_results)
            if result.detection is not None and not result.initialized:
                e = np.array([tgt[0] - result.detection.x, tgt[1] - result.detection.y])
                coverage.append(float(e @ np.linalg.solve(result.detection.cov, e)) <= CHI2_2DOF_95)
        if ekf.has_pose:
            est = est_of(ekf)
            e3 = np.array([pose[0] - est[0], pose[1] - est[1], wrap_angle(pose[2] - est[2])])
            errors.append(e3)
            nees.append(float(e3 @ np.linalg.solve(cov_of(ekf), e3)))
        cx, cy, radius = 2.5, 2.5, 1.3
        tangent = math.atan2(pose[1] - cy, pose[0] - cx) + math.pi / 2
        v_cmd = 0.25
        w_cmd = (
            v_cmd / radius
            + 1.5 * wrap_angle(tangent - pose[2])
            + 1.0 * (math.hypot(pose[0] - cx, pose[1] - cy) - radius)
        )
        duties = nominal.mix(v_cmd, w_cmd)
    E = np.array(errors)
    return RunStats(
        init_time=init_time,
        position_rmse=math.sqrt(float(np.mean(E[:, 0] ** 2 + E[:, 1] ** 2))),
        heading_rmse_deg=math.degrees(math.sqrt(float(np.mean(E[:, 2] ** 2)))),
        worst_position=float(np.max(np.hypot(E[:, 0], E[:, 1]))),
        nees_mean=float(np.mean(nees)),
        nees_over_99=float(np.mean(np.array(nees) > CHI2_3DOF_99)),
        detections=len(coverage),
        coverage_95=float(np.mean(coverage)),
        accepted=accepted,
        gated=gated,
        counters=ekf.counters.as_dict(),
    )


@pytest.fixture(scope="module")
def loop_run() -> RunStats:
    stats = simulate_loop(seed=7)
    print(
        f"\nEKF 60 s loop: init at {stats.init_time:.1f} s, position RMSE "
        f"{stats.position_rmse * 100:.2f} cm (worst {stats.worst_position * 100:.1f} cm), "
        f"heading RMSE {stats.heading_rmse_deg:.2f} deg, NEES mean {stats.nees_mean:.2f} "
        f"({stats.nees_over_99 * 100:.1f} % above chi2(3) 99 %), tags accepted {stats.accepted} "
        f"gated {stats.gated}, target detections {stats.detections} with "
        f"{stats.coverage_95 * 100:.1f} % inside their 95 % ellipse; counters {stats.counters}"
    )
    return stats


def test_simulated_loop_accuracy(loop_run: RunStats) -> None:
    assert loop_run.init_time < 5.0
    assert loop_run.position_rmse < 0.10
    assert loop_run.heading_rmse_deg < 3.0


def test_simulated_loop_nees_is_consistent(loop_run: RunStats) -> None:
    # Band: mean NEES within [0.8, 4.5] around the 3-dof expectation of 3. The process
    # noise deliberately over-covers a duty-calibration bias over short horizons, so
    # the filter sits on the conservative side; overconfidence would push the mean
    # above 3 and the tail above 1 %.
    assert 0.8 <= loop_run.nees_mean <= 4.5
    assert loop_run.nees_over_99 <= 0.03
    # The 99 % gate rejects about 1 % of honest sightings, not more than 3 %.
    assert loop_run.gated <= 0.03 * (loop_run.accepted + loop_run.gated)


def test_simulated_loop_detection_coverage(loop_run: RunStats) -> None:
    # Nominal 95 %; the conservative pose covariance may raise it, never lower it much.
    assert loop_run.detections >= 50
    assert 0.92 <= loop_run.coverage_95 <= 1.0


# --------------------------------------------------------------------------- gyro samples


def test_gyro_rate_is_interpolated_between_samples() -> None:
    """First-order hold: once the next gyro sample arrives, the interval since the previous
    one is integrated with the rate ramped between the two (the exact solution of
    θ' = ω0 + (ω1 - ω0)·t/Δ, x' = v·cos θ, y' = v·sin θ), not with the first rate held."""
    drive = DriveModel()
    ekf = PoseEKF(TAGS, drive, LocalizerParams(max_step=0.001), t0=0.0)
    ekf.set_pose(1.0, 1.0, 0.2, np.diag([1e-3, 1e-3, 1e-4]))
    duty, (w0, w1), span = 0.8, (0.5, 2.5), 0.1
    ekf.predict_to(span, duty, duty, gyro_z=w0)
    assert est_of(ekf)[2] == pytest.approx(0.2 + w0 * span)  # held until the next sample
    ekf.predict_to(span + 1e-3, duty, duty, gyro_z=w1)  # the next sample, taken at 0.1 s
    at = ekf.pose_at(span)
    assert at is not None
    v, _ = drive.body_velocity(duty, duty)
    t = np.linspace(0.0, span, 100_001)
    theta = 0.2 + w0 * t + (w1 - w0) * t * t / (2 * span)
    dt = t[1] - t[0]
    x = 1.0 + v * float(np.sum(np.cos(theta[:-1]) + np.cos(theta[1:])) * dt / 2)
    y = 1.0 + v * float(np.sum(np.sin(theta[:-1]) + np.sin(theta[1:])) * dt / 2)
    assert at[0][2] == pytest.approx(0.2 + (w0 + w1) / 2 * span, abs=1e-12)
    assert at[0][:2] == pytest.approx([x, y], abs=1e-6)


def test_an_update_between_samples_is_kept() -> None:
    """The ramp reaches back to the last update at most: what a tag did stays applied."""
    rng = np.random.default_rng(5)
    pose = np.array([2.5, 3.0, math.pi / 2])
    ekf = PoseEKF(TAGS, params=LocalizerParams(camera_forward=CAMERA_FORWARD), t0=0.0)
    put(ekf, pose, np.diag([0.01, 0.01, 0.003]))
    ekf.predict_to(0.05, 0.0, 0.0, gyro_z=0.0)
    result = ekf.update_batch(ObservationBatch(0.05, True, sight_tags(pose, rng)))
    assert all(r.accepted for _, r in result.tag_results)
    after_update = est_of(ekf)
    ekf.predict_to(0.1, 0.0, 0.0, gyro_z=0.0)
    ekf.predict_to(0.15, 0.0, 0.0, gyro_z=1.0)  # sampled at 0.1 (the last at 0): ω = 10·t
    at = ekf.pose_at(0.1)
    assert at is not None
    # Only [0.05, 0.1] is ramped: ∫ 10·t dt = 5·(0.1² - 0.05²); the held 0 before the update.
    assert at[0][2] == pytest.approx(after_update[2] + 5.0 * (0.1**2 - 0.05**2), abs=1e-9)


def test_heading_variance_covers_a_wandering_rate_sampled_at_10_hz() -> None:
    """The yaw rate a random walk of spectral density q (rad²/s³), the gyro sampling it
    every 0.1 s without noise. Between samples the filter integrates the ramp, whose
    error is a Brownian bridge's integral, variance q·Δ³/12 per interval, and past the
    last sample the held rate, q·a³/3 at age a; q it estimates from the samples. The
    heading error's variance over 400 runs matches the filter's (a filter that holds each
    sample and adds only the gyro's own error claims almost nothing here)."""
    q, span, fine = 12.0, 0.1, 0.001
    rng = np.random.default_rng(11)
    params = LocalizerParams(gyro_error=1e-4, max_position_trace=1e3, max_heading_var=1e3)
    errors, variances = [], []
    for _ in range(400):
        ekf = PoseEKF(TAGS, params=params, t0=0.0)
        omega = theta = held = 0.0
        for k in range(1, 51):  # 3 s to learn q, 2 s measured, then 0.05 s past a sample
            for _ in range(round(span / fine)):
                step = float(rng.normal(0.0, math.sqrt(q * fine)))
                theta += (omega + 0.5 * step) * fine
                omega += step
            ekf.predict_to(k * span, 0.0, 0.0, gyro_z=held)  # what the car reported last
            held = omega  # sampled at k·span, given with the next prediction
            if k == 30:
                ekf.set_pose(2.5, 2.5, wrap_angle(theta), np.diag([1e-6, 1e-6, 1e-8]))
        for _ in range(round(span / fine / 2)):
            step = float(rng.normal(0.0, math.sqrt(q * fine)))
            theta += (omega + 0.5 * step) * fine
            omega += step
        ekf.predict_to(50 * span + span / 2, 0.0, 0.0, gyro_z=held)
        errors.append(wrap_angle(est_of(ekf)[2] - theta))
        variances.append(cov_of(ekf)[2, 2])
    expected = 20 * q * span**3 / 12 + q * (span / 2) ** 3 / 3
    assert float(np.mean(variances)) == pytest.approx(expected, rel=0.35)
    ratio = float(np.mean(np.square(errors))) / float(np.mean(variances))
    print(f"heading: mean variance {np.mean(variances):.2e} (formula {expected:.2e}), "
          f"error² mean / variance {ratio:.2f}")
    assert 0.75 <= ratio <= 1.35, ratio


# --------------------------------------------------------------------------- gating and init


def tracked_filter(seed: int = 3) -> tuple[PoseEKF, np.ndarray, np.random.Generator]:
    rng = np.random.default_rng(seed)
    ekf = PoseEKF(TAGS, params=LocalizerParams(camera_forward=CAMERA_FORWARD))
    pose = np.array([2.5, 3.0, math.pi / 2])
    put(ekf, pose, np.diag([1e-3, 1e-3, 1e-4]))
    for _ in range(10):
        ekf.update_batch(ObservationBatch(ekf.t, True, sight_tags(pose, rng)))
    return ekf, pose, rng


def test_gross_outlier_is_rejected_by_the_gate() -> None:
    ekf, pose, rng = tracked_filter()
    before = ekf.pose
    gated_before = ekf.counters["gated"]
    tid = sight_tags(pose, rng)[0].tag_id
    lx, ly = TAGS[tid]
    # The tag is reported as if it were 1 m further along the wall.
    r, b = true_range_bearing(pose, (lx + 1.0, ly))
    result = ekf.update_tag(TAGS[tid], TagSighting(tid, r, b, sigma_range(r), SIGMA_BEARING))
    assert not result.accepted
    assert result.reason == "gated"
    assert result.nis is not None and result.nis > CHI2_2DOF_99
    assert ekf.pose == before
    assert ekf.counters["gated"] == gated_before + 1


def test_repeated_rejections_lose_the_pose() -> None:
    ekf, pose, rng = tracked_filter()
    tid = sight_tags(pose, rng)[0].tag_id
    r, b = true_range_bearing(pose, (TAGS[tid][0] + 1.0, TAGS[tid][1]))
    bad = TagSighting(tid, r, b, sigma_range(r), SIGMA_BEARING)
    for _ in range(ekf.params.max_consecutive_rejections - 1):
        ekf.update_tag(TAGS[tid], bad)
    assert ekf.has_pose
    ekf.update_tag(TAGS[tid], bad)
    assert not ekf.has_pose
    assert ekf.lost_reason == "inconsistent_tags"
    assert ekf.counters["pose_lost_inconsistent_tags"] == 1


def test_initialisation_from_two_tags_is_correct_within_noise() -> None:
    rng = np.random.default_rng(11)
    pose = np.array([1.0, 4.0, math.radians(135)])  # two tags, one on each wall of a corner
    errs = []
    for _ in range(30):
        sightings = sight_tags(pose, rng)
        assert len(sightings) >= 2
        two = sightings[:2]
        ekf = PoseEKF(TAGS, params=LocalizerParams(camera_forward=CAMERA_FORWARD))
        result = ekf.update_batch(ObservationBatch(0.0, True, two))
        if not result.initialized:
            continue
        assert ekf.has_pose
        est = est_of(ekf)
        e = np.array([pose[0] - est[0], pose[1] - est[1], wrap_angle(pose[2] - est[2])])
        errs.append(float(e @ np.linalg.solve(cov_of(ekf), e)))
    # Most draws initialise; the solution's own covariance explains the error (3 dof).
    assert len(errs) >= 20
    assert float(np.mean(np.array(errs) <= CHI2_3DOF_99)) >= 0.9


def test_initialisation_is_refused_from_one_tag() -> None:
    rng = np.random.default_rng(5)
    pose = np.array([1.0, 4.0, math.radians(135)])
    one = sight_tags(pose, rng)[:1]
    ekf = PoseEKF(TAGS, params=LocalizerParams(camera_forward=CAMERA_FORWARD))
    result = ekf.update_batch(ObservationBatch(0.0, True, one))
    assert not result.initialized
    assert not ekf.has_pose
    assert ekf.pose is None and ekf.cov is None
    assert ekf.counters["init_too_few_tags"] == 1


def test_initialisation_refuses_contradicting_tags() -> None:
    # Two sightings that no pose explains: ranges that add up to less than the tags' spacing
    # cannot both be right, and the bearings say they are 50 degrees apart.
    s1 = TagSighting(0, 0.3, 0.4, 0.03, 0.02)
    s2 = TagSighting(4, 0.3, -0.5, 0.03, 0.02)
    solution = solve_pose_from_tags([(TAGS[0], s1), (TAGS[4], s2)])
    assert not solution.ok
    assert solution.reason == "residual_gate"


def test_initialisation_ignores_unknown_tags() -> None:
    rng = np.random.default_rng(2)
    pose = np.array([1.0, 4.0, math.radians(135)])
    known = sight_tags(pose, rng)[:1]
    unknown = TagSighting(500, 1.0, 0.1, 0.05, 0.02)
    ekf = PoseEKF(TAGS, params=LocalizerParams(camera_forward=CAMERA_FORWARD))
    ekf.update_batch(ObservationBatch(0.0, True, (*known, unknown)))
    assert not ekf.has_pose
    assert ekf.counters["unknown_tag"] == 1


def test_solver_with_offsets_finds_the_pose_from_sightings_taken_at_other_headings() -> None:
    # One tag per frame while turning on the spot: each sighting from pose ⊕ (0, 0, dθ); the
    # camera, 5 cm ahead of the rotation centre, moves with the turn.
    pose = np.array([0.5, 0.5, math.radians(10.0)])
    turns = [0.0, math.radians(70.0), math.radians(140.0)]
    exact, offsets = [], []
    for turn in turns:
        at, _, _ = compose(pose, np.array([0.0, 0.0, turn]))
        rng = np.random.default_rng(0)
        tid = next(t for t in TAGS if sight_point(at, TAGS[t], rng, t) is not None)
        r, b = true_range_bearing(at, TAGS[tid])
        exact.append((TAGS[tid], TagSighting(tid, r, b, 1e-4, 1e-5)))
        offsets.append(Offset(np.array([0.0, 0.0, turn]), np.zeros((3, 3))))
    assert len({s.tag_id for _, s in exact}) >= 2
    solution = solve_pose_from_tags(exact, CAMERA_FORWARD, offsets=offsets)
    assert solution.ok and solution.pose is not None
    assert np.allclose(solution.pose, pose, atol=1e-6)
    # The same sightings taken as simultaneous explain nothing.
    assert not solve_pose_from_tags(exact, CAMERA_FORWARD).ok


def spin_until_posed(seed: int, rate: float = 2.0, gyro_sd: float = 0.01,
                     ) -> tuple[PoseEKF, np.ndarray, float]:
    """A robot turning on the spot near a corner, shown only the first tag of each 10 Hz frame;
    returns the filter, the true pose and the time when it had a pose (or gave up)."""
    rng = np.random.default_rng(seed)
    ekf = PoseEKF(TAGS, params=LocalizerParams(camera_forward=CAMERA_FORWARD))
    truth = np.array([0.6, 0.7, float(rng.uniform(-math.pi, math.pi))])
    t = 0.0
    while not ekf.has_pose and t < 10.0:
        t = round(t + 0.1, 10)
        truth[2] = wrap_angle(truth[2] + rate * 0.1)
        ekf.predict_to(t, -0.8, 0.8, gyro_z=rate + float(rng.normal(0.0, gyro_sd)))
        seen = sight_tags(truth, rng)[:1]
        if seen:
            ekf.update_batch(ObservationBatch(t, True, seen))
        if not ekf.has_pose:  # the local frame is never reported, nor used to place anything
            assert ekf.pose is None and ekf.cov is None
            assert not seen or ekf.detection_from_sighting(seen[0], t) is None
    return ekf, truth, t


def test_a_robot_turning_on_the_spot_gets_its_pose_from_one_tag_at_a_time() -> None:
    nees, times = [], []
    for seed in range(40):
        ekf, truth, t = spin_until_posed(seed)
        assert ekf.has_pose, f"seed {seed}: no pose after {t:.1f} s"
        times.append(t)
        est = est_of(ekf)
        e = np.array([truth[0] - est[0], truth[1] - est[1], wrap_angle(truth[2] - est[2])])
        nees.append(float(e @ np.linalg.solve(cov_of(ekf), e)))
    # One turn at 2 rad/s takes 3.1 s; the error is explained by the pose's covariance.
    assert max(times) < 3.2
    assert float(np.mean(np.array(nees) <= CHI2_3DOF_99)) >= 0.9


def test_a_turn_frame_that_grows_too_uncertain_is_dropped() -> None:
    ekf = PoseEKF(TAGS, params=LocalizerParams(camera_forward=CAMERA_FORWARD))
    rng = np.random.default_rng(3)
    pose = np.array([1.0, 4.0, math.radians(135)])
    ekf.update_batch(ObservationBatch(0.0, True, sight_tags(pose, rng)[:1]))
    assert not ekf.has_pose
    t = 0.0
    while ekf.counters["turn_frame_expired"] == 0 and t < 60.0:
        t = round(t + 0.1, 10)
        ekf.predict_to(t, 0.6, 0.6, gyro_z=0.0)
    assert ekf.counters["turn_frame_expired"] == 1 and not ekf.has_pose
    # What the dropped frame saw is gone: one more tag starts a new frame, no pose.
    ekf.update_batch(ObservationBatch(t, True, sight_tags(pose, rng)[1:2]))
    assert not ekf.has_pose and ekf.counters["init_too_few_tags"] == 2


def test_pose_fix_initialises_and_is_gated() -> None:
    ekf = PoseEKF(TAGS)
    cov = np.diag([0.003, 0.003, 0.001])
    r = ekf.update_batch(ObservationBatch(0.0, True, pose_fix=PoseFix(1.0, 2.0, 0.5, cov)))
    assert r.initialized and ekf.pose == (1.0, 2.0, 0.5)
    ok = ekf.update_pose_fix(PoseFix(1.02, 2.01, 0.51, cov))
    assert ok.accepted and ok.nis is not None
    bad = ekf.update_pose_fix(PoseFix(2.0, 2.0, 0.5, cov))
    assert not bad.accepted and bad.reason == "gated"
    vague = PoseEKF(TAGS)
    refused = vague.update_pose_fix(PoseFix(1.0, 2.0, 0.5, np.diag([1.0, 1.0, 0.1])))
    assert not refused.accepted and not vague.has_pose


def test_pose_is_lost_when_no_tag_is_seen_for_long() -> None:
    ekf = PoseEKF(TAGS)
    ekf.set_pose(2.5, 2.5, 0.0, np.diag([1e-3, 1e-3, 1e-4]))
    t = 0.0
    while ekf.has_pose and t < 120.0:
        t += 0.1
        ekf.predict_to(t, 0.6, 0.6, gyro_z=0.0)
    assert not ekf.has_pose
    assert ekf.lost_reason == "covariance_exceeded"
    assert 3.0 < t < 60.0
    # Without a pose nothing is claimed: no detection, no update.
    assert ekf.detection_from_sighting(TagSighting(9, 1.0, 0.0, 0.05, 0.02), ekf.t) is None
    assert ekf.update_tag(TAGS[0], TagSighting(0, 1.0, 0.0, 0.05, 0.02)).reason == "no_pose"


# --------------------------------------------------------------------------- time


def test_late_batch_equals_a_batch_applied_on_time() -> None:
    rng = np.random.default_rng(4)
    pose = np.array([2.5, 3.0, math.pi / 2])
    batch = ObservationBatch(0.3, True, sight_tags(pose, rng))
    inputs = [(0.1 * k, 0.5 + 0.02 * k, 0.55, 0.05) for k in range(1, 8)]

    def fresh() -> PoseEKF:
        ekf = PoseEKF(TAGS, params=LocalizerParams(camera_forward=CAMERA_FORWARD))
        ekf.set_pose(2.5, 3.0, math.pi / 2, np.diag([0.01, 0.01, 0.003]))
        return ekf

    on_time = fresh()
    for t, dl, dr, g in inputs:
        on_time.predict_to(t, dl, dr, g)
        if t == pytest.approx(0.3):
            on_time.update_batch(batch)
    late = fresh()
    for t, dl, dr, g in inputs:
        late.predict_to(t, dl, dr, g)
    result = late.update_batch(batch)  # arrives at 0.7 s, captured at 0.3 s
    assert result.applied
    assert all(r.accepted for _, r in result.tag_results)
    assert late.t == pytest.approx(0.7)
    assert np.allclose(est_of(late), est_of(on_time), atol=1e-12)
    assert np.allclose(cov_of(late), cov_of(on_time), atol=1e-12)


def test_refused_times_are_named_and_counted() -> None:
    rng = np.random.default_rng(4)
    pose = np.array([2.5, 3.0, math.pi / 2])
    ekf = PoseEKF(TAGS, params=LocalizerParams(camera_forward=CAMERA_FORWARD))
    ekf.set_pose(2.5, 3.0, math.pi / 2, np.diag([0.01, 0.01, 0.003]))
    for k in range(1, 21):
        ekf.predict_to(0.1 * k, 0.0, 0.0, 0.0)
    tags = sight_tags(pose, rng)
    assert ekf.update_batch(ObservationBatch(1.7, True, tags)).applied
    assert ekf.update_batch(ObservationBatch(1.6, True, tags)).reason == "out_of_order"
    assert ekf.update_batch(ObservationBatch(2.5, True, tags)).reason == "from_future"
    assert ekf.update_batch(ObservationBatch(1.9, False, tags)).reason == "unsynchronized"
    assert ekf.update_batch(ObservationBatch(1.9, True, tags)).applied
    fresh = PoseEKF(TAGS, t0=10.0)
    fresh.predict_to(10.5, 0.0, 0.0)
    assert fresh.update_batch(ObservationBatch(9.0, True, tags)).reason == "too_old"
    assert ekf.counters["out_of_order"] == 1
    assert ekf.counters["from_future"] == 1
    assert ekf.counters["unsynchronized"] == 1
    assert fresh.counters["too_old"] == 1
    with pytest.raises(ValueError):
        ekf.predict_to(1.0, 0.0, 0.0)


def test_initialisation_from_a_late_batch_is_carried_to_now() -> None:
    rng = np.random.default_rng(8)
    ekf = PoseEKF(TAGS, params=LocalizerParams(camera_forward=CAMERA_FORWARD))
    pose = np.array([1.0, 4.0, math.radians(135)])
    for k in range(1, 4):
        ekf.predict_to(0.1 * k, 0.0, 0.0, 0.0)
    result = ekf.update_batch(ObservationBatch(0.1, True, sight_tags(pose, rng)))
    assert result.initialized
    assert ekf.t == pytest.approx(0.3)
    assert math.hypot(est_of(ekf)[0] - 1.0, est_of(ekf)[1] - 4.0) < 0.25
    # The pose was held for 0.2 s since capture, so it is less certain now than then.
    then = ekf.pose_at(0.1)
    assert then is not None
    assert np.trace(cov_of(ekf)) > np.trace(then[1])


# --------------------------------------------------------------------------- detections


def test_detection_refused_without_pose() -> None:
    ekf = PoseEKF(TAGS)
    s = TagSighting(99, 1.0, 0.0, 0.05, 0.02)
    assert ekf.detection_from_sighting(s, 0.0) is None
    assert ekf.counters["detection_no_pose"] == 1


def test_detection_covariance_includes_pose_uncertainty_at_the_expected_rate() -> None:
    """Monte Carlo: true pose drawn from N(estimate, P), target sighted with noise."""
    rng = np.random.default_rng(21)
    P = np.diag([0.05**2, 0.04**2, math.radians(3.0) ** 2])
    P[0, 1] = P[1, 0] = 0.3 * 0.05 * 0.04
    est = np.array([1.0, 1.0, 0.3])
    ekf = PoseEKF(TAGS, params=LocalizerParams(camera_forward=CAMERA_FORWARD))
    put(ekf, est, P)
    L = np.linalg.cholesky(P)
    inside = inside_sensor_only = 0
    n = 2000
    for _ in range(n):
        truth = est + L @ rng.standard_normal(3)
        target = camera(truth)
        r = float(rng.uniform(0.5, 3.0))
        b = float(rng.uniform(-FOV / 2, FOV / 2))
        target = (
            target[0] + r * math.cos(truth[2] + b),
            target[1] + r * math.sin(truth[2] + b),
        )
        sr = sigma_range(r)
        s = TagSighting(
            99,
            r + float(rng.normal(0, sr)),
            wrap_angle(b + float(rng.normal(0, SIGMA_BEARING))),
            sr,
            SIGMA_BEARING,
        )
        det = ekf.detection_from_sighting(s, ekf.t)
        assert det is not None
        e = np.array([target[0] - det.x, target[1] - det.y])
        inside += float(e @ np.linalg.solve(det.cov, e)) <= CHI2_2DOF_95
        _, _, G = target_position(est, s, CAMERA_FORWARD)
        sensor_only = G @ s.noise_cov @ G.T
        # The pose's part is kept apart (the track's consider term): the rest is the sensor's.
        assert det.pose_cov is not None and np.allclose(det.cov - det.pose_cov, sensor_only)
        inside_sensor_only += float(e @ np.linalg.solve(sensor_only, e)) <= CHI2_2DOF_95
    rate = inside / n
    print(
        f"\ndetection 95 % ellipse coverage: {rate * 100:.1f} % with pose uncertainty, "
        f"{inside_sensor_only / n * 100:.1f} % with sensor noise only"
    )
    # Binomial sd at n = 2000 is 0.5 %; the band is about +-4 sd.
    assert 0.93 <= rate <= 0.97
    assert inside_sensor_only / n < 0.85
