"""The receiver's plausibility rules (SWARM.md §10), each at its edges."""

from __future__ import annotations

import numpy as np
import pytest

from protocol.swarm.limits import (
    ClaimLimits,
    Implausible,
    check_cells,
    check_covariance,
    check_time,
    check_track,
)

LIM = ClaimLimits.for_room(5.0, 4.0, margin=1.0)
P_OK = np.diag([0.01, 0.01, 0.1, 0.1])


def test_time_window_is_closed_at_both_ends() -> None:
    assert check_time(95.0, 100.0, LIM) is None  # exactly max_age old
    assert check_time(101.0, 100.0, LIM) is None  # exactly max_ahead ahead
    assert check_time(94.999, 100.0, LIM) is Implausible.TIME
    assert check_time(101.001, 100.0, LIM) is Implausible.TIME
    assert check_time(-1e300, 100.0, LIM) is Implausible.TIME


@pytest.mark.parametrize(
    ("mean", "reason"),
    [
        ((-1.0, -1.0, 0.0, 0.0), None),  # the room's corner minus the margin
        ((6.0, 5.0, 0.0, 0.0), None),
        ((6.01, 2.0, 0.0, 0.0), Implausible.POSITION),
        ((2.0, -1.01, 0.0, 0.0), Implausible.POSITION),
        ((3e38, 3e38, 0.0, 0.0), Implausible.POSITION),
        ((2.0, 2.0, 6.0, 8.0), None),  # 10 m/s exactly
        ((2.0, 2.0, 6.0, 8.01), Implausible.VELOCITY),
    ],
)
def test_track_position_and_speed(mean: tuple[float, ...], reason: Implausible | None) -> None:
    assert check_track(mean, P_OK, LIM) is reason


def test_covariance_needs_every_eigenvalue_between_floor_and_ceiling() -> None:
    assert check_covariance(P_OK, LIM) is None
    assert check_covariance(np.diag([1e-6, 1e-6, 1e4, 1e4]), LIM) is None
    assert check_covariance(np.diag([1e-30] * 4), LIM) is Implausible.COVARIANCE
    assert check_covariance(np.diag([0.01, 0.01, 0.1, 1e5]), LIM) is Implausible.COVARIANCE
    singular = np.ones((4, 4)) * 0.1  # rank one: positive diagonal, not positive definite
    assert check_covariance(singular, LIM) is Implausible.COVARIANCE
    lopsided = P_OK.copy()
    lopsided[0, 1] = 0.005
    assert check_covariance(lopsided, LIM) is Implausible.COVARIANCE  # not symmetric
    assert check_covariance(np.full((4, 4), np.nan), LIM) is Implausible.COVARIANCE


def test_cells_mu_and_var_bounds() -> None:
    assert check_cells([], [], LIM) is None
    assert check_cells([0.0, 1.0, -0.01, 1.01], [5e-7, 1.0, 4.0, 0.5], LIM) is None
    assert check_cells([65504.0], [0.1], LIM) is Implausible.CELLS
    assert check_cells([0.5], [2.0**-24], LIM) is Implausible.CELLS
    assert check_cells([0.5], [4.5], LIM) is Implausible.CELLS


def test_limits_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="extent"):
        ClaimLimits(1.0, 0.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="finite"):
        ClaimLimits(0.0, float("inf"), 0.0, 1.0)
    with pytest.raises(ValueError, match="var_floor"):
        ClaimLimits(0.0, 1.0, 0.0, 1.0, var_floor=0.0)


def test_look_cameras_in_the_room_and_range_bounded() -> None:
    from protocol.swarm import Look, LookRecord, Message
    from protocol.swarm.limits import check_look, judge

    def look(x_cm: int, range_cm: int = 300, age_ms: int = 0) -> Look:
        records = (LookRecord(age_ms, 100, 100, 0), LookRecord(0, x_cm, 100, 0))
        return Look(1, 100.0, range_cm, 1082, records)

    assert check_look(look(600), LIM) is None  # the east wall plus the 1 m margin
    assert check_look(look(601), LIM) is Implausible.POSITION
    assert check_look(look(-101), LIM) is Implausible.POSITION
    assert check_look(look(100, range_cm=1000), LIM) is None  # 10 m exactly
    assert check_look(look(100, range_cm=1001), LIM) is Implausible.LOOK
    assert check_look(look(601, range_cm=1001), LIM) is Implausible.POSITION  # in that order
    # The oldest look's time is judged as t_ref is: 5 s old at most.
    same_clock = lambda t: t  # noqa: E731
    fresh = Message(1, "walnut", 1, 1, 100.0, look(100, age_ms=5000))
    stale = Message(1, "walnut", 1, 1, 100.0, look(100, age_ms=5001))
    assert judge(fresh, 100.0, LIM, same_clock) is None
    assert judge(stale, 100.0, LIM, same_clock) is Implausible.TIME
    assert judge(stale, 100.0, LIM, None) is None  # no mapping: no time rule
