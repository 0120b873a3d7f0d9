"""Beta reputation with forgetting, judged on the own evidence: liars lose their weight,
honest peers keep it, and peers are never references for each other."""

from __future__ import annotations

import numpy as np
import pytest

from agents.belief.params import ReputationParams
from agents.belief.reputation import PositionClaim, Reason, ReputationTable, position_nis
from agents.belief.views import ViewEvidence

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
        outcome = table.judge("liar", liar, own, None)
        assert outcome is not None
        verdicts.append(outcome.passed)
    assert len(verdicts) == 4 and not any(verdicts)

    # A peer that was honest for a long time, then starts lying.
    for _ in range(200):
        table.record("turncoat", True)
    n = 0
    while table.fusable("turncoat"):
        table.judge("turncoat", liar, own, None)
        n += 1
    assert n <= table.checks_to_distrust()


def test_an_honest_noisy_peer_keeps_its_weight() -> None:
    rng = np.random.default_rng(2)
    table = ReputationTable()
    fails = 0
    for _ in range(500):
        own = _claim(TRUTH + rng.normal(0, 0.05, 2), 0.0025)
        honest = _claim(TRUTH + rng.normal(0, 0.1, 2), 0.01)
        outcome = table.judge("honest", honest, own, None)
        assert outcome is not None
        fails += not outcome.passed
        assert table.fusable("honest")
    assert 0 < fails < 25  # about 1 % at the 99 % gate: failures happen and are absorbed
    assert table.inflation("honest") < 1.2


def test_no_check_without_own_evidence() -> None:
    table = ReputationTable()
    vague_own = _claim(TRUTH, 1.0)  # trace 2.0 > confident_trace
    lie = _claim(TRUTH + 5.0, 0.01)
    assert table.judge("hazel", lie, vague_own, None) is None
    assert table.judge("hazel", lie, None, None) is None
    assert table.judge("hazel", lie, None, ViewEvidence(0, 0, 5)) is None  # not looked at
    assert table.judge("hazel", lie, None, ViewEvidence(1, 0, 5)) is None  # one frame only
    assert table.peers() == {}


def test_a_place_seen_empty_fails_the_claim_without_any_witness() -> None:
    """The liar who is the only one to see the target: the own camera saw its place empty."""
    table = ReputationTable()
    lie = _claim(TRUTH + np.array([1.5, 0.0]), 0.01)
    outcome = table.judge("liar", lie, None, ViewEvidence(refuting=3, supporting=0, looked=4))
    assert outcome is not None and not outcome.passed
    assert outcome.reason is Reason.SEEN_EMPTY and outcome.refuting == 3
    n = 1
    while table.fusable("liar"):
        table.judge("liar", lie, None, ViewEvidence(3, 0, 4))
        n += 1
    assert n == 4  # from the prior, as with a witness


def test_a_place_where_the_target_was_seen_passes_the_claim() -> None:
    table = ReputationTable()
    outcome = table.judge("hazel", _claim(TRUTH, 0.01), None, ViewEvidence(0, 2, 3))
    assert outcome is not None and outcome.passed and outcome.reason is Reason.SEEN_THERE
    # Seen there by one frame, empty in others (it moved): support wins, no failure.
    outcome = table.judge("hazel", _claim(TRUTH, 0.01), None, ViewEvidence(3, 1, 4))
    assert outcome is not None and outcome.passed


def test_the_witness_decides_before_the_views_and_a_refutation_still_fails() -> None:
    table = ReputationTable()
    own = _claim(TRUTH, 0.0025)
    near = _claim(TRUTH + 0.05, 0.01)
    outcome = table.judge("hazel", near, own, ViewEvidence(0, 0, 2))
    assert outcome is not None and outcome.passed and outcome.reason is Reason.WITNESS_AGREES
    far = _claim(TRUTH + np.array([0.0, 2.0]), 0.01)
    outcome = table.judge("hazel", far, own, ViewEvidence(0, 0, 2))
    assert outcome is not None and not outcome.passed
    assert outcome.reason is Reason.WITNESS_DISAGREES and outcome.nis > 9.21


def test_own_evidence_that_contradicts_itself_judges_nothing() -> None:
    """The camera saw the target where the claim puts it, the witness (the same detections
    through the robot's own, off, pose) puts it elsewhere: nothing is known of the peer."""
    table = ReputationTable()
    own = _claim(TRUTH, 0.0025)
    off = _claim(TRUTH + np.array([0.4, 0.0]), 0.0025)  # 0.4 m away: nis 32 against own
    assert table.judge("hazel", off, own, ViewEvidence(0, 1, 3)) is None
    assert table.peers() == {}
    outcome = table.judge("hazel", off, own, ViewEvidence(0, 0, 3))  # nothing seen there
    assert outcome is not None and outcome.reason is Reason.WITNESS_DISAGREES


def test_patch_cells_fail_on_a_majority_of_refuted_cells_and_never_pass() -> None:
    table = ReputationTable()
    empty, seen, unknown = ViewEvidence(2, 0, 3), ViewEvidence(0, 1, 3), ViewEvidence(0, 0, 3)
    outcome = table.judge_cells("liar", [empty, empty, empty, unknown])
    assert outcome is not None and not outcome.passed
    assert outcome.reason is Reason.CELLS_SEEN_EMPTY and outcome.refuting == 3
    # One refuted cell is not enough (a blob's edge), and seen cells outweigh refuted ones.
    assert table.judge_cells("hazel", [empty, unknown]) is None
    assert table.judge_cells("hazel", [empty, empty, seen, seen]) is None
    # Cells where the own camera saw the target may be this robot's own belief sent back.
    assert table.judge_cells("hazel", [seen, seen, seen]) is None
    assert table.judge_cells("hazel", [unknown, unknown]) is None
    assert "hazel" not in table.peers()
