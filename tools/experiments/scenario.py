"""Scenarios: an arena, its agents, a duration, a seed and a timed fault schedule.

A :class:`Scenario` is frozen; :mod:`tools.experiments.scenario_file` reads one
from a file (the format: ``tools/SCENARIO.md``). A scenario may hide the arena's
target (:class:`~tools.experiments.hiding.Hide`: it stands still at a place drawn from the
run's seed, out of every camera's view at the start; that module places it);
:func:`oracle` is a liar's scenario with the liar's datagrams dropped from its onset
instead of its lies; a :class:`Suite` is the scenes the evidence runs. :func:`timeline`
turns the
schedule into concrete, timed operations (:class:`SetLink`,
:class:`SetByzantine`, :class:`Kill`, :class:`Restart`, :class:`WorldFault`)
that both runners execute the same way: ``stigmesh run`` through the control
sockets of real processes, ``stigmesh run --lockstep`` on the objects of one
process. It keeps each agent's own faults apart from a swarm-wide partition and
composes them, so that setting one never erases the other, and it refuses a
schedule that acts on an agent that is not running.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.faults import ByzantineSpec, LinkFaults, format_byzantine, format_faults
from agents.transport import Direction
from protocol.tomlfile import FileError
from tools.experiments.arena_text import check_run_arena_text, run_arena_text
from tools.experiments.hiding import (
    Hide,
    hidden_arena,
)
from worlds.arena import Arena, Waypoints

if TYPE_CHECKING:
    from agents.config import AgentConfig

MAX_DURATION = 3600.0
FUSIONS = ("ci", "naive", "max_confidence", "none")  # AgentConfig.fusion; checked by a test
EVERY_AGENT = "*"
CLEAR = "clear"

ScenarioError = FileError  # the one error of the project's files


# ---------------------------------------------------------------- the model


class ActionKind(StrEnum):
    FAULTS = "faults"
    BYZANTINE = "byzantine"
    CLEAR = "clear"
    KILL = "kill"
    RESTART = "restart"
    WORLD = "world"
    PARTITION = "partition"


@dataclass(frozen=True)
class AgentSetup:
    """One agent of the scenario and its settings (``sets``: dotted AgentConfig keys)."""

    name: str
    fusion: str = "ci"
    use_reputation: bool = True
    sets: tuple[tuple[str, str], ...] = ()
    line: int = 0


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


@dataclass(frozen=True)
class Scenario:
    name: str
    source: str  # the file, for errors
    text: str  # the file as read, copied into the run directory
    arena: Arena  # as run: with the hidden target's place when ``hide`` is set
    arena_ref: str  # as written: a shipped name or a path
    duration: float
    seed: int
    agents: tuple[AgentSetup, ...]
    schedule: tuple[Action, ...] = ()
    hide: Hide | None = None
    arena_file: str = ""  # the arena's own file (``arena.source`` may be a run's copy)
    car_model_sets: tuple[tuple[str, bool | float], ...] = ()  # over the file's [car_model]
    oracle_looks: bool = False  # lockstep only: see with_oracle_looks()
    car_link: LinkFaults | None = None  # lockstep only: faults on every car's link, both ways

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.agents)

    def setup(self, name: str) -> AgentSetup:
        for a in self.agents:
            if a.name == name:
                return a
        raise KeyError(f"no agent {name!r} in scenario {self.name}")

    def agent_config(self, name: str) -> AgentConfig:
        """The agent's :class:`~agents.config.AgentConfig` (arena map plus its settings)."""
        from tools.agent_config import agent_config
        from tools.replay.overrides import apply_overrides

        a = self.setup(name)
        config = agent_config(self.arena, name, fusion=a.fusion, use_reputation=a.use_reputation)
        return apply_overrides(config, dict(a.sets)) if a.sets else config

    def with_seed(self, seed: int) -> Scenario:
        """The scenario with another seed (and, for a hidden target, that seed's place)."""
        out = replace(self, seed=check_seed(seed))
        if out.hide is None:
            return out
        return replace(out, arena=hidden_arena(out.arena, out.hide, out.seed))

    @property
    def target_place(self) -> tuple[float, float] | None:
        """Where the hidden target stands (None: the arena's own motion)."""
        target = self.arena.target
        if self.hide is None or target is None or not isinstance(target.motion, Waypoints):
            return None
        return target.motion.points[0]

    def arena_text(self) -> str | None:
        """The arena file the run is played in (:mod:`tools.experiments.arena_text`: a hidden
        target's place, the car constants of :meth:`with_car_model`); None when the arena's
        own file is it."""
        return run_arena_text(self.arena_file or self.arena.source, self.target_place,
                              dict(self.car_model_sets), source=self.source,
                              line=self.hide.line if self.hide is not None else 0)

    def check_arena_text(self) -> None:
        """The run's arena file reads back to the same target and car constants
        (ScenarioError if not)."""
        text = self.arena_text()
        if text is not None:
            check_run_arena_text(text, self.arena_file or self.arena.source, self.arena,
                                 hidden=self.target_place is not None,
                                 sets_car_model=bool(self.car_model_sets), source=self.source,
                                 line=self.hide.line if self.hide is not None else 0)

    def with_car_model(self, **changes: bool | float) -> Scenario:
        """Every car of the arena with these car constants (:class:`~worlds.arena.CarModel`
        fields, e.g. ``gyro=False``: what ``stigmesh sweep --over gyro=0`` sets); a run
        directory's ``arena.toml`` says them too (:meth:`materialise`). Raises ScenarioError
        for a constant the arena's file cannot be given (TypeError for an unknown field)."""
        given: dict[str, Any] = dict(changes)  # each field's own type: the file checks it
        model = replace(self.arena.car_model, **given)
        sets = {**dict(self.car_model_sets), **changes}
        out = replace(self, arena=replace(self.arena, car_model=model),
                      car_model_sets=tuple(sorted(sets.items())))
        out.check_arena_text()
        return out

    def materialise(self, run_dir: Path) -> Scenario:
        """The scenario as a run directory holds it: a hidden target's arena, or an arena
        whose car constants the scenario sets, written to ``RUN_DIR/arena.toml`` (the world
        process and the replay read that file)."""
        text = self.arena_text()
        if text is None:
            return self
        path = run_dir / "arena.toml"
        path.write_text(text, encoding="utf-8")
        return replace(self, arena=replace(self.arena, source=str(path)))

    def with_fusion(self, fusion: str) -> Scenario:
        """Every agent with the fusion rule ``fusion``."""
        if fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, got {fusion!r}")
        return replace(self, agents=tuple(replace(a, fusion=fusion) for a in self.agents))

    def with_oracle_looks(self) -> Scenario:
        """The search's oracle (lockstep only): no LOOK is sent or applied (``search.share``
        off for every agent); instead every robot's look is handed at once to every other
        robot's search map, so the swarm searches as if each knew every view (what perfect
        sharing could give; :class:`~tools.experiments.lockstep.Lockstep` ``oracle_looks``)."""
        agents = tuple(replace(a, sets=(*a.sets, ("search.share", "false")))
                       for a in self.agents)
        return replace(self, agents=agents, oracle_looks=True)

    def with_reputation(self, on: bool) -> Scenario:
        return replace(self, agents=tuple(replace(a, use_reputation=on) for a in self.agents))

    def with_actions(self, actions: Iterable[Action]) -> Scenario:
        """The scenario with ``actions`` added (validated again: raises ScenarioError)."""
        out = replace(self, schedule=(*self.schedule, *actions))
        timeline(out)
        return out


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


