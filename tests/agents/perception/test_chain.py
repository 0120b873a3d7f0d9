"""Pose chaining between robots: at most two hops, 0.1 s skew, synchronised frames only."""

from __future__ import annotations

import math

import numpy as np
import pytest

from agents.perception.chain import (
    NO_PATH,
    SKEW,
    TOO_MANY_HOPS,
    UNSYNCHRONIZED,
    AnchorPose,
    Link,
    chain_pose,
    compose,
    invert,
    link_from_sighting,
)
from agents.perception.records import RobotSighting

COV = np.diag([0.01**2, 0.01**2, math.radians(1) ** 2])


def _pose(x: float, y: float, t: float) -> np.ndarray:
    return np.array([x, y, t])


def _relative(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """b in a's frame."""
    c, s = math.cos(a[2]), math.sin(a[2])
    dx, dy = b[0] - a[0], b[1] - a[1]
    return np.array([c * dx + s * dy, -s * dx + c * dy, math.remainder(b[2] - a[2], math.tau)])


WORLD = {
    "walnut": _pose(1.0, 1.0, 0.3),
    "hazel": _pose(2.0, 1.5, 2.0),
    "pecan": _pose(2.5, 3.0, -1.0),
    "almond": _pose(4.0, 3.5, 0.0),
}


def _link(observer: str, subject: str, t: float = 10.0, synced: bool = True) -> Link:
    return Link(observer, subject, _relative(WORLD[observer], WORLD[subject]), COV, t, synced)


def _anchor(robot: str = "walnut", t: float = 10.0, synced: bool = True) -> AnchorPose:
    return AnchorPose(robot, WORLD[robot], COV, t, synced)


def test_compose_and_invert_are_consistent():
    a, b = WORLD["walnut"], WORLD["hazel"]
    rel = _relative(a, b)
    pose, cov = compose(a, COV, rel, COV)
    np.testing.assert_allclose(pose, b, atol=1e-12)
    assert cov[0, 0] > COV[0, 0]  # errors add up
    back, _ = invert(rel, COV)
    np.testing.assert_allclose(back, _relative(b, a), atol=1e-12)
    rng = np.random.default_rng(0)
    C = rng.normal(size=(3, 3))
    C = C @ C.T
    _, twice = invert(*invert(rel, C))
    np.testing.assert_allclose(twice, C, atol=1e-9)


def test_one_and_two_hops_both_directions():
    one = chain_pose("hazel", [_anchor()], [_link("walnut", "hazel")])
    assert one.ok and one.path == ("walnut", "hazel") and one.hops == 1
    np.testing.assert_allclose(one.pose, WORLD["hazel"], atol=1e-12)
    # hazel saw walnut (inverse link), pecan saw hazel
    two = chain_pose("pecan", [_anchor()], [_link("hazel", "walnut"), _link("pecan", "hazel")])
    assert two.ok and two.path == ("walnut", "hazel", "pecan")
    np.testing.assert_allclose(two.pose, WORLD["pecan"], atol=1e-12)
    assert np.trace(two.cov[:2, :2]) > np.trace(one.cov[:2, :2])


def test_three_hops_are_refused():
    links = [_link("walnut", "hazel"), _link("hazel", "pecan"), _link("pecan", "almond")]
    result = chain_pose("almond", [_anchor()], links)
    assert result.reason == TOO_MANY_HOPS and result.pose is None
    assert chain_pose("almond", [_anchor()], links, max_hops=3).ok


def test_skew_above_a_tenth_of_a_second_is_refused():
    first = _link("walnut", "hazel", 10.05)
    ok = chain_pose("pecan", [_anchor(t=10.0)], [first, _link("hazel", "pecan", 10.09)])
    assert ok.ok and ok.t_span == pytest.approx((10.0, 10.09))
    late = chain_pose("pecan", [_anchor(t=10.0)], [first, _link("hazel", "pecan", 10.12)])
    assert late.reason == SKEW
    assert chain_pose("hazel", [_anchor(t=9.8)], [_link("walnut", "hazel", 10.0)]).reason == SKEW


def test_unsynchronised_frames_never_chain():
    link = _link("walnut", "hazel", synced=False)
    assert chain_pose("hazel", [_anchor()], [link]).reason == UNSYNCHRONIZED
    anchor = _anchor(synced=False)
    assert chain_pose("hazel", [anchor], [_link("walnut", "hazel")]).reason == UNSYNCHRONIZED


def test_the_best_of_several_chains_and_no_path():
    far = Link("pecan", "hazel", _relative(WORLD["pecan"], WORLD["hazel"]), COV * 100, 10.0, True)
    result = chain_pose("hazel", [_anchor(), _anchor("pecan")], [_link("walnut", "hazel"), far])
    assert result.ok and result.path == ("walnut", "hazel")
    assert chain_pose("almond", [_anchor()], [_link("walnut", "hazel")]).reason == NO_PATH
    own = chain_pose("walnut", [_anchor()], [])
    assert own.ok and own.hops == 0


def test_a_pipeline_sighting_becomes_a_link():
    sighting = RobotSighting("hazel", 200, _relative(WORLD["walnut"], WORLD["hazel"]), COV, 10.0,
                             True)  # fmt: skip
    link = link_from_sighting("walnut", sighting)
    assert (link.observer, link.subject, link.t, link.synchronized) == (
        "walnut",
        "hazel",
        10.0,
        True,
    )
    assert chain_pose("hazel", [_anchor()], [link]).ok
