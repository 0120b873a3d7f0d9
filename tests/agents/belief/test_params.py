"""Parameter sets refuse values outside their documented ranges."""

from __future__ import annotations

import math

import pytest

from agents.belief.params import GridParams, ReputationParams, TrackParams


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
        {"accel_psd": 0.0},
        {"gate": -1.0},
        {"max_consecutive_gated": 0},
        {"ci_criterion": "median"},
        {"peak_max_var": 0.0},
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
    ],
)
def test_reputation_params_refuse_bad_values(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        ReputationParams(**kwargs)


def test_exchange_rate_scales_with_cell_size() -> None:
    assert GridParams(diffusivity=0.02, cell_size=0.1).exchange_rate == pytest.approx(2.0)
    assert GridParams(diffusivity=0.02, cell_size=0.2).exchange_rate == pytest.approx(0.5)
