"""Beta reputation with forgetting: liars lose their weight, honest peers keep it."""

from __future__ import annotations

import numpy as np
import pytest

from agents.belief.params import ReputationParams
from agents.belief.reputation import PositionClaim, ReputationTable, position_nis

TRUTH = np.array([1.5, -0.5])


def _claim(position: np.ndarray, var: float) -> PositionClaim:
    return PositionClaim(position=np.asarray(position, dtype=float), covariance=np.eye(2) * var)


def test_unknown_peer_starts_from_a_fusable_prior() -> None:
    table = ReputationTable()
    assert table.score("hazel") == pytest.approx(4.0 / 5.0)
    assert table.fusable("hazel")
    assert table.inflation("hazel") == pytest.approx(1.25)


def test_record_is_the_forgetful_beta_update() -> None:
    p = ReputationParams(forgetting=0.8, prior_alpha=2.0, prior_beta=1.0, threshold=0.5)
    table = ReputationTable(p)
    a = b = 0.0
    for passed in [True, True, False, True, False, False, False]:
        a = 0.8 * a + passed
        b = 0.8 * b + (not passed)
        assert table.record("walnut", passed) == pytest.approx((2.0 + a) / (3.0 + a + b))


def test_position_nis_textbook() -> None:
    own = PositionClaim(np.array([0.0, 0.0]), np.array([[0.02, 0.005], [0.005, 0.03]]))
    peer = PositionClaim(np.array([0.3, -0.1]), np.array([[0.01, 0.0], [0.0, 0.04]]))
    d = peer.position - own.position
    expected = d @ np.linalg.inv(own.covariance + peer.covariance) @ d
    assert position_nis(own, peer) == pytest.approx(float(expected))
    broken = PositionClaim(np.array([0.0, 0.0]), -np.eye(2))
    assert position_nis(broken, peer) == float("inf")


def test_a_peer_reporting_the_target_2m_off_loses_its_weight_within_the_bound() -> None:
    """Bound: from the prior, 4 failed checks; from the best possible history, 10.

    With λ = 0.9, α₀ = 4, β₀ = 1 and threshold 0.5: a fresh peer's score after n
    failures is 4 / (5 + 10(1 - 0.9ⁿ)), below 0.5 from n = 4; a peer with the maximal
    pass count 1/(1-λ) = 10 scores (4 + 10·0.9ⁿ) / 15, below 0.5 from n = 10.
    """
    rng = np.random.default_rng(1)
    table = ReputationTable()
    assert table.checks_to_distrust() == 10
    own = _claim(TRUTH + rng.normal(0, 0.05, 2), 0.0025)
    liar = _claim(TRUTH + np.array([2.0, 0.0]), 0.01)
    verdicts = []
    while table.fusable("liar"):
        outcome = table.check("liar", liar, own)
        assert outcome is not None
        verdicts.append(outcome.passed)
    assert len(verdicts) == 4 and not any(verdicts)

    # A peer that was honest for a long time, then starts lying.
    for _ in range(200):
        table.record("turncoat", True)
    n = 0
    while table.fusable("turncoat"):
        table.check("turncoat", liar, own)
        n += 1
    assert n <= table.checks_to_distrust()


def test_an_honest_noisy_peer_keeps_its_weight() -> None:
    rng = np.random.default_rng(2)
    table = ReputationTable()
    fails = 0
    for _ in range(500):
        own = _claim(TRUTH + rng.normal(0, 0.05, 2), 0.0025)
        honest = _claim(TRUTH + rng.normal(0, 0.1, 2), 0.01)
        outcome = table.check("honest", honest, own)
        assert outcome is not None
        fails += not outcome.passed
        assert table.fusable("honest")
    assert 0 < fails < 25  # about 1 % at the 99 % gate: failures happen and are absorbed
    assert table.inflation("honest") < 1.2


def test_no_check_without_a_confident_reference() -> None:
    table = ReputationTable()
    vague_own = _claim(TRUTH, 1.0)  # trace 2.0 > confident_trace
    assert table.check("hazel", _claim(TRUTH + 5.0, 0.01), vague_own) is None
    assert table.check("hazel", _claim(TRUTH + 5.0, 0.01), None) is None
    assert table.peers() == {}


def test_majority_of_references_decides_with_three_or_more_agents() -> None:
    table = ReputationTable()
    lie = _claim(TRUTH + np.array([0.0, 2.0]), 0.01)
    good = _claim(TRUTH + 0.02, 0.01)
    # Own track not confident: two honest peers outvote nothing, they are the references.
    others = {"walnut": good, "hazel": _claim(TRUTH - 0.03, 0.01)}
    outcome = table.check("liar", lie, None, others)
    assert outcome is not None and not outcome.passed
    assert (outcome.votes_for, outcome.votes_against, outcome.own_vote) == (0, 2, None)
    # The peer under test is never its own reference, and without an own vote one
    # peer against another cannot tell which of them lies: no verdict.
    outcome = table.check("walnut", good, None, {"walnut": good, "hazel": others["hazel"]})
    assert outcome is None
    # Three peers and a confident own track: 3 against 1 fails the peer.
    own = _claim(TRUTH, 0.0025)
    outcome = table.check("liar", lie, own, {**others, "accomplice": lie})
    assert outcome is not None and not outcome.passed
    assert (outcome.votes_for, outcome.votes_against, outcome.own_vote) == (1, 3, False)


def test_ties_are_broken_by_the_own_vote() -> None:
    table = ReputationTable()
    own = _claim(TRUTH, 0.0025)
    honest = _claim(TRUTH + 0.05, 0.01)
    liar_peer = _claim(TRUTH + np.array([3.0, 0.0]), 0.01)
    # Own says consistent, the other peer (itself lying) says inconsistent: own decides.
    outcome = table.check("hazel", honest, own, {"liar": liar_peer})
    assert outcome is not None and outcome.passed
    assert (outcome.votes_for, outcome.votes_against) == (1, 1)


def test_an_untrusted_peer_is_not_a_reference() -> None:
    table = ReputationTable()
    for _ in range(20):
        table.record("liar", False)
    assert not table.fusable("liar")
    honest = _claim(TRUTH, 0.01)
    walnut = _claim(TRUTH + 0.01, 0.01)
    others = {"liar": _claim(TRUTH + 3.0, 0.01), "walnut": walnut}
    outcome = table.check("hazel", honest, None, others)
    assert outcome is None  # only walnut is a reference: not enough without an own vote
    assert "liar" in table.peers() and "hazel" not in table.peers()
