"""The gyro's bias learnt while the car stands still: the scalar Kalman formula, when a sample
counts, and an agent whose heading no longer drifts while it waits."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from agents.config import AgentConfig
from agents.core import AgentCore
from agents.gyro_bias import SAMPLE_PERIOD, GyroBias, GyroBiasParams
from agents.observations import ObservationBatch, PoseFix
from agents.room import Room

DT = 0.1  # telemetry at 10 Hz


def test_still_samples_give_the_textbook_estimate() -> None:
    """Without drift the bias after n used samples is the precision-weighted mean (the
    samples quieter than ``sample_noise``, so that is the noise used throughout)."""
    p = GyroBiasParams(drift_psd=0.0, settle_time=0.5, sample_noise=0.02, initial_std=0.02)
    g = GyroBias(p)
    samples = np.random.default_rng(1).normal(0.013, 0.01, 60)
    for k, z in enumerate(samples):
        g.correct(k * DT, 0.0, 0.0, float(z))
    used = samples[5:]  # from 0.5 s of zero duty on
    n = len(used)
    assert g.updates == n
    precision = 1 / p.initial_std**2 + n / p.sample_noise**2
    assert g.variance == pytest.approx(1 / precision, rel=1e-9)
    assert g.bias == pytest.approx(used.sum() / p.sample_noise**2 / precision, rel=1e-9)
    assert abs(g.bias - 0.013) < 3 * g.std
    assert g.noise_std == p.sample_noise


def test_the_noise_learnt_is_the_prior_and_the_innovations_less_the_estimate_variance() -> None:
    p = GyroBiasParams(drift_psd=0.0, settle_time=0.0, sample_noise=0.01, initial_std=0.02,
                       noise_prior_samples=4.0)
    g = GyroBias(p)
    total = 0.0
    for k, z in enumerate((0.05, -0.03, 0.06)):
        prior_variance, bias = g.variance, g.bias
        g.correct(k * DT, 0.0, 0.0, z)
        total += (z - bias) ** 2 - prior_variance
        learnt = (4.0 * 0.01**2 + total) / (4.0 + k + 1)
        assert g.noise_std == pytest.approx(math.sqrt(max(0.01**2, learnt)), rel=1e-12)
    assert g.noise_std > 0.02


@pytest.mark.parametrize("true_noise", [0.06, 0.005])
def test_a_noisier_gyro_is_learnt_and_a_quieter_one_never_trusted_below_the_setting(
    true_noise: float,
) -> None:
    """60 s standing still at 10 Hz: a gyro three times noisier than the setting is learnt
    within 10 % (the gate widens with it, so its tails are not cut off); a quieter one
    keeps the setting. The residual handed to the localizer follows."""
    g = GyroBias(GyroBiasParams(sample_noise=0.02))
    samples = np.random.default_rng(5).normal(0.013, true_noise, 600)
    for k, z in enumerate(samples):
        g.correct(k * DT, 0.0, 0.0, float(z))
    expected = max(true_noise, 0.02)
    assert g.noise_std == pytest.approx(expected, rel=0.1)
    if true_noise < 0.02:
        assert g.noise_std == 0.02
    assert g.refused <= 2
    assert abs(g.bias - 0.013) < 3 * g.std
    tau = 0.5
    assert g.residual_std(tau) == pytest.approx(
        math.sqrt(g.variance + g.noise_std**2 * SAMPLE_PERIOD / (2 * tau)), rel=1e-12)


def test_only_a_settled_still_car_teaches_and_every_sample_is_corrected() -> None:
    g = GyroBias(GyroBiasParams(settle_time=0.5))  # not the default: five samples to settle
    t = 0.0
    for _ in range(20):  # driving: nothing learnt, the rate passes less the (zero) estimate
        assert g.correct(t, 0.5, 0.6, 0.3) == 0.3
        t += DT
    for _ in range(5):  # stopped, still settling: 0.0 .. 0.4 s
        g.correct(t, 0.0, 0.0, 0.01)
        t += DT
    assert g.updates == 0
    out = g.correct(t, 0.0, 0.0, 0.01)  # 0.5 s after the stop
    assert g.updates == 1 and 0.0 < g.bias < 0.01
    assert out == pytest.approx(0.01 - g.bias)
    assert g.correct(t + DT, 0.4, 0.4, 0.5) == pytest.approx(0.5 - g.bias)  # moving again
    assert g.updates == 1
    assert g.correct(t + 2 * DT, 0.0, 0.0, None) is None  # no gyro


def test_a_still_car_that_is_being_turned_is_not_used() -> None:
    g = GyroBias(GyroBiasParams(settle_time=0.0, max_still_rate=0.1))
    g.correct(0.0, 0.0, 0.0, 0.4)  # pushed round by another robot, wheels idle
    assert (g.updates, g.refused, g.bias) == (0, 1, 0.0)


def test_the_bias_variance_grows_with_the_drift_between_samples() -> None:
    g = GyroBias(GyroBiasParams(drift_psd=1e-6, initial_std=0.01))
    g.correct(0.0, 1.0, 1.0, 0.0)
    g.correct(100.0, 1.0, 1.0, 0.0)
    assert g.variance == pytest.approx(1e-4 + 1e-4)


def test_disabled_passes_the_gyro_through() -> None:
    g = GyroBias(GyroBiasParams(enabled=False, settle_time=0.0))
    assert g.correct(0.0, 0.0, 0.0, 0.05) == 0.05 and g.updates == 0


@pytest.mark.parametrize("bad", [{"settle_time": -1.0}, {"sample_noise": 0.0},
                                 {"max_still_rate": math.nan}, {"enabled": 1},
                                 {"noise_prior_samples": 0.0}])
def test_bad_parameters_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        GyroBiasParams(**bad)  # type: ignore[arg-type]


def test_the_residual_error_is_the_estimate_and_the_held_white_noise() -> None:
    p = GyroBiasParams(sample_noise=0.02, initial_std=0.02)
    g = GyroBias(p)
    tau = 0.5
    # Textbook: white noise σ_n held for T has density σ_n²·T = 2·σ²·τ of the filter's model.
    white = 0.02**2 * SAMPLE_PERIOD / (2.0 * tau)
    assert abs(SAMPLE_PERIOD - 0.1) < 1e-12  # the firmware's 10 Hz telemetry
    assert g.residual_std(tau) == pytest.approx(math.sqrt(0.02**2 + white))
    for k in range(300):  # 30 s standing still, the first 0.2 s settling
        g.correct(k * DT, 0.0, 0.0, 0.01)
    error = g.residual_std(tau)
    assert error == pytest.approx(math.sqrt(g.variance + white))
    # The drift keeps the estimate's σ near (drift_psd·T·σ_n²)^¼ = 0.0025 rad/s.
    assert error is not None and g.variance < 0.003**2 and error < 0.007
    assert GyroBias(GyroBiasParams(enabled=False)).residual_std(tau) is None


def _heading_after_waiting(enabled: bool, bias: float, seed: int = 7,
                           seconds: float = 30.0) -> tuple[float, float]:
    """An agent given its pose, then standing still with a biased gyro and no tag in view:
    its heading and the heading's σ after ``seconds``."""
    config = AgentConfig(name="walnut", room=Room(5.0, 5.0), landmarks={0: (0.0, 2.5)},
                         target_tag=100)
    config = replace(config, gyro_bias=replace(config.gyro_bias, enabled=enabled))
    core = AgentCore(config, t0=0.0)
    steps = round(seconds / DT)
    noise = np.random.default_rng(seed).normal(0.0, 0.02, steps + 1)
    core.on_car_status(0.0, 0.0, 0.0, bias)
    core.on_observations(ObservationBatch(0.0, True, pose_fix=PoseFix(
        2.5, 2.5, 0.0, np.diag([1e-4, 1e-4, 1e-4]))), 0.0)
    for k in range(1, steps + 1):
        core.on_car_status(k * DT, 0.0, 0.0, bias + float(noise[k]))
    core.tick(seconds)
    pose, P = core.localizer.pose, core.localizer.cov
    assert pose is not None and P is not None
    return pose[2], math.sqrt(float(P[2, 2]))


