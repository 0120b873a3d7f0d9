"""Vetting: a peer's claims against this robot's own evidence, with no IO.

The core (:mod:`agents.core`) owns one and calls it with ``now`` and data. It keeps
the evidence that owes nothing to any peer (a peer's track, or the agent's own fused
track, may already hold the peer under test: checking against them confirms a lie
once it has spread):

- the **witness**: a track of the agent's own detections only, never a peer's;
- the **views**: the own camera's recent frames, what each covered and whether it
  saw the target (:mod:`agents.belief.views`: negative evidence).

and confronts with it every *new measurement* a peer publishes, not every resend:

- a TRACK once per (epoch, update count): the witness at the claim's time (when it
  has a recent detection) and the own views around that time; the claim of a *disputed*
  peer (below) that keeps sending it without a new measurement (its target out of its
  sight) again after each new own detection, on the witness alone (the views of its time
  have spoken already): new own evidence settles a dispute either way;
- a PATCH's hot cells that rose since that peer's previous PATCH of them: the
  own views around the time they could have risen.

Verdicts go to the reputation table (:mod:`agents.belief.reputation`); the claim a
check refutes is not fused, whatever the peer's score. A claim nothing of the own
evidence bears on is not fused either when it contradicts the agent's track: the peer
is then disputed, and its claims carry the disagreement in their covariance until the
witness agrees with one (:meth:`Vetting.weigh`). A resend that is not fused (no new
measurement) disputes the peer the same way (:meth:`Vetting.contest`): a claim fused
before the agent had a track of its own, then coasted, is checked again once the agent
sees the target. A peer whose latest check failed stays *suspect* until a check
passes: its claims that no check reaches (a resend of the refuted measurement among
them) are held as disputed, not fused, whether or not the agent has a track they
contradict; a refutation streak is not forgotten on the claim the own evidence happens
not to reach. Evidence is also sought: while no own detection can settle a dispute,
:meth:`Vetting.to_verify` names the disputed claim's place for the navigator to look
at, so the own views confront its next claims. When a check turns a peer distrusted,
what the core's track took from it cannot be taken out: the core starts its track over
from the witness (:meth:`Vetting.rebuild`). Deterministic, like the core: no clock
reads, ordered iteration only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import numpy as np
import numpy.typing as npt

from agents.belief.constraints import FreeSpace
from agents.belief.deposit import Footprint
from agents.belief.lattice import cell_centre
from agents.belief.models import cv_predict
from agents.belief.reputation import (
    CheckOutcome,
    PositionClaim,
    Reason,
    ReputationTable,
    position_nis,
)
from agents.belief.track import TrackFilter
from agents.belief.views import View, ViewHistory
from agents.config import AgentConfig
from agents.observations import Detection
from protocol.errors import RejectCounters
from protocol.swarm import Cells

FloatArray = npt.NDArray[np.float64]
MAX_VIEWS = 64  # own frames kept (at 8 frames/s, 8 s: more than any view horizon in use)
Emit = Callable[[str, dict[str, Any]], None]

DISTRUSTED = "distrusted"
TRUSTED = "trusted"


@dataclass(frozen=True)
class Verdict:
    """One check's outcome, and ``turned`` (``distrusted``/``trusted``) when it changed
    whether the peer is fused."""

    outcome: CheckOutcome
    turned: str | None = None


def _claim_at(track: TrackFilter, x: FloatArray, P: FloatArray, dt: float) -> PositionClaim:
    """A peer's claim predicted by ``dt`` as the peer made it: the motion model without the
    room's limits. Clamping a claim beyond a wall into the room grows its covariance by the
    move, so a lie beyond the wall would agree with anything near it."""
    return PositionClaim.from_track(*cv_predict(x, P, dt, track.params.accel_psd))


class Vetting:
    """The witness, the views and the checks; see the module docstring."""

    def __init__(self, config: AgentConfig, space: FreeSpace, reputation: ReputationTable,
                 counters: RejectCounters, emit: Emit) -> None:
        self.config = config
        self.reputation = reputation  # the core's: its scores weigh every fusion
        self.witness = TrackFilter(config.track, space)
        self.views = ViewHistory(config.reputation.view_horizon, MAX_VIEWS,
                                 max_speed=config.track.max_speed, space=space,
                                 robot_radius=config.nav.robot_radius)
        self.checks: dict[str, int] = {"track_checks": 0, "track_failed": 0,
                                       "patch_checks": 0, "patch_failed": 0}
        self._counters = counters
        self._emit = emit
        self._last_detection_at = -math.inf
        # peer -> ((epoch, TRACK updates), witness updates or None): the last check's evidence
        self._checked: dict[str, tuple[tuple[int, int], int | None]] = {}
        self._patch_seen: dict[str, dict[tuple[int, int], tuple[float, float]]] = {}
        self._distrusted: set[str] = set()
        self._suspect: set[str] = set()  # peers whose latest check failed, see weigh()
        self._disputes: dict[str, FloatArray] = {}  # peer -> d dᵀ (m²), see weigh()
        # peer -> (the newest disputed claim's position, its time, when the dispute began)
        self._contested: dict[str, tuple[tuple[float, float], float, float]] = {}
        self._weighed_at: dict[str, float] = {}  # peer -> when a claim of it was last fusable

    # ------------------------------------------------------------ own evidence

    def own_detection(self, det: Detection) -> None:
        """An own detection (after any sensor fault: what this robot believes it saw)."""
        self._last_detection_at = det.t
        self.witness.update_position((det.x, det.y), det.cov, det.t, consider=det.pose_cov)

    def own_view(self, t: float, footprint: Footprint, P_pose: FloatArray,
                 seen: tuple[float, float] | None,
                 robots: Sequence[tuple[float, float]] = ()) -> None:
        """An own frame at ``t`` with a pose: what it covered, where it saw the target, and
        where the other robots (which hide what is behind them) were believed to be."""
        P = np.asarray(P_pose, dtype=np.float64)
        self.views.add(View(t, footprint, 2.0 * math.sqrt(max(0.0, P[0, 0] + P[1, 1])),
                            2.0 * math.sqrt(max(0.0, P[2, 2])), seen, tuple(robots)))

    def tick(self, now: float) -> None:
        """The witness is forgotten ``track_timeout`` after the newest own detection; a
        disputed claim no longer resent is forgotten after ``view_horizon``, a fusable
        claim's time once :meth:`to_verify` no longer asks for it."""
        if self.witness.initialised and (
                now - self._last_detection_at > self.config.track_timeout):
            self.witness.reset()
        horizon = self.config.reputation.view_horizon
        for peer in [k for k, (_, t, _) in self._contested.items() if now - t > horizon]:
            del self._contested[peer]
        max_age = self.config.reputation.witness_max_age
        for peer in [k for k, at in self._weighed_at.items() if now - at > max_age]:
            del self._weighed_at[peer]

    def to_verify(self, now: float) -> tuple[float, float] | None:
        """Where the own camera should look: the newest disputed claim of a peer still
        fused, when nothing else can settle it — no fresh own detection (the witness does)
        and no other peer's claim fused within ``witness_max_age`` (the track is not the
        disputed peer's word against itself) — for at most ``verify_time`` per dispute, or
        since the own views last bore on its claims (an unreachable place is not chased; a
        place being seen is looked at until the peer is distrusted or trusted). None:
        nothing to look at."""
        p = self.config.reputation
        if now - self._last_detection_at <= p.witness_max_age:
            return None
        best: tuple[tuple[float, float], float] | None = None
        for peer, (position, t, since) in self._contested.items():
            if peer in self._distrusted or now - since > p.verify_time:
                continue
            if any(now - at <= p.witness_max_age
                   for other, at in self._weighed_at.items() if other != peer):
                continue
            if best is None or t > best[1]:
                best = (position, t)
        return None if best is None else best[0]

    # ------------------------------------------------------------------ checks

    def check_track(
        self, peer: str, measurement: tuple[int, int], x: FloatArray, P: FloatArray, t: float,
        *, clock_u: float, now: float,
    ) -> Verdict | None:
        """A peer's TRACK (``x``, ``P`` at local time ``t``; ``measurement``: the peer's
        epoch and update count) against the witness and the own views; None when neither it
        nor the witness holds a new measurement since its last check, or nothing of the own
        evidence bears on it (an undisputed peer's claim is checked once)."""
        p = self.config.reputation
        w = self.witness
        fresh = w.initialised and now - self._last_detection_at <= p.witness_max_age
        key = (measurement, w.update_count if fresh else None)
        last = self._checked.get(peer)
        if last == key:
            return None
        self._checked[peer] = key
        # A disputed claim again, with new own detections since: only the witness speaks
        # (the views already spoke of this claim; counting them again would count them twice).
        recheck = last is not None and last[0] == measurement
        if recheck and not (fresh and peer in self._disputes):
            return None
        witness = None
        claim = PositionClaim.from_track(x, P)
        if fresh:
            t_c = max(t, w.posterior_time)
            claim = _claim_at(w, x, P, t_c - t)
            witness = PositionClaim.from_track(*w.state_at(t_c))
        views = None if recheck else self.views.test(
            x[:2], P[:2, :2], t, window=p.view_window, gate=p.gate, floor=p.claim_floor,
            clock_uncertainty=clock_u, detection_gate=p.support_distance)
        verdict = self._verdict("track", peer, self.reputation.judge(peer, claim, witness, views))
        contested = self._contested.get(peer)
        if verdict is not None and contested is not None and (
                verdict.outcome.refuting or verdict.outcome.supporting):
            # The own views reach the disputed place: it is no unreachable place, and
            # the look goes on (verify_time counts from the last view that bore on it).
            self._contested[peer] = (contested[0], contested[1], now)
        return verdict

    def check_patch(self, peer: str, cells: Cells, t: float, clock_u: float) -> Verdict | None:
        """A PATCH's new hot cells (the peer claims the target was there since its previous
        PATCH) against the own recent views. Checked only when such cells changed."""
        p = self.config.reputation
        seen = self._patch_seen.setdefault(peer, {})
        keep = p.view_horizon + p.view_window
        previous = max(map(itemgetter(1), seen.values()), default=-math.inf)
        hot: list[tuple[int, int]] = []
        for ix, iy, mu, var in zip(cells.ix.tolist(), cells.iy.tolist(), cells.mu.tolist(),
                                   cells.var.tolist(), strict=True):
            before = seen.get((ix, iy))
            base = before[0] if before is not None and t - before[1] <= keep else 0.0
            seen[(ix, iy)] = (mu, t)
            if mu >= p.hot_mu and var <= p.hot_var and mu - base >= p.hot_rise:
                hot.append((ix, iy))
        for key in [k for k, (_, t_seen) in seen.items() if t - t_seen > keep]:
            del seen[key]
        if not hot:
            return None
        # The cells rose at some time since the previous PATCH (at most view_window ago).
        half = 0.5 * min(max(t - previous, 0.0), p.view_window)
        cs = self.config.grid.cell_size
        evidence = self.views.test_points(
            [(cell_centre(ix, cs), cell_centre(iy, cs)) for ix, iy in hot], np.zeros((2, 2)),
            t - half, window=p.view_window + half, gate=p.gate,
            floor=p.claim_floor + cs / math.sqrt(2.0), clock_uncertainty=clock_u + half,
            detection_gate=p.support_distance)
        verdict = self._verdict("patch", peer, self.reputation.judge_cells(peer, evidence))
        if verdict is not None:
            o = verdict.outcome
            self._emit("patch_check", {
                "peer": peer, "t_ref": t, "hot": len(hot), "passed": o.passed,
                "reason": str(o.reason), "refuted": o.refuting, "seen": o.supporting,
                "score": o.score,
            })
        return verdict

    def _verdict(self, kind: str, peer: str, outcome: CheckOutcome | None) -> Verdict | None:
        """Count a check and say whether it turned the peer distrusted or trusted again."""
        if outcome is None:
            return None
        self.checks[f"{kind}_checks"] += 1
        if not outcome.passed:
            self.checks[f"{kind}_failed"] += 1
        if outcome.passed:
            self._suspect.discard(peer)
        else:
            self._suspect.add(peer)
        fusable = self.reputation.fusable(peer)
        if not fusable and peer not in self._distrusted:
            self._distrusted.add(peer)
            self._contested.pop(peer, None)
            self._counters.count("peer_distrusted")
            return Verdict(outcome, DISTRUSTED)
        if fusable and peer in self._distrusted:
            self._distrusted.discard(peer)
            self._emit("peer_trusted", {"peer": peer, "score": outcome.score})
            return Verdict(outcome, TRUSTED)
        return Verdict(outcome)

    def weigh(self, peer: str, track: TrackFilter, x: FloatArray, P: FloatArray, *, t: float,
              now: float, verdict: Verdict | None) -> tuple[FloatArray | None, float]:
        """How a peer's TRACK (``x``, ``P`` at local time ``t``; ``verdict``: its check, not a
        failed one) may be fused: the covariance to fuse it with, or None when it contradicts
        the agent's track; and the position NIS against that track (NaN without one).

        Covariance intersection of two estimates that contradict each other is confident and
        wrong, whoever is right. So a claim beyond the gate is not fused, and the peer is
        *disputed* by the offset d: until the witness agrees with one of its claims, they
        are fused with ``d dᵀ`` added to their position covariance, which says what is not
        known (the own track may have been the wrong one; the peer may have lied before, or
        since). A view that saw the target near the claim does not settle it: its disc
        grows with the target's speed and the time between them.

        A *suspect* peer's claim (its latest check failed) that no check reached is held
        the same way, with or without a track it contradicts, and looked at as a disputed
        one is (:meth:`to_verify`)."""
        nis, disputed = self._compare(peer, track, x, P, t=t, now=now, verdict=verdict)
        if disputed:
            return None, nis
        if verdict is None and peer in self._suspect:
            self._contest_place(peer, x, t, now)
            return None, nis
        self._weighed_at[peer] = now
        D = self._disputes.get(peer)
        if D is None:
            return P, nis
        Q = np.array(P, dtype=np.float64)
        Q[:2, :2] += D
        return Q, nis

    def contest(self, peer: str, track: TrackFilter, x: FloatArray, P: FloatArray, *, t: float,
                now: float, verdict: Verdict | None) -> float:
        """A peer's TRACK that is not fused (a resend without a new measurement: the peer
        coasts) against the agent's track, as in :meth:`weigh`: when it contradicts it, the
        peer is disputed, so the next own detections check it again. Returns the NIS."""
        return self._compare(peer, track, x, P, t=t, now=now, verdict=verdict)[0]

    def _compare(self, peer: str, track: TrackFilter, x: FloatArray, P: FloatArray, *,
                 t: float, now: float, verdict: Verdict | None) -> tuple[float, bool]:
        """The position NIS of a claim against the agent's track (NaN without one), and
        whether the claim is beyond the gate: the peer is then disputed (see :meth:`weigh`).
        A check the witness passed ends the dispute."""
        confirmed = verdict is not None and verdict.outcome.reason is Reason.WITNESS_AGREES
        if confirmed:
            self._disputes.pop(peer, None)
            self._contested.pop(peer, None)
        if not track.initialised:
            return math.nan, False
        t_c = max(now, track.posterior_time)
        own = PositionClaim.from_track(*track.state_at(t_c))
        claim = _claim_at(track, x, P, t_c - t)
        nis = position_nis(own, claim)
        if nis <= self.config.reputation.gate or confirmed:
            return nis, False
        d = claim.position - own.position
        self._disputes[peer] = np.outer(d, d)
        self._contest_place(peer, x, t, now)
        return nis, True

    def _contest_place(self, peer: str, x: FloatArray, t: float, now: float) -> None:
        """The peer's newest disputed claim is at ``x`` (local time ``t``): where to look."""
        prior = self._contested.get(peer)
        since = now if prior is None else prior[2]
        self._contested[peer] = ((float(x[0]), float(x[1])), t, since)

    def rebuild(self, track: TrackFilter, now: float) -> tuple[TrackFilter, str]:
        """What ``track`` took from a peer now distrusted cannot be taken out of it: it
        starts over from the witness (the own detections), or is dropped without one.
        Returns the track to keep and how (``witness``, ``dropped``, ``none``)."""
        if not track.initialised:
            return track, "none"
        if self.witness.initialised:
            rebuilt = self.witness.copy()
            rebuilt.predict_to(now)
            return rebuilt, "witness"
        track.reset()
        return track, "dropped"


__all__ = ["DISTRUSTED", "TRUSTED", "Verdict", "Vetting"]
