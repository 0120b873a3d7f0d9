"""The pheromone grid's PREDICT and DEPOSIT against explicit per-cell reference
implementations: diffusion and decay; the scalar Kalman update of each cell the camera
saw or a detection fell in, none behind an obstacle or another robot."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.belief.deposit import Detection, Footprint
from agents.belief.grid import CellBlock, PheromoneGrid
from agents.belief.params import GridParams
from tests.agents.belief.smallgrid import SMALL, _randomise


# ------------------------------------------------------------------- reference
def _reference_predict(mu: np.ndarray, var: np.ndarray, p: GridParams, dt: float) -> tuple:
    mu = mu.copy()
    h, w = mu.shape
    rate = p.exchange_rate
    steps = max(1, math.ceil(rate * dt / 0.25))
    k = rate * dt / steps
    for _ in range(steps):
        new = mu.copy()
        for r in range(h):
            for c in range(w):
                for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
                    if 0 <= rr < h and 0 <= cc < w:
                        new[r, c] += k * (mu[rr, cc] - mu[r, c])
        mu = new
    return mu, np.minimum(var + p.process_noise * dt, p.var_max)


def _reference_deposit(
    grid: PheromoneGrid, footprint: Footprint | None, detections: list[Detection]
) -> tuple[np.ndarray, np.ndarray, int]:
    p = grid.params
    mu, var = grid.mu.copy(), grid.var.copy()
    observed = 0
    pad = p.cell_size**2 / 12.0
    for r, yc in enumerate(grid.ys):
        for c, xc in enumerate(grid.xs):
            R_hit = math.inf
            for det in detections:
                S = det.cov + pad * np.eye(2)
                d = np.array([xc - det.x, yc - det.y])
                d2 = float(d @ np.linalg.inv(S) @ d)
                if d2 <= p.detection_gate:
                    R_hit = min(R_hit, p.r_hit * math.exp(0.5 * d2))
            seen = False
            if footprint is not None:
                dist = math.hypot(xc - footprint.x, yc - footprint.y)
                bearing = math.atan2(yc - footprint.y, xc - footprint.x)
                off = abs(math.remainder(bearing - footprint.heading, 2 * math.pi))
                seen = footprint.min_range <= dist <= footprint.range and (
                    dist == 0.0 or off <= footprint.fov / 2
                )
            if R_hit < math.inf:
                z, R = 1.0, R_hit
            elif seen:
                z, R = 0.0, p.r_miss
            else:
                continue
            observed += 1
            K = var[r, c] / (var[r, c] + R)
            mu[r, c] += K * (z - mu[r, c])
            var[r, c] = max((1.0 - K) * var[r, c], p.var_min)
    return mu, var, observed


# --------------------------------------------------------------------- PREDICT
@pytest.mark.parametrize("dt", [0.05, 0.1, 0.37])
def test_predict_matches_the_flux_stencil(dt: float) -> None:
    grid = PheromoneGrid(SMALL, 0.3, -0.2)
    _randomise(grid, seed=1)
    mu_ref, var_ref = _reference_predict(grid.mu, grid.var, grid.params, dt)
    grid.predict(dt)
    assert np.allclose(grid.mu, mu_ref, rtol=1e-12, atol=1e-14)
    assert np.allclose(grid.var, var_ref)


def test_predict_sub_steps_a_long_dt() -> None:
    params = GridParams(width=9, height=7, diffusivity=0.05)  # rate 5/s
    grid = PheromoneGrid(params)
    _randomise(grid, seed=2)
    mu_ref, _ = _reference_predict(grid.mu, grid.var, params, 1.0)  # 20 sub-steps
    grid.predict(1.0)
    assert np.allclose(grid.mu, mu_ref, rtol=1e-12, atol=1e-14)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.001, 3.0))
def test_diffusion_conserves_mass_and_stays_in_range(seed: int, dt: float) -> None:
    grid = PheromoneGrid(SMALL)
    _randomise(grid, seed)
    before = grid.total_mass()
    lo, hi = grid.mu.min(), grid.mu.max()
    grid.predict(dt)
    assert grid.total_mass() == pytest.approx(before, rel=1e-12, abs=1e-12)
    assert grid.mu.min() >= lo - 1e-12 and grid.mu.max() <= hi + 1e-12


def test_diffusion_spreads_a_spike_symmetrically_and_keeps_mass_at_a_border() -> None:
    grid = PheromoneGrid(GridParams(width=11, height=11))
    snap = grid.snapshot()
    mu = np.zeros(len(snap))
    mu[0] = 1.0  # corner cell: no-flux borders on two sides
    grid.assign(CellBlock(snap.ix, snap.iy, mu, snap.var))
    for _ in range(50):
        grid.predict(0.1)
    assert grid.total_mass() == pytest.approx(1.0, rel=1e-12)
    assert np.allclose(grid.mu, grid.mu.T)


def test_decay_textbook() -> None:
    grid = PheromoneGrid(SMALL)
    _randomise(grid, seed=3)
    mu, var = grid.mu.copy(), grid.var.copy()
    p = grid.params
    grid.decay(0.2)
    assert np.allclose(grid.mu, mu * (1 - p.decay * 0.2))
    assert np.allclose(grid.var, np.minimum(var + p.decay_noise * 0.2, p.var_max))
    grid.decay(1e6)  # a huge gap clamps the factor at 0 instead of flipping the sign
    assert np.all(grid.mu == 0.0)


def test_negative_dt_is_refused() -> None:
    grid = PheromoneGrid(SMALL)
    with pytest.raises(ValueError):
        grid.predict(-0.1)
    with pytest.raises(ValueError):
        grid.decay(-0.1)


# --------------------------------------------------------------------- DEPOSIT
@pytest.mark.parametrize(
    ("footprint", "detections"),
    [
        (Footprint(0.13, -0.04, 0.41, 0.9, math.radians(62)), []),
        (
            Footprint(0.13, -0.04, 0.41, 0.9, math.radians(62)),
            [Detection(0.61, 0.22, np.array([[0.01, 0.004], [0.004, 0.02]]))],
        ),
        (
            Footprint(-0.21, 0.07, 2.8, 0.7, math.radians(250), min_range=0.15),
            [
                Detection(-0.62, 0.3, np.array([[0.004, 0.0], [0.0, 0.004]])),
                Detection(-0.55, 0.33, np.array([[0.02, -0.01], [-0.01, 0.03]])),
            ],
        ),
        (None, [Detection(0.05, 0.05, np.eye(2) * 1e-6)]),  # tiny covariance: its own cell
        (Footprint(0.0, 0.0, -2.0, 5.0, 2 * math.pi), []),  # everything in the window
    ],
)
def test_deposit_matches_the_scalar_kalman_update(
    footprint: Footprint | None, detections: list[Detection]
) -> None:
    grid = PheromoneGrid(SMALL)
    _randomise(grid, seed=4)
    mu_ref, var_ref, observed = _reference_deposit(grid, footprint, detections)
    changed = grid.deposit(footprint, detections)
    assert np.allclose(grid.mu, mu_ref, rtol=1e-12, atol=1e-15)
    assert np.allclose(grid.var, var_ref, rtol=1e-12, atol=1e-15)
    assert changed == observed


def test_deposit_counts_the_observed_cells() -> None:
    grid = PheromoneGrid(SMALL)
    fp = Footprint(0.0, 0.0, 0.0, 0.5, 2 * math.pi)
    n = grid.deposit(fp, [])
    centres_x, centres_y = grid.cell_centres()
    assert n == int(np.count_nonzero(np.hypot(centres_x, centres_y) <= 0.5))
    assert n == int(np.count_nonzero(grid.var < grid.params.var_max))


def test_negative_evidence_lowers_mu_and_var_only_in_the_footprint() -> None:
    grid = PheromoneGrid(SMALL)
    snap = grid.snapshot()
    grid.assign(CellBlock(snap.ix, snap.iy, np.full(len(snap), 0.5), np.full(len(snap), 0.5)))
    fp = Footprint(0.0, 0.0, math.pi / 2, 0.8, math.radians(60))
    grid.deposit(fp, [])
    gx, gy = grid.cell_centres()
    bearing_off = np.abs(np.arctan2(gy, gx) - math.pi / 2)
    inside = (np.hypot(gx, gy) <= 0.8) & (bearing_off <= math.radians(30))
    assert inside.sum() > 10
    assert np.all(grid.mu[inside] < 0.5) and np.all(grid.var[inside] < 0.5)
    assert np.all(grid.mu[~inside] == 0.5) and np.all(grid.var[~inside] == 0.5)


def test_detection_raises_mu_at_its_cell_and_marks_the_peak() -> None:
    grid = PheromoneGrid(SMALL)
    fp = Footprint(0.0, 0.0, 0.0, 1.0, math.radians(90))
    for _ in range(5):
        grid.deposit(fp, [Detection(0.52, 0.11, np.eye(2) * 0.003)])
    peak = grid.peak()
    assert (peak.ix, peak.iy) == (5, 1)
    assert peak.x == pytest.approx(0.55) and peak.y == pytest.approx(0.15)
    assert peak.mu > 0.9 and peak.var < 0.02


def test_detection_outside_the_window_is_ignored() -> None:
    grid = PheromoneGrid(SMALL)
    assert grid.deposit(None, [Detection(50.0, 50.0, np.eye(2) * 0.01)]) == 0
    assert grid.total_mass() == 0.0


def test_detection_and_footprint_validation() -> None:
    with pytest.raises(ValueError):
        Detection(0.0, 0.0, np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError):
        Detection(math.nan, 0.0, np.eye(2))
    with pytest.raises(ValueError):
        Footprint(0.0, 0.0, 0.0, 1.0, 0.0)
    with pytest.raises(ValueError):
        Footprint(0.0, 0.0, 0.0, 1.0, 1.0, min_range=1.0)


@pytest.mark.parametrize("heading", np.linspace(-math.pi, math.pi, 13))
@pytest.mark.parametrize("fov", [0.3, 1.5, 3.0, 4.5])
def test_footprint_bounds_contain_the_sector(heading: float, fov: float) -> None:
    fp = Footprint(0.3, -0.2, heading, 1.5, fov)
    xmin, xmax, ymin, ymax = fp.bounds()
    angles = heading + np.linspace(-fov / 2, fov / 2, 400)
    for r in (0.0, 0.7, 1.5):
        xs = fp.x + r * np.cos(angles)
        ys = fp.y + r * np.sin(angles)
        assert np.all(xs >= xmin - 1e-12) and np.all(xs <= xmax + 1e-12)
        assert np.all(ys >= ymin - 1e-12) and np.all(ys <= ymax + 1e-12)


def test_negative_evidence_stops_at_obstacles_and_other_robots() -> None:
    """Only the cells the camera could see are searched and found empty: none behind a crate
    or another robot."""
    from agents.belief.occlusion import hidden
    from agents.room import Box, Room

    room = Room(4.0, 3.0, (Box(0.0, -0.3, 0.2, 0.2),))  # the grid spans ±1.2 m, ±0.8 m
    robots = [(-0.2, 0.35)]
    fp = Footprint(-1.0, 0.0, 0.0, 2.0, math.radians(90))
    gx, gy = PheromoneGrid(SMALL).cell_centres()
    covered = fp.sees(np.unique(gx), np.unique(gy))
    behind = hidden(-1.0, 0.0, gx, gy, room, robots=robots, robot_radius=0.13)
    assert np.count_nonzero(covered & behind) > 10
    grid = PheromoneGrid(SMALL)
    n = grid.deposit(fp, [], room=room, robots=robots, robot_radius=0.13)
    changed = grid.var < grid.params.var_max
    assert np.array_equal(changed, covered & ~behind)
    assert n == int(np.count_nonzero(covered & ~behind))
