"""Running the evidence's jobs: lockstep runs on a Dask cluster, each measured, the real runs
one after the other, and a cache that reuses a run's result while nothing it depends on
has changed.

A cached result is reused only when the job (scene, variant, seed, duration), the scenario
file, the arena file, the hidden target's place and the versions of the numerical
libraries are the same, AND every source file the run imported (recorded by the worker
after the run: the repository's modules in ``sys.modules``) still has the same content.
A change to the agent, the world, the protocol, the lockstep runner or the metrics reruns
every job that imported it; a change to how the report is written reruns nothing. A real
run depends on every source file but the report's (its processes import what they import).
"""

from __future__ import annotations

import hashlib
import json
import pickle
import platform
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from tools.experiments.cluster import ROOT, SOURCES, Cluster, file_digest, source_files
from tools.experiments.evidence.plan import Job
from tools.experiments.measure import analysis_of, series_of, trial_metrics
from tools.experiments.progress import progress_bar
from tools.experiments.scenario import Scenario, liar_of

LIBRARIES = ("numpy", "scipy", "pybullet", "msgpack")
Say = Callable[[str], None]


# ---------------------------------------------------------------- one job


def _imported() -> dict[str, str]:
    """The project's source files (``SOURCES``) this process has imported, with their digests
    (not a virtualenv's that happens to sit inside the repository)."""
    out = {}
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if not file or not file.endswith(".py"):
            continue
        path = Path(file).resolve()
        if (path.is_relative_to(ROOT) and path.relative_to(ROOT).parts[0] in SOURCES
                and path.is_file()):
            out[str(path.relative_to(ROOT))] = file_digest(path)
    return out


def _visibility(an: Any, arena: Any, liar: str, onset: float) -> dict[str, Any]:
    """After the onset: when an honest camera could first see the target (s after the
    onset), and for how many seconds only the liar's could (from the truth)."""
    from tools.replay.metrics import STEP, target_visible

    rel = an.times - an.t_start
    seen = {n: target_visible(an.truth, arena, n, an.times) for n in an.agents}
    after = rel >= onset
    honest = np.zeros(rel.size, dtype=bool)
    for name, v in seen.items():
        if name != liar:
            honest |= v
    only = seen.get(liar, np.zeros(rel.size, dtype=bool)) & ~honest & after
    first = np.flatnonzero(honest & after)
    return {"honest_sees_s": float(rel[first[0]] - onset) if first.size else None,
            "liar_only_s": float(np.count_nonzero(only) * STEP)}


def measure(run_dir: Path, scenario: Scenario) -> dict[str, Any]:
    """A run's metrics, its series and (for a liar's scenario) what the honest agents made
    of the liar."""
    from tools.replay.metrics import liar_trace

    configs = {n: scenario.agent_config(n) for n in scenario.names}
    an = analysis_of(run_dir, scenario.arena, configs)
    out: dict[str, Any] = {"metrics": trial_metrics(run_dir, scenario.arena, an),
                           "series": series_of(an)}
    found = liar_of(scenario)
    if found is not None and an.truth is not None:
        liar, onset = found
        agents = {n: liar_trace(an.run.agents[n], liar, an.t_start + onset,
                                configs[n].reputation.threshold)
                  for n in an.run.agents if n != liar}
        out["liar"] = {"name": liar, "onset": onset, "agents": agents,
                       **_visibility(an, scenario.arena, liar, onset)}
    return out


def run_job(item: tuple[Job, Scenario]) -> dict[str, Any]:
    """Run one job in lockstep and measure it; an exception becomes an ``error``. The
    result records the source files the run imported (for the cache)."""
    from tools.experiments.lockstep import run_scenario

    job, scenario = item
    began = time.perf_counter()
    out: dict[str, Any] = {"key": job.key, "scene": job.scene, "variant": job.variant,
                           "seed": job.seed, "place": scenario.target_place}
    try:
        with tempfile.TemporaryDirectory(prefix="stigmesh-evidence-") as tmp:
            run_scenario(scenario, Path(tmp))
            out.update(measure(Path(tmp), scenario))
    except Exception:
        out["error"] = traceback.format_exc(limit=8)
    out["seconds"] = time.perf_counter() - began
    out["deps"] = _imported()
    return out


def _lost(item: tuple[Job, Scenario], exc: BaseException) -> dict[str, Any]:
    job = item[0]
    return {"key": job.key, "scene": job.scene, "variant": job.variant, "seed": job.seed,
            "error": f"the worker was lost: {exc!r}", "seconds": 0.0, "deps": {}}


def run_real(job: Job, scenario: Scenario, work: Path) -> dict[str, Any]:
    """One real-process run of a job (the world and every agent as processes), measured."""
    import shutil

    from tools.experiments.progress import Progress
    from tools.experiments.realrun import run_real as run_processes

    began = time.perf_counter()
    out: dict[str, Any] = {"key": job.key, "scene": job.scene, "seed": job.seed}
    run_dir = work / job.key
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    try:
        (run_dir / "scenario.toml").write_text(scenario.text, encoding="utf-8")
        real = scenario.materialise(run_dir)
        _, codes = run_processes(real, run_dir, None,
                                 Progress(real.duration, quiet=True, every=10.0))
        out["codes"] = codes
        out.update(measure(run_dir, real))
    except Exception:
        out["error"] = traceback.format_exc(limit=6)
    out["seconds"] = time.perf_counter() - began
    out["deps"] = {str(p.relative_to(ROOT)): file_digest(p) for p in source_files()
                   if _runs_it(p)}
    return out


