"""One robot's agent as one sans-IO object; the runtime, lockstep and the re-run drive it.

It composes the core (:class:`~agents.core.AgentCore`, inside the swarm node
that decodes, encodes and logs), the controller session and car adapter, and
the transport faults, and speaks one vocabulary, in the shape of aioquic's
connection::

    receive_datagram(data, addr, now)     a swarm datagram arrived
    receive_car(data, port, now)          a datagram from the car (4210 or 4211)
    receive_frame(batch, now, stages)     perception made an observation of a frame
    datagrams_to_send(now)                what to send now: swarm and car datagrams
    get_timer() / handle_timer(now)       the next deadline, and what is due at it
                                          (a beat, a decision, a held-back TRACK, ...)

Decisions are made when something new is known — an applied observation, a
synchronized frame that saw nothing (a look for the search map), or a fused peer
track that changes whether the track is confident (pursue or search) — at most
every ``min_decision_spacing`` s, and at a beat of ``rates.tick`` when none was
made since the last beat (a peer's other tracks wait for the next decision, at
most one period; decisions are at most two periods apart). Drivers own
sockets, threads and clocks; this object never reads a clock. Its log goes through
``log`` (a RunLog's ``log``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from agents.carlink import CarAdapter
from agents.config import AgentConfig
from agents.core import AgentCore
from agents.faults import ByzantineSpec, LinkFaults
from agents.navigation import NavDecision
from agents.node import LogFn, SwarmNode
from agents.observations import ObservationBatch
from agents.transport import Direction, TransportFaults
from protocol.eventqueue import EventQueue
from protocol.mz01.session import ControllerSession, SessionConfig

Address = tuple[str, int]
MIN_DECISION_SPACING = 0.02  # s between two decisions made because something new is known


@dataclass(frozen=True)
class Outgoing:
    """A datagram to send now. ``car``: to the car's ``port``; else a swarm datagram to
    ``to`` (None: the swarm's broadcast address)."""

    data: bytes
    kind: str
    to: Address | None = None
    car: bool = False
    port: int = 0


def _no_log(event: str, t: float | None = None, **fields: object) -> None:
    return None


class Agent:
    """See the module docstring."""

    def __init__(
        self,
        config: AgentConfig,
        *,
        key: bytes,
        swarm_id: int,
        epoch: int,
        t0: float,
        limit: int = 1200,
        log: LogFn = _no_log,
        robot_id: int = 0,
        first_tick: float | None = None,
        min_decision_spacing: float = MIN_DECISION_SPACING,
    ) -> None:
        self.core = AgentCore(config, t0)
        self.node = SwarmNode(self.core, key, swarm_id, epoch, limit=limit, log=log)
        self.session = ControllerSession(SessionConfig(robot_id=robot_id))
        self.adapter = CarAdapter(self.session)
        self.faults = TransportFaults(config.name, epoch, self.core.peers.name_at)
        self.log = log
        self.epoch = epoch
        self.period = 1.0 / config.rates.tick
        self.next_tick = t0 if first_tick is None else first_tick
        self.min_spacing = min_decision_spacing
        self.decision: NavDecision | None = None
        self._decided_at = -math.inf
        self._last_beat = -math.inf
        self._decide_at: float | None = None
        self._held: EventQueue[tuple[bool, bytes, Address | None]] = EventQueue()  # delayed
        self._out: list[Outgoing] = []

    @property
    def name(self) -> str:
        return self.core.config.name

    # ------------------------------------------------------------------ inputs

    def receive_datagram(self, data: bytes, src: Address, now: float) -> None:
        """A swarm datagram from ``src``: through the inbound faults, then the node."""
        for copy in self.faults.incoming(data, src, now):
            if copy.delay <= 0:
                self.node.receive_datagram(copy.data, src, now)
            else:
                self._hold(now + copy.delay, True, copy.data, src)
        self._log_faults()
        self._after_input(now)

    def receive_car(self, data: bytes, port: int, now: float) -> None:
        """A datagram from the car: telemetry (duties, gyro, a simulated observation)."""
        update = self.adapter.receive_datagram(data, port, now)
        if update is not None:
            self.node.car_status(now, update.duty, update.gyro_z, update.gyro_angle,
                                 sampled_at=update.sampled_at)
            if update.batch is not None:
                self.node.observations(update.batch, now)
        self._after_input(now)

    def receive_frame(
        self, batch: ObservationBatch, now: float, stages: dict[str, float] | None = None
    ) -> None:
        """What perception saw in one camera frame (``stages``: its timestamps, for the log)."""
        self.node.observations(batch, now, stages=stages)
        self._after_input(now)

    def discovered(self, name: str, addr: Address, epoch: int, now: float) -> None:
        self.node.discovered(name, addr, epoch, now)

    # ------------------------------------------------------------------ control

    def set_faults(self, spec: LinkFaults, direction: Direction, now: float) -> dict[str, Any]:
        change = self.faults.set(spec, direction, now)
        self.log("faults_set", t=now, **change)
        return change

    def set_byzantine(self, spec: ByzantineSpec | None, now: float) -> None:
        """Make the agent lie (None: honest), seeded by its epoch (as every driver does)."""
        self.node.set_byzantine(spec, self.epoch, now)

    def stop_car(self, now: float) -> None:
        """Wheels to zero now (the session keeps sending until the car confirms)."""
        self.adapter.set_decision(0.0, 0.0, now)

    # ------------------------------------------------------------------ timers

    def get_timer(self) -> float | None:
        # The earliest of the deadlines that are set (min() of them, without a list).
        timer = self.next_tick
        for deadline in (self._decide_at, self._held.next_at(), self.session.get_timer(),
                         self.core.track_due_at()):
            if deadline is not None and deadline < timer:
                timer = deadline
        return timer

    def handle_timer(self, now: float) -> None:
        """Everything due at ``now``: delayed datagrams, the session, a beat or a decision."""
        for inbound, data, addr in self._held.due(now):
            if inbound:
                assert addr is not None
                self.node.receive_datagram(data, addr, now)
            else:
                self._out.append(Outgoing(data, "delayed", addr))
        timer = self.session.get_timer()
        if timer is not None and timer <= now:
            self.session.handle_timer(now)
        if now >= self.next_tick:
            self.next_tick = max(self.next_tick + self.period, now)
            # The beat carries the rest: it decides only if nothing new was decided on
            # since the last beat (a decision uses all that is known, whatever woke it).
            recent = self._decided_at > self._last_beat
            self._last_beat = now
            if recent:
                self.node.tick(now, decide=False)
            else:
                self._use(self.node.tick(now), now)
                self.core.take_news()  # the beat's decision already knows it
        elif self._decide_at is not None and now >= self._decide_at:
            self._use(self.node.decide(now), now)
        due = self.core.track_due_at()
        if due is not None and now >= due:
            self.node.send_track(now)
        self._after_input(now)

    # ------------------------------------------------------------------ outputs

    def datagrams_to_send(self, now: float) -> list[Outgoing]:
        """Swarm datagrams (after the outbound faults) and car datagrams due now."""
        for dg in self.node.datagrams():
            for copy in self.faults.outgoing(dg.data, dg.to, now):
                if copy.delay <= 0:
                    self._out.append(Outgoing(copy.data, dg.kind, dg.to))
                else:
                    self._hold(now + copy.delay, False, copy.data, dg.to)
        self._log_faults()
        for tx in self.session.datagrams_to_send():
            self._out.append(Outgoing(tx.data, tx.kind, car=True, port=tx.port))
        out, self._out = self._out, []
        return out

    def session_events(self) -> list[Any]:
        """The controller session's state changes since the last call (for the log)."""
        return self.session.events()

    def service(self, now: float) -> list[Outgoing]:
        """What every driver does after an input and at the timer: run everything due at
        ``now``, then return what to send. The one way data flows out of an agent."""
        timer = self.get_timer()
        while timer is not None and timer <= now:
            self.handle_timer(now)
            after = self.get_timer()
            if after == timer:  # a deadline ``now`` could not move: next time
                break
            timer = after
        return self.datagrams_to_send(now)

    # ------------------------------------------------------------------ internals

    def _hold(self, at: float, inbound: bool, data: bytes, addr: Address | None) -> None:
        self._held.push(at, (inbound, data, addr))

    def _log_faults(self) -> None:
        for record in self.faults.records():
            t = record.pop("t")
            self.log("fault", t=t, **record)

    def _use(self, decision: NavDecision | None, now: float) -> None:
        self._decided_at, self._decide_at = now, None
        if decision is not None:
            self.decision = decision
            self.adapter.set_decision(decision.duty_left, decision.duty_right, now)

    def _after_input(self, now: float) -> None:
        """Something new is known: decide at once, or as soon as the spacing allows."""
        if self.core.take_news() and self._decide_at is None:
            self._decide_at = max(now, self._decided_at + self.min_spacing)


