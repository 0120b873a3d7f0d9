"""What the evidence runs: the plan (seeds, durations, loss levels), one job per lockstep run,
and the results every experiment reads."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tools.experiments.scenario import Scenario
from tools.experiments.sweep import Trial, build

ROOT = Path(__file__).resolve().parents[3]


SCENARIOS = ROOT / "scenarios"


SETTLE = 20.0


ACCURATE = 0.5  # m: a track this close to the truth counts as knowing where the target is


BYZANTINE_ONSET = 20.0


PARTITION = (20.0, 40.0)


@dataclass(frozen=True)
class Plan:
    seeds: int  # for experiments 1-3
    few_seeds: int  # for 4, 5 and the real runs of 7
    duration: float | None  # None: as the scenario files say (60 s)
    losses: tuple[float, ...]
    real_runs: int
    real_duration: float | None


FULL = Plan(10, 5, None, (0.0, 0.25, 0.5, 0.75, 0.9), 5, None)


QUICK = Plan(2, 1, 40.0, (0.0, 0.5, 0.9), 1, 30.0)


@dataclass(frozen=True)
class Job:
    key: str
    scenario: str  # file under scenarios/
    seed: int
    fusion: str | None = None
    loss: float = 0.0
    duration: float | None = None
    search: bool = False  # measure the camera footprints of the search phase
    liar: str | None = None  # the Byzantine agent, whose fusion by the others is traced

    @property
    def trial(self) -> Trial:
        point = (("loss", self.loss),) if self.loss else ()
        return Trial(str(SCENARIOS / self.scenario), self.seed, self.fusion, point)

    def scenario_of(self) -> Scenario:
        s = build(self.trial)
        return replace(s, duration=self.duration) if self.duration is not None else s


def loss_key(loss: float, seed: int) -> str:
    return f"default-ci-{seed}" if loss == 0 else f"default-loss{loss:g}-{seed}"


def jobs_for(plan: Plan) -> list[Job]:
    seeds = list(range(1, plan.seeds + 1))
    few = seeds[: plan.few_seeds]
    d = plan.duration
    jobs = []
    for k in seeds:
        for fusion in ("ci", "none", "naive"):
            jobs.append(Job(f"default-{fusion}-{k}", "default.toml", k, fusion, duration=d))
        for fusion in ("ci", "none"):
            jobs.append(Job(f"search-{fusion}-{k}", "search.toml", k, fusion, duration=d,
                            search=True))
    for k in few:
        for loss in plan.losses:
            if loss:
                jobs.append(Job(loss_key(loss, k), "default.toml", k, "ci", loss, d))
        for scen in ("partition", "partition_divided"):
            jobs.append(Job(f"{scen}-{k}", f"{scen}.toml", k))  # the partition needs 60 s
        for scen in ("three_agents", "byzantine", "byzantine_norep"):
            jobs.append(Job(f"{scen}-{k}", f"{scen}.toml", k, duration=d, liar="pecan"))
    return jobs


@dataclass(frozen=True)
class Results:
    """What the experiments read: every lockstep run's result by key, the real runs, the plan,
    and where the figures go."""

    lockstep: dict[str, dict[str, Any]]
    real: list[dict[str, Any]]
    plan: Plan
    figdir: Path

    @property
    def seeds(self) -> list[int]:
        """The seeds of experiments 1-3 and 6."""
        return list(range(1, self.plan.seeds + 1))

    @property
    def few(self) -> list[int]:
        """The seeds of experiments 4 and 5."""
        return self.seeds[: self.plan.few_seeds]
