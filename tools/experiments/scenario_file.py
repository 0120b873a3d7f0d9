"""Scenario files (TOML, ``tools/SCENARIO.md``) read into a frozen ``Scenario``.

:func:`load_scenario` reads and validates a file through the project's one TOML
reader (:class:`protocol.tomlfile.Table`); every problem is a
:class:`~protocol.tomlfile.FileError` naming the file, the line and the reason,
including an action on an agent that the schedule has stopped (:func:`timeline`).
:func:`load_suite` reads the suite of scenes the evidence runs (``scenarios/suite.toml``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from agents.faults import ByzantineSpec, FaultSpecError, LinkFaults, parse_byzantine, parse_faults
from agents.transport import Direction
from protocol.tomlfile import FileError, PathKey, Table, parse
from tools.experiments.hiding import Hide
from tools.experiments.scenario import (
    FUSIONS,
    MAX_DURATION,
    SCENE_KINDS,
    AgentSetup,
    Scenario,
    ScenarioError,
    Scene,
    Suite,
    check_seed,
    liar_of,
)
from tools.experiments.schedule import (
    CLEAR,
    EVERY_AGENT,
    Action,
    ActionKind,
    WorldAction,
    timeline,
)
from worlds.arena import ARENA_DIR, Arena, ArenaError, load_arena

TOP_KEYS = ("name", "arena", "duration", "seed", "fusion", "use_reputation", "agents", "schedule",
            "target", "car_link")
TARGET_KEYS = ("hide_in", "hide_seed")
AGENT_KEYS = ("name", "fusion", "use_reputation", "set")
ACTIONS = ("faults", "byzantine", "clear", "kill", "restart", "world", "partition")
WORLD_FAULTS = {"drop_link": "duration", "reboot": "down", "freeze_camera": "duration"}
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")


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
    from tools.replay.overrides import OverrideError

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


def _car_link(top: Table) -> LinkFaults:
    """``car_link = "delay=20ms jitter=15ms"`` (or a table): every car's link, both ways."""
    spec = _faults(top, None, key="car_link")
    if spec.partition:
        raise top.fail("car_link", "a car's link has two ends: no partition there")
    return spec


def _faults(r: Table, agents: Sequence[str] | None, key: str = "faults") -> LinkFaults:
    value = r.raw(key)
    try:
        if isinstance(value, str):
            spec = parse_faults(value)
        elif isinstance(value, dict):
            spec = LinkFaults.from_mapping(value)
        else:
            raise r.fail(key, 'must be a table {drop = 0.5, delay = "50ms"} or a string')
    except FaultSpecError as exc:
        raise r.fail(key, str(exc)) from None
    missing = None if agents is None else _names_in(spec.partition, agents)
    if missing is not None:
        raise r.fail(key, f"partition: {missing!r} is not an agent of this scenario")
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
        seed = check_seed(seed_value)
    except ValueError as exc:
        raise top.fail("seed", str(exc)) from None
    fusion = _fusion(top, "ci")
    reputation = top.boolean("use_reputation", True)
    agents = _agents(top, arena, fusion, reputation)
    names = [a.name for a in agents]
    schedule = tuple(_action(entry, duration, names, arena) for entry in top.tables("schedule"))
    hide = _hide(top.table("target"), arena)
    scenario = Scenario(name, source, text, arena, ref, duration, seed, agents, schedule, hide,
                        str(path), car_link=_car_link(top) if top.has("car_link") else None)
    _check_config(scenario)
    timeline(scenario)
    if hide is not None:
        scenario = scenario.with_seed(scenario.seed)
        scenario.check_arena_text()
    return scenario


