"""The evidence package: every experiment module is registered once, in the report's order."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import replace

import tools.experiments.evidence as package
from tools.experiments.evidence.main import EXPERIMENTS
from tools.experiments.evidence.plan import FULL, QUICK, jobs_for, real_jobs
from tools.experiments.scenario_file import load_suite


def test_every_experiment_module_is_registered_once() -> None:
    found = set()
    for info in pkgutil.iter_modules(package.__path__):
        if info.name == "__main__":
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        if hasattr(module, "section"):
            found.add(module)
    assert set(EXPERIMENTS) == found and len(EXPERIMENTS) == len(found) == 8
    titles = [(m.__doc__ or "").split(".")[0] for m in EXPERIMENTS]
    assert titles == [f"Experiment {n}" for n in range(1, 9)]


def test_every_job_has_its_own_key() -> None:
    # --quick: 2 seeds a scene, 4 hiding places; five scenes as their files say, four also
    # with naive (orbit, eight robots) or the oracle (both liars), the search also unshared
    keys = [job.key for job in jobs_for(load_suite(), QUICK)]
    assert len(keys) == len(set(keys)) == (5 + 4 * 2) * 2 + 2 * 4


def test_a_plan_of_fewer_seeds_says_how_many_ran() -> None:
    suite = load_suite()
    assert FULL.describe(suite) == "10 seeds per scene, 30 hiding places for the search"
    assert QUICK.describe(suite) == "2 seeds per scene, 4 hiding places for the search"
    few = replace(FULL, seeds=3, search_seeds=6, real_scenes=frozenset({"orbit", "liar_only"}))
    assert few.describe(suite) == "3 seeds per scene, 6 hiding places for the search"
    assert len(jobs_for(suite, few)) == (5 + 4 * 2) * 3 + 2 * 6
    assert [j.key for j in real_jobs(suite, few)] == ["orbit-as_file-1", "liar_only-as_file-1"]
    assert len(real_jobs(suite, FULL)) == len(suite.scenes) and not real_jobs(suite, QUICK)
    more = replace(few, scene_seeds=(("orbit", 6), ("liar_only", 20)))
    assert more.describe(suite) == ("3 seeds per scene (orbit 6, liar_only 10), 6 hiding "
                                    "places for the search")
    assert len(jobs_for(suite, more)) == len(jobs_for(suite, few)) + 3 * 2 + 7 * 2


def test_a_runs_dependencies_are_the_projects_sources_only() -> None:
    """What decides when a cached run is redone: the project's imported sources, never a
    virtualenv's files (the Makefile's .venv sits inside the repository)."""
    import agents.core  # noqa: F401  (imported: it must be listed)
    from tools.experiments.cluster import SOURCES
    from tools.experiments.evidence.jobs import _imported

    deps = _imported()
    assert "agents/core.py" in deps
    assert all(path.split("/")[0] in SOURCES for path in deps)
