"""A scenario's schedule: its actions, and the timed operations both runners execute.

An :class:`Action` is one ``[[schedule]]`` entry of a scenario file (tools/SCENARIO.md).
:func:`timeline` turns a :class:`~tools.experiments.scenario.Scenario`'s schedule into
concrete, timed operations (:class:`SetLink`, :class:`SetByzantine`, :class:`Kill`,
:class:`Restart`, :class:`WorldFault`) that ``stigmesh run`` executes through the control
sockets of real processes and ``stigmesh run --lockstep`` on the objects of one process,
the same way. It keeps each agent's own faults apart from a swarm-wide partition and
composes them, so that setting one never erases the other, and it refuses a schedule that
acts on an agent that is not running. :func:`describe` writes the operations for
``schedule.json``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Protocol

from agents.faults import ByzantineSpec, LinkFaults, format_byzantine, format_faults
from agents.transport import Direction
from protocol.tomlfile import FileError

EVERY_AGENT = "*"
CLEAR = "clear"


# ---------------------------------------------------------------- the schedule's actions


class ActionKind(StrEnum):
    FAULTS = "faults"
    BYZANTINE = "byzantine"
    CLEAR = "clear"
    KILL = "kill"
    RESTART = "restart"
    WORLD = "world"
    PARTITION = "partition"


@dataclass(frozen=True)
class WorldAction:
    """A car-side fault in the world: ``kind`` in drop_link, reboot, freeze_camera."""

    kind: str
    car: int | str
    seconds: float  # the link or camera outage, or the reboot's time down


@dataclass(frozen=True)
class Action:
    """One ``[[schedule]]`` entry. ``agents`` is empty for world and partition actions,
    ``("*",)`` for every running agent."""

    at: float
    kind: ActionKind
    agents: tuple[str, ...] = ()
    faults: LinkFaults | None = None
    direction: Direction = Direction.BOTH
    byzantine: ByzantineSpec | None = None
    partition: tuple[tuple[str, ...], ...] = ()  # () heals
    world: WorldAction | None = None
    duration: float | None = None  # undo after this long (restart after a kill)
    line: int = 0


class Scheduled(Protocol):
    """What :func:`timeline` reads of a scenario."""

    @property
    def names(self) -> tuple[str, ...]: ...

    @property
    def schedule(self) -> tuple[Action, ...]: ...

    @property
    def source(self) -> str: ...


# ---------------------------------------------------------------- operations


@dataclass(frozen=True)
class SetLink:
    """Set one direction (or both) of an agent's transport faults to ``spec``."""

    agent: str
    direction: Direction
    spec: LinkFaults

    def describe(self) -> str:
        return f"{self.agent}: faults {self.direction.value} {format_faults(self.spec)}"


@dataclass(frozen=True)
class SetByzantine:
    """Make an agent lie (``spec``), or honest again (None)."""

    agent: str
    spec: ByzantineSpec | None

    def describe(self) -> str:
        text = CLEAR if self.spec is None else format_byzantine(self.spec)
        return f"{self.agent}: byzantine {text}"


@dataclass(frozen=True)
class Kill:
    """The agent's process dies at once (no BYE); its car stops on its own watchdog."""

    agent: str

    def describe(self) -> str:
        return f"{self.agent}: kill"


@dataclass(frozen=True)
class Restart:
    """A fresh agent process (new epoch) for the same robot; its own faults start clear."""

    agent: str

    def describe(self) -> str:
        return f"{self.agent}: restart"


@dataclass(frozen=True)
class WorldFault:
    kind: str
    car: int | str
    seconds: float

    def describe(self) -> str:
        return f"world: {self.kind} car {self.car} {self.seconds:g} s"


Op = SetLink | SetByzantine | Kill | Restart | WorldFault


@dataclass(frozen=True)
class TimedOp:
    """``op`` at ``t`` seconds after the start; ``line`` of the schedule entry behind it."""

    t: float
    op: Op
    line: int
    why: str = ""


@dataclass
class _AgentState:
    alive: bool = True
    inn: LinkFaults = field(default_factory=LinkFaults)
    out: LinkFaults = field(default_factory=LinkFaults)
    byzantine: ByzantineSpec | None = None
    killed_at: float | None = None


@dataclass(frozen=True)
class _Event:
    t: float
    order: int
    action: Action
    end: bool  # the undo of a timed action (or the restart after a timed kill)


def _compose(own: LinkFaults, partition: tuple[tuple[str, ...], ...]) -> LinkFaults:
    return replace(own, partition=partition) if partition else own


