"""Byzantine behaviours: a liar's bias, noise, overconfidence and replay applied to the tracks,
cells and patches it sends; a liar against a broken sensor (at=sense); an honest spec
changes nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.faults import Byzantine, ByzantineSpec, parse_byzantine
from agents.observations import Detection
from protocol.swarm import Cells, Message, Patch, Track

COV4 = np.array(
    [[0.04, 0.01, 0.0, 0.0], [0.01, 0.05, 0.0, 0.0], [0.0, 0.0, 0.2, 0.02], [0.0, 0.0, 0.02, 0.3]]
)


def make_track(x: float, t: float, updates: int = 3) -> Track:
    cov = tuple(COV4[np.triu_indices(4)].tolist())
    return Track((x, 1.0, 0.5, -0.25), cov, t, updates)


def test_bias_moves_the_track_mean_by_exactly_the_vector() -> None:
    liar = Byzantine(parse_byzantine("bias=2,-0.5"), seed=1)
    honest = make_track(1.25, 10.0)
    out = liar.transform_track(honest, now=10.1)
    assert out.mean == (1.25 + 2.0, 1.0 - 0.5, 0.5, -0.25)
    assert out.cov == honest.cov and out.t_ref == honest.t_ref and out.updates == honest.updates
    assert liar.counters["track"] == 1


def test_noise_has_the_bias_as_mean_and_sigma_as_spread() -> None:
    liar = Byzantine(parse_byzantine("bias=1,0 noise=0.3"), seed=2)
    xs = np.array([liar.transform_track(make_track(0.0, 0.0), 0.0).mean[:2] for _ in range(4000)])
    assert np.allclose(xs.mean(axis=0), [1.0, 1.0], atol=5 * 0.3 / math.sqrt(4000))
    assert np.allclose(xs.std(axis=0), [0.3, 0.3], rtol=0.05)


def test_noise_is_deterministic_for_a_seed() -> None:
    def draws(seed: int) -> list[tuple[float, ...]]:
        liar = Byzantine(parse_byzantine("noise=0.3"), seed=seed)
        return [liar.transform_track(make_track(0.0, 0.0), 0.0).mean for _ in range(10)]

    assert draws(5) == draws(5) != draws(6)


def test_overconfident_divides_the_covariance() -> None:
    liar = Byzantine(parse_byzantine("overconfident=10"), seed=1)
    out = liar.transform_track(make_track(0.0, 0.0), 0.0)
    assert np.allclose(out.cov_matrix, COV4 / 10, rtol=1e-7, atol=0)  # float 32 on the wire
    assert out.mean == make_track(0.0, 0.0).mean


def test_replay_returns_the_belief_from_that_long_ago_restamped() -> None:
    liar = Byzantine(parse_byzantine("replay=2s"), seed=1)
    sent: list[Track] = []
    for i in range(50):  # 5 Hz for 10 s; the belief refers to 50 ms before sending
        now = 100.0 + i * 0.2
        sent.append(liar.transform_track(make_track(float(i), now - 0.05, updates=i), now))
    for i, out in enumerate(sent):
        j = max(0, i - 10)  # 2 s = 10 messages back; the oldest one until then
        assert out.mean[0] == float(j) and out.updates == j
        assert out.t_ref == pytest.approx(100.0 + i * 0.2 - 0.05 if i >= 10 else 99.95 + i * 0.2)
        Message(1, "liar", 1, i, 100.0 + i * 0.2, out)  # a valid message: t_ref <= t_sent
    assert liar.counters["replayed"] == 49
    assert len(liar._histories["track"]) <= 12  # bounded by the replay window


def test_replay_history_has_a_hard_bound() -> None:
    liar = Byzantine(parse_byzantine("replay=100s"), seed=1, max_history=5)
    for i in range(20):
        out = liar.transform_track(make_track(float(i), float(i)), float(i))
    assert out.mean[0] == 15.0
    assert liar.counters["history_overflow"] == 15


def test_stage_decides_between_liar_and_broken_sensor() -> None:
    cov = np.array([[0.01, 0.0], [0.0, 0.02]])
    liar = Byzantine(parse_byzantine("bias=2,0 overconfident=4"), seed=1)
    assert liar.transform_detection(1.0, 1.0, cov, 0.0)[:2] == (1.0, 1.0)
    assert liar.transform_track(make_track(0.0, 0.0), 0.0).mean[0] == 2.0
    broken = Byzantine(parse_byzantine("bias=2,0 overconfident=4 at=sense"), seed=1)
    x, y, c = broken.transform_detection(1.0, 1.0, cov, 0.0)
    assert (x, y) == (3.0, 1.0) and np.array_equal(c, cov / 4)
    assert broken.transform_track(make_track(0.0, 0.0), 0.0) == make_track(0.0, 0.0)
    det = Detection(1.0, 1.0, cov, 7.0)
    moved = broken.transform_observation(det, 7.1)
    assert (moved.x, moved.t) == (3.0, 7.0)
    assert liar.transform_observation(det, 7.1) is det


def _cells() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    ix = np.array([10, 11, 12, 32767], dtype=np.int16)
    iy = np.array([-5, -5, -4, 0], dtype=np.int16)
    mu = np.array([0.25, 0.5, 0.75, 0.125])
    var = np.array([0.5, 0.25, 0.125, 0.5])
    return ix, iy, mu, var


def test_bias_shifts_cells_and_their_mean_by_the_vector() -> None:
    liar = Byzantine(parse_byzantine("bias=0.3,-0.2"), seed=1)
    ix, iy, mu, var = _cells()
    out = liar.transform_cells(ix[:3], iy[:3], mu[:3], var[:3], 0.0, cell_size=0.1)
    assert out.ix.tolist() == [13, 14, 15] and out.iy.tolist() == [-7, -7, -6]
    assert np.array_equal(out.mu, mu[:3]) and np.array_equal(out.var, var[:3])
    c = 0.1

    def centroid(i: np.ndarray, j: np.ndarray, w: np.ndarray) -> np.ndarray:
        return np.array(
            [np.average((i + 0.5) * c, weights=w), np.average((j + 0.5) * c, weights=w)]
        )

    shift = centroid(out.ix, out.iy, out.mu) - centroid(ix[:3], iy[:3], mu[:3])
    assert np.allclose(shift, [0.3, -0.2], atol=1e-12)


def test_cells_shifted_off_the_lattice_are_dropped() -> None:
    liar = Byzantine(parse_byzantine("bias=0.1,0"), seed=1)
    out = liar.transform_cells(*_cells(), 0.0, cell_size=0.1)
    assert len(out.ix) == 3 and 32767 not in out.ix.tolist()
    assert liar.counters["cells_off_lattice"] == 1


def test_overconfident_divides_cell_variances_with_a_wire_floor() -> None:
    liar = Byzantine(parse_byzantine("overconfident=8"), seed=1)
    ix, iy, mu, var = _cells()
    var[0] = 1e-7
    out = liar.transform_cells(ix, iy, mu, var, 0.0, cell_size=0.1)
    assert np.array_equal(out.var[1:], var[1:] / 8)
    assert out.var[0] == 2.0**-24  # 1e-7 / 8 would round to 0 in float16
    assert Cells.from_arrays(out.ix, out.iy, out.mu, out.var).var.min() > 0


def test_transform_patch_gives_a_valid_shifted_overconfident_patch() -> None:
    ix, iy, mu, var = _cells()
    patch = Patch(100, 4.5, Cells.from_arrays(ix[:3], iy[:3], mu[:3], var[:3]))
    liar = Byzantine(parse_byzantine("bias=0.2,0 overconfident=2"), seed=1)
    out = liar.transform_patch(patch, now=5.0)
    assert out.t_ref == 4.5 and out.cell_size_mm == 100
    assert out.cells.ix.tolist() == [12, 13, 14]
    assert np.array_equal(out.cells.var, patch.cells.var / 2)
    assert np.array_equal(out.cells.mu, patch.cells.mu)


def test_patch_replay_restamps_the_old_patch() -> None:
    liar = Byzantine(parse_byzantine("replay=1s"), seed=1)
    patches = [
        Patch(100, t - 0.1, Cells.from_arrays([i], [0], [0.5], [0.25]))
        for i, t in enumerate(np.arange(10.0, 13.0, 0.5))
    ]
    outs = [liar.transform_patch(p, now=p.t_ref + 0.1) for p in patches]
    assert [o.cells.ix.tolist() for o in outs] == [[0], [0], [0], [1], [2], [3]]
    assert [o.t_ref for o in outs] == pytest.approx([p.t_ref for p in patches])


def test_cell_replay_and_honest_identity() -> None:
    liar = Byzantine(parse_byzantine("replay=0.5s"), seed=1)
    first = liar.transform_cells([1], [2], [0.5], [0.25], 0.0, cell_size=0.1)
    liar.transform_cells([3], [4], [0.5], [0.25], 0.25, cell_size=0.1)
    third = liar.transform_cells([5], [6], [0.5], [0.25], 0.5, cell_size=0.1)
    assert first.ix.tolist() == [1] and third.ix.tolist() == [1]
    honest = Byzantine(ByzantineSpec(), seed=1)
    track = make_track(1.0, 1.0)
    assert honest.transform_track(track, 1.0) is track
    with pytest.raises(ValueError, match="int16"):
        honest.transform_cells([40000], [0], [0.5], [0.25], 0.0, cell_size=0.1)