REPORT_ONLY = ROOT / "tools" / "experiments" / "evidence"
RUNS_AND_MEASURES = ("__init__.py", "jobs.py", "plan.py")  # the rest only writes the report


def _runs_it(path: Path) -> bool:
    """Whether a source file can change what a real run does or measures: every file but
    the evidence's report modules (its sections, statistics, figures and markdown)."""
    return path.parent != REPORT_ONLY or path.name in RUNS_AND_MEASURES


# ---------------------------------------------------------------- the cache


def spec_digest(job: Job, scenario: Scenario, mode: str) -> str:
    """What a job's result depends on besides the code: the job, the scenario and arena
    files, the hidden place, the libraries' versions."""
    versions: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    arena_file = Path(scenario.arena_file or scenario.arena.source)
    spec = {
        "mode": mode, "key": job.key, "variant": job.variant, "seed": job.seed,
        "duration": scenario.duration, "scenario": scenario.text,
        "arena": arena_file.read_text(encoding="utf-8") if arena_file.is_file() else None,
        "hidden": scenario.arena_text(), "libraries": versions,
        "python": platform.python_version(),
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


class Cache:
    """Results by job key under ``directory``, each valid while its spec and every source file
    it recorded are unchanged."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._digests: dict[str, str | None] = {}

    def _digest(self, rel: str) -> str | None:
        if rel not in self._digests:
            path = ROOT / rel
            self._digests[rel] = file_digest(path) if path.is_file() else None
        return self._digests[rel]

    def _file(self, mode: str, job: Job) -> Path:
        return self.directory / mode / f"{job.key}.pickle"

    def get(self, job: Job, scenario: Scenario, mode: str = "lockstep") -> dict[str, Any] | None:
        path = self._file(mode, job)
        try:
            with path.open("rb") as f:
                entry = pickle.load(f)  # our own files, written by put() below
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            return None
        if entry.get("spec") != spec_digest(job, scenario, mode):
            return None
        deps = entry["result"].get("deps") or {}
        if not deps or any(self._digest(rel) != digest for rel, digest in deps.items()):
            return None
        result: dict[str, Any] = entry["result"]
        return result

    def put(self, job: Job, scenario: Scenario, result: dict[str, Any],
            mode: str = "lockstep") -> None:
        if "error" in result or not result.get("deps"):
            return  # a failure is tried again next time
        path = self._file(mode, job)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with tmp.open("wb") as f:
            pickle.dump({"spec": spec_digest(job, scenario, mode), "result": result}, f)
        tmp.replace(path)


def cached_results(directory: Path, mode: str = "lockstep") -> dict[str, dict[str, Any]]:
    """Every result kept under ``directory`` by job key, whatever code made it (two
    regenerations compared, :mod:`.compare`); a file that cannot be read is skipped."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted((directory / mode).glob("*.pickle")):
        try:
            with path.open("rb") as f:
                entry = pickle.load(f)  # our own files, written by Cache.put()
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            continue
        result = entry.get("result") if isinstance(entry, dict) else None
        if isinstance(result, dict) and isinstance(result.get("key"), str):
            out[result["key"]] = result
    return out


# ---------------------------------------------------------------- many jobs


def run_jobs(jobs: Sequence[Job], *, scheduler: str | None, workers: int,
             cache: Cache | None, say: Say) -> dict[str, dict[str, Any]]:
    """Every job's result by key: from the cache where it is still valid, else run on a
    Dask cluster (``workers`` local processes, or ``scheduler``'s), or in this process when
    ``workers`` is 1 and there is no scheduler."""
    built = [(job, job.scenario()) for job in jobs]
    results: dict[str, dict[str, Any]] = {}
    todo = []
    for job, scenario in built:
        hit = cache.get(job, scenario) if cache is not None else None
        if hit is not None:
            results[job.key] = hit
        else:
            todo.append((job, scenario))
    if not todo:
        say(f"evidence: all {len(jobs)} lockstep runs from the cache")
        return results
    began = time.perf_counter()

    def done(n: int, result: dict[str, Any], item: tuple[Job, Scenario]) -> None:
        results[result["key"]] = result
        if cache is not None:
            cache.put(item[0], item[1], result)
        if "error" in result:
            say(f"\n{result['key']} FAILED:\n{result['error']}")
        print("\r" + progress_bar(n, len(todo), began), end="", flush=True)

    if workers <= 1 and scheduler is None:
        say(f"evidence: {len(jobs) - len(todo)} lockstep runs from the cache, {len(todo)} to "
            "run in this process")
        for n, item in enumerate(todo, start=1):
            done(n, run_job(item), item)
    else:
        with Cluster(scheduler, workers) as cluster:
            say(f"evidence: {len(jobs) - len(todo)} lockstep runs from the cache, {len(todo)} "
                f"to run on {cluster.describe()}")
            for n, (i, result) in enumerate(cluster.map(run_job, todo, _lost), start=1):
                done(n, result, todo[i])
    print(flush=True)
    return results


def run_reals(jobs: Iterable[Job], work: Path, cache: Cache | None,
              say: Say) -> dict[str, dict[str, Any]]:
    """The real-process runs, one after the other (each is a world and its agents)."""
    out: dict[str, dict[str, Any]] = {}
    for job in jobs:
        scenario = job.scenario()
        hit = cache.get(job, scenario, "real") if cache is not None else None
        if hit is not None:
            out[job.scene] = hit
            continue
        say(f"evidence: real run of {job.scene} (seed {job.seed})")
        result = run_real(job, scenario, work)
        if "error" in result:
            say(f"evidence: the real run of {job.scene} FAILED:\n{result['error']}")
        elif cache is not None:
            cache.put(job, scenario, result, "real")
        out[job.scene] = result
    return out