def timeline(scenario: Scheduled) -> list[TimedOp]:
    """The schedule as ordered operations; raises :class:`~protocol.tomlfile.FileError`
    (with the line) for an action on an agent that is not running at that time."""
    events: list[_Event] = []
    for i, action in enumerate(scenario.schedule):
        events.append(_Event(action.at, 2 * i, action, False))
        if action.duration is not None:
            events.append(_Event(action.at + action.duration, 2 * i + 1, action, True))
    events.sort(key=lambda e: (e.t, e.order))
    state = {name: _AgentState() for name in scenario.names}
    partition: tuple[tuple[str, ...], ...] = ()
    ops: list[TimedOp] = []

    def fail(action: Action, reason: str) -> FileError:
        return FileError(scenario.source, action.line, reason)

    def emit(t: float, op: Op, action: Action, why: str) -> None:
        ops.append(TimedOp(t, op, action.line, why))

    def links(t: float, name: str, direction: Direction, action: Action, why: str) -> None:
        s = state[name]
        inn, out = _compose(s.inn, partition), s.out
        if direction is Direction.BOTH and inn == out:
            emit(t, SetLink(name, Direction.BOTH, inn), action, why)
            return
        if direction in (Direction.IN, Direction.BOTH):
            emit(t, SetLink(name, Direction.IN, inn), action, why)
        if direction in (Direction.OUT, Direction.BOTH):
            emit(t, SetLink(name, Direction.OUT, out), action, why)

    def targets(ev: _Event) -> list[str]:
        action = ev.action
        if action.agents == (EVERY_AGENT,):
            return [n for n in scenario.names if state[n].alive]
        names = list(action.agents)
        for name in names:
            s = state[name]
            wants_dead = action.kind is ActionKind.RESTART or (
                action.kind is ActionKind.KILL and ev.end
            )
            if wants_dead and s.alive:
                raise fail(action, f"{name} is running at {ev.t:g} s: nothing to restart")
            if not wants_dead and not s.alive:
                raise fail(
                    action,
                    f"{name} is not running at {ev.t:g} s (killed at {s.killed_at:g} s)",
                )
        return names

    for ev in events:
        a, t = ev.action, ev.t
        why = f"end of line {a.line}" if ev.end else f"line {a.line}"
        if a.kind is ActionKind.FAULTS:
            spec = LinkFaults() if ev.end else a.faults
            assert spec is not None
            for name in targets(ev):
                s = state[name]
                if a.direction in (Direction.IN, Direction.BOTH):
                    s.inn = spec
                if a.direction in (Direction.OUT, Direction.BOTH):
                    s.out = spec
                links(t, name, a.direction, a, why)
        elif a.kind is ActionKind.BYZANTINE:
            byz = None if ev.end else a.byzantine
            for name in targets(ev):
                state[name].byzantine = byz
                emit(t, SetByzantine(name, byz), a, why)
        elif a.kind is ActionKind.CLEAR:
            for name in targets(ev):
                s = state[name]
                s.inn, s.out, s.byzantine = LinkFaults(), LinkFaults(), None
                links(t, name, Direction.BOTH, a, why)
                emit(t, SetByzantine(name, None), a, why)
        elif a.kind is ActionKind.KILL and not ev.end:
            for name in targets(ev):
                state[name] = _AgentState(alive=False, killed_at=t)
                emit(t, Kill(name), a, why)
        elif a.kind in (ActionKind.KILL, ActionKind.RESTART):
            for name in targets(ev):
                state[name] = _AgentState()
                emit(t, Restart(name), a, why)
                if partition:
                    links(t, name, Direction.IN, a, f"{why}: the partition holds")
        elif a.kind is ActionKind.WORLD:
            assert a.world is not None
            emit(t, WorldFault(a.world.kind, a.world.car, a.world.seconds), a, why)
        elif a.kind is ActionKind.PARTITION:
            partition = () if ev.end else a.partition
            for name in scenario.names:
                if state[name].alive:
                    links(t, name, Direction.IN, a, why)
    return ops


def every_agent_faults(at: float, spec: LinkFaults, direction: Direction) -> Action:
    """A faults action on every running agent (what ``stigmesh sweep`` adds at t = 0)."""
    return Action(at, ActionKind.FAULTS, (EVERY_AGENT,), faults=spec, direction=direction)


def describe(ops: Iterable[TimedOp]) -> list[dict[str, Any]]:
    """The timeline as JSON-friendly records (for ``schedule.json`` in the run directory)."""
    out = []
    for op in ops:
        record: dict[str, Any] = {"t": op.t, "line": op.line, "why": op.why,
                                  "op": type(op.op).__name__, "text": op.op.describe()}
        out.append(record)
    return out


__all__ = ["CLEAR", "EVERY_AGENT", "Action", "ActionKind", "Kill", "Op", "Restart",
           "Scheduled", "SetByzantine", "SetLink", "TimedOp", "WorldAction", "WorldFault",
           "describe", "every_agent_faults", "timeline"]
