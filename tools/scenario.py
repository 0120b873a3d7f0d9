"""Scenario files: an arena, its agents, a duration, a seed and a timed fault schedule (TOML).

:func:`load_scenario` reads and validates a file into a frozen :class:`Scenario`
through the project's one TOML reader (:class:`protocol.tomlfile.Table`);
every problem is a :class:`~protocol.tomlfile.FileError` naming the file, the
line and the reason. The format is documented in ``tools/SCENARIO.md``.

:func:`timeline` turns the schedule into concrete, timed operations
(:class:`SetLink`, :class:`SetByzantine`, :class:`Kill`, :class:`Restart`,
:class:`WorldFault`) that both runners execute the same way: ``stigmesh run``
through the control sockets of real processes, ``stigmesh run --lockstep``
on the objects of one process. It keeps each agent's own faults apart from a
swarm-wide partition and composes them, so that setting one never erases the
other, and it refuses a schedule that acts on an agent that is not running.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.faults import (
    ByzantineSpec,
    FaultSpecError,
    LinkFaults,
    format_byzantine,
    format_faults,
    parse_byzantine,
    parse_faults,
)
from agents.transport import Direction
from protocol.tomlfile import FileError, PathKey, Table, parse
from worlds.arena import ARENA_DIR, Arena, ArenaError, load_arena

if TYPE_CHECKING:
    from agents.core import AgentConfig

MAX_DURATION = 3600.0
FUSIONS = ("ci", "naive", "max_confidence", "none")  # AgentConfig.fusion; checked by a test
TOP_KEYS = ("name", "arena", "duration", "seed", "fusion", "use_reputation", "agents", "schedule")
AGENT_KEYS = ("name", "fusion", "use_reputation", "set")
ACTIONS = ("faults", "byzantine", "clear", "kill", "restart", "world", "partition")
WORLD_FAULTS = {"drop_link": "duration", "reboot": "down", "freeze_camera": "duration"}
EVERY_AGENT = "*"
CLEAR = "clear"
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")


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
    arena: Arena
    arena_ref: str  # as written: a shipped name or a path
    duration: float
    seed: int
    agents: tuple[AgentSetup, ...]
    schedule: tuple[Action, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.agents)

    def setup(self, name: str) -> AgentSetup:
        for a in self.agents:
            if a.name == name:
                return a
        raise KeyError(f"no agent {name!r} in scenario {self.name}")

    def agent_config(self, name: str) -> AgentConfig:
        """The agent's :class:`~agents.core.AgentConfig` (arena map plus its settings)."""
        from tools.agent_config import agent_config
        from tools.replay.rerun import apply_overrides

        a = self.setup(name)
        config = agent_config(self.arena, name, fusion=a.fusion, use_reputation=a.use_reputation)
        return apply_overrides(config, dict(a.sets)) if a.sets else config

    def with_seed(self, seed: int) -> Scenario:
        return replace(self, seed=_check_seed(seed))

    def with_fusion(self, fusion: str) -> Scenario:
        """Every agent with the fusion rule ``fusion``."""
        if fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, got {fusion!r}")
        return replace(self, agents=tuple(replace(a, fusion=fusion) for a in self.agents))

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


# ---------------------------------------------------------------- reading


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(f"seed must be an integer in [0, 2^32), got {seed!r}")
    return seed


def _arena_path(ref: str, base: Path) -> Path | None:
    candidates = [base / ref, Path(ref)]
    if "/" not in ref and not ref.endswith(".toml"):
        candidates.insert(0, ARENA_DIR / f"{ref}.toml")
    found = next((p for p in candidates if p.is_file()), None)
    return found.resolve() if found is not None else None


def _fusion(r: Table, default: str) -> str:
    fusion = r.string("fusion", default)
    if fusion not in FUSIONS:
        raise r.fail("fusion", f"{fusion!r} is not one of {', '.join(FUSIONS)}")
    return fusion


def _setting_text(value: object) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    return None


def _agents(
    top: Table, arena: Arena, fusion: str, reputation: bool
) -> tuple[AgentSetup, ...]:
    raw = top.raw("agents")
    cars = [c.name for c in arena.cars]
    listed = top.source.line(("agents",))
    if raw is None:
        return tuple(AgentSetup(n, fusion, reputation, (), listed) for n in cars)
    if not isinstance(raw, list) or not raw:
        raise top.fail("agents", "must be a non-empty list of names or [[agents]] tables")
    out: list[AgentSetup] = []
    for i, item in enumerate(raw):
        path: PathKey = ("agents", i)
        if isinstance(item, str):
            setup = AgentSetup(item, fusion, reputation, (), listed)
            where: PathKey = ("agents",)
        else:
            r = Table(top.source, path, item)
            r.only(AGENT_KEYS)
            sets: list[tuple[str, str]] = []
            table = r.raw("set") or {}
            if not isinstance(table, dict):
                raise r.fail("set", 'must be a table of dotted settings, e.g. "grid.q_drift" = 0.1')
            for key, value in table.items():
                text = _setting_text(value)
                if text is None:
                    raise r.fail("set", f"{key}: a setting is a number, string or boolean")
                sets.append((str(key), text))
            setup = AgentSetup(
                r.string("name"), _fusion(r, fusion), r.boolean("use_reputation", reputation),
                tuple(sets), r.line,
            )
            where = (*path, "name")
        if setup.name not in cars:
            raise top.source.fail(
                where, f"agent {setup.name!r} has no car in arena {arena.name} "
                f"(cars: {', '.join(cars)})",
            )
        if any(a.name == setup.name for a in out):
            raise top.source.fail(where, f"agent {setup.name!r} is listed twice")
        out.append(setup)
    return tuple(out)


