"""Global lattice <-> window index maths."""

from __future__ import annotations

import numpy as np
import pytest

from agents.belief.lattice import (
    axis_centres,
    cell_centre,
    cell_index,
    check_int16_window,
    global_to_local,
    local_to_global,
    origin_for,
    shift_slices,
)


def test_cell_index_floors_including_negative_coordinates() -> None:
    assert cell_index(0.05, 0.1) == 0
    assert cell_index(0.15, 0.1) == 1
    assert cell_index(-0.05, 0.1) == -1
    assert cell_index(-0.15, 0.1) == -2
    assert cell_centre(-2, 0.1) == pytest.approx(-0.15)


def test_origin_puts_the_robot_cell_at_the_centre_cell() -> None:
    ox, oy = origin_for(1.23, -0.47, 0.1, 64, 48)
    assert (cell_index(1.23, 0.1) - ox, cell_index(-0.47, 0.1) - oy) == (32, 24)


def test_global_local_round_trip_and_mask() -> None:
    origin = (-10, 5)
    ix = np.array([-10, -1, 9, 10, -11])
    iy = np.array([5, 6, 12, 5, 5])
    lx, ly, inside = global_to_local(ix, iy, origin, width=20, height=8)
    assert inside.tolist() == [True, True, True, False, False]
    gx, gy = local_to_global(lx, ly, origin)
    assert np.array_equal(gx, ix) and np.array_equal(gy, iy)


def test_axis_centres() -> None:
    assert np.allclose(axis_centres(-2, 4, 0.5), [-0.75, -0.25, 0.25, 0.75])


def test_int16_limits() -> None:
    check_int16_window((32767 - 63, 0), 64, 64)
    with pytest.raises(ValueError):
        check_int16_window((32767 - 62, 0), 64, 64)
    with pytest.raises(ValueError):
        check_int16_window((0, -32769), 64, 64)


@pytest.mark.parametrize("shift", [-3, -1, 0, 2, 5])
def test_shift_slices_move_values(shift: int) -> None:
    n = 8
    old = np.arange(n)
    new = np.full(n, -1)
    dst, src = shift_slices(shift, n)
    new[dst] = old[src]
    for k in range(n):
        expected = k + shift if 0 <= k + shift < n else -1
        assert new[k] == expected
