"""Lockstep: the world and every agent in one process, in virtual time.

The same :class:`~worlds.sim.World`, the same :class:`~agents.core.AgentCore`
inside the same :class:`~agents.node.SwarmNode`, the same controller session
and car adapter as the real processes; only the sockets are replaced by an
in-memory network, and time advances by itself in 1 ms steps. Deterministic
for a given seed, and far faster than real time.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.carlink.adapter import CarAdapter
from agents.core import AgentConfig, AgentCore
from agents.node import SwarmNode
from protocol.mz01.session import COMMAND_PORT, ControllerSession, SessionConfig
from protocol.runlog import RunLog, log_path
from protocol.swarm import swarm_id_from_name
from tools.agent_config import agent_config
from worlds.arena import Arena
from worlds.sim import World

Address = tuple[str, int]
SWARM_PORT = 47000
STEP = 0.001

# Delivery targets in the event queue.
TO_CAR, TO_CONTROLLER, TO_AGENT = "car", "controller", "agent"


@dataclass
class LockstepAgent:
    name: str
    car_id: int
    swarm_addr: Address
    control_addr: Address
    core: AgentCore
    node: SwarmNode
    session: ControllerSession
    adapter: CarAdapter
    log: RunLog | None
    next_tick: float


@dataclass
class Lockstep:
    """One run; build it, then :meth:`run` for a duration."""

    arena: Arena
    seed: int
    run_dir: Path | None = None
    key: bytes = b"stigmesh-lockstep-key-0123456789"
    swarm: str = "lockstep"
    t0: float = 1000.0
    swarm_latency: float = 0.002
    car_latency: float = 0.002
    configure: Callable[[str], dict[str, Any]] = lambda name: {}
    agents: dict[str, LockstepAgent] = field(init=False, default_factory=dict)
    t: float = field(init=False)
    world: World = field(init=False)

    def __post_init__(self) -> None:
        self.t = self.t0
        self.world = World(self.arena, seed=self.seed, t0=self.t0)
        self._queue: list[tuple[float, int, str, Any, bytes, Address, int]] = []
        self._order = itertools.count()
        self._world_log = (
            RunLog(log_path(self.run_dir, "world"), "world", lambda: self.t)
            if self.run_dir is not None
            else None
        )
        swarm_id = swarm_id_from_name(self.swarm)
        for i, spec in enumerate(self.arena.cars):
            config: AgentConfig = agent_config(self.arena, spec.name, **self.configure(spec.name))
            log = (
                RunLog(log_path(self.run_dir, spec.name), spec.name, lambda: self.t)
                if self.run_dir is not None
                else None
            )
            core = AgentCore(config, self.t0)
            node = SwarmNode(
                core,
                self.key,
                swarm_id,
                epoch=1000 + i,
                log=log.log if log is not None else _no_log,
            )
            session = ControllerSession(SessionConfig(robot_id=spec.id))
            self.agents[spec.name] = LockstepAgent(
                spec.name,
                spec.id,
                (f"127.0.1.{i + 1}", SWARM_PORT),
                (f"127.0.1.{i + 1}", 50000),
                core,
                node,
                session,
                CarAdapter(session),
                log,
                self.t0 + 0.1 * (i + 1) / (len(self.arena.cars) + 1),
            )
        self._by_control = {a.control_addr: a for a in self.agents.values()}
        self._by_swarm = {a.swarm_addr: a for a in self.agents.values()}

    # ------------------------------------------------------------------ plumbing

    def _push(
        self, at: float, target: str, who: Any, *, data: bytes, src: Address, port: int
    ) -> None:
        heapq.heappush(self._queue, (at, next(self._order), target, who, data, src, port))

    def _world_output(self, step: Any) -> None:
        for send in step.sends:
            agent = self._by_control.get(send.dst)
            if agent is not None:
                car = self.world.cars[send.car]
                src = (car.spec.address, send.port)
                self._push(
                    self.t + self.car_latency, TO_CONTROLLER, agent,
                    data=send.data, src=src, port=send.port,
                )
        if self._world_log is not None:
            for ev in step.events:
                self._world_log.log(ev.event, t=ev.t, **ev.fields)

    def _flush_agent(self, agent: LockstepAgent) -> None:
        car = self.world.cars[agent.car_id]
        for tx in agent.session.datagrams_to_send():
            self._push(
                self.t + self.car_latency, TO_CAR, car.id,
                data=tx.data, src=agent.control_addr, port=tx.port,
            )
        for dg in agent.node.datagrams():
            targets = (
                [a for a in self.agents.values() if a is not agent]
                if dg.to is None
                else [a for a in (self._by_swarm.get(dg.to),) if a is not None]
            )
            for other in targets:
                self._push(
                    self.t + self.swarm_latency, TO_AGENT, other,
                    data=dg.data, src=agent.swarm_addr, port=SWARM_PORT,
                )

    def _deliver(self, target: str, who: Any, data: bytes, src: Address, port: int) -> None:
        if target == TO_CAR:
            self._world_output(self.world.deliver(who, port, data, src, self.t))
        elif target == TO_CONTROLLER:
            agent: LockstepAgent = who
            update = agent.adapter.receive_datagram(data, port, self.t)
            if update is not None:
                agent.node.car_status(self.t, update.duty, update.gyro_z)
                if update.batch is not None:
                    agent.node.observations(update.batch, self.t)
            self._flush_agent(agent)
        else:
            agent = who
            agent.node.receive_datagram(data, src, self.t)
            self._flush_agent(agent)

    # ------------------------------------------------------------------ running

    def step(self) -> None:
        self.t = round(self.t + STEP, 6)
        self._world_output(self.world.advance_to(self.t))
        while self._queue and self._queue[0][0] <= self.t:
            _, _, target, who, data, src, port = heapq.heappop(self._queue)
            self._deliver(target, who, data, src, port)
        for agent in self.agents.values():
            timer = agent.session.get_timer()
            if timer is not None and timer <= self.t:
                agent.session.handle_timer(self.t)
            if self.t >= agent.next_tick:
                agent.next_tick += 1.0 / agent.core.config.rates.tick
                decision = agent.node.tick(self.t)
                if decision is not None:
                    agent.adapter.set_decision(decision.duty_left, decision.duty_right, self.t)
            self._flush_agent(agent)

    def run(self, duration: float, progress: Callable[[float], None] | None = None) -> None:
        end = self.t + duration
        next_report = self.t
        while self.t < end - 1e-9:
            self.step()
            if progress is not None and self.t >= next_report:
                progress(self.t - self.t0)
                next_report += 1.0

    def close(self) -> None:
        for agent in self.agents.values():
            if agent.log is not None:
                agent.log.close()
        if self._world_log is not None:
            self._world_log.close()
        self.world.close()


def _no_log(event: str, t: float | None = None, **fields: object) -> None:
    return None


__all__ = ["COMMAND_PORT", "Lockstep", "LockstepAgent"]