def _check_config(scenario: Scenario) -> None:
    """Every agent's settings build a valid AgentConfig (a bad --set-like key names its line)."""
    from tools.replay.rerun import OverrideError

    for a in scenario.agents:
        try:
            scenario.agent_config(a.name)
        except (OverrideError, ValueError) as exc:
            raise ScenarioError(scenario.source, a.line, f"agent {a.name}: {exc}") from None


def _names_in(groups: Iterable[Iterable[str]], agents: Sequence[str]) -> str | None:
    for group in groups:
        for name in group:
            if name not in agents:
                return name
    return None


def _partition(r: Table, agents: Sequence[str]) -> tuple[tuple[str, ...], ...]:
    value = r.raw("partition")
    if value == CLEAR:
        return ()
    try:
        if isinstance(value, str):
            spec = parse_faults(f"partition={value}")
        elif isinstance(value, list):
            spec = LinkFaults.from_mapping({"partition": value})
        else:
            raise r.fail("partition", 'must be "a,b|c" or [["a", "b"], ["c"]] or "clear"')
    except FaultSpecError as exc:
        raise r.fail("partition", exc.problem) from None
    missing = _names_in(spec.partition, agents)
    if missing is not None:
        raise r.fail("partition", f"{missing!r} is not an agent of this scenario")
    return spec.partition


def _faults(r: Table, agents: Sequence[str]) -> LinkFaults:
    value = r.raw("faults")
    try:
        if isinstance(value, str):
            spec = parse_faults(value)
        elif isinstance(value, dict):
            spec = LinkFaults.from_mapping(value)
        else:
            raise r.fail("faults", 'must be a table {drop = 0.5, delay = "50ms"} or a string')
    except FaultSpecError as exc:
        raise r.fail("faults", str(exc)) from None
    missing = _names_in(spec.partition, agents)
    if missing is not None:
        raise r.fail("faults", f"partition: {missing!r} is not an agent of this scenario")
    return spec


def _byzantine(r: Table) -> ByzantineSpec:
    value = r.raw("byzantine")
    try:
        if isinstance(value, str):
            return parse_byzantine(value)
        if isinstance(value, dict):
            return ByzantineSpec.from_mapping(value)
    except FaultSpecError as exc:
        raise r.fail("byzantine", str(exc)) from None
    raise r.fail("byzantine", "must be a table {bias = [2, 0]} or a string")


def _world(r: Table, arena: Arena) -> WorldAction:
    value = r.raw("world")
    if not isinstance(value, dict) or len(value) != 1:
        raise r.fail("world", f"must be a table with one of {', '.join(WORLD_FAULTS)}")
    ((kind, args),) = value.items()
    if kind not in WORLD_FAULTS:
        raise r.fail("world", f"unknown world fault {kind!r} (one of {', '.join(WORLD_FAULTS)})")
    w = Table(r.source, (*r.path, "world"), args)
    seconds_key = WORLD_FAULTS[kind]
    w.only(("car", seconds_key))
    car = w.raw("car")
    if isinstance(car, bool) or not isinstance(car, int | str):
        raise r.fail("world", f"{kind} needs car = an id or a name")
    try:
        arena.car(car)
    except KeyError:
        raise r.fail("world", f"{kind}: arena {arena.name} has no car {car!r}") from None
    default = 0.0 if kind == "reboot" else None
    try:
        seconds = w.number(seconds_key, default, 0.0, MAX_DURATION)
    except FileError as exc:
        raise r.fail("world", f"{kind}: {exc.reason}") from None
    return WorldAction(kind, car, seconds)


