"""The evidence package: every experiment module is registered once, in the report's order."""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import replace

import pytest

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
    assert set(EXPERIMENTS) == found and len(EXPERIMENTS) == len(found) == 9
    titles = [(m.__doc__ or "").split(".")[0] for m in EXPERIMENTS]
    assert titles == [f"Experiment {n}" for n in range(1, 10)]


def test_every_job_has_its_own_key() -> None:
    # --quick: 2 seeds a scene, 4 hiding places; five scenes as their files say, four also
    # with naive (orbit, eight robots) or the oracle (both liars), the five fault-free ones
    # also without a gyro, the search also unshared and with the oracle
    keys = [job.key for job in jobs_for(load_suite(), QUICK)]
    assert len(keys) == len(set(keys)) == (5 + 4 * 2 + 5) * 2 + 3 * 4


def test_a_plan_of_fewer_seeds_says_how_many_ran() -> None:
    suite = load_suite()
    assert FULL.describe(suite) == "10 seeds per scene, 30 hiding places for the search"
    assert QUICK.describe(suite) == "2 seeds per scene, 4 hiding places for the search"
    few = replace(FULL, seeds=3, search_seeds=6, real_scenes=frozenset({"orbit", "liar_only"}))
    assert few.describe(suite) == "3 seeds per scene, 6 hiding places for the search"
    assert len(jobs_for(suite, few)) == (5 + 4 * 2 + 5) * 3 + 3 * 6
    assert [j.key for j in real_jobs(suite, few)] == ["orbit-as_file-1", "liar_only-as_file-1"]
    assert len(real_jobs(suite, FULL)) == len(suite.scenes) and not real_jobs(suite, QUICK)
    more = replace(few, scene_seeds=(("orbit", 6), ("liar_only", 20)))
    assert more.describe(suite) == ("3 seeds per scene (orbit 6, liar_only 10), 6 hiding "
                                    "places for the search")
    assert len(jobs_for(suite, more)) == len(jobs_for(suite, few)) + 3 * 3 + 7 * 2


def test_a_runs_dependencies_are_the_projects_sources_only() -> None:
    """What decides when a cached run is redone: the project's imported sources, never a
    virtualenv's files (the Makefile's .venv sits inside the repository)."""
    import agents.core  # noqa: F401  (imported: it must be listed)
    from tools.experiments.cluster import SOURCES
    from tools.experiments.evidence.jobs import _imported

    deps = _imported()
    assert "agents/core.py" in deps
    assert all(path.split("/")[0] in SOURCES for path in deps)


def test_the_kit_as_sold_section_compares_each_fault_free_scene(tmp_path) -> None:
    """Runs with and without the gyro (synthetic, 6 seeds): one row each, misses bold, the
    paired p of the p95 error and the track held; a failed run is left out, not fatal."""
    from tools.experiments.evidence import gyro
    from tools.experiments.evidence.plan import AS_FILE, NO_GYRO, Results

    suite = load_suite()
    plan = replace(FULL, seeds=6)

    def run(err: float, held: float) -> dict:
        t = [float(k) for k in range(60)]
        return {"metrics": {"err_p95": err * 2, "held": held, "pose_held": 0.9,
                            "pose_heading_p95_deg": 5.0, "first_detection_s": 1.0},
                "series": {"t": t, "err": {"walnut": [err] * 60}}}

    lockstep = {}
    for sc in suite.scenes:
        if sc.kind != "fault_free":
            continue
        for k in range(1, 7):
            lockstep[f"{sc.name}-{AS_FILE}-{k}"] = run(0.05 + 0.001 * k, 0.99)
            lockstep[f"{sc.name}-{NO_GYRO}-{k}"] = run(0.3 + 0.01 * k, 0.6 + 0.01 * k)
    lockstep[f"waypoints-{NO_GYRO}-6"] = {"error": "boom"}
    section = gyro.section(Results(lockstep, {}, suite, plan, tmp_path))
    assert section is not None
    rows = [line for line in section.text if line.startswith("| orbit |")]
    assert len(rows) == 2 and "| yes |" in rows[0] and "| **no** |" in rows[1]
    assert "**0.335** / 0.360 / 0.36 | **0.635** |" in rows[1]  # median, held: misses
    assert section.data["orbit"]["p_err_p95"] == pytest.approx(0.03125)  # 6 of 6 pairs
    assert section.data["waypoints"]["no"]["held"] == pytest.approx(0.63)  # 5 runs
    empty = Results({k: v for k, v in lockstep.items() if NO_GYRO not in k}, {}, suite, plan,
                    tmp_path)
    assert gyro.section(empty) is None


