"""Per-peer reputation: a Beta score with forgetting, fed by checks on independent evidence.

For each peer the table keeps forgetful counts ``a`` (passes) and ``b``
(failures). Every check does ``a = λ·a + pass`` and ``b = λ·b + (1 - pass)``;
the score adds the never-forgotten prior::

    score = (α₀ + a) / (α₀ + β₀ + a + b)

An unknown peer has ``a = b = 0`` and the prior's score, which
:class:`~agents.belief.params.ReputationParams` requires to be fusable. A peer
whose score is below ``threshold`` is not fused; otherwise its covariances are
inflated by ``1 / score``.

The evidence is the agent's own, and nothing a peer said (a peer's track, or
the agent's own fused track, may already hold the peer under test: checking
against them confirms a lie once it has spread):

- the **witness**: a track built from the agent's own detections only, when
  it is confident (a recent detection, a position covariance trace at most
  ``confident_trace``). The peer's position claim is consistent with it when
  ``dᵀ (P_witness + P_claim)⁻¹ d <= gate``;
- **negative evidence** (:mod:`agents.belief.views`): the agent's own camera
  looked at the place the claim puts the target, at a time it could not have
  left it, past every obstacle and every other robot, and saw nothing there (at
  least ``min_refuting_views`` frames); or
  positive evidence: a frame saw the target there.

:meth:`ReputationTable.judge` turns a TRACK's evidence into a verdict: it fails
when the witness disagrees or the views refute it, passes when the witness
agrees or a view saw the target there, and is no verdict otherwise — nor when
the own evidence contradicts itself (a view saw the target where the claim puts
it, the witness elsewhere: the robot's own pose error, seen on the orbit with
heading errors of 0.15-0.45 rad, would otherwise fail an honest peer).
:meth:`ReputationTable.judge_cells` judges the hot cells of a PATCH, which can
fail but never pass (they may hold this robot's own belief, sent back). The
caller checks once per new measurement of the peer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from agents.belief.params import ReputationParams
from agents.belief.views import ViewEvidence

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class PositionClaim:
    """A track's position (m) and its 2×2 covariance (m²) at the check's common time."""

    position: FloatArray
    covariance: FloatArray

    @classmethod
    def from_track(cls, x: npt.ArrayLike, P: npt.ArrayLike) -> PositionClaim:
        """The position part of a 4-state ``[x, y, vx, vy]`` track."""
        x_ = np.asarray(x, dtype=np.float64)
        P_ = np.asarray(P, dtype=np.float64)
        return cls(position=x_[:2].copy(), covariance=P_[:2, :2].copy())

    def confident(self, max_trace: float) -> bool:
        tr = float(self.covariance[0, 0] + self.covariance[1, 1])
        return math.isfinite(tr) and tr <= max_trace


def position_nis(a: PositionClaim, b: PositionClaim) -> float:
    """``dᵀ (Pa + Pb)⁻¹ d``; infinite if the summed covariance is not positive definite."""
    d = np.asarray(b.position, dtype=np.float64) - np.asarray(a.position, dtype=np.float64)
    S = np.asarray(a.covariance, dtype=np.float64) + np.asarray(b.covariance, dtype=np.float64)
    det = S[0, 0] * S[1, 1] - S[0, 1] * S[1, 0]
    if not (det > 0.0 and S[0, 0] > 0.0 and np.all(np.isfinite(d))):
        return math.inf
    nis = (S[1, 1] * d[0] * d[0] - (S[0, 1] + S[1, 0]) * d[0] * d[1] + S[0, 0] * d[1] * d[1]) / det
    return float(nis)


class Reason(StrEnum):
    """What decided a check."""

    WITNESS_AGREES = "witness_agrees"
    WITNESS_DISAGREES = "witness_disagrees"
    SEEN_EMPTY = "seen_empty"
    SEEN_THERE = "seen_there"
    CELLS_SEEN_EMPTY = "cells_seen_empty"


@dataclass(frozen=True)
class CheckOutcome:
    """One check: the verdict, what decided it, and the evidence behind it."""

    passed: bool
    reason: Reason
    score: float
    nis: float = math.nan  # against the witness (NaN without one)
    refuting: int = 0  # own views (or cells) that refuted the claim
    supporting: int = 0  # own views (or cells) that saw the target there


@dataclass
class _Counts:
    a: float = 0.0
    b: float = 0.0


class ReputationTable:
    """Beta reputation of every peer met so far (by agent id)."""

    def __init__(self, params: ReputationParams | None = None) -> None:
        self.params = params if params is not None else ReputationParams()
        self._peers: dict[str, _Counts] = {}

    def score(self, peer: str) -> float:
        p = self.params
        c = self._peers.get(peer, _Counts())
        return (p.prior_alpha + c.a) / (p.prior_alpha + p.prior_beta + c.a + c.b)

    def fusable(self, peer: str) -> bool:
        return self.score(peer) >= self.params.threshold

    def inflation(self, peer: str) -> float:
        """Covariance multiplier for a fusable peer: ``1 / score`` (>= 1)."""
        return 1.0 / self.score(peer)

    def record(self, peer: str, passed: bool) -> float:
        """Apply one check's verdict; returns the new score."""
        lam = self.params.forgetting
        c = self._peers.setdefault(peer, _Counts())
        c.a = lam * c.a + (1.0 if passed else 0.0)
        c.b = lam * c.b + (0.0 if passed else 1.0)
        return self.score(peer)

    def judge(
        self,
        peer: str,
        claim: PositionClaim,
        witness: PositionClaim | None,
        views: ViewEvidence | None,
    ) -> CheckOutcome | None:
        """Judge a peer's position claim on the own evidence and record the verdict.

        ``witness``: the own-detections-only track at the claim's time (ignored unless
        confident); ``views``: what the own recent frames say of the claim. Returns None
        when neither says anything.
        """
        p = self.params
        nis = math.nan
        agrees: bool | None = None
        if witness is not None and witness.confident(p.confident_trace):
            nis = position_nis(witness, claim)
            agrees = nis <= p.gate
        refuting = views.refuting if views is not None else 0
        supporting = views.supporting if views is not None else 0
        refuted = views is not None and views.refutes(p.min_refuting_views)
        if agrees is False and supporting > 0:
            # The own evidence contradicts itself: the camera saw the target where the claim
            # puts it, the witness (the same detections, through the robot's own pose) puts
            # it elsewhere. Nothing is known against the peer.
            return None
        if agrees is False:
            passed, reason = False, Reason.WITNESS_DISAGREES
        elif refuted:
            passed, reason = False, Reason.SEEN_EMPTY
        elif agrees:
            passed, reason = True, Reason.WITNESS_AGREES
        elif supporting > 0:
            passed, reason = True, Reason.SEEN_THERE
        else:
            return None
        return CheckOutcome(passed, reason, self.record(peer, passed), nis, refuting, supporting)

    def judge_cells(self, peer: str, cells: list[ViewEvidence]) -> CheckOutcome | None:
        """Judge a PATCH's new hot cells (one :class:`ViewEvidence` each) and record it.

        It fails when at least ``min_refuted_cells`` cells, and more than were seen with
        the target, are refuted by the own views; otherwise no verdict. A PATCH never
        passes: its cells hold what the peer fused from others, this robot included, so a
        cell where the own camera saw the target may be this robot's own belief sent back
        (trust is earned by the peer's TRACKs, checked once per own measurement of it).
        """
        p = self.params
        refuted = sum(1 for c in cells if c.refutes(p.min_refuting_views))
        seen = sum(1 for c in cells if c.supporting > 0)
        if not (refuted >= p.min_refuted_cells and refuted > seen):
            return None
        return CheckOutcome(False, Reason.CELLS_SEEN_EMPTY, self.record(peer, False), math.nan,
                            refuted, seen)

    def peers(self) -> dict[str, float]:
        """Score of every peer checked so far."""
        return {name: self.score(name) for name in sorted(self._peers)}

    def checks_to_distrust(self) -> int:
        """Worst-case number of consecutive failed checks until any peer is not fusable.

        The worst case is a peer with the largest possible pass count
        ``a = 1/(1-λ)`` and ``b = 0``; after n failures ``a = λⁿ/(1-λ)`` and
        ``b = (1-λⁿ)/(1-λ)``.
        """
        p = self.params
        lam = p.forgetting
        full = 1.0 / (1.0 - lam)
        for n in range(1, 100_000):
            a = lam**n * full
            b = full - a
            if (p.prior_alpha + a) / (p.prior_alpha + p.prior_beta + a + b) < p.threshold:
                return n
        raise ValueError("these parameters never distrust a peer that always fails")
