"""Scenarios: an arena, its agents, a duration, a seed and a timed fault schedule.

A :class:`Scenario` is frozen; :mod:`tools.experiments.scenario_file` reads one
from a file (the format: ``tools/SCENARIO.md``). A scenario may hide the arena's
target (:class:`~tools.experiments.hiding.Hide`: it stands still at a place drawn from the
run's seed, out of every camera's view at the start; that module places it);
:func:`oracle` is a liar's scenario with the liar's datagrams dropped from its onset
instead of its lies; a :class:`Suite` is the scenes the evidence runs. The schedule's
actions, and the timed operations both runners execute, are
:mod:`tools.experiments.schedule`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.faults import LinkFaults
from protocol.tomlfile import FileError
from tools.experiments.arena_text import check_run_arena_text, run_arena_text
from tools.experiments.hiding import (
    Hide,
    hidden_arena,
)
from tools.experiments.schedule import EVERY_AGENT, Action, ActionKind, timeline
from worlds.arena import Arena, Waypoints

if TYPE_CHECKING:
    from agents.config import AgentConfig

MAX_DURATION = 3600.0
FUSIONS = ("ci", "naive", "max_confidence", "none")  # AgentConfig.fusion; checked by a test

ScenarioError = FileError  # the one error of the project's files


# ---------------------------------------------------------------- the model


@dataclass(frozen=True)
class AgentSetup:
    """One agent of the scenario and its settings (``sets``: dotted AgentConfig keys)."""

    name: str
    fusion: str = "ci"
    use_reputation: bool = True
    sets: tuple[tuple[str, str], ...] = ()
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


def check_seed(seed: int) -> int:
    """``seed`` if it is a seed (an integer in [0, 2^32)); ValueError otherwise."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(f"seed must be an integer in [0, 2^32), got {seed!r}")
    return seed


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
