"""Lockstep: the world and every agent in one process, in virtual time.

The same :class:`~worlds.sim.World` and the same sans-IO
:class:`~agents.agent.Agent` as the real processes (core, swarm node,
controller session, car adapter, transport faults); this module is only their
driver: an in-memory network and a clock that advances by itself in 1 ms
steps. After every input and at every step, each agent is serviced exactly as
the runtime does (:meth:`~agents.agent.Agent.service`). Deterministic for a
given seed, and far faster than real time.

:meth:`Lockstep.kill` drops an agent (no timer, no datagrams in or out, its car
stops on the firmware watchdog); :meth:`Lockstep.restart` gives it a fresh
agent with a new epoch, as a new process would have. World faults go to the
:class:`~worlds.sim.World`.

:func:`run_scenario` runs a :class:`~tools.experiments.scenario.Scenario` and its schedule.

``oracle_looks``: every look an agent makes is handed at once to every other
agent's search map (:meth:`~agents.core.AgentCore.on_oracle_look`, logged as an
``oracle_look`` input so that a replay reproduces it): the search with perfect
sharing, to compare LOOK sharing with (run it with ``search.share`` off).
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.agent import Agent
from agents.config import AgentConfig
from agents.core import AgentCore
from agents.faults import ByzantineSpec, LinkFaults, LinkModel
from agents.node import SwarmNode
from agents.transport import Direction
from protocol.eventqueue import EventQueue
from protocol.mz01.session import COMMAND_PORT
from protocol.runlog import RunLog, log_path
from protocol.swarm import swarm_id_from_name
from tools.agent_config import agent_config
from tools.experiments.scenario import Scenario
from tools.experiments.schedule import (
    Kill,
    Restart,
    SetByzantine,
    SetLink,
    TimedOp,
    WorldFault,
    timeline,
)
from worlds.arena import Arena
from worlds.sim import Step, World

Address = tuple[str, int]
SWARM_PORT = 47000
CONTROL_PORT = 50000
STEP = 0.001

# Delivery targets in the event queue.
TO_CAR, TO_CONTROLLER = "car", "controller"
TO_AGENT = "agent"  # arrives at an agent's swarm socket


@dataclass
class LockstepAgent:
    """One agent process: its :class:`Agent`, its addresses, its log."""

    name: str
    car_id: int
    swarm_addr: Address
    control_addr: Address
    agent: Agent
    log: RunLog | None
    incarnation: int = 0
    alive: bool = True
    started: float = 0.0
    timer: float | None = None
    """The agent's :meth:`~agents.agent.Agent.get_timer`, asked again after each call that
    can move it (the driver's, and the operations on the agent)."""

    @property
    def core(self) -> AgentCore:
        return self.agent.core

    @property
    def node(self) -> SwarmNode:
        return self.agent.node

    @property
    def epoch(self) -> int:
        return self.agent.epoch


def lockstep_epoch(seed: int, name: str, incarnation: int) -> int:
    """The epoch of an agent's ``incarnation``-th start: fixed by the seed, growing with each
    start as SWARM.md requires (a random base below 2**31, plus the incarnation)."""
    return random.Random(f"stigmesh-lockstep/{seed}/{name}").randrange(1, 2**31) + incarnation


@dataclass
class Lockstep:
    """One run; build it, then :meth:`run` for a duration (or :meth:`run_until`)."""

    arena: Arena
    seed: int
    run_dir: Path | None = None
    key: bytes = b"stigmesh-lockstep-key-0123456789"
    swarm: str = "lockstep"
    t0: float = 1000.0
    swarm_latency: float = 0.002
    car_latency: float = 0.002
    configure: Callable[[str], dict[str, Any]] = lambda name: {}
    config: Callable[[str], AgentConfig] | None = None  # wins over ``configure``
    names: Sequence[str] | None = None  # the cars that get an agent (default: all)
    limit: int = 1200
    oracle_looks: bool = False  # every agent's looks go straight to every other agent
    car_link: LinkFaults | None = None  # faults on every car's link, both ways, over car_latency
    agents: dict[str, LockstepAgent] = field(init=False, default_factory=dict)
    t: float = field(init=False)
    world: World = field(init=False)

    def __post_init__(self) -> None:
        self.t = self.t0
        self.world = World(self.arena, seed=self.seed, t0=self.t0)
        self._queue: EventQueue[tuple[str, Any, bytes, Any, int]] = EventQueue()
        self._car_link = (
            None if self.car_link is None or self.car_link == LinkFaults()
            else LinkModel(self.car_link, random.Random(
                f"stigmesh-lockstep-car-link/{self.seed}").randrange(2**31)))
        self._swarm_id = swarm_id_from_name(self.swarm)
        self._world_log = (
            RunLog(log_path(self.run_dir, "world"), "world", lambda: self.t)
            if self.run_dir is not None
            else None
        )
        if self._world_log is not None:
            a = self.arena
            self._world_log.log(
                "start", t=self.t0, arena=a.name, source=a.source, seed=self.world.seed,
                sensing=a.sensing.mode, cars=[c.__dict__ for c in a.cars], lockstep=True,
            )  # fmt: skip
        wanted = list(self.names) if self.names is not None else [c.name for c in self.arena.cars]
        self._slots = {spec.name: i for i, spec in enumerate(self.arena.cars)}
        for name in wanted:
            if name not in self._slots:
                raise ValueError(f"arena {self.arena.name} has no car {name!r}")
            self.agents[name] = self._make_agent(name, 0)
        self._by_control = {a.control_addr: a.name for a in self.agents.values()}
        self._by_swarm = {a.swarm_addr: a.name for a in self.agents.values()}

    # ------------------------------------------------------------------ agents

    def _config(self, name: str) -> AgentConfig:
        if self.config is not None:
            return self.config(name)
        return agent_config(self.arena, name, **self.configure(name))

    def _make_agent(self, name: str, incarnation: int) -> LockstepAgent:
        i = self._slots[name]
        spec = self.arena.cars[i]
        config = self._config(name)
        epoch = lockstep_epoch(self.seed, name, incarnation)
        log = (
            RunLog(log_path(self.run_dir, name), name, lambda: self.t)
            if self.run_dir is not None
            else None
        )
        swarm_addr = (f"127.0.1.{i + 1}", SWARM_PORT)
        if log is not None:
            log.log(
                "start", t=self.t, name=name, swarm=self.swarm, swarm_id=self._swarm_id,
                epoch=epoch, car=spec.address, iface="lockstep", address=swarm_addr[0],
                broadcast=None, port=SWARM_PORT, fusion=config.fusion,
                reputation=config.use_reputation,
                key_id=hashlib.sha256(self.key).hexdigest()[:12], lockstep=True,
            )  # fmt: skip
        n = len(self.arena.cars) + 1
        agent = Agent(
            config, key=self.key, swarm_id=self._swarm_id, epoch=epoch, t0=self.t,
            limit=self.limit, log=log.log if log is not None else _no_log, robot_id=spec.id,
            first_tick=self.t + 0.1 * (i + 1) / n,
        )  # fmt: skip
        agent.core.seeker.collect_looks = self.oracle_looks
        return LockstepAgent(
            name, spec.id, swarm_addr, (f"127.0.1.{i + 1}", CONTROL_PORT), agent, log,
            incarnation, True, self.t, agent.get_timer(),
        )  # fmt: skip

    def _live(self, name: str | None) -> LockstepAgent | None:
        agent = self.agents.get(name) if name is not None else None
        return agent if agent is not None and agent.alive else None

    # ------------------------------------------------------------------ faults

    def set_faults(self, name: str, spec: LinkFaults, direction: Direction) -> None:
        """What ``stigmesh faults NAME set ... --dir DIRECTION`` does to a live agent."""
        agent = self._require(name)
        agent.agent.set_faults(spec, direction, self.t)
        agent.timer = agent.agent.get_timer()

    def set_byzantine(self, name: str, spec: ByzantineSpec | None) -> None:
        """Make the agent lie (None: honest again), seeded by its epoch as the runtime does."""
        agent = self._require(name)
        agent.agent.set_byzantine(spec, self.t)
        agent.timer = agent.agent.get_timer()

    def kill(self, name: str) -> None:
        """The agent's process dies: nothing more in or out; the car's watchdog stops it."""
        agent = self._require(name)
        agent.alive = False
        if agent.log is not None:
            agent.log.close()

    def restart(self, name: str) -> None:
        """A new process for the agent: fresh core, node, session and faults; a new epoch."""
        old = self.agents.get(name)
        if old is None:
            raise ValueError(f"no agent {name!r}")
        if old.alive:
            raise ValueError(f"{name} is running")
        self.agents[name] = self._make_agent(name, old.incarnation + 1)

    def world_fault(self, kind: str, car: int | str, seconds: float) -> None:
        if kind == "drop_link":
            step = self.world.drop_link(car, seconds, self.t)
        elif kind == "freeze_camera":
            step = self.world.freeze_camera(car, seconds, self.t)
        elif kind == "reboot":
            step = self.world.reboot(car, self.t, seconds)
        else:
            raise ValueError(f"unknown world fault {kind!r}")
        self._world_output(step)

    def apply(self, op: TimedOp) -> None:
        """One scenario operation, now."""
        o = op.op
        if isinstance(o, SetLink):
            self.set_faults(o.agent, o.spec, o.direction)
        elif isinstance(o, SetByzantine):
            self.set_byzantine(o.agent, o.spec)
        elif isinstance(o, Kill):
            self.kill(o.agent)
        elif isinstance(o, Restart):
            self.restart(o.agent)
        elif isinstance(o, WorldFault):
            self.world_fault(o.kind, o.car, o.seconds)

    def _require(self, name: str) -> LockstepAgent:
        agent = self._live(name)
        if agent is None:
            raise ValueError(f"no running agent {name!r}")
        return agent

    # ------------------------------------------------------------------ plumbing

    def _push(self, at: float, target: str, who: Any, *, data: bytes, src: Any, port: int) -> None:
        self._queue.push(at, (target, who, data, src, port))

    def _push_car_link(self, target: str, who: Any, link: tuple[str | int, str | int], *,
                       data: bytes, src: Any, port: int) -> None:
        """A datagram on a car's link, ``link`` its ends (a car's id, an agent's name; from,
        to): ``car_latency`` later, through ``car_link``'s faults (lost, delayed, duplicated
        or corrupted as that spec says) when there are any. The faults' state is the
        link's, one per direction whatever the ports, as a radio's would be."""
        if self._car_link is None:
            self._push(self.t + self.car_latency, target, who, data=data, src=src, port=port)
            return
        for delay, copy in self._car_link.route(data, link[0], link[1], self.t):
            self._push(self.t + self.car_latency + delay, target, who, data=copy, src=src,
                       port=port)
        if self._world_log is not None:
            for ev in self._car_link.take_events():
                self._world_log.log("car_link_fault", **ev.as_record())

    def _world_output(self, step: Step) -> None:
        for send in step.sends:
            name = self._by_control.get(send.dst)
            agent = self._live(name)
            if agent is not None:
                car = self.world.cars[send.car]
                src = (car.spec.address, send.port)
                self._push_car_link(TO_CONTROLLER, agent, (car.id, agent.name), data=send.data,
                                    src=src, port=send.port)
        if self._world_log is not None:
            for ev in step.events:
                self._world_log.log(ev.event, t=ev.t, **ev.fields)

    def _service(self, agent: LockstepAgent) -> None:
        """Run what is due for ``agent`` now and put what it sends on the wire."""
        car = self.world.cars[agent.car_id]
        for out in agent.agent.service(self.t):
            if out.car:
                self._push_car_link(TO_CAR, car.id, (agent.name, car.id), data=out.data,
                                    src=agent.control_addr, port=out.port)
            else:
                self._fan_out(agent, out.data, out.to)
        if self.oracle_looks:
            self._hand_looks(agent)  # other agents' search maps: no deadline of theirs moves
        agent.timer = agent.agent.get_timer()

    def _hand_looks(self, sender: LockstepAgent) -> None:
        """The oracle: the sender's new looks, applied by every other live agent now."""
        seeker = sender.core.seeker
        looks, seeker.new_looks = seeker.new_looks, []
        for look in looks:
            for other in self.agents.values():
                if other is not sender and other.alive:
                    other.agent.log("oracle_look", t=self.t, sender=sender.name,
                                    look=[look.t, look.x, look.y, look.heading, look.range,
                                          look.fov])
                    other.core.on_oracle_look(sender.name, look, self.t)

    def _fan_out(self, sender: LockstepAgent, data: bytes, to: Address | None) -> None:
        """One datagram on the wire: to every other agent's socket, or to one address."""
        if to is None:
            names = [n for n in self.agents if n != sender.name]
        else:
            name = self._by_swarm.get(to)
            names = [name] if name is not None else []
        for name in names:
            self._push(self.t + self.swarm_latency, TO_AGENT, name, data=data,
                       src=sender.swarm_addr, port=SWARM_PORT)

    def _deliver(self, target: str, who: Any, data: bytes, src: Any, port: int) -> None:
        if target == TO_CAR:
            self._world_output(self.world.deliver(who, port, data, src, self.t))
            return
        receiver: LockstepAgent | None = self._live(who) if target == TO_AGENT else who
        if receiver is None or not receiver.alive or self.agents.get(receiver.name) is not receiver:
            return  # nobody listens, or the process that held it is gone
        if target == TO_AGENT:
            receiver.agent.receive_datagram(data, src, self.t)
        else:
            receiver.agent.receive_car(data, port, self.t)
        self._service(receiver)

    # ------------------------------------------------------------------ running

    def step(self) -> None:
        self.t = round(self.t + STEP, 6)
        self._world_output(self.world.advance_to(self.t))
        for target, who, data, src, port in self._queue.due(self.t):
            self._deliver(target, who, data, src, port)
        # An agent's deadline moves only when it is called, and every call ends in _service
        # (or an operation above) that asks for it again: no need to ask at every step.
        for agent in list(self.agents.values()):
            if agent.alive and agent.timer is not None and agent.timer <= self.t:
                self._service(agent)

    def run_until(self, t: float) -> None:
        """Step until the clock reads ``t`` (absolute)."""
        while self.t < t - 1e-9:
            self.step()

    def run(self, duration: float, progress: Callable[[float], None] | None = None) -> None:
        end = self.t + duration
        next_report = self.t
        while self.t < end - 1e-9:
            self.step()
            if progress is not None and self.t >= next_report:
                progress(self.t - self.t0)
                next_report += 1.0

    def close(self) -> None:
        """Close the logs and the world; OSError when a log could not be written whole."""
        logs = [a.log for a in self.agents.values() if a.log is not None]
        logs += [self._world_log] if self._world_log is not None else []
        for log in logs:
            log.close()
        self.world.close()
        failed = [log.error for log in logs if log.error is not None]
        if failed:
            raise OSError(f"a log was not written whole: {failed[0]}")

    # ------------------------------------------------------------------ views

    def target_error(self, name: str) -> float | None:
        """Distance from the agent's track (predicted to now) to the target, or None."""
        agent = self._live(name)
        state = self.world.target_state
        if agent is None or state is None or not agent.core.track.initialised:
            return None
        track = agent.core.track
        x = track.state
        dt = max(0.0, self.t - track.time)
        return math.hypot(x[0] + x[2] * dt - state.x, x[1] + x[3] * dt - state.y)


def _no_log(event: str, t: float | None = None, **fields: object) -> None:
    return None


Progress = Callable[[float, Lockstep], None]


def run_scenario(
    scenario: Scenario,
    run_dir: Path | None,
    *,
    progress: Progress | None = None,
    every: float = 1.0,
    on_op: Callable[[TimedOp, float], None] | None = None,
) -> list[dict[str, Any]]:
    """Run ``scenario`` in lockstep; returns each applied operation with its time.

    ``progress(elapsed, lockstep)`` is called every ``every`` simulated seconds,
    ``on_op(op, elapsed)`` after each scheduled operation.
    """
    ops = timeline(scenario)
    ls = Lockstep(
        scenario.arena, scenario.seed, run_dir, swarm=f"scenario-{scenario.name}",
        config=scenario.agent_config, names=scenario.names,
        oracle_looks=scenario.oracle_looks, car_link=scenario.car_link,
    )  # fmt: skip
    applied: list[dict[str, Any]] = []
    try:
        reports = _ticks(scenario.duration, every)
        marks = sorted({*(op.t for op in ops), *reports})
        pending = list(ops)
        for mark in marks:
            ls.run_until(ls.t0 + mark)
            while pending and pending[0].t <= mark:
                op = pending.pop(0)
                ls.apply(op)
                applied.append({"t": op.t, "at": ls.t - ls.t0, "line": op.line,
                                "text": op.op.describe()})
                if on_op is not None:
                    on_op(op, ls.t - ls.t0)
            if progress is not None and mark in reports:
                progress(mark, ls)
        ls.run_until(ls.t0 + scenario.duration)
    finally:
        ls.close()
    return applied


def _ticks(duration: float, every: float) -> set[float]:
    n = math.floor(duration / every + 1e-9)
    return {round(every * k, 9) for k in range(1, n + 1)}


__all__ = [
    "COMMAND_PORT",
    "Lockstep",
    "LockstepAgent",
    "lockstep_epoch",
    "run_scenario",
]
