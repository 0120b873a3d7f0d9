"""The pheromone grid's window and what it exchanges with peers: SLIDE keeps every cell at
its world position, FUSE applies staleness inflation and the rule (naive fusion double
counts, CI does not), patches and snapshots; tick runs the steps in order; var and mu stay
in bounds under random operations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.belief.deposit import Detection, Footprint
from agents.belief.fusion import FusionRule
from agents.belief.grid import CellBlock, PheromoneGrid
from tests.agents.belief.smallgrid import SMALL, _randomise


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
