from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.drive_model import DriveModel

MODEL = DriveModel(track=0.13, max_wheel_speed=0.5, deadband=0.25, min_speed=0.005)


def test_deadband_gives_no_motion_and_linear_above() -> None:
    assert MODEL.wheel_speed(0.0) == 0.0
    assert MODEL.wheel_speed(0.25) == 0.0
    assert MODEL.wheel_speed(-0.2) == 0.0
    assert MODEL.wheel_speed(1.0) == pytest.approx(0.5)
    assert MODEL.wheel_speed(-1.0) == pytest.approx(-0.5)
    assert MODEL.wheel_speed(0.625) == pytest.approx(0.25)  # halfway between deadband and 1
    assert MODEL.wheel_speed(2.0) == pytest.approx(0.5)  # clipped


def test_inverse_compensates_the_deadband_and_zeroes_tiny_requests() -> None:
    assert MODEL.duty_for_speed(0.0) == 0.0
    assert MODEL.duty_for_speed(0.004) == 0.0
    assert MODEL.duty_for_speed(-0.004) == 0.0
    d = MODEL.duty_for_speed(0.01)
    assert d > 0.25  # just past the deadband, not a tiny duty that would not move the wheel
    assert MODEL.duty_for_speed(0.5) == 1.0
    assert MODEL.duty_for_speed(3.0) == 1.0
    assert MODEL.duty_for_speed(-3.0) == -1.0


@settings(max_examples=200, deadline=None)
@given(st.floats(-0.5, 0.5))
def test_inverse_round_trips(speed: float) -> None:
    duty = MODEL.duty_for_speed(speed)
    if abs(speed) < MODEL.min_speed:
        assert duty == 0.0
    else:
        assert MODEL.wheel_speed(duty) == pytest.approx(speed, abs=1e-12)


@settings(max_examples=300, deadline=None)
@given(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6))
def test_mix_is_always_within_unit_duties(v: float, omega: float) -> None:
    left, right = MODEL.mix(v, omega)
    assert -1.0 <= left <= 1.0
    assert -1.0 <= right <= 1.0


@settings(max_examples=200, deadline=None)
@given(st.floats(-0.3, 0.3), st.floats(-2.0, 2.0))
def test_mix_realises_feasible_requests(v: float, omega: float) -> None:
    vl, vr = v - omega * MODEL.track / 2, v + omega * MODEL.track / 2
    if max(abs(vl), abs(vr)) > MODEL.max_wheel_speed:
        return
    if min(abs(vl), abs(vr)) < MODEL.min_speed:
        return
    v_out, omega_out = MODEL.body_velocity(*MODEL.mix(v, omega))
    assert v_out == pytest.approx(v, abs=1e-9)
    assert omega_out == pytest.approx(omega, abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(st.floats(0.05, 5.0), st.floats(-20.0, 20.0))
def test_saturation_keeps_the_turn(v: float, omega: float) -> None:
    vl, vr = MODEL.wheel_speeds_for(v, omega)
    assert max(abs(vl), abs(vr)) <= MODEL.max_wheel_speed + 1e-12
    # Same curvature omega / v as requested: both wheels were scaled together.
    v_out, omega_out = 0.5 * (vl + vr), (vr - vl) / MODEL.track
    assert omega_out * v == pytest.approx(omega * v_out, rel=1e-9, abs=1e-12)
    assert v_out > 0.0


def test_turning_on_the_spot_mixes_opposite_duties() -> None:
    left, right = MODEL.mix(0.0, 1.0)
    assert left < -0.25 and right > 0.25
    assert left == -right


@pytest.mark.parametrize(
    "kwargs",
    [
        {"track": 0.0},
        {"max_wheel_speed": -1.0},
        {"deadband": 1.0},
        {"deadband": -0.1},
        {"min_speed": 0.8},
        {"track": math.nan},
    ],
)
def test_construction_validates(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        DriveModel(**kwargs)


def test_non_finite_inputs_are_refused() -> None:
    with pytest.raises(ValueError):
        MODEL.wheel_speed(math.nan)
    with pytest.raises(ValueError):
        MODEL.duty_for_speed(math.inf)
    with pytest.raises(ValueError):
        MODEL.mix(math.nan, 0.0)
