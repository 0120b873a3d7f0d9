"""AgentCore: one robot's mind, with no IO.

Inputs are method calls carrying ``now`` (the agent's monotonic clock):
decoded swarm messages, the car's applied duties and gyro, observation
batches, peer discoveries, and the 10 Hz :meth:`AgentCore.tick`. Outputs are
collected and drained with :meth:`AgentCore.take_outputs`: swarm messages to
send (broadcast or to one peer), the newest wheel decision, and log records.

The core owns the belief grid, the track, the reputation table and the
vetting that feeds it (:mod:`agents.vetting`: the own evidence, a witness track
and the recent views, that every new claim of a peer faces), the peer
table with each peer's clock offset, the localizer and the navigator, and the
seeker (:mod:`agents.seeking`: the search map, its own looks and the peers'
LOOKs, the viewpoints a search goal is chosen among) with the frames seen without a pose
that become looks and detections once one comes (:mod:`agents.backfill`). It is
deterministic: the same inputs at the same times give the same outputs bit
for bit (no random numbers, no clock reads, ordered iteration only).

Why one module of ~600 lines, over the ~500 of the rest: it is one state machine. Every
input and every tick reads and changes the same state (grid, track, peers, pose), and the
order of those changes is the behaviour; the fusion of a peer's cells and track (~150
lines) changes the same grid and track as the own observations, and stays beside them.
Apart are the parts with a state of their own: the messages it sends unasked and their
cadences (:mod:`agents.sends`), a peer's clock mapping and the cells held until it is
mapped (:mod:`agents.peer_clock`), the car's inputs held for the localizer and a lost
robot's dead reckoning (:mod:`agents.odometry`), and its output types
(:mod:`agents.outputs`); and the pure functions of its state that make its belief log
record and the belief digest (:mod:`agents.belief_record`). The estimators it drives are
their own modules and its settings are :mod:`agents.config`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import numpy as np

from agents.backfill import Backfill
from agents.belief import Detection as GridDetection
from agents.belief import Footprint, FusionRule, PheromoneGrid, ReputationTable, TrackFilter
from agents.belief.search import CameraLook
from agents.belief_record import belief_digest, belief_record
from agents.config import FUSION_NONE, AgentConfig, confident
from agents.faults import Byzantine, ByzantineSpec, Stage
from agents.gyro_bias import GyroBias
from agents.localization import EMPTY, PoseEKF
from agents.navigation import BeliefView, Navigator, TrackView
from agents.observations import Detection, ObservationBatch
from agents.odometry import GyroAngle, Odometry
from agents.outputs import Outgoing, OutPatch, Outputs, OutSnapshot, Record, Send
from agents.peer_clock import hold, peer_time, release, to_local
from agents.peers import Address, Peer, PeerTable
from agents.rejections import RejectionSampler
from agents.seeking import Seeker
from agents.sends import Sends
from agents.vetting import DISTRUSTED, Verdict, Vetting
from protocol.errors import RejectCounters
from protocol.swarm import (
    Bye,
    Heartbeat,
    Look,
    Message,
    Mode,
    Patch,
    Ping,
    Pong,
    Snapshot,
    Track,
    from_upper_triangle,
)
from protocol.swarm.limits import check_time, judge

# The output types live in agents.outputs; the drivers name them from here too.
__all__ = ["AgentCore", "OutPatch", "OutSnapshot", "Outputs", "Record", "Send"]


class AgentCore:
    """The pure agent; see the module docstring."""

    def __init__(self, config: AgentConfig, t0: float) -> None:
        self.config = config
        c = config
        self.grid = PheromoneGrid(c.grid, x=c.room.width / 2, y=c.room.height / 2)
        self.space = c.target_space
        self.track = TrackFilter(c.track, self.space)
        self.reputation = ReputationTable(c.reputation)
        self.localizer = PoseEKF(
            c.landmarks, drive=c.drive, params=c.localizer, t0=t0,
            bias_psd=c.gyro_bias.drift_psd if c.gyro_bias.enabled else 0.0)
        self.gyro_bias = GyroBias(c.gyro_bias)
        self.navigator = Navigator(
            drive=c.drive, params=c.nav, tags=[c.landmarks[k] for k in sorted(c.landmarks)],
            view_distance=c.sensing.view_distance, camera_range=c.sensing.range,
        )
        self.peers = PeerTable(c.peer_limits)
        self.limits = c.claim_limits
        self.counters = RejectCounters()
        self.seeker = Seeker(c, self.counters, t0)  # the search map and its looks
        # The frames seen without a pose, to be looks and detections once one comes.
        self.backfill = Backfill(c.search.backfill, c.drive, c.localizer)
        # The own evidence (a witness track, the recent views) that peers' claims face.
        self.vetting = Vetting(c, self.space, self.reputation, self.counters, self._emit)
        # The car's inputs, held for the localizer; a lost robot's dead reckoning.
        self.odometry = Odometry(c, self.localizer, self.gyro_bias, self.backfill)
        self.refusals = RejectionSampler()
        self.stats: dict[str, int] = {
            "detections": 0,
            "cells_fused": 0,
            "tracks_fused": 0,
            "snapshots_sent": 0,
            "captures_after_receipt": 0,
        }
        self._out = Outputs()
        # The messages no input asks for, and when they are due.
        self.sending = Sends(c, grid=self.grid, localizer=self.localizer, peers=self.peers,
                           reputation=self.reputation, seeker=self.seeker, stats=self.stats,
                           confident=self.track_confident, send=self._send, t0=t0)
        self._t_tick: float | None = None
        self._seen_at = -math.inf  # capture time of the newest own detection the track took
        self._track_info_at = -math.inf  # the newest measurement in the track, own or a peer's
        self._pose_had = False
        self._news = False  # something new is known since the last decision
        self.sensor_fault: Byzantine | None = None  # a broken sensor (Byzantine at=sense)

    def set_sensor_fault(self, spec: ByzantineSpec | None, seed: int) -> None:
        """Distort this agent's own detections from now on (``None``: an honest sensor)."""
        honest = spec is None or spec.is_honest or spec.at is not Stage.SENSE
        self.sensor_fault = None if honest else Byzantine(spec, seed)  # type: ignore[arg-type]

    # ---------------------------------------------------------------- inputs

    def on_car_status(
        self, now: float, duty_left: float, duty_right: float, gyro_z: float | None,
        angle: GyroAngle | None = None, *, sampled_at: float | None = None,
    ) -> None:
        """The duties the car applies, its gyro rate and integrated angle, sampled by the
        car at ``sampled_at`` (None: at ``now``): the localizer's inputs (the rate less the
        gyro's bias, learnt while the car stands still)."""
        self.odometry.car_status(now, duty_left, duty_right, gyro_z, angle,
                                 sampled_at=sampled_at)

    def on_observations(self, batch: ObservationBatch, now: float) -> None:
        """A sensor frame: wall tags localize, the target becomes a detection."""
        if batch.t_capture > now:
            # The clock mapping placed the capture after its receipt: it was taken no later
            # than now (and nothing the core sends may be stamped after its sending).
            self.stats["captures_after_receipt"] += 1
            batch = replace(batch, t_capture=now)
        self.odometry.advance(now)
        result = self.localizer.update_batch(batch)
        record: dict[str, Any] = {
            "t_capture": batch.t_capture,
            "applied": result.applied,
            "reason": result.reason,
            "tags": len(batch.tags),
            "target": batch.target is not None,
        }
        if result.initialized:
            record["initialized"] = True
        self._emit("observation", record)
        if not result.applied and result.reason == EMPTY and batch.synchronized:
            # Nothing seen at all (the localizer has nothing to apply): still a look, and
            # news for the decision (the search map, or relocation without a pose).
            self._news = True
            empty = self.localizer.pose_at(batch.t_capture)
            if empty is not None:
                self.seeker.after_frame(batch.t_capture, empty[0], empty[1], None,
                                        self.track.initialised, robots=self._other_robots(now))
            else:
                self.backfill.frame(batch.t_capture)
        if not result.applied:
            return
        self._news = True
        at = self.localizer.pose_at(batch.t_capture)
        if at is None:
            self.backfill.frame(batch.t_capture, batch.target)
        placed = self.backfill.place(batch.t_capture, *at) if (
            at is not None and result.initialized) else []
        cf = self.config.localizer.camera_forward
        for frame in placed:  # all older than this frame: the track takes them first
            late = frame.detection(cf)
            if late is not None:
                self._own_detection(late, now, placed_at=batch.t_capture)
        detections: list[GridDetection] = []
        det = result.detection
        if det is not None:
            det = self._own_detection(det, now)
            detections.append(GridDetection(det.x, det.y, det.cov))
        if at is not None:
            (px, py, ptheta), P_pose = at
            s = self.config.sensing
            footprint = Footprint(px, py, ptheta, s.range, s.fov, s.min_range)
            robots = self._other_robots(now)
            self.grid.deposit(footprint, detections, room=self.config.room, robots=robots,
                              robot_radius=self.config.nav.robot_radius)
            if placed:
                self.seeker.after_pose_came(placed, self.track.initialised, batch.t_capture,
                                            robots=robots)
            self.seeker.after_frame(batch.t_capture, at[0], at[1], det, self.track.initialised,
                                    robots=robots)
            self.vetting.own_view(batch.t_capture, footprint, P_pose,
                                  None if det is None else (det.x, det.y), robots)

    def _own_detection(self, det: Detection, now: float,
                       placed_at: float | None = None) -> Detection:
        """One of this robot's detections (through its sensor fault, if any) into the track;
        ``placed_at``: the detection is of a frame seen without a pose, placed by the pose
        that came at this time (:mod:`agents.backfill`). Returns it as the track took it."""
        if self.sensor_fault is not None:
            det = self.sensor_fault.transform_observation(det, now)
        self.stats["detections"] += 1
        upd = self.track.update_position((det.x, det.y), det.cov, det.t, consider=det.pose_cov)
        if upd.accepted:
            self._seen_at = max(self._seen_at, det.t)
            self.sending.track_dirty = True
            self._track_info_at = now
        self.vetting.own_detection(det)
        record: dict[str, Any] = {"t_det": det.t, "x": det.x, "y": det.y, "cov": det.cov,
                                  "accepted": upd.accepted, "reason": str(upd.reason)}
        if placed_at is not None:
            record["placed_at"] = placed_at
        self._emit("detection", record)
        self.sending.maybe_send_track(now, self.track)
        return det

    def on_peer_discovered(self, name: str, addr: Address, epoch: int, now: float) -> None:
        """Discovery (mDNS or a static list) names an address to PING; it makes no peer."""
        if name != self.config.name:
            self.peers.discovered(name, addr, now)

    def on_message(self, msg: Message, src: Address, now: float) -> None:
        """A swarm message that passed every check of the decoder.

        One message at a time: whatever it holds, an exception while handling it is
        counted (``internal_error``), logged with the message, and goes no further.
        """
        if msg.sender == self.config.name:
            return  # our own broadcast, looped back
        try:
            self._on_message(msg, src, now)
        except Exception as exc:
            self._refuse("internal_error", now, peer=msg.sender, kind=msg.kind.name,
                         error=f"{type(exc).__name__}: {exc}"[:200], message=repr(msg)[:400])
        self._drain_peer_events()

    def _on_message(self, msg: Message, src: Address, now: float) -> None:
        routed = self.peers.route(msg.sender, msg.epoch, src, now)
        if isinstance(routed, str):
            self._refuse(routed, now, peer=msg.sender, epoch=msg.epoch)
            return
        peer = routed
        body = msg.body
        if isinstance(body, Ping):  # answered whoever asks: a PONG is no bigger than its PING
            self._send(src, Pong(body.ping_id, msg.t_sent, now, now))
            return
        if isinstance(body, Pong):
            self._on_pong(peer, body, src, now)
            return
        reason = judge(msg, now, self.limits, to_local(peer, now))
        if reason is not None:
            self._refuse(reason, now, peer=peer.name, kind=msg.kind.name)
            return
        if isinstance(body, Heartbeat):
            if body.mode != Mode.LOST_POSE:  # a lost robot's (0, 0) is no place
                peer.position, peer.position_at = (body.x, body.y), now
        elif isinstance(body, Patch | Snapshot):
            self._fuse_cells(peer, body, now)
        elif isinstance(body, Track):
            self._on_peer_track(peer, body, now)
        elif isinstance(body, Look):
            mapped = peer_time(peer, body.t_ref, now)
            trusted = not self.config.use_reputation or self.reputation.fusable(peer.name)
            pose = self.localizer.pose
            robots = self._other_robots(now, besides=peer.name)
            if pose is not None:
                robots.append((pose[0], pose[1]))
            record = self.seeker.on_peer_look(peer, body, None if mapped is None else mapped[0],
                                              trusted, now, robots=robots)
            if record is not None:
                self._emit("peer_look", record)
        elif isinstance(body, Bye):
            if peer is self.peers.get(peer.name):
                peer.lost = True
            self._emit("peer_bye", {"peer": peer.name, "reason": body.reason})

    def _on_pong(self, peer: Peer, body: Pong, src: Address, now: float) -> None:
        if self.peers.answered(body.ping_id, body.t1, src) is None:
            self.counters.count("unknown_pong")
            return
        if self.peers.confirm(peer, src, now):
            self.sending.send_snapshot(peer, now)
        if not peer.clock.add_sample(body.t1, body.t2, body.t3, now):
            self.counters.count("clock_sample_rejected")
            return
        for cells_body, fresh in release(peer, now):  # held until the clock was mapped
            if fresh:
                self._fuse_cells(peer, cells_body, now)
            else:
                self.counters.count("held_cells_expired")

    def _refuse(self, reason: str, now: float, **fields: Any) -> None:
        """A valid message's content refused: counted always, logged as a sample."""
        self.counters.count(reason)
        count = self.refusals.admit(reason, now)
        if count is not None:
            self._emit("refused", {"reason": reason, "count": count, **fields})

    def _drain_peer_events(self) -> None:
        for event, fields in self.peers.take_events():
            self._emit(event, fields)

    def tick(self, now: float, *, decide: bool = True) -> None:
        """The 10 Hz beat: belief step, decision (unless one was just made), periodic
        messages, peer liveness."""
        dt = 0.0 if self._t_tick is None else max(0.0, now - self._t_tick)
        self._t_tick = now
        self.odometry.advance(now)
        pose = self.localizer.pose
        if pose is not None:
            self.grid.slide_to(pose[0], pose[1])
        if pose is not None and not self._pose_had:
            self._emit("pose_acquired", {"x": pose[0], "y": pose[1], "theta": pose[2]})
        elif pose is None and self._pose_had:
            self._emit("pose_lost", {"reason": self.localizer.lost_reason})
        self._pose_had = pose is not None
        self.grid.predict(dt)
        self.grid.decay(dt)
        # The grid is not a measurement of the track: it holds the same detections (and
        # the peers' cells), only older.
        if self.track.initialised:
            self.track.predict_to(max(now, self.track.time))
            # Dropped after track_timeout without news, or once it says less than the room
            # does (a lost target: the estimate widened in place instead of flying off).
            spread = self.track.position_spread
            if (now - self._track_info_at > self.config.track_timeout
                    or spread > self.space.uninformed_spread):
                self.track.reset()
                self._emit("track_dropped", {"silent": now - self._track_info_at,
                                             "spread": spread})
        self.vetting.tick(now)
        t = self.track
        self.seeker.tick(dt, (float(t.state[0]), float(t.state[1]), t.covariance[:2, :2])
                         if t.initialised else None)
        if decide:
            self._decide(now, pose)
        self._periodic(now)
        self._check_peers(now)

    def decide(self, now: float) -> None:
        """A decision now, between beats: something new is known (see :meth:`take_news`)."""
        self.odometry.advance(now)
        self._decide(now, self.localizer.pose)

    def track_due_at(self) -> float | None:
        """When a TRACK held back by the burst limit may go (None: none is waiting)."""
        return self.sending.track_due_at(self.track)

    def send_due_track(self, now: float) -> None:
        """Send the TRACK that was held back, if it may go now."""
        self.sending.maybe_send_track(now, self.track)

    # ---------------------------------------------------------------- outputs

    def take_news(self) -> bool:
        """Whether a new observation (an applied one, or a synchronized look that saw
        nothing), or a peer track that made the track confident or not, arrived since the
        last call."""
        news, self._news = self._news, False
        return news

    def take_outputs(self) -> Outputs:
        out, self._out = self._out, Outputs()
        return out

    def track_confident(self, now: float) -> bool:
        """Whether the track is pursued: news within ``track_max_age``, and the target's
        place known to ``confident_spread`` in the room or from where the robot stands (a
        target its camera has just seen, :func:`agents.config.confident`)."""
        t = self.track
        return (
            t.initialised
            and bool(confident(t.position_spread, now - self._seen_at,
                               limit=self.config.confident_spread,
                               max_speed=self.config.track.max_speed))
            and now - self._track_info_at <= self.config.track_max_age
        )

    def belief_digest(self) -> str:
        """SHA-256 of the exact belief state (grid and track): replay compares these."""
        return belief_digest(self.grid, self.seeker, self.track)

    # ---------------------------------------------------------------- internals

    def _emit(self, event: str, fields: dict[str, Any]) -> None:
        self._out.records.append(Record(event, fields))

    def _send(self, to: Address | None, body: Outgoing) -> None:
        self._out.sends.append(Send(to, body))

    def _fusion_weight(self, peer: Peer) -> float | None:
        """The covariance inflation for this peer, or None when it must not be fused."""
        if self.config.fusion == FUSION_NONE:
            return None
        if not self.config.use_reputation:
            return 1.0
        if not self.reputation.fusable(peer.name):
            return None
        return self.reputation.inflation(peer.name)

    def _fuse_cells(self, peer: Peer, body: Patch | Snapshot, now: float) -> None:
        kind = "snapshot" if isinstance(body, Snapshot) else "patch"
        if abs(body.cell_size_mm / 1000.0 - self.config.grid.cell_size) > 1e-9:
            self.counters.count(f"{kind}_wrong_lattice")
            return
        mapped = peer_time(peer, body.t_ref, now)
        if mapped is None:
            if self._fusion_weight(peer) is None:
                self.counters.count(f"{kind}_not_fused")
                return
            # Held (bounded) until the peer's clock is mapped (agents.peer_clock).
            if not hold(peer, body, now):
                self.counters.count(f"{kind}_peer_clock_unsynced")
            return
        t_local, uncertainty = mapped
        if check_time(t_local, now, self.limits) is not None:
            self._refuse("implausible_time", now, peer=peer.name, kind=kind.upper())
            return
        if isinstance(body, Patch) and self.config.use_reputation:
            verdict = self.vetting.check_patch(peer.name, body.cells, t_local, uncertainty)
            self._after_check(peer, verdict, "patch", now)
            if verdict is not None and not verdict.outcome.passed:
                self.counters.count("patch_refuted")  # the own views have just refuted it
                return
        inflation = self._fusion_weight(peer)
        if inflation is None:
            self.counters.count(f"{kind}_not_fused")
            return
        cells = body.cells
        n = self.grid.fuse(
            cells.ix,
            cells.iy,
            cells.mu.astype(np.float64),
            cells.var.astype(np.float64),
            age=now - t_local,
            age_uncertainty=uncertainty,
            rule=FusionRule(self.config.fusion),
            inflation=inflation,
        )
        self.stats["cells_fused"] += n
        self._emit(
            f"fused_{kind}",
            {"peer": peer.name, "cells": len(cells), "fused": n, "age": now - t_local},
        )

    def _on_peer_track(self, peer: Peer, body: Track, now: float) -> None:
        mapped = peer_time(peer, body.t_ref, now)
        if mapped is None:
            self.counters.count("track_peer_clock_unsynced")
            return
        t_local, uncertainty = mapped  # plausible: judged on receipt, with this mapping
        x = np.array(body.mean, dtype=np.float64)
        P = from_upper_triangle(body.cov, 4)
        # The clock's uncertainty u is a time error δt that moves the claimed position by
        # v·δt: its second moment u²·E[v vᵀ] = u²·(v vᵀ + P_vv) joins the position block.
        P[:2, :2] += uncertainty**2 * (np.outer(x[2:], x[2:]) + P[2:, 2:])
        peer.track = (x, P, t_local)
        verdict = None
        if self.config.use_reputation:
            verdict = self.vetting.check_track(peer.name, (peer.epoch, body.updates), x, P,
                                               t_local, clock_u=uncertainty, now=now)
            self._after_check(peer, verdict, "track", now)
        inflation = self._fusion_weight(peer)
        agreement = math.nan
        P_fused: np.ndarray | None = None
        if inflation is None:
            outcome = "not_sharing" if self.config.fusion == FUSION_NONE else "distrusted"
        elif verdict is not None and not verdict.outcome.passed:
            self.counters.count("track_refuted")  # the own evidence has just refuted it
            outcome = "refuted"
        elif body.updates == peer.updates_fused:
            # Nothing new since the last one: the same measurements, only predicted. Fusing
            # it again would keep a lost target alive by passing it back and forth.
            self.counters.count("track_no_new_information")
            outcome = "no_new_information"
            if self.config.use_reputation:  # though not fused, it may contradict the track
                agreement = self.vetting.contest(peer.name, self.track, x, P * inflation,
                                                 t=t_local, now=now, verdict=verdict)
        else:
            P_fused = P * inflation
            if self.config.use_reputation:
                P_fused, agreement = self.vetting.weigh(peer.name, self.track, x, P_fused,
                                                        t=t_local, now=now, verdict=verdict)
            outcome = "fused" if P_fused is not None else "disputed"
            if P_fused is None:
                self.counters.count("track_disputed")  # contradicts the track, or a suspect peer
        if P_fused is not None:
            rule = FusionRule(self.config.fusion)
            confident = self.track_confident(now)
            self.track.fuse_peer(x, P_fused, t_local, now, rule=rule)
            self.stats["tracks_fused"] += 1
            peer.updates_fused = body.updates
            self._track_info_at = now
            # A peer's track calls for a decision at once only when it changes the mode
            # (pursue or search); otherwise the next beat decides with it.
            self._news = self._news or self.track_confident(now) != confident
        record: dict[str, Any] = {
            "peer": peer.name,
            "t_ref": t_local,
            "outcome": outcome,
            "x": x,
            "fused": outcome == "fused",
            "check": None if verdict is None else verdict.outcome.passed,
            "score": self.reputation.score(peer.name),
        }
        if math.isfinite(agreement):
            record["agreement"] = agreement  # the NIS against the own track
        if verdict is not None:
            o = verdict.outcome
            record.update(check_reason=str(o.reason), nis=o.nis, refuting=o.refuting,
                          supporting=o.supporting)
        self._emit("peer_track", record)

    def _after_check(self, peer: Peer, verdict: Verdict | None, kind: str, now: float) -> None:
        """A peer that a check has just turned distrusted takes its share back: the track
        starts over from the witness (the own detections)."""
        if verdict is None or verdict.turned != DISTRUSTED:
            return
        self.track, how = self.vetting.rebuild(self.track, now)
        self.sending.track_dirty = self.sending.track_dirty or how == "witness"
        self._emit("peer_distrusted", {"peer": peer.name, "score": verdict.outcome.score,
                                       "by": kind, "track": how})

    def _active_peers(self, now: float) -> Iterable[Peer]:
        return self.peers.active()

    def _other_robots(self, now: float, besides: str | None = None) -> list[tuple[float, float]]:
        """Where the other robots (but ``besides``) are believed to be (their newest
        positions, not stale)."""
        return [
            p.position
            for p in self._active_peers(now)
            if p.position is not None and now - p.position_at <= self.config.peer_lost_after
            and p.name != besides
        ]

    def _decide(self, now: float, pose: tuple[float, float, float] | None) -> None:
        g = self.grid
        view = BeliefView(g.mu, g.var, g.xs, g.ys, self.config.grid.var_max)
        track_view = None
        if self.track.initialised:
            x = self.track.state
            track_view = TrackView(
                float(x[0]), float(x[1]), float(x[2]), float(x[3]), self.track.time,
                self.track_confident(now),
            )
        others = self._other_robots(now)
        # The search view only for a search: a confident track is pursued without it.
        searching = track_view is None or not track_view.confident
        decision = self.navigator.decide(
            now, pose=pose, belief=view, track=track_view, others=others, room=self.config.room,
            search=self.seeker.view(pose, self.localizer.t) if searching else None,
            estimate=self.odometry.reckoned,
            verify=self.vetting.to_verify(now) if self.config.use_reputation else None,
            heading_std=self.odometry.heading_std(),
            pose_used=self.odometry.pose_used(),
        )
        self._out.decision = decision
        self._emit(
            "decision",
            {
                "mode": decision.mode.value,
                "v": decision.v,
                "omega": decision.omega,
                "duty": (decision.duty_left, decision.duty_right),
                "goal": decision.goal,
                **({} if decision.goal_heading is None else {"heading": decision.goal_heading}),
            },
        )

    def _periodic(self, now: float) -> None:
        self.sending.periodic(now, self.track)
        if self.sending.belief_log_due(now):
            self._emit("belief", belief_record(
                now, grid=self.grid, localizer=self.localizer, gyro_bias=self.gyro_bias,
                peers=self.peers, reputation=self.reputation, counters=self.counters,
                checks=self.vetting.checks, seeker=self.seeker, track=self.track,
                confident=self.track_confident))

    def on_oracle_look(self, sender: str, look: CameraLook, now: float) -> None:
        """Another robot's look handed over directly (the lockstep oracle)."""
        self.seeker.on_oracle_look(sender, look, now)

    def _check_peers(self, now: float) -> None:
        self.peers.check(now)
        self._drain_peer_events()
        for reason, count in self.refusals.flush(now):
            self._emit("refused", {"reason": reason, "count": count})
