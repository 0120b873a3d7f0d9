"""What the evidence runs: the suite's scenes (``scenarios/suite.toml``), each over its seeds
and variants, one job per lockstep run; the real-process runs; the results the sections read."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tools.experiments.scenario import Scenario, Scene, Suite, liar_of, oracle

ROOT = Path(__file__).resolve().parents[3]


SCENARIOS = ROOT / "scenarios"


SETTLE = 20.0  # s: "after 20 s" (run time)


AS_FILE, NAIVE, ORACLE, NONE = "as_file", "naive", "oracle", "none"
NO_GYRO = "no_gyro"  # every car without its gyro: the kit as sold
ORACLE_LOOKS = "oracle_looks"  # a search with every look handed at once to every robot
VARIANTS = (AS_FILE, NAIVE, ORACLE, NONE, NO_GYRO, ORACLE_LOOKS)


@dataclass(frozen=True)
class Plan:
    """How many seeds (None: the suite's, per scene; never more), a shorter run (None: the
    files'), whether the real-process runs happen and of which scenes (None: every scene
    the suite marks ``real``)."""

    quick: bool
    seeds: int | None
    search_seeds: int | None
    duration: float | None
    real: bool
    real_scenes: frozenset[str] | None = None
    scene_seeds: tuple[tuple[str, int], ...] = ()  # (scene, at most N seeds) beside ``seeds``

    def describe(self, suite: Suite) -> str:
        """Seeds per scene, as run: "10 seeds (30 places for the search)"."""
        own = dict(self.scene_seeds)
        counts = sorted({len(seeds_of(s, self)) for s in suite.scenes
                         if s.kind != "search" and s.name not in own})
        places = sorted({len(seeds_of(s, self)) for s in suite.scenes if s.kind == "search"})
        text = "/".join(map(str, counts)) + " seed" + ("" if counts == [1] else "s")
        text += " per scene"
        extra = [f"{s.name} {len(seeds_of(s, self))}" for s in suite.scenes
                 if s.name in own and s.kind != "search"]
        if extra:
            text += f" ({', '.join(extra)})"
        if places:
            text += f", {'/'.join(map(str, places))} hiding places for the search"
        return text


FULL = Plan(False, None, None, None, True)


QUICK = Plan(True, 2, 4, None, False)


@dataclass(frozen=True)
class Job:
    """One lockstep run: a scene's scenario, a variant of it, a seed."""

    scene: str
    file: str  # the scenario file
    variant: str  # as_file | naive | oracle | none | no_gyro | oracle_looks
    seed: int
    duration: float | None = None

    @property
    def key(self) -> str:
        return f"{self.scene}-{self.variant}-{self.seed}"

    def scenario(self) -> Scenario:
        from tools.experiments.scenario_file import load_scenario

        s = load_scenario(self.file).with_seed(self.seed)
        if self.variant == NAIVE:
            s = s.with_fusion("naive")
        elif self.variant == NONE:
            s = s.with_fusion("none")
        elif self.variant == ORACLE:
            s = oracle(s)
        elif self.variant == NO_GYRO:
            s = s.with_car_model(gyro=False)
        elif self.variant == ORACLE_LOOKS:
            s = s.with_oracle_looks()
        return replace(s, duration=self.duration) if self.duration is not None else s


def variants_of(scene: Scene) -> list[str]:
    out = [AS_FILE]
    if scene.naive:
        out.append(NAIVE)
    if scene.kind in ("liar_among", "liar_only"):
        out.append(ORACLE)
    if scene.kind == "search":
        out += [NONE, ORACLE_LOOKS]
    if scene.kind == "fault_free":
        out.append(NO_GYRO)
    return out


def seeds_of(scene: Scene, plan: Plan) -> list[int]:
    """Seeds 1..n: the scene's own count, capped by the plan's for that scene, else by the
    plan's for every scene (a search scene: its places)."""
    n = scene.seeds
    own = dict(plan.scene_seeds).get(scene.name)
    if own is not None:
        n = min(n, own)
    elif plan.seeds is not None:
        n = min(n, plan.search_seeds or n) if scene.kind == "search" else min(n, plan.seeds)
    return list(range(1, n + 1))


def jobs_for(suite: Suite, plan: Plan) -> list[Job]:
    return [Job(scene.name, str(scene.file), variant, seed, plan.duration)
            for scene in suite.scenes for variant in variants_of(scene)
            for seed in seeds_of(scene, plan)]


def real_jobs(suite: Suite, plan: Plan) -> list[Job]:
    """One real-process run of each scene (seed 1, as the file says), or of the plan's."""
    if not plan.real:
        return []
    return [Job(s.name, str(s.file), AS_FILE, 1, plan.duration) for s in suite.scenes
            if s.real and (plan.real_scenes is None or s.name in plan.real_scenes)]


@dataclass(frozen=True)
class Results:
    """What the sections read: every lockstep run's result by job key, the real runs by
    scene, the suite, the plan, and where the figures go."""

    lockstep: dict[str, dict[str, Any]]
    real: dict[str, dict[str, Any]]
    suite: Suite
    plan: Plan
    figdir: Path

    def runs(self, scene: str, variant: str = AS_FILE) -> list[dict[str, Any]]:
        """The scene's runs of ``variant``, by seed (a failed run has ``error``)."""
        sc = self.suite.scene(scene)
        return [self.lockstep[f"{scene}-{variant}-{k}"] for k in seeds_of(sc, self.plan)
                if f"{scene}-{variant}-{k}" in self.lockstep]

    def scenes(self, *kinds: str) -> list[Scene]:
        return [s for s in self.suite.scenes if not kinds or s.kind in kinds]

    def honest(self, scene: str) -> list[str] | None:
        """The agents whose own estimates count on ``scene``: all but its liar (whose logged
        track mixes the lies it sent with its honest belief); None: every agent."""
        from tools.experiments.scenario_file import load_scenario

        scenario = load_scenario(self.suite.scene(scene).file)
        found = liar_of(scenario)
        return None if found is None else [n for n in scenario.names if n != found[0]]

    def liar(self, scene: str) -> tuple[str, float]:
        from tools.experiments.scenario_file import load_scenario

        found = liar_of(load_scenario(self.suite.scene(scene).file))
        assert found is not None
        return found