def _action(r: Table, scenario_duration: float, agents: Sequence[str], arena: Arena) -> Action:
    r.only(("at", "agent", "direction", "duration", *ACTIONS))
    present = [k for k in ACTIONS if r.has(k)]
    if len(present) != 1:
        what = ", ".join(present) if present else "none"
        raise r.source.fail(r.path, f"a schedule entry needs exactly one of {', '.join(ACTIONS)} "
                        f"(found: {what})")
    kind = ActionKind(present[0])
    at = r.number("at", None, 0.0, math.inf)
    if at >= scenario_duration:
        raise r.fail("at", f"{at:g} s is not before the end of the run ({scenario_duration:g} s)")
    duration = None
    if r.has("duration"):
        if kind not in (ActionKind.FAULTS, ActionKind.BYZANTINE, ActionKind.PARTITION,
                        ActionKind.KILL):
            raise r.fail("duration", f"a {kind.value} action cannot last (faults, byzantine, "
                         "partition and kill can)")
        duration = r.number("duration", None, 1e-3, MAX_DURATION)
        if at + duration > scenario_duration:
            raise r.fail("duration", f"it ends at {at + duration:g} s, after the run "
                         f"({scenario_duration:g} s)")
    if r.has("direction") and kind is not ActionKind.FAULTS:
        raise r.fail("direction", "only a faults action has a direction")
    direction = Direction.BOTH
    if r.has("direction"):
        text = r.string("direction")
        try:
            direction = Direction(text)
        except ValueError:
            raise r.fail("direction", f"{text!r} is not in, out or both") from None
    names: tuple[str, ...] = ()
    wants_agent = kind not in (ActionKind.WORLD, ActionKind.PARTITION)
    if r.has("agent") and not wants_agent:
        raise r.fail("agent", f"a {kind.value} action names no agent")
    if wants_agent:
        value = r.raw("agent")
        if value is None:
            raise r.fail("agent", f"is required for a {kind.value} action")
        names = (value,) if isinstance(value, str) else tuple(value) if isinstance(
            value, list) else ()
        if not names or not all(isinstance(n, str) for n in names):
            raise r.fail("agent", 'must be a name, a list of names, or "*" (every agent)')
        if EVERY_AGENT in names and len(names) > 1:
            raise r.fail("agent", '"*" stands alone')
        if EVERY_AGENT in names and kind in (ActionKind.KILL, ActionKind.RESTART):
            raise r.fail("agent", f'a {kind.value} names its agents (not "*")')
        for n in names:
            if n != EVERY_AGENT and n not in agents:
                raise r.fail("agent", f"{n!r} is not an agent of this scenario "
                              f"({', '.join(agents)})")
        if len(set(names)) != len(names):
            raise r.fail("agent", "an agent is named twice")
    base = Action(at, kind, names, direction=direction, duration=duration, line=r.line)
    if kind is ActionKind.FAULTS:
        return replace(base, faults=_faults(r, agents))
    if kind is ActionKind.BYZANTINE:
        return replace(base, byzantine=_byzantine(r))
    if kind in (ActionKind.CLEAR, ActionKind.KILL, ActionKind.RESTART):
        if r.raw(kind.value) is not True:
            raise r.fail(kind.value, "must be true")
        return base
    if kind is ActionKind.WORLD:
        return replace(base, world=_world(r, arena))
    groups = _partition(r, agents)
    if not groups and duration is not None:
        raise r.fail("duration", 'partition = "clear" cannot last')
    return replace(base, partition=groups)


def parse_scenario(text: str, source: str = "<scenario>", base_dir: Path | None = None) -> Scenario:
    """Validate TOML text; ``source`` names it in errors, ``base_dir`` anchors arena paths."""
    top = parse(text, source, base_dir)
    top.only(TOP_KEYS)
    name = top.string("name", Path(source).stem or "scenario")
    if not _NAME.match(name):
        raise top.fail("name", "letters, digits, '.', '_' and '-' only, at most 32")
    ref = top.string("arena", "two_cars")
    path = _arena_path(ref, base_dir if base_dir is not None else Path(source).parent)
    if path is None:
        raise top.fail("arena", f"{ref!r}: no such file and no shipped arena of that name")
    try:
        arena = load_arena(path)
    except ArenaError as exc:
        raise top.fail("arena", str(exc)) from None
    if arena.target is None:
        raise top.fail("arena", f"arena {arena.name} has no target to track")
    duration = top.number("duration", None, 1e-3, MAX_DURATION)
    seed_value = top.raw("seed") if top.has("seed") else arena.seed
    try:
        seed = _check_seed(seed_value)
    except ValueError as exc:
        raise top.fail("seed", str(exc)) from None
    fusion = _fusion(top, "ci")
    reputation = top.boolean("use_reputation", True)
    agents = _agents(top, arena, fusion, reputation)
    names = [a.name for a in agents]
    schedule = tuple(_action(entry, duration, names, arena) for entry in top.tables("schedule"))
    scenario = Scenario(name, source, text, arena, ref, duration, seed, agents, schedule)
    _check_config(scenario)
    timeline(scenario)
    return scenario


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; raises :class:`ScenarioError`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(str(p), 0, f"cannot read: {exc}") from None
    return parse_scenario(text, str(p), p.parent)


SCENARIO_DIR = Path(__file__).resolve().parent.parent / "scenarios"


def find_scenario(ref: str) -> Path:
    """A scenario given as a path, or by the name of a shipped one (``default``)."""
    path = Path(ref)
    if path.is_file() or "/" in ref or ref.endswith(".toml"):
        return path
    return SCENARIO_DIR / f"{ref}.toml"


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
    return {
        "name": scenario.name,
        "source": scenario.source,
        "arena": scenario.arena_ref,
        "arena_source": scenario.arena.source,
        "duration": scenario.duration,
        "seed": scenario.seed,
        "agents": [
            {"name": a.name, "fusion": a.fusion, "use_reputation": a.use_reputation,
             "set": dict(a.sets)}
            for a in scenario.agents
        ],
    }
