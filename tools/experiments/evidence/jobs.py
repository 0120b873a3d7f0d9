"""Running the evidence's jobs: lockstep runs in parallel, each measured, and the real runs."""

from __future__ import annotations

import math
import multiprocessing
import random
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from tools.experiments.evidence.plan import ACCURATE, BYZANTINE_ONSET, SCENARIOS, Job
from tools.experiments.measure import analysis_of, camera_footprints, trial_metrics
from tools.experiments.progress import progress_bar
from tools.experiments.scenario_file import load_scenario


def _series(an: Any) -> dict[str, Any]:
    """Per agent: run-relative times, position error, uncertainty; agreement per pair."""
    out: dict[str, Any] = {"t": (an.times - an.t_start).round(3).tolist(), "err": {}, "unc": {},
                           "agree": {}}
    for name, ag in an.agents.items():
        if ag.errors is not None:
            out["err"][name] = ag.errors.pos_err.tolist()
        out["unc"][name] = ag.series.uncertainty.tolist()
    for (a, b), d in an.agreement.items():
        out["agree"][f"{a}-{b}"] = d.tolist()
    return out


def _search_metrics(an: Any, arena: Any, first: float | None) -> dict[str, Any]:
    """Camera coverage while nobody has seen the target, and when everyone knows where it is."""
    names = sorted(an.agents)
    end = first if first is not None else an.run.t_end - an.t_start
    times = an.t_start + np.arange(0.0, end, 0.5)
    sets = {n: set(np.concatenate(camera_footprints(an.truth, arena, n, times)).tolist())
            if times.size else set() for n in names}
    union = set().union(*sets.values())
    overlap = None
    if len(names) == 2 and union:
        overlap = len(sets[names[0]] & sets[names[1]]) / len(union)
    cells = math.ceil(arena.room.size_x / 0.1 - 1e-9) * math.ceil(arena.room.size_y / 0.1 - 1e-9)
    t15 = an.t_start + np.arange(0.0, 15.0, 0.5)
    seen15 = set().union(*(np.concatenate(camera_footprints(an.truth, arena, n, t15)).tolist()
                           for n in names))
    aware: dict[str, float | None] = {}
    rel = an.times - an.t_start
    for name in names:
        err = an.agents[name].errors.pos_err
        ok = np.flatnonzero(np.nan_to_num(err, nan=np.inf) <= ACCURATE)
        aware[name] = float(rel[ok[0]]) if ok.size else None
    known = [v for v in aware.values() if v is not None]
    return {
        "search_overlap": overlap,
        "search_union_fraction": len(union) / cells,
        "union_15s_fraction": len(seen15) / cells,
        "all_accurate_s": max(known) if len(known) == len(names) else None,
        "accurate_s": aware,
    }


def _liar_trace(an: Any, liar: str) -> dict[str, Any]:
    """When each honest agent stopped fusing the liar's TRACKs (after the onset)."""
    out: dict[str, Any] = {}
    for name, log in an.run.agents.items():
        if name == liar:
            continue
        events = [e for e in log.events("peer_track") if e.get("peer") == liar]
        after = [e for e in events if e["t"] - an.t_start >= BYZANTINE_ONSET]
        # TRACKs that carried new measurements: fused, or refused by reputation (the
        # ones with nothing new are skipped whoever sends them).
        after = [e for e in after if e.get("outcome", "fused") in ("fused", "distrusted")]
        refused = [e["t"] - an.t_start for e in after if e.get("outcome") == "distrusted"]
        out[name] = {
            "tracks_after_onset": len(after),
            "fused_after_onset": sum(1 for e in after if e.get("fused")),
            "first_refused_s": refused[0] if refused else None,
            "score_end": after[-1].get("score") if after else None,
        }
    return out


def run_job(job: Job, keep: str | None = None) -> dict[str, Any]:
    """Run one job in lockstep and measure it; an exception becomes an ``error``."""
    from tools.experiments.lockstep import run_scenario

    began = time.perf_counter()
    out: dict[str, Any] = {"key": job.key, "job": job}
    try:
        scenario = job.scenario_of()
        with tempfile.TemporaryDirectory(prefix="stigmesh-evidence-") as tmp:
            run_dir = Path(tmp) if keep is None else Path(keep) / job.key
            run_dir.mkdir(parents=True, exist_ok=True)
            run_scenario(scenario, run_dir)
            an = analysis_of(run_dir, scenario.arena)
            m = trial_metrics(run_dir, scenario.arena, an)
            out["metrics"] = m
            out["series"] = _series(an)
            if job.search:
                m.update(_search_metrics(an, scenario.arena, m["first_detection_s"]))
            if job.liar is not None:
                out["liar"] = _liar_trace(an, job.liar)
    except Exception:
        out["error"] = traceback.format_exc(limit=8)
    out["seconds"] = time.perf_counter() - began
    return out


def run_jobs(jobs: Sequence[Job], workers: int, keep: str | None) -> dict[str, dict[str, Any]]:
    began = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(run_job, job, keep): job for job in jobs}
        for n, future in enumerate(as_completed(futures), start=1):
            result = future.result()
            results[result["key"]] = result
            if "error" in result:
                print(f"\n{result['key']} FAILED:\n{result['error']}", file=sys.stderr)
            print("\r" + progress_bar(n, len(jobs), began), end="", flush=True)
    print(flush=True)
    return results


def run_real_default(seed: int, duration: float | None, work: Path) -> dict[str, Any]:
    from tools.experiments.progress import Progress
    from tools.experiments.realrun import run_real

    out: dict[str, Any] = {"seed": seed}
    scenario = load_scenario(SCENARIOS / "default.toml").with_seed(seed)
    if duration is not None:
        scenario = replace(scenario, duration=duration)
    run_dir = work / f"real-default-{seed}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    try:
        _, codes = run_real(scenario, run_dir, random.randint(30000, 40000),
                            Progress(scenario.duration, quiet=True, every=10.0))
        out["codes"] = codes
        out["metrics"] = trial_metrics(run_dir, scenario.arena)
    except Exception:
        out["error"] = traceback.format_exc(limit=6)
    return out
