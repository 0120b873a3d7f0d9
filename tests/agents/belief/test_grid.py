"""The pheromone grid against explicit per-cell reference implementations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.belief.deposit import Detection, Footprint
from agents.belief.fusion import FusionRule
from agents.belief.grid import CellBlock, PheromoneGrid
from agents.belief.params import GridParams

# A non-square window catches any x/y (row/column) mix-up.
SMALL = GridParams(width=24, height=17)


def _randomise(grid: PheromoneGrid, seed: int, var_lo: float = 0.05) -> None:
    rng = np.random.default_rng(seed)
    snap = grid.snapshot()
    grid.assign(
        CellBlock(
            snap.ix,
            snap.iy,
            rng.uniform(0.0, 1.0, len(snap)),
            rng.uniform(var_lo, grid.params.var_max, len(snap)),
        )
    )


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


# ----------------------------------------------------------------------- SLIDE
@pytest.mark.parametrize("target", [(0.25, 0.0), (-0.31, 0.47), (1.05, -0.9), (40.0, 3.0)])
def test_slide_keeps_every_surviving_cell_at_its_world_position(
    target: tuple[float, float],
) -> None:
    grid = PheromoneGrid(SMALL)
    _randomise(grid, seed=5)
    before = grid.snapshot()
    old = {
        (int(i), int(j)): (m, v)
        for i, j, m, v in zip(before.ix, before.iy, before.mu, before.var, strict=True)
    }
    assert grid.slide_to(*target)
    after = grid.snapshot()
    survivors = 0
    for i, j, m, v in zip(after.ix, after.iy, after.mu, after.var, strict=True):
        if (int(i), int(j)) in old:
            survivors += 1
            assert (m, v) == old[(int(i), int(j))]
        else:
            assert (m, v) == (0.0, grid.params.var_max)
    # The cell centres moved with the window.
    assert np.allclose(grid.xs, (np.arange(24) + grid.origin[0] + 0.5) * 0.1)
    assert np.allclose(grid.ys, (np.arange(17) + grid.origin[1] + 0.5) * 0.1)
    cx, cy = math.floor(target[0] / 0.1), math.floor(target[1] / 0.1)
    assert (cx - grid.origin[0], cy - grid.origin[1]) == (12, 8)
    if target[0] > 10:
        assert survivors == 0
    else:
        assert survivors > 0


def test_slide_waits_for_a_whole_cell() -> None:
    grid = PheromoneGrid(SMALL, 0.01, 0.01)
    assert not grid.slide_to(0.09, 0.0)
    assert grid.slide_to(0.11, 0.0)
    assert not grid.slide_to(0.15, 0.05)


def test_slide_forgets_what_was_sent_for_entering_cells() -> None:
    grid = PheromoneGrid(SMALL)
    grid.deposit(Footprint(0.0, 0.0, 0.0, 0.6, 2 * math.pi), [])
    grid.mark_sent(grid.select_patch(10_000))
    assert len(grid.select_patch(10_000)) == 0
    grid.slide_to(10.0, 0.0)
    assert len(grid.select_patch(10_000)) == 0  # all cells are at the prior again


# ------------------------------------------------------------------------ FUSE
@pytest.mark.parametrize("rule", list(FusionRule))
def test_fuse_applies_staleness_inflation_and_the_rule(rule: FusionRule) -> None:
    grid = PheromoneGrid(SMALL)
    _randomise(grid, seed=6, var_lo=0.1)
    p = grid.params
    rng = np.random.default_rng(7)
    ox, oy = grid.origin
    ix = np.array([ox, ox + 3, ox + 23, ox + 24, ox - 1, ox + 5])
    iy = np.array([oy, oy + 16, oy + 2, oy, oy, oy + 5])
    mu_r = rng.uniform(0, 1, 6)
    var_r = rng.uniform(0.05, 0.5, 6)
    age = np.array([0.1, 0.5, 1.0, 0.0, 0.0, 2.0])
    mu_o, var_o = grid.mu.copy(), grid.var.copy()
    fused = grid.fuse(ix, iy, mu_r, var_r, age=age, age_uncertainty=0.05, rule=rule, inflation=1.5)
    assert fused == 4  # two cells lie outside the window
    for k in (0, 1, 2, 5):
        lx, ly = ix[k] - ox, iy[k] - oy
        a_mu, a_var = mu_o[ly, lx], var_o[ly, lx]
        b_var = (var_r[k] + p.q_drift * (age[k] + 0.05)) * 1.5
        b_mu = mu_r[k]
        if rule is FusionRule.CI:
            omega = b_var / (a_var + b_var)
            var = 1 / (omega / a_var + (1 - omega) / b_var)
            mu = var * (omega * a_mu / a_var + (1 - omega) * b_mu / b_var)
        elif rule is FusionRule.NAIVE:
            var = 1 / (1 / a_var + 1 / b_var)
            mu = var * (a_mu / a_var + b_mu / b_var)
        else:
            mu, var = (b_mu, b_var) if b_var < a_var else (a_mu, a_var)
        assert grid.mu[ly, lx] == pytest.approx(mu, rel=1e-12)
        assert grid.var[ly, lx] == pytest.approx(min(var, p.var_max), rel=1e-12)


def test_fuse_skips_garbage_and_a_negative_age_adds_nothing() -> None:
    grid = PheromoneGrid(SMALL)
    ox, oy = grid.origin
    n = grid.fuse(
        [ox, ox + 1, ox + 2, ox + 3],
        [oy, oy, oy, oy],
        [0.5, math.nan, 0.5, 0.5],
        [0.1, 0.1, 0.0, 0.1],
        age=[0.0, 0.0, 0.0, -3.0],
        rule=FusionRule.MAX_CONFIDENCE,
    )
    assert n == 2
    assert grid.var[0, 0] == pytest.approx(0.1) and grid.var[0, 3] == pytest.approx(0.1)
    assert grid.var[0, 1] == grid.params.var_max and grid.var[0, 2] == grid.params.var_max
    with pytest.raises(ValueError):
        grid.fuse([ox], [oy], [0.5], [0.1], age=0.0, inflation=0.5)


def _exchange(rule: FusionRule, rounds: int) -> tuple[float, float]:
    a, b = PheromoneGrid(SMALL), PheromoneGrid(SMALL)
    ox, oy = a.origin
    ix, iy = np.meshgrid(np.arange(ox + 5, ox + 10), np.arange(oy + 5, oy + 10))
    block = CellBlock(
        ix.ravel().astype(np.int16), iy.ravel().astype(np.int16), np.full(25, 0.6), np.full(25, 0.5)
    )
    a.assign(block)
    b.assign(block)
    for _ in range(rounds):
        sa = a.snapshot()
        b.fuse(sa.ix, sa.iy, sa.mu, sa.var, age=0.0, rule=rule)
        sb = b.snapshot()
        a.fuse(sb.ix, sb.iy, sb.mu, sb.var, age=0.0, rule=rule)
    return float(a.var[7, 7]), float(b.var[7, 7])


def test_double_counting_naive_collapses_while_ci_holds() -> None:
    """The same cells bounce between two grids 20 times.

    Naive fusion treats each copy as new evidence: var 0.5 falls below 1e-3 (it
    reaches the var_min floor of 1e-6). CI leaves var at exactly 0.5.
    """
    naive_a, naive_b = _exchange(FusionRule.NAIVE, rounds=20)
    ci_a, ci_b = _exchange(FusionRule.CI, rounds=20)
    assert naive_a < 1e-3 and naive_b < 1e-3
    assert ci_a == pytest.approx(0.5, rel=1e-12) and ci_b == pytest.approx(0.5, rel=1e-12)


# ------------------------------------------------------------------- BROADCAST
def test_select_patch_sends_changes_once_and_prioritises_hot_cells() -> None:
    grid = PheromoneGrid(SMALL)
    assert len(grid.select_patch(100)) == 0  # the prior is never sent
    fp = Footprint(0.0, 0.0, 0.0, 0.6, 2 * math.pi)
    grid.deposit(fp, [Detection(0.3, 0.1, np.eye(2) * 0.002)])
    everything = grid.select_patch(10_000)
    assert len(everything) == int(np.count_nonzero(grid.var < grid.params.var_max - 0.05))
    patch = grid.select_patch(5)
    assert len(patch) == 5
    assert np.all(patch.mu > grid.params.patch_mu_threshold)
    assert np.all(np.diff(patch.mu) <= 1e-12)  # hottest first
    assert patch.ix.dtype == np.int16 and patch.iy.dtype == np.int16
    grid.mark_sent(everything)
    assert len(grid.select_patch(10_000)) == 0  # nothing changed since it was sent
    grid.decay(3.0)  # var grows by 0.03 everywhere: below patch_var_change; mu falls by 15 %
    again = grid.select_patch(10_000)
    assert len(again) > 0 and np.all(again.mu > grid.params.patch_mu_threshold)


def test_snapshot_and_assign_round_trip() -> None:
    grid = PheromoneGrid(SMALL, 3.0, -2.0)
    _randomise(grid, seed=8)
    snap = grid.snapshot()
    assert len(snap) == 24 * 17
    other = PheromoneGrid(SMALL, 3.0, -2.0)
    assert other.assign(snap) == len(snap)
    assert np.array_equal(other.mu, grid.mu) and np.array_equal(other.var, grid.var)
    assert other.mean_variance() == pytest.approx(grid.mean_variance())


def test_arrays_are_read_only_views() -> None:
    grid = PheromoneGrid(SMALL)
    with pytest.raises(ValueError):
        grid.mu[0, 0] = 1.0


# ------------------------------------------------------------------------ tick
def test_tick_runs_the_steps_in_order_with_dt_from_the_previous_tick() -> None:
    fp = Footprint(0.0, 0.0, 0.0, 0.5, 1.0)
    dets = [Detection(0.3, 0.0, np.eye(2) * 0.01)]
    ticked, manual = PheromoneGrid(SMALL), PheromoneGrid(SMALL)
    ticked.tick(10.0, (0.0, 0.0), fp, dets)
    ticked.tick(10.1, (0.26, 0.0, 0.3), fp, dets)
    manual.deposit(fp, dets)
    manual.slide_to(0.26, 0.0)
    manual.predict(10.1 - 10.0)
    manual.deposit(fp, dets)
    manual.decay(10.1 - 10.0)
    assert ticked.origin == manual.origin
    assert np.array_equal(ticked.mu, manual.mu) and np.array_equal(ticked.var, manual.var)
    with pytest.raises(ValueError):
        ticked.tick(10.0, (0.0, 0.0))


# ------------------------------------------------------------------ invariants
_op = st.one_of(
    st.tuples(st.just("predict"), st.floats(0.0, 5.0)),
    st.tuples(st.just("decay"), st.floats(0.0, 30.0)),
    st.tuples(
        st.just("deposit"),
        st.floats(-1.5, 1.5),
        st.floats(-1.5, 1.5),
        st.floats(-4.0, 4.0),
        st.floats(0.05, 2.0),
        st.floats(0.1, 2 * math.pi),
        st.integers(0, 3),
    ),
    st.tuples(
        st.just("fuse"),
        st.sampled_from(list(FusionRule)),
        st.integers(0, 2**32 - 1),
        st.floats(-2.0, 5.0),
        st.floats(1.0, 20.0),
    ),
    st.tuples(st.just("slide"), st.floats(-3.0, 3.0), st.floats(-3.0, 3.0)),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_op, min_size=1, max_size=25))
def test_var_stays_in_bounds_and_mu_finite_under_random_operations(ops: list[tuple]) -> None:
    grid = PheromoneGrid(SMALL)
    p = grid.params
    for op in ops:
        kind = op[0]
        if kind == "predict":
            grid.predict(op[1])
        elif kind == "decay":
            grid.decay(op[1])
        elif kind == "deposit":
            _, x, y, heading, rng_, fov, n_det = op
            dets = [
                Detection(x + 0.1 * k, y - 0.05 * k, np.array([[0.01, k / 500], [k / 500, 0.02]]))
                for k in range(n_det)
            ]
            grid.deposit(Footprint(x, y, heading, rng_, fov), dets)
        elif kind == "fuse":
            _, rule, seed, age, inflation = op
            rng = np.random.default_rng(seed)
            ox, oy = grid.origin
            n = 40
            grid.fuse(
                rng.integers(ox - 5, ox + 30, n),
                rng.integers(oy - 5, oy + 22, n),
                rng.uniform(-1.0, 2.0, n),
                10.0 ** rng.uniform(-9, 1, n),
                age=age,
                age_uncertainty=0.01,
                rule=rule,
                inflation=inflation,
            )
        else:
            grid.slide_to(op[1], op[2])
        assert np.all(grid.var > 0.0)
        assert np.all(grid.var >= p.var_min) and np.all(grid.var <= p.var_max)
        assert np.all(np.isfinite(grid.mu))


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
