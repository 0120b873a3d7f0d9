"""Parameter sets refuse values outside their documented ranges."""

from __future__ import annotations

import math
from typing import Any

import pytest

from agents.belief.params import GridParams, ReputationParams, TrackParams
from agents.config import track_for_target


def test_defaults_construct() -> None:
    GridParams()
    TrackParams()
    ReputationParams()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"cell_size": 0.0},
        {"cell_size": math.nan},
        {"width": 2},
        {"height": 5000},
        {"var_min": 2.0, "var_max": 1.0},
        {"r_hit": 0.0},
        {"r_miss": -1.0},
        {"decay": -0.1},
        {"diffusivity": math.inf},
        {"patch_var_change": 0.0},
    ],
)
def test_grid_params_refuse_bad_values(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        GridParams(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_speed": 0.0},
        {"max_accel": math.inf},
        {"sojourn_ct": -1.0},
        {"initial_turn": 1.5},
        {"mode_floor": 0.5},
        {"gate": -1.0},
        {"max_consecutive_gated": 0},
        {"ci_criterion": "median"},
    ],
)
def test_track_params_refuse_bad_values(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        TrackParams(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"forgetting": 1.0},
        {"forgetting": 0.0},
        {"threshold": 0.9},  # the prior 4/5 would not be fusable
        {"prior_alpha": 100.0},  # a peer that always fails would stay fusable
        {"confident_trace": 0.0},
        {"min_refuting_views": 0},
        {"hot_mu": 1.5},
    ],
)
def test_reputation_params_refuse_bad_values(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ReputationParams(**kwargs)


def test_track_noises_follow_the_declared_target() -> None:
    p = TrackParams(max_speed=1.0, max_accel=0.5, cv_manoeuvre_time=0.2, ct_accel_fraction=0.1)
    assert p.q_cv == pytest.approx(0.25 * 0.2)
    assert p.q_ct == pytest.approx(0.05**2)
    assert p.accel_psd == p.q_cv  # a published track is predicted with the CV mode
    assert p.initial_modes == pytest.approx((1 - p.initial_turn, p.initial_turn))


def test_a_declared_target_sets_the_track_limits_and_the_rest_stays() -> None:
    p = track_for_target(1.0, 0.67, 0.06)
    assert (p.max_speed, p.max_accel, p.target_radius) == (1.0, 0.67, 0.06)
    default = TrackParams()
    q = track_for_target(None, None, None)
    assert (q.max_speed, q.max_accel, q.target_radius) == (
        default.max_speed, default.max_accel, default.target_radius)
    assert track_for_target(2.0, None, None).max_accel == default.max_accel


def test_exchange_rate_scales_with_cell_size() -> None:
    assert GridParams(diffusivity=0.02, cell_size=0.1).exchange_rate == pytest.approx(2.0)
    assert GridParams(diffusivity=0.02, cell_size=0.2).exchange_rate == pytest.approx(0.5)