def _hide(t: Table | None, arena: Arena) -> Hide | None:
    """``[target] hide_in = [xmin, ymin, xmax, ymax]``, ``hide_seed = N``: the target
    stands still at a place drawn from the run's seed."""
    if t is None:
        return None
    t.only(TARGET_KEYS)
    x0, y0, x1, y1 = t.vector("hide_in", 4)
    if not (x0 < x1 and y0 < y1):
        raise t.fail("hide_in", "must be [xmin, ymin, xmax, ymax] with min < max")
    if x1 <= 0 or y1 <= 0 or x0 >= arena.room.size_x or y0 >= arena.room.size_y:
        raise t.fail("hide_in", f"does not meet the room ({arena.room.size_x:g} m x "
                     f"{arena.room.size_y:g} m)")
    hide = Hide((x0, y0, x1, y1), t.integer("hide_seed", 0, 0, 2**32 - 1),
                line=t.source.line((*t.path, "hide_in")))
    t.done()
    return hide


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; raises :class:`ScenarioError`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(str(p), 0, f"cannot read: {exc}") from None
    return parse_scenario(text, str(p), p.parent)


SCENARIO_DIR = Path(__file__).resolve().parents[2] / "scenarios"


def find_scenario(ref: str) -> Path:
    """A scenario given as a path, or by the name of a shipped one (``default``)."""
    path = Path(ref)
    if path.is_file() or "/" in ref or ref.endswith(".toml"):
        return path
    return SCENARIO_DIR / f"{ref}.toml"


# ---------------------------------------------------------------- the suite


SUITE_FILE = SCENARIO_DIR / "suite.toml"
SUITE_KEYS = ("seeds", "scene")
SCENE_KEYS = ("name", "file", "kind", "tests", "seeds", "naive", "speed", "reference", "real")


def parse_suite(text: str, source: str = "<suite>", base_dir: Path | None = None) -> Suite:
    """Validate a suite: every scene's scenario file loads, names are unique, each kind
    has what its targets need (a liar for liar_*, a hidden target for search, a
    fault-free reference for loss)."""
    base = base_dir if base_dir is not None else Path(source).parent
    top = parse(text, source, base)
    top.only(SUITE_KEYS)
    seeds = top.integer("seeds", 10, 1, 1000)
    scenes: list[Scene] = []
    for t in top.tables("scene"):
        t.only(SCENE_KEYS)
        name = t.string("name")
        if not _NAME.match(name):
            raise t.fail("name", "letters, digits, '.', '_' and '-' only, at most 32")
        if any(s.name == name for s in scenes):
            raise t.fail("name", f"scene {name!r} is named twice")
        kind = t.string("kind")
        if kind not in SCENE_KINDS:
            raise t.fail("kind", f"{kind!r} is not one of {', '.join(SCENE_KINDS)}")
        file = base / t.string("file")
        try:
            scenario = load_scenario(file)
        except ScenarioError as exc:
            raise t.fail("file", str(exc)) from None
        if kind in ("liar_among", "liar_only") and liar_of(scenario) is None:
            raise t.fail("kind", f"a {kind} scene needs a Byzantine action on one named agent")
        if kind == "search" and scenario.hide is None:
            raise t.fail("kind", "a search scene needs a hidden target ([target] hide_in)")
        reference = t.string("reference", "") or None
        if kind == "loss":
            ref = next((s for s in scenes if s.name == reference), None)
            if ref is None or ref.kind != "fault_free":
                raise t.fail("reference", "a loss scene names a fault_free scene listed "
                             "before it (its loss-free run)")
        elif reference is not None:
            raise t.fail("reference", "only a loss scene has a reference")
        scenes.append(Scene(name, file, kind, t.string("tests"), t.integer("seeds", seeds, 1, 1000),
                            t.boolean("naive", False), t.boolean("speed", False), reference,
                            t.boolean("real", True), t.line))
        t.done()
    top.done()
    if not scenes:
        raise top.fail("scene", "a suite needs at least one [[scene]]")
    return Suite(source, seeds, tuple(scenes))


def load_suite(path: str | Path = SUITE_FILE) -> Suite:
    """Read and validate a suite file; raises :class:`ScenarioError`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(str(p), 0, f"cannot read: {exc}") from None
    return parse_suite(text, str(p), p.parent)
