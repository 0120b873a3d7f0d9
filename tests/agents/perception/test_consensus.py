"""Maximal-clique consensus over the car poses the tags imply."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.perception.consensus import (
    CONTRADICTORY,
    NO_CANDIDATES,
    Candidate,
    ConsensusParams,
    compatible,
    consensus,
    fuse,
    maximal_cliques,
)

PARAMS = ConsensusParams()
TIGHT = np.diag([0.01**2, 0.01**2, math.radians(0.5) ** 2])


def _c(key: int, x: float, y: float, theta: float, cov: np.ndarray = TIGHT) -> Candidate:
    return Candidate(key, np.array([x, y, theta]), cov)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.data())
def test_bron_kerbosch_finds_exactly_the_maximal_cliques(n: int, data: st.DataObject):
    pairs = list(itertools.combinations(range(n), 2))
    edges = {p for p in pairs if data.draw(st.booleans())}
    adjacency: dict[int, set[int]] = {v: set() for v in range(n)}
    for a, b in edges:
        adjacency[a].add(b)
        adjacency[b].add(a)
    cliques = [
        frozenset(s)
        for k in range(1, n + 1)
        for s in itertools.combinations(range(n), k)
        if all((a, b) in edges for a, b in itertools.combinations(s, 2))
    ]
    maximal = {c for c in cliques if not any(c < d for d in cliques)}
    found = maximal_cliques(adjacency)
    assert len(found) == len(set(found)) and set(found) == maximal


def test_a_mis_mapped_tag_is_an_outlier():
    cands = [
        _c(1, 1.00, 2.00, 0.50),
        _c(2, 1.01, 1.99, 0.51),
        _c(3, 0.99, 2.01, 0.49),
        _c(4, 1.40, 2.00, 0.50),  # its map entry is 0.4 m off
    ]
    result = consensus(cands, PARAMS)
    assert result.ok and result.members == (1, 2, 3) and result.outliers == (4,)
    assert result.pose is not None and result.cov is not None
    np.testing.assert_allclose(result.pose, [1.0, 2.0, 0.5], atol=0.01)
    assert np.all(np.linalg.eigvalsh(result.cov) > 0)


def test_two_contradictory_equal_cliques_give_no_pose():
    result = consensus([_c(1, 1.0, 2.0, 0.5), _c(2, 1.5, 2.0, 0.5)], PARAMS)
    assert result.reason == CONTRADICTORY and result.pose is None and result.members == ()
    assert result.cliques == ((1,), (2,))
    pairs = [_c(1, 1.0, 2.0, 0.5), _c(2, 1.01, 2.0, 0.5), _c(3, 2.0, 1.0, 0.5),
             _c(4, 2.01, 1.0, 0.5)]  # fmt: skip
    assert consensus(pairs, PARAMS).reason == CONTRADICTORY
    heading = consensus([_c(1, 1.0, 2.0, 0.5), _c(2, 1.0, 2.0, 0.9)], PARAMS)
    assert heading.reason == CONTRADICTORY  # 23° apart


def test_equal_cliques_telling_the_same_story_are_not_a_contradiction():
    # 1~2 and 2~3 but 1 and 3 are 0.2 m apart: cliques {1,2} and {2,3}, fused 0.1 m apart
    cands = [_c(1, 1.0, 2.0, 0.5), _c(2, 1.1, 2.0, 0.5), _c(3, 1.2, 2.0, 0.5)]
    result = consensus(cands, PARAMS)
    assert result.ok and result.cliques == ((1, 2), (2, 3)) and len(result.members) == 2


def test_uncertain_candidates_are_compatible_when_their_covariances_explain_the_gap():
    loose = np.diag([0.15**2, 0.15**2, math.radians(6) ** 2])
    a, b = np.array([1.0, 2.0, 0.5]), np.array([1.25, 2.0, 0.5])
    assert not compatible(a, b, PARAMS, TIGHT, TIGHT)
    assert compatible(a, b, PARAMS, loose, loose)
    assert not compatible(a, b, ConsensusParams(consistency_quantile=0.0), loose, loose)
    assert compatible(a, b, PARAMS, loose, None)  # a missing covariance counts as exact
    assert not compatible(a, b, PARAMS)


def test_fusion_is_information_weighted_and_wraps_headings():
    a = _c(1, 0.0, 0.0, math.pi - 0.01, np.diag([0.01, 0.04, 0.01]))
    b = _c(2, 0.1, 0.1, -math.pi + 0.01, np.diag([0.04, 0.01, 0.01]))
    fused = fuse([a, b])
    assert fused is not None
    pose, cov, _ = fused
    assert pose[0] == pytest.approx(0.02) and pose[1] == pytest.approx(0.08)
    assert abs(math.remainder(pose[2] - math.pi, math.tau)) < 1e-9
    assert cov[0, 0] == pytest.approx(0.008) and cov[1, 1] == pytest.approx(0.008)


def test_scatter_beyond_the_covariances_inflates_the_fused_covariance():
    spread = [_c(1, 1.0, 2.0, 0.5), _c(2, 1.1, 2.0, 0.5)]  # 10 cm apart, 1 cm sigmas
    fused = fuse(spread)
    assert fused is not None
    _, cov, chi2 = fused
    assert chi2 == pytest.approx(50.0, rel=1e-6)  # (0.05 / 0.01)² twice
    assert cov[0, 0] == pytest.approx(0.01**2 / 2 * chi2 / 3)


def test_nothing_to_agree_on():
    assert consensus([], PARAMS).reason == NO_CANDIDATES
    with pytest.raises(ValueError):
        consensus([_c(1, 0, 0, 0), _c(1, 0, 0, 0)], PARAMS)
