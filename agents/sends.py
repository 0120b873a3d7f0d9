"""What the core sends on its own, and when (protocol/SWARM.md §rates).

:class:`Sends` makes the messages that no input asks for, at the core's beat:

- HEARTBEAT every 1 / ``rates.heartbeat`` s: the pose (or LOST_POSE), the mode, the
  window's origin and the stats counters;
- TRACK: at once after a fresh detection, at most ``rates.track_burst`` of those per second
  (one that must wait is due at :meth:`Sends.track_due_at`, the agent's timer, not at the
  next beat); else the last one again when none went out for 1 / ``rates.track`` s (such a
  resend carries nothing new and does not count against the burst);
- PATCH every 1 / ``rates.patch`` s: the cells most worth sending, marked sent as the peers
  will decode them (float16);
- LOOK when the seeker has one due, PING to every address whose ping is due;
- SNAPSHOT: the whole window, unicast to a newly confirmed peer (rate-limited by the table);

and says when the belief log is due (once a second; the core writes it). A periodic action
keeps its cadence: after a gap it is due once, not once per missed period.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from agents.belief import CellBlock, PheromoneGrid, ReputationTable, TrackFilter
from agents.config import AgentConfig
from agents.localization import PoseEKF
from agents.outputs import Outgoing, OutPatch, OutSnapshot
from agents.peers import Address, Peer, PeerTable
from agents.seeking import Seeker
from protocol.swarm import Heartbeat, Mode, Ping, Track, upper_triangle

TIMER_SLACK = 1e-3  # s: a period counted from a past send is due this early (beats' rounding)


def _due(now: float, next_at: float, period: float) -> tuple[bool, float]:
    """Whether a periodic action is due, and its next time (cadence kept, no bursts)."""
    if now < next_at:
        return False, next_at
    return True, max(next_at + period, now)


class Sends:
    """The core's own messages and their cadences; see the module docstring."""

    def __init__(
        self,
        config: AgentConfig,
        *,
        grid: PheromoneGrid,
        localizer: PoseEKF,
        peers: PeerTable,
        reputation: ReputationTable,
        seeker: Seeker,
        stats: dict[str, int],
        confident: Callable[[float], bool],
        send: Callable[[Address | None, Outgoing], None],
        t0: float,
    ) -> None:
        """The core's own parts, read when a message is made; ``stats``: the core's
        counters (the HEARTBEAT carries them; a SNAPSHOT sent is counted there);
        ``confident``: whether the track is confident at a time (the HEARTBEAT's mode);
        ``send``: where a message goes."""
        self.config = config
        self.grid = grid
        self.localizer = localizer
        self.peers = peers
        self.reputation = reputation
        self.seeker = seeker
        self.stats = stats
        self._confident = confident
        self._send = send
        self._next = {"heartbeat": t0, "patch": t0, "belief_log": t0}
        self._last_track_sent = -math.inf
        self._last_fresh_sent = -math.inf  # the last TRACK that carried a new measurement
        self.track_dirty = False
        """The track took a measurement that no TRACK sent has carried yet."""
        self._snapshot_id = 0

    def periodic(self, now: float, track: TrackFilter) -> None:
        """Every message due at ``now``; ``track``: the core's track now."""
        r = self.config.rates
        due, self._next["heartbeat"] = _due(now, self._next["heartbeat"], 1.0 / r.heartbeat)
        if due:
            self._send(None, self._heartbeat(now))
        if now - self._last_track_sent >= 1.0 / r.track - TIMER_SLACK:  # nothing new sent
            self._send_track(now, track)
        else:
            self.maybe_send_track(now, track)
        due, self._next["patch"] = _due(now, self._next["patch"], 1.0 / r.patch)
        if due:
            cells = self.grid.select_patch(self.config.patch_max_cells)
            if len(cells):
                sent = CellBlock(
                    cells.ix,
                    cells.iy,
                    cells.mu.astype(np.float16).astype(np.float64),
                    cells.var.astype(np.float16).astype(np.float64),
                )
                self.grid.mark_sent(sent)
                self._send(None, OutPatch(cells, now))
        look = self.seeker.look_due(now)
        if look is not None:
            self._send(None, look)
        for addr in self.peers.pings_due(now, 1.0 / r.ping):
            self._send(addr, Ping(self.peers.ping(addr, now)))

    def belief_log_due(self, now: float) -> bool:
        """Whether the belief log is due at ``now`` (then it is not again for a second)."""
        due, self._next["belief_log"] = _due(now, self._next["belief_log"], 1.0)
        return due

    def maybe_send_track(self, now: float, track: TrackFilter) -> None:
        """A fresh detection goes out at once, rate-limited, not at the next periodic TRACK."""
        due = self.track_due_at(track)
        if due is not None and now >= due:
            self._send_track(now, track)

    def track_due_at(self, track: TrackFilter) -> float | None:
        """When the TRACK of a measurement no TRACK has carried yet may go (None: none
        waits)."""
        if not (self.track_dirty and track.initialised):
            return None
        return self._last_fresh_sent + 1.0 / self.config.rates.track_burst

    def send_snapshot(self, peer: Peer, now: float) -> None:
        """The whole window, unicast to a newly confirmed peer (rate-limited by the table)."""
        if peer.confirmed_addr is None or not self.peers.snapshot_allowed(peer.name, now):
            return
        self._snapshot_id = (self._snapshot_id + 1) & 0xFFFF_FFFF
        g = self.grid
        height, width = g.shape
        self._send(
            peer.confirmed_addr,
            OutSnapshot(g.snapshot(), self._snapshot_id, g.origin, width, height, now),
        )
        self.stats["snapshots_sent"] += 1

    def _send_track(self, now: float, t: TrackFilter) -> None:
        if not t.initialised:
            return
        self._send(None, Track(tuple(t.state.tolist()), upper_triangle(t.covariance), t.time,
                               t.update_count))
        self._last_track_sent = now
        if self.track_dirty:
            self._last_fresh_sent = now
        self.track_dirty = False

    def _heartbeat(self, now: float) -> Heartbeat:
        pose = self.localizer.pose
        cov = self.localizer.cov
        cov6: tuple[float, ...]
        if pose is None or cov is None:
            x, y, heading, mode = 0.0, 0.0, 0.0, Mode.LOST_POSE
            cov6 = (1e6, 0.0, 0.0, 1e6, 0.0, 1e6)
        else:
            x, y, heading = pose
            cov6 = upper_triangle(cov)
            mode = Mode.TRACK if self._confident(now) else Mode.SEARCH
        ox, oy = self.grid.origin
        active = [p for p in self.peers.active() if p.confirmed]
        stats = {
            **self.stats,
            "peers": len(active),  # for listeners (`stigmesh status`) on the swarm
            "distrusted": sum(1 for p in active if not self.reputation.fusable(p.name)),
        }
        counters = tuple((k, min(v, 0xFFFF_FFFF)) for k, v in stats.items())
        return Heartbeat(x, y, math.remainder(heading, 2 * math.pi), cov6, mode, ox, oy, counters)