def test_the_search_section_sets_sharing_against_no_sharing_and_the_oracle(tmp_path) -> None:
    """Synthetic runs of 6 places: each variant's median, both ratios and their paired p; a
    search that never detects counts as the run's length."""
    from tools.experiments.evidence import search
    from tools.experiments.evidence.plan import AS_FILE, NONE, ORACLE_LOOKS, Results

    suite = load_suite()
    plan = replace(FULL, search_seeds=6, seeds=6)

    def run(first: float | None, k: int) -> dict:
        return {"seed": k, "place": (1.0 + k, 2.0),
                "metrics": {"first_detection_s": first, "search_redundancy": 1.5,
                            "search_cells": 100.0, "err_p50": 0.03},
                "series": {"t": [0.0, 60.0]}}

    lockstep = {}
    for k in range(1, 7):
        lockstep[f"hidden_search-{AS_FILE}-{k}"] = run(4.0 + k, k)
        lockstep[f"hidden_search-{NONE}-{k}"] = run(None if k == 6 else 8.0 + 2 * k, k)
        lockstep[f"hidden_search-{ORACLE_LOOKS}-{k}"] = run(3.0 + k, k)
    section = search.section(Results(lockstep, {}, suite, plan, tmp_path))
    assert section is not None
    row = next(line for line in section.text if line.startswith("| time to first detection"))
    # medians 7.5 (ci), 15.0 (none: 10..18 and 60), 6.5 (oracle); all 6 pairs one way
    assert row == ("| time to first detection (s) | 7.5 | 15.0 | 6.5 | 0.50 | 0.0312 | 1.15 "
                   "| 0.0312 |")
    assert section.data["first_detection_s"]["none"][-1] == 60.0


def test_the_nees_table_says_which_side_a_miss_is_on(tmp_path) -> None:
    """Synthetic runs whose NEES4 is 0.1 (below the bounds) a fifth of the time and 20 (above)
    a tenth: the orbit's row gives 70 % inside, 20 % below and 10 % above."""
    from tools.experiments.evidence import consistency
    from tools.experiments.evidence.plan import AS_FILE, Results

    suite = load_suite()
    plan = replace(FULL, seeds=2, search_seeds=2)
    nees4 = [0.1] * 2 + [20.0] + [4.0] * 7
    series = {"t": [float(k) for k in range(10)], "nees4": {"walnut": nees4},
              "nees2": {"walnut": [2.0] * 10}, "peer_nees4": {"walnut": [4.0] * 10},
              "matched_nees4": {"walnut": [4.0] * 10}, "err": {"walnut": [0.05] * 10}}
    run = {"metrics": {"nees4_inside": 0.7, "nees4_mean": 4.0}, "series": series}
    lockstep = {job.key: run for job in jobs_for(suite, plan) if job.variant == AS_FILE}
    section = consistency.section(Results(lockstep, {}, suite, plan, tmp_path))
    row = next(line for line in section.text if line.startswith("| orbit |"))
    assert row.startswith("| orbit | 70.0% / 4.82 | 20.0% / 10.0% | 100.0% / 2.00 |"), row


def test_a_liars_real_run_is_judged_on_its_honest_agents(tmp_path) -> None:
    """liar_only (pecan lies): lockstep and real honest agents alike, the liar's own track
    far off in the real run. The pooled (every agent) median is out of range, the honest
    agents' is not: the scene agrees, and both rows are shown."""
    from tools.experiments.evidence import modes
    from tools.experiments.evidence.measures import real_agreement
    from tools.experiments.evidence.plan import AS_FILE, Results

    suite = load_suite()
    plan = replace(FULL, seeds=3, search_seeds=3)
    t = [float(k) for k in range(40)]

    def run(honest: float, liar: float, held_liar: float) -> dict:
        per = {"walnut": {"held": 0.9, "kbytes_per_s": 1.0},
               "hazel": {"held": 0.9, "kbytes_per_s": 1.0},
               "pecan": {"held": held_liar, "kbytes_per_s": 1.0}}
        err = {"walnut": [honest] * 40, "hazel": [honest] * 40, "pecan": [liar] * 40}
        every = [honest] * 40 + [honest] * 40 + [liar] * 40
        return {"metrics": {"err_p50": float(sorted(every)[60]), "held": 0.9,
                            "nees4_inside": 1.0, "kbytes_per_s": 1.0, "agents": per},
                "series": {"t": t, "err": err, "nees4": {n: [4.0] * 40 for n in err}}}

    lockstep = {f"liar_only-{AS_FILE}-{k}": run(0.05 * k, 0.1, 0.9) for k in (1, 2, 3)}
    # the real run: honest agents at 0.1 m, the liar's track at 1.5 m; the run's own pooled
    # median (as trial_metrics gives it when the honest agents hold less) 0.536 m
    real = {"liar_only": run(0.1, 1.5, 0.9)}
    real["liar_only"]["metrics"]["err_p50"] = 0.536
    res = Results(lockstep, real, suite, plan, tmp_path)
    honest = real_agreement(res, "liar_only")
    every = real_agreement(res, "liar_only", every_agent=True)
    assert set(honest["agents"]) == {"walnut", "hazel"} and every["agents"] is None
    assert honest["agrees"] and honest["measures"]["err_p50"][0] == pytest.approx(0.1)
    assert not every["agrees"] and every["measures"]["err_p50"][3] is False
    section = modes.section(res)
    assert section is not None
    rows = [line for line in section.text if line.startswith("| liar_only")]
    assert len(rows) == 2 and rows[0].endswith("| yes |") and rows[1].endswith("| **no** |")
    assert "every agent (not judged)" in rows[1] and "0.536 (" in rows[1]