def timeline(scenario: Scenario) -> list[TimedOp]:
    """The schedule as ordered operations; raises :class:`ScenarioError` (with the line)
    for an action on an agent that is not running at that time."""
    events: list[_Event] = []
    for i, action in enumerate(scenario.schedule):
        events.append(_Event(action.at, 2 * i, action, False))
        if action.duration is not None:
            events.append(_Event(action.at + action.duration, 2 * i + 1, action, True))
    events.sort(key=lambda e: (e.t, e.order))
    state = {name: _AgentState() for name in scenario.names}
    partition: tuple[tuple[str, ...], ...] = ()
    ops: list[TimedOp] = []

    def fail(action: Action, reason: str) -> ScenarioError:
        return ScenarioError(scenario.source, action.line, reason)

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


def check_seed(seed: int) -> int:
    """``seed`` if it is a seed (an integer in [0, 2^32)); ValueError otherwise."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(f"seed must be an integer in [0, 2^32), got {seed!r}")
    return seed


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


def mapping_of(scenario: Scenario) -> Mapping[str, Any]:
    """The effective settings of a scenario (after --seed, sweep overrides)."""
    place = scenario.target_place
    return {
        "name": scenario.name,
        "source": scenario.source,
        "arena": scenario.arena_ref,
        "arena_source": scenario.arena.source,
        "duration": scenario.duration,
        "seed": scenario.seed,
        **({"hidden_target": list(place)} if place is not None else {}),
        **({"car_model": dict(scenario.car_model_sets)} if scenario.car_model_sets else {}),
        "agents": [
            {"name": a.name, "fusion": a.fusion, "use_reputation": a.use_reputation,
             "set": dict(a.sets)}
            for a in scenario.agents
        ],
    }


# ---------------------------------------------------------------- liars and their oracle


def liar_of(scenario: Scenario) -> tuple[str, float] | None:
    """The scenario's liar and its onset: the first Byzantine action (one named agent)."""
    for a in scenario.schedule:
        if a.kind is ActionKind.BYZANTINE and len(a.agents) == 1 and a.agents[0] != EVERY_AGENT:
            return a.agents[0], a.at
    return None


