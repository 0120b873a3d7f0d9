"""Seeker: one agent's search for a target it does not see, with no IO.

The core (:mod:`agents.core`) owns one and calls it with ``now`` and data; it keeps
the room-scale search map (:mod:`agents.belief.search`) and everything around it:

- **own looks**: a frame with a good pose and no track is a look that saw nothing
  (at most one every ``look_interval``), applied to the map rounded as the wire
  carries it, numbered, and kept ``look_resend`` seconds to go out in LOOKs
  (SWARM.md §6b; each look travels about twice); so are the frames of a turn without
  a pose, once a pose comes (:mod:`agents.backfill` places them);
- **a peer's looks** (SWARM.md §10.6): each applied once (:class:`LookLedger`: the
  look numbers per sender and epoch), from a trusted peer whose clock is mapped,
  only where its HEARTBEAT said it was, at a bounded rate per peer
  (:class:`LookBucket`); none with ``search.share`` off or fusion ``none`` (the
  no-sharing baseline uses nothing it receives);
- **the oracle** (lockstep only): another robot's look handed over directly;
- **time and tracks**: the map spreads at the target's declared speed; a track
  holds it on the track's position;
- **a search goal**: the viewpoints and the probability each would cover now, the
  cells nearer a peer's newest look weighted down (:class:`~agents.navigation.SearchView`).

Deterministic, like the core: no clock reads, no random numbers.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from agents.backfill import Placed
from agents.belief.search import (
    HEADING_UNIT,
    CameraLook,
    SearchMap,
    fov_mrad,
    heading_units,
    position_cm,
    range_cm,
    rounded_look,
    viewpoints_for,
)
from agents.checks import require
from agents.config import FUSION_NONE, AgentConfig
from agents.navigation import SearchView
from agents.peers import Peer
from protocol.errors import RejectCounters
from protocol.swarm import Look, LookRecord

MAX_LOOKS_SENT = 64  # looks in one LOOK (SWARM.md §6b)


class Seeker:
    """The search map and its looks; see the module docstring. ``map`` is None when the
    agent keeps no search map (``search.enabled`` off): then every call does nothing."""

    def __init__(self, config: AgentConfig, counters: RejectCounters, t0: float) -> None:
        self.config = config
        s = config.search
        self.map = SearchMap(config.room, s, config.nav.robot_radius) if s.enabled else None
        # Built with the agent, before its loop runs: built at the first search decision
        # instead (0.06-0.29 s here), it held the loop past the car's 300 ms watchdog when
        # eight agents shared two cores.
        self._viewpoints = None if self.map is None else viewpoints_for(
            config.room, s, config.sensing.range, config.sensing.fov,
            config.localizer.camera_forward)
        self.counters = counters  # the core's: refused looks are counted with the rest
        self.stats: dict[str, float] = {"looks_made": 0, "looks_backfilled": 0,
                                        "sightings_backfilled": 0,
                                        "looks_applied": 0, "looks_sent": 0,
                                        "seen_own": 0.0, "seen_peers": 0.0}
        self._seq = 0
        self._looks: list[tuple[int, CameraLook]] = []  # own looks still to be (re)sent
        self._last_look_t = -math.inf
        self._next_send = t0
        self._ledger = LookLedger(s.look_window, 2 * config.max_peers)
        self._buckets: dict[str, LookBucket] = {}
        self._peer_views: dict[str, CameraLook] = {}  # each peer's newest look applied
        self.collect_looks = False  # keep own looks in new_looks (the lockstep oracle)
        self.new_looks: list[CameraLook] = []

    def after_frame(self, t: float, pose: Any, P_pose: Any, det: Any, tracking: bool, *,
                    robots: Sequence[tuple[float, float]] = (), age: float = 0.0) -> bool:
        """A frame with a pose: a detection collapses the map; else, at most every
        ``look_interval``, with a good pose and no track, a look that saw nothing (past
        the other ``robots``, where they are believed to stand). ``age``: how long before
        the map's present the frame was seen (0: just now; the map is at the last tick).
        True: a look was made."""
        smap = self.map
        if smap is None:
            return False
        s = self.config.search
        if det is not None:
            smap.collapse(det.x, det.y, det.cov)
            return False
        if tracking or t - self._last_look_t < s.look_interval - 1e-6:
            return False
        P = np.asarray(P_pose, dtype=np.float64)[:2, :2]
        if not float(np.linalg.eigvalsh(0.5 * (P + P.T))[-1]) <= s.max_pose_std**2:
            return False
        self._last_look_t = t
        x, y, th = (float(v) for v in pose[:3])
        cf = self.config.localizer.camera_forward
        sensing = self.config.sensing
        look = rounded_look(t, (x + cf * math.cos(th), y + cf * math.sin(th), th),
                            sensing.range, sensing.fov)
        self.stats["seen_own"] += smap.apply_look(look, robots, age)
        self.stats["looks_made"] += 1
        self._looks.append((self._seq, look))
        self._seq += 1
        if self.collect_looks:
            self.new_looks.append(look)
        return True

    def after_pose_came(self, placed: Sequence[Placed], tracking: bool, t: float, *,
                        robots: Sequence[tuple[float, float]] = ()) -> None:
        """The frames seen without a pose, placed now that one came at ``t``
        (:mod:`agents.backfill`, in time order, before the frame that brought the pose):
        each a look like any other (none once the sightings among them started a track),
        and one that saw the target collapses the map where that put it; both late by
        ``t`` less the frame's time (:meth:`SearchMap.apply_look`'s ``age``)."""
        smap = self.map
        if smap is None:
            return
        cf = self.config.localizer.camera_forward
        for frame in placed:
            det = frame.detection(cf)
            if det is not None:
                smap.collapse(det.x, det.y, det.cov, t - frame.t)
                self.stats["sightings_backfilled"] += 1
            elif self.after_frame(frame.t, frame.pose, frame.cov, None, tracking, robots=robots,
                                  age=t - frame.t):
                self.stats["looks_backfilled"] += 1

    def look_due(self, now: float) -> Look | None:
        """The LOOK to broadcast now, if one is due (every ``look_period``, sharing on):
        the looks of the last ``look_resend`` seconds."""
        s = self.config.search
        if self.map is None or not s.share or now < self._next_send:
            return None
        self._next_send = max(self._next_send + s.look_period, now)
        self._looks = [(seq, look) for seq, look in self._looks if now - look.t < s.look_resend]
        looks = self._looks[-MAX_LOOKS_SENT:]
        if not looks:
            return None
        t_ref = min(now, max(look.t for _, look in looks))
        records = tuple(
            LookRecord(min(max(round((t_ref - look.t) * 1000.0), 0), 65535),
                       position_cm(look.x), position_cm(look.y), heading_units(look.heading))
            for _, look in looks
        )
        self.stats["looks_sent"] += len(records)
        sensing = self.config.sensing
        return Look(looks[0][0], t_ref, range_cm(sensing.range), fov_mrad(sensing.fov), records)

    def on_peer_look(self, peer: Peer, body: Look, t_ref: float | None, trusted: bool,
                     now: float, *, robots: Sequence[tuple[float, float]] = (),
                     ) -> dict[str, Any] | None:
        """A peer's LOOK, its ``t_ref`` on our clock (None: the peer's clock is not mapped
        yet); ``trusted``: reputation lets the peer be fused; ``robots``: the other robots
        (this one included, the peer not) where they stand now, which hid what was behind
        them from the peer's camera. Returns the log record of what was applied, or None
        when the whole LOOK was refused (and counted)."""
        smap = self.map
        s = self.config.search
        if smap is None or not s.share or self.config.fusion == FUSION_NONE:
            self.counters.count("look_not_sharing")
            return None
        if not trusted:
            self.counters.count("look_distrusted")
            return None
        if t_ref is None:
            self.counters.count("look_peer_clock_unsynced")
            return None
        bucket = self._buckets.get(peer.name)
        if bucket is None:
            bucket = self._buckets[peer.name] = LookBucket(s.peer_look_rate,
                                                           s.peer_look_burst, now)
        applied, seen, again = 0, 0.0, 0
        for k, r in enumerate(body.looks):
            t = t_ref - r.age_ms / 1000.0
            look = CameraLook(t, r.x_cm / 100.0, r.y_cm / 100.0, r.heading * HEADING_UNIT,
                              body.range_m, body.fov_rad)
            if peer.position is None or math.hypot(
                look.x - peer.position[0], look.y - peer.position[1]
            ) > s.peer_slack + s.peer_speed * abs(t - peer.position_at):
                self.counters.count("look_misplaced")
                continue
            verdict = self._ledger.admit(peer.name, peer.epoch, body.first_seq + k)
            if verdict is not None:
                self.counters.count(verdict)
                again += 1
                continue
            if not bucket.take(now):
                self.counters.count("look_rate_exceeded")
                continue
            seen += smap.apply_look(look, robots, now - t)
            applied += 1
            newest = self._peer_views.get(peer.name)
            if newest is None or look.t >= newest.t:
                self._peer_views[peer.name] = look
        self.stats["looks_applied"] += applied
        self.stats["seen_peers"] += seen
        return {"peer": peer.name, "looks": len(body.looks), "applied": applied,
                "again": again, "seen": seen}

    def on_oracle_look(self, sender: str, look: CameraLook, now: float) -> None:
        """Another robot's look handed over directly (the lockstep oracle), applied at once
        (late by ``now`` less its time, as a peer's would be)."""
        if self.map is not None:
            self.stats["seen_peers"] += self.map.apply_look(look, age=now - look.t)
            self.stats["looks_applied"] += 1
            self._peer_views[sender] = look

    def tick(self, dt: float, track: tuple[float, float, Any] | None) -> None:
        """Time passes on the map; a track ``(x, y, P_xy)`` holds it on its position."""
        if self.map is None:
            return
        self.map.predict(dt)
        if track is not None:
            self.map.collapse(*track)

    def view(self, pose: tuple[float, float, float] | None, t: float) -> SearchView | None:
        """The viewpoints and what each would see now, for a search decision at ``t``."""
        smap, vp = self.map, self._viewpoints
        if smap is None or vp is None or pose is None:
            return None
        s = self.config.search
        dist = smap.path_lengths(pose[0], pose[1]).ravel()[vp.cell]
        peers = [(look.x, look.y) for look in self._peer_views.values()
                 if t - look.t <= s.peer_view_age]
        p = smap.partition((pose[0], pose[1]), peers, s.partition)
        return SearchView(vp.x, vp.y, vp.heading, vp.gains(p), dist, s.turn_rate,
                          s.look_time, s.switch_ratio, s.arrive_radius)

    def state_bytes(self) -> bytes:
        """The map's exact state, for the core's belief digest (empty without a map)."""
        return b"" if self.map is None else np.ascontiguousarray(self.map.p).tobytes()

    def log_fields(self) -> dict[str, Any]:
        """The map's entropy and the look counters, for the belief log. Not the map itself
        (1.2 KB/s per agent after zstd, read by nothing): a re-run of the logged inputs
        rebuilds it exactly (the belief digest covers it)."""
        smap = self.map
        if smap is None:
            return {}
        return {"search": {"shape": smap.p.shape, "cell": smap.cell_size,
                           "entropy": smap.entropy(), **self.stats}}


class LookLedger:
    """Which look numbers of each (sender, epoch) were applied: each counts once.

    Per stream: the newest number applied and a bitmap of the ``window - 1`` before
    it. At most ``max_streams`` streams are kept (the least recently used go).
    """

    def __init__(self, window: int = 1024, max_streams: int = 128) -> None:
        require(window >= 1 and max_streams >= 1, "window and max_streams must be >= 1")
        self.window = window
        self.max_streams = max_streams
        self._streams: OrderedDict[tuple[str, int], list[int]] = OrderedDict()

    def admit(self, sender: str, epoch: int, seq: int) -> str | None:
        """None (and recorded) when the look is new; else ``look_duplicate`` or
        ``look_too_old``."""
        key = (sender, epoch)
        stream = self._streams.get(key)
        if stream is None:
            self._streams[key] = [seq, 1]
            while len(self._streams) > self.max_streams:
                self._streams.popitem(last=False)
            return None
        self._streams.move_to_end(key)
        top, bits = stream
        if seq > top:
            shift = seq - top
            stream[1] = ((bits << shift) | 1) & ((1 << self.window) - 1) if shift < self.window \
                else 1
            stream[0] = seq
            return None
        behind = top - seq
        if behind >= self.window:
            return "look_too_old"
        if bits >> behind & 1:
            return "look_duplicate"
        stream[1] = bits | (1 << behind)
        return None


class LookBucket:
    """A token bucket: ``rate`` looks a second, at most ``burst`` at once."""

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.t = now

    def take(self, now: float) -> bool:
        if now > self.t:
            self.tokens = min(self.burst, self.tokens + (now - self.t) * self.rate)
            self.t = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False
