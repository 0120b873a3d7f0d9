"""The runtime's driver and the lockstep driver send the same bytes for the same inputs.

A lockstep run records every input its driver hands one agent (swarm datagrams,
car datagrams, timer wake-ups, with their times) and every datagram the agent
gives back. The same inputs, at the same times, then go through the runtime's
own handlers (``on_swarm_datagram``, ``on_car_datagram``, its timer) with its
sockets replaced by recorders; both must send the same datagrams, bit for bit,
to the same places, and end with the same belief.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.agent import Agent, Outgoing
from agents.drivers.net import Interface
from agents.drivers.runtime import AgentRuntime, RuntimeOptions
from tools.experiments.lockstep import SWARM_PORT, Lockstep
from worlds.arena import load_arena, shipped_arena


@dataclass
class Recorded:
    inputs: list[tuple[str, float, Any]] = field(default_factory=list)  # kind, t, args
    sent: list[tuple[float, bytes, Any]] = field(default_factory=list)  # t, data, where


def _where(out: Outgoing) -> Any:
    return ("car", out.port) if out.car else out.to


def tap(agent: Agent, rec: Recorded) -> None:
    """Record what the lockstep driver hands ``agent`` and what it gives back."""
    receive_datagram, receive_car, service = (
        agent.receive_datagram, agent.receive_car, agent.service)
    serviced = [True]  # the newest input has had its service call

    def on_datagram(data: bytes, src: tuple[str, int], now: float) -> None:
        rec.inputs.append(("swarm", now, (data, src)))
        serviced[0] = False
        receive_datagram(data, src, now)

    def on_car(data: bytes, port: int, now: float) -> None:
        rec.inputs.append(("car", now, (data, port)))
        serviced[0] = False
        receive_car(data, port, now)

    def on_service(now: float) -> list[Outgoing]:
        if serviced[0]:  # a wake-up of the agent's timer, not the service after an input
            rec.inputs.append(("timer", now, None))
        serviced[0] = True
        out = service(now)
        rec.sent += [(now, o.data, _where(o)) for o in out]
        return out

    agent.receive_datagram = on_datagram  # type: ignore[method-assign]
    agent.receive_car = on_car  # type: ignore[method-assign]
    agent.service = on_service  # type: ignore[method-assign]


class _Recorder:
    """Stands in for a socket's transport: what the runtime sends, and when."""

    def __init__(self, sent: list[tuple[float, bytes, Any]], clock: list[float],
                 car: bool) -> None:
        self.sent, self.clock, self.car = sent, clock, car

    def sendto(self, data: bytes, dest: tuple[str, int]) -> None:
        self.sent.append((self.clock[0], data, ("car", dest[1]) if self.car else dest))

    def is_closing(self) -> bool:
        return False


def test_lockstep_and_runtime_drivers_send_the_same_bytes(tmp_path: Path) -> None:
    arena = load_arena(shipped_arena("two_cars"))
    ls = Lockstep(arena, seed=3)
    walnut = ls.agents["walnut"]
    rec = Recorded()
    agent = walnut.agent
    fresh = Agent(  # what the runtime will drive: the same agent, made the same way
        agent.core.config, key=ls.key, swarm_id=agent.node.receiver.swarm_id, epoch=agent.epoch,
        t0=ls.t0, limit=ls.limit, robot_id=walnut.car_id, first_tick=agent.next_tick,
    )
    tap(agent, rec)
    try:
        ls.run(6.0)
        lockstep_digest = agent.core.belief_digest()
    finally:
        ls.close()
    print(f"{len(rec.inputs)} inputs, {len(rec.sent)} datagrams out")
    assert len(rec.inputs) > 300 and len(rec.sent) > 100  # 6 s of a working agent

    car = arena.car("walnut").address
    runtime = AgentRuntime(RuntimeOptions(
        config=agent.core.config, car=car,
        iface=Interface("lockstep", walnut.swarm_addr[0], "lockstep-broadcast"), key=ls.key,
        swarm=ls.swarm, run_dir=tmp_path, swarm_port=SWARM_PORT, epoch=agent.epoch,
    ))
    runtime.agent, runtime.core, runtime.node = fresh, fresh.core, fresh.node
    clock = [ls.t0]
    sent: list[tuple[float, bytes, Any]] = []
    runtime.now = lambda: clock[0]  # type: ignore[method-assign]
    runtime._tx = _Recorder(sent, clock, car=False)  # type: ignore[assignment]
    runtime._car = _Recorder(sent, clock, car=True)  # type: ignore[assignment]
    for kind, t, args in rec.inputs:
        clock[0] = t
        if kind == "swarm":
            runtime.on_swarm_datagram(*args)
        elif kind == "car":
            data, port = args
            runtime.on_car_datagram(data, (car, port))
        else:
            runtime._on_timer()
    runtime.log.close()
    assert runtime.fatal is None
    broadcast = ("lockstep-broadcast", SWARM_PORT)
    expected = [(t, d, broadcast if w is None else w) for t, d, w in rec.sent]
    assert len(sent) == len(expected)
    assert sent == expected  # every datagram, byte for byte, to the same place, at the same time
    assert fresh.core.belief_digest() == lockstep_digest
