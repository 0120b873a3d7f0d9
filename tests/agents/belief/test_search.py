"""The search map against hand-computable cases: conservation, the (1 - P_d) update, the
diffusion bound, occlusion, collapse; the viewpoints."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.belief.search import (
    CameraLook,
    SearchMap,
    SearchParams,
    Viewpoints,
    heading_units,
    rounded_look,
)
from agents.room import Box, Room

EXACT = SearchParams(floor=0.0)
ROOM = Room(4.0, 3.0)
CRATE = Room(4.0, 3.0, (Box(2.0, 1.5, 0.5, 0.5),))


def test_starts_uniform_over_free_cells_and_zero_in_obstacles() -> None:
    m = SearchMap(CRATE, EXACT)
    assert (m.nx, m.ny) == (16, 12)
    assert m.total() == pytest.approx(1.0, abs=1e-12)
    blocked = ~m.free
    assert blocked.sum() == 4  # the 0.5 m crate covers 2 x 2 cell centres
    assert np.all(m.p[blocked] == 0.0)
    assert np.allclose(m.p[m.free], 1.0 / m.free.sum())
    assert m.entropy() == pytest.approx(math.log(m.free.sum()))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(1, 30))
def test_predict_conserves_probability_and_keeps_it_off_obstacles(seed: int, steps: int) -> None:
    m = SearchMap(CRATE, EXACT)
    rng = np.random.default_rng(seed)
    m.p = np.where(m.free, rng.uniform(0.0, 1.0, m.p.shape), 0.0)
    m.p /= m.p.sum()
    m.predict(steps * m.cell_size / EXACT.target_speed)
    assert m.total() == pytest.approx(1.0, abs=1e-12)
    assert np.all(m.p >= 0.0)
    assert np.all(m.p[~m.free] == 0.0)


def test_predict_waits_for_whole_steps_of_the_target_speed() -> None:
    m = SearchMap(ROOM, EXACT)  # 0.25 m cells at 0.5 m/s: one step every 0.5 s
    m.collapse(2.0, 1.5, np.eye(2) * 1e-6)
    before = m.p.copy()
    assert m.predict(0.3) == 0 and np.array_equal(m.p, before)
    assert m.predict(0.2) == 1 and not np.array_equal(m.p, before)
    assert SearchMap(ROOM, SearchParams(target_speed=0.0)).predict(100.0) == 0


def test_diffusion_never_outruns_the_target() -> None:
    """From one cell, after t seconds no probability lies farther than speed * t."""
    params = SearchParams(floor=0.0, target_speed=0.5)
    m = SearchMap(Room(8.0, 8.0), params)
    m.p = np.zeros_like(m.p)
    j, i = m.cell_of(4.1, 4.1)
    m.p[j, i] = 1.0
    x0, y0 = float(m.xs[i]), float(m.ys[j])
    gx, gy = np.meshgrid(m.xs, m.ys)
    dist = np.hypot(gx - x0, gy - y0)
    for t in (0.5, 1.0, 2.5, 4.0):
        m2 = SearchMap(Room(8.0, 8.0), params)
        m2.p = m.p.copy()
        m2.predict(t)
        reach = params.target_speed * t
        assert m2.p[dist > reach + 1e-9].sum() == 0.0
        assert m2.p[np.isclose(dist, reach)].sum() > 0.0  # and it does get that far
        assert m2.total() == pytest.approx(1.0, abs=1e-12)


def test_a_look_multiplies_by_one_minus_pd_and_renormalises() -> None:
    """A 360-degree look of range 0.33 m from a cell centre: its 4 edge neighbours (0.25 m)
    lie inside 80 % of the range (P_d = 0.8), the diagonals (0.354 m) beyond the range,
    its own cell closer than min_range."""
    m = SearchMap(ROOM, EXACT)
    n = int(m.free.sum())
    j, i = m.cell_of(1.1, 1.1)
    x, y = float(m.xs[i]), float(m.ys[j])
    seen = m.apply_look(CameraLook(0.0, x, y, 0.3, 0.33, 2.0 * math.pi))
    assert seen == pytest.approx(4 * 0.8 / n)
    after = 1.0 / (n - 4 * 0.8)
    looked = [(j, i + 1), (j, i - 1), (j + 1, i), (j - 1, i)]
    for cell in looked:
        assert m.p[cell] == pytest.approx(0.2 * after)
    mask = np.ones_like(m.free)
    for cell in looked:
        mask[cell] = False
    assert np.allclose(m.p[mask], after)
    assert m.total() == pytest.approx(1.0)


def test_pd_is_full_in_the_core_and_tapers_to_zero_at_the_edges() -> None:
    m = SearchMap(Room(8.0, 2.0), EXACT)
    look = CameraLook(0.0, 0.0, 1.125, 0.0, 5.0, math.radians(60.0))
    box, pd = m.detection(look)
    row = pd[m.cell_of(0.0, 1.125)[0] - box[0].start]
    xs = m.xs[box[1]]
    assert np.all(row[(xs >= 0.15) & (xs <= 4.0)] == pytest.approx(0.8))
    assert np.all(row[xs > 5.0] == 0.0)
    edge = (xs > 4.0) & (xs < 5.0)
    assert np.all((row[edge] > 0.0) & (row[edge] < 0.8))
    assert np.all(np.diff(row[edge]) < 0)  # falling towards the range


def test_an_obstacle_hides_what_lies_behind_it() -> None:
    m = SearchMap(CRATE, EXACT)
    look = CameraLook(0.0, 0.6, 1.5, 0.0, 3.0, math.radians(40.0))
    box, pd = m.detection(look)
    full = np.zeros_like(m.p)
    full[box] = pd
    j = m.cell_of(0.0, 1.5)[0]
    assert full[j, m.cell_of(1.5, 0.0)[1]] == pytest.approx(0.8)  # in front of the crate
    assert full[j, m.cell_of(2.8, 0.0)[1]] == 0.0  # behind it
    # without the crate the same cell is seen
    _, open_pd = SearchMap(ROOM, EXACT).detection(look)
    assert open_pd[j - box[0].start, m.cell_of(2.8, 0.0)[1] - box[1].start] == pytest.approx(0.8)


def test_floor_keeps_every_free_cell_possible() -> None:
    m = SearchMap(ROOM, SearchParams(floor=1e-4))
    look = CameraLook(0.0, 0.1, 1.5, 0.0, 5.0, 2.0 * math.pi)
    for _ in range(500):
        m.apply_look(look)
    assert m.p[m.free].min() >= 1e-4 / m.free.sum() * 0.999
    assert m.total() == pytest.approx(1.0)


def test_collapse_centres_on_the_track_and_respects_obstacles() -> None:
    m = SearchMap(CRATE, EXACT)
    m.collapse(1.0, 1.0, np.diag([0.04, 0.04]))
    assert m.total() == pytest.approx(1.0)
    assert m.probability_within(1.0, 1.0, 0.5) > 0.9
    m.collapse(2.0, 1.5, np.diag([1e-4, 1e-4]))  # inside the crate: its free rim
    assert m.total() == pytest.approx(1.0)
    assert np.all(m.p[~m.free] == 0.0)
    m.collapse(100.0, 100.0, np.diag([1e-4, 1e-4]))  # far away: the nearest free cell
    assert m.p[m.ny - 1, m.nx - 1] == pytest.approx(1.0)


def test_rounded_look_is_what_the_wire_carries() -> None:
    look = rounded_look(5.0, (1.23456, -0.004, math.pi), 3.004, 2.0 * math.pi + 1.0)
    assert (look.x, look.y, look.range) == (1.23, -0.0, 3.0)
    assert look.heading == -math.pi  # +pi wraps to -pi (int16 -32768)
    assert look.fov == 6.283
    assert heading_units(math.pi / 2) == 16384 and heading_units(-math.pi) == -32768


def test_viewpoint_gains_are_the_looks_own_probability() -> None:
    params = SearchParams(viewpoint_spacing=0.5, viewpoint_headings=4)
    m = SearchMap(CRATE, params)
    vp = Viewpoints(m, 2.0, math.radians(62.0), camera_forward=0.05)
    rng = np.random.default_rng(3)
    m.p = np.where(m.free, rng.uniform(0.0, 1.0, m.p.shape), 0.0)
    m.p /= m.p.sum()
    gains = vp.gains(m.p)
    assert len(vp) == len(gains) and len(vp) % 4 == 0
    for k in (0, 7, len(vp) - 1):
        h = float(vp.heading[k])
        look = CameraLook(0.0, float(vp.x[k]) + 0.05 * math.cos(h),
                          float(vp.y[k]) + 0.05 * math.sin(h), h, 2.0, math.radians(62.0))
        copy = SearchMap(CRATE, params)
        copy.p = m.p.copy()
        assert copy.apply_look(look) == pytest.approx(float(gains[k]))
    surface = CRATE.surface_distance(vp.x, vp.y)
    assert surface.min() >= params.clearance


def test_path_lengths_go_around_obstacles() -> None:
    wall = Room(4.0, 3.0, (Box(2.0, 1.25, 0.3, 2.5),))  # open only along the top
    m = SearchMap(wall, SearchParams())
    d = m.path_lengths(1.0, 1.0)
    j, i = m.cell_of(3.0, 1.0)
    straight = math.hypot(float(m.xs[i]) - 1.0, float(m.ys[j]) - 1.0)
    assert d[j, i] > straight + 1.5
    assert math.isinf(d[m.cell_of(2.0, 1.0)])  # inside the wall


def test_partition_weighs_down_the_cells_nearer_a_peer() -> None:
    m = SearchMap(ROOM, EXACT)
    assert m.partition((1.0, 1.5), [], 0.2) is m.p  # no peer: the map itself
    assert m.partition((1.0, 1.5), [(3.0, 1.5)], 1.0) is m.p  # weight 1: no partition
    q = m.partition((1.0, 1.5), [(3.0, 1.5)], 0.2)
    west, east = m.xs < 2.0, m.xs > 2.0  # the split is the bisector x = 2
    assert np.array_equal(q[:, west], m.p[:, west])
    assert np.allclose(q[:, east], 0.2 * m.p[:, east])
    q2 = m.partition((1.0, 1.5), [(3.0, 1.5), (1.0, 0.25)], 0.2)  # a second peer, south
    assert np.allclose(q2[0, west], 0.2 * m.p[0, west])  # the bottom row is nearer to it


def test_another_robot_hides_what_lies_behind_it() -> None:
    m = SearchMap(ROOM, EXACT, robot_radius=0.13)
    look = CameraLook(0.0, 0.6, 1.5, 0.0, 3.0, math.radians(40.0))
    j = m.cell_of(0.0, 1.5)[0]
    front, back = m.cell_of(1.1, 0.0)[1], m.cell_of(2.8, 0.0)[1]
    box, pd = m.detection(look, robots=[(1.6, 1.5)])
    full = np.zeros_like(m.p)
    full[box] = pd
    assert full[j, front] == pytest.approx(0.8)  # between the camera and the robot
    assert full[j, back] == 0.0  # behind it
    # A look told of no robot, or a map whose robots have no size, sees the cell.
    for robots, radius in (((), 0.13), ([(1.6, 1.5)], 0.0)):
        b, p = SearchMap(ROOM, EXACT, robot_radius=radius).detection(look, robots)
        assert p[j - b[0].start, back - b[1].start] == pytest.approx(0.8)
    before = m.p[j, back]
    m.apply_look(look, [(1.6, 1.5)])
    assert m.p[j, back] > before  # renormalised: the cell behind gained what others lost


@pytest.mark.parametrize("room", [ROOM, CRATE], ids=["open", "crate"])
def test_a_late_look_on_a_uniform_map_is_the_look_then_the_walk(room: Room) -> None:
    # The walk is symmetric and keeps the uniform map, so on a uniform map a look applied
    # late with its age is exactly the look applied at its time and then predicted.
    look = CameraLook(0.0, 1.1, 0.9, 0.4, 1.6, 1.1)
    age = 3.0  # six steps at 0.5 m/s and 0.25 m cells
    then = SearchMap(room, EXACT)
    then.apply_look(look)
    then.predict(age)
    late = SearchMap(room, EXACT)
    late.apply_look(look, age=age)
    assert np.allclose(late.p, then.p, atol=1e-15)
    fresh = SearchMap(room, EXACT)
    fresh.apply_look(look)
    assert late.p[late.free].min() > fresh.p[fresh.free].min()  # "not here" less strongly


def test_a_look_older_than_a_step_of_the_walk_is_walked_and_a_fresh_one_not() -> None:
    look = CameraLook(0.0, 2.0, 1.5, 0.0, 0.8, 2.0 * math.pi)  # two cells clear of the walls
    m = SearchMap(ROOM, EXACT)
    box, fresh = m.detection(look)
    box_young, young = m.detection(look, steps=m._steps_for(0.49))  # under one step (0.5 s)
    assert box_young == box and np.array_equal(young, fresh)
    _, old = m.detection(look, steps=m._steps_for(1.0))  # two steps: two cells more
    assert old.shape == (fresh.shape[0] + 4, fresh.shape[1] + 4)
    assert old.sum() == pytest.approx(fresh.sum(), rel=1e-12)  # the walk moves P_d, keeps it
    assert (old > 0.0).sum() > (fresh > 0.0).sum()  # beyond the footprint, less at its edge


def test_a_late_collapse_walks_for_its_age() -> None:
    m = SearchMap(CRATE, EXACT)
    m.collapse(1.0, 1.0, np.diag([0.01, 0.01]), age=2.0)
    expect = SearchMap(CRATE, EXACT)
    expect.collapse(1.0, 1.0, np.diag([0.01, 0.01]))
    expect.predict(2.0)
    assert np.allclose(m.p, expect.p, atol=1e-15)
