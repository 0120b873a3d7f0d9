"""Per-peer reputation: a Beta score with forgetting, fed by consistency checks.

For each peer the table keeps forgetful counts ``a`` (passes) and ``b``
(failures). Every check does ``a = λ·a + pass`` and ``b = λ·b + (1 - pass)``;
the score adds the never-forgotten prior::

    score = (α₀ + a) / (α₀ + β₀ + a + b)

An unknown peer has ``a = b = 0`` and the prior's score, which
:class:`~agents.belief.params.ReputationParams` requires to be fusable. A peer
whose score is below ``threshold`` is not fused; otherwise its covariances are
inflated by ``1 / score``.

The check compares the peer's track position with reference positions at the
same time (the caller predicts every track to a common time)::

    consistent(ref)  ⇔  dᵀ (P_ref + P_peer)⁻¹ d <= gate,   d = p_peer - p_ref

References are the own track, if it is confident, and every *other* peer that
is fusable and confident (trace of its position covariance at most
``confident_trace``). Each reference votes. The peer passes if more references
find it consistent than inconsistent; on a tie the own vote decides. Without an
own vote, at least two peer references are needed (one peer against another
cannot tell which of them lies), and a tie is no check.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from agents.belief.params import ReputationParams

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


@dataclass(frozen=True)
class CheckOutcome:
    """One consistency check: the verdict and the votes behind it."""

    passed: bool
    votes_for: int
    votes_against: int
    own_vote: bool | None
    score: float


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

    def check(
        self,
        peer: str,
        claim: PositionClaim,
        own: PositionClaim | None,
        others: Mapping[str, PositionClaim] | None = None,
    ) -> CheckOutcome | None:
        """Vote on ``claim`` (the peer's position) and record the verdict.

        ``own`` is the own track's position (ignored unless confident); ``others`` the
        other peers' claims at the same time (ignored unless fusable and confident;
        ``peer`` itself is skipped). Returns None when no verdict was possible.
        """
        p = self.params
        own_vote: bool | None = None
        votes_for = votes_against = 0
        if own is not None and own.confident(p.confident_trace):
            own_vote = position_nis(own, claim) <= p.gate
            votes_for += own_vote
            votes_against += not own_vote
        for name, ref in (others or {}).items():
            if name == peer or not self.fusable(name) or not ref.confident(p.confident_trace):
                continue
            ok = position_nis(ref, claim) <= p.gate
            votes_for += ok
            votes_against += not ok
        if own_vote is None and votes_for + votes_against < 2:
            return None
        if votes_for == votes_against:
            if own_vote is None:
                return None
            passed = own_vote
        else:
            passed = votes_for > votes_against
        score = self.record(peer, passed)
        return CheckOutcome(passed, votes_for, votes_against, own_vote, score)

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