def oracle(scenario: Scenario) -> Scenario:
    """The oracle baseline of a liar's scenario: instead of lying, each Byzantine agent is
    cut off by a partition at the same time (for the same duration), so the others drop
    its datagrams from its onset on; everything else the same."""
    actions = []
    for a in scenario.schedule:
        if a.kind is not ActionKind.BYZANTINE:
            actions.append(a)
            continue
        if EVERY_AGENT in a.agents:
            raise ScenarioError(scenario.source, a.line, 'an oracle cuts off named liars, not "*"')
        others = tuple(n for n in scenario.names if n not in a.agents)
        actions.append(replace(a, kind=ActionKind.PARTITION, agents=(), byzantine=None,
                               partition=(tuple(a.agents), others)))
    out = replace(scenario, name=f"{scenario.name[:25]}-oracle", schedule=tuple(actions))
    timeline(out)
    return out


# ---------------------------------------------------------------- the suite


SCENE_KINDS = ("fault_free", "loss", "partition", "liar_among", "liar_only", "search")


@dataclass(frozen=True)
class Scene:
    """One scene of the suite: a scenario file, what it tests and how the evidence runs it.

    ``kind`` says which targets apply (fault_free: accuracy and hold; loss: against
    ``reference``, the loss-free scene of the same seeds; liar_among and liar_only: the
    liar's; search: the hidden target's); ``seeds``: seeds 1..seeds; ``naive``: also run
    with naive fusion; ``speed``: the speed-at-detection target applies; ``real``: one
    real-process run checks the lockstep runs."""

    name: str
    file: Path
    kind: str
    tests: str
    seeds: int
    naive: bool = False
    speed: bool = False
    reference: str | None = None
    real: bool = True
    line: int = 0


@dataclass(frozen=True)
class Suite:
    source: str
    seeds: int
    scenes: tuple[Scene, ...]

    def scene(self, name: str) -> Scene:
        for s in self.scenes:
            if s.name == name:
                return s
        raise KeyError(f"no scene {name!r} in the suite")