def test_an_agent_waiting_still_keeps_its_heading() -> None:
    bias = 0.015  # rad/s: a heading error of 0.45 rad after 30 s if integrated
    drifted, _ = _heading_after_waiting(False, bias)
    kept, _ = _heading_after_waiting(True, bias)
    assert abs(drifted) > 0.3
    assert abs(kept) < 0.05


def test_a_still_agent_that_knows_its_bias_knows_its_heading_is_kept() -> None:
    """The heading's σ once the bias is learnt grows as the residual's, not the unknown
    bias's, and still covers the error: over 20 noise draws, 30 s still, the errors are
    inside 2σ and their mean square below the variance's."""
    bias = 0.015
    runs = np.array([_heading_after_waiting(True, bias, seed) for seed in range(20)])
    errors, sigmas = runs[:, 0], runs[:, 1]
    assert np.all(sigmas < math.radians(3.0))  # was 6.3 deg: 0.02·sqrt(2·0.5·30)
    assert np.all(np.abs(errors) <= 2.0 * sigmas)
    assert float(np.mean(errors**2 / sigmas**2)) < 1.0
    _, unknown = _heading_after_waiting(False, bias)
    assert unknown == pytest.approx(math.sqrt(1e-4 + 2 * 0.02**2 * 0.5 * 30.0), rel=0.02)
