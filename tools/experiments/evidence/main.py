"""The evidence's command: run the jobs (or reuse the last run's), then every experiment's
section, in the order of :data:`EXPERIMENTS`, into the report."""

from __future__ import annotations

import argparse
import os
import pickle
import time
from collections.abc import Sequence
from pathlib import Path

import tools.experiments.evidence as package
from tools.experiments.evidence import (
    byzantine,
    consistency,
    coverage,
    degradation,
    fusion,
    modes,
    seed,
)
from tools.experiments.evidence.jobs import run_jobs, run_real_default
from tools.experiments.evidence.plan import FULL, QUICK, ROOT, Results, jobs_for
from tools.experiments.evidence.report import write

# Every experiment, in the report's order: a module with ``section(results) -> Section | None``.
EXPERIMENTS = (fusion, consistency, coverage, degradation, byzantine, seed, modes)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.experiments.evidence",
                                     description=package.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a couple of minutes, not evidence")
    parser.add_argument("--out", type=Path, default=None,
                        help="where evidence.md and the figures go (default docs/, or "
                        "runs/evidence-quick/ with --quick)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="lockstep runs at once (default: the cores)")
    parser.add_argument("--no-real", action="store_true",
                        help="skip the real-process runs of experiment 7")
    parser.add_argument("--keep-runs", type=Path, default=None,
                        help="keep every lockstep run directory under this one")
    parser.add_argument("--reuse", action="store_true",
                        help="write the report from the last run's measurements (runs/evidence"
                        "[-quick].pickle) instead of running again")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    out: Path = args.out or (ROOT / "runs" / "evidence-quick" if args.quick else ROOT / "docs")
    figdir = out / "evidence"
    figdir.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    jobs = jobs_for(plan)
    print(f"evidence: {len(jobs)} lockstep runs on {args.jobs} worker(s)"
          + ("" if args.no_real else f", then {plan.real_runs} real run(s)"), flush=True)
    keep = str(args.keep_runs) if args.keep_runs is not None else None
    cache = ROOT / "runs" / ("evidence-quick.pickle" if args.quick else "evidence.pickle")
    if args.reuse:
        with cache.open("rb") as f:
            saved = pickle.load(f)  # our own file, written below by this tool
        res, real = saved[0], saved[1]
        measured = (saved[2] if len(saved) > 2 else "measured by an earlier run") + \
            f"; report redrawn {time.strftime('%Y-%m-%d %H:%M')}"
    else:
        res = run_jobs(jobs, args.jobs, keep)
        real = []
        if not args.no_real:
            work = ROOT / "runs" / ("evidence-quick-real" if args.quick else "evidence-real")
            for k in range(1, plan.real_runs + 1):
                print(f"evidence: real run {k}/{plan.real_runs} (seed {k})", flush=True)
                real.append(run_real_default(k, plan.real_duration or plan.duration, work))
        measured = (f"measured in {(time.perf_counter() - began) / 60:.1f} min on "
                    f"{os.cpu_count()} cores ({time.strftime('%Y-%m-%d %H:%M')})")
        cache.parent.mkdir(parents=True, exist_ok=True)
        with cache.open("wb") as f:
            pickle.dump((res, real, measured), f)
    results = Results(res, real, plan, figdir)
    sections = [s for s in (e.section(results) for e in EXPERIMENTS) if s is not None]
    failed = [k for k, r in res.items() if "error" in r]
    extra = {"failed_runs": failed, "seconds": {k: r["seconds"] for k, r in res.items()},
             "real": [{k: v for k, v in r.items() if k != "series"} for r in real]}
    md = write(sections, out, plan, quick=args.quick, measured=measured, extra=extra)
    print(f"evidence: wrote {md} ({len(failed)} failed run(s)) in "
          f"{(time.perf_counter() - began) / 60:.1f} min", flush=True)
    return 1 if failed else 0
