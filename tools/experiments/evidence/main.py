"""The evidence's command: run the suite's jobs (or take them from the cache), the real runs,
then every experiment's section, in the order of :data:`EXPERIMENTS`, into the report and the
README's evidence table."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tools.experiments.evidence as package
from tools.experiments.evidence import (
    accuracy,
    consistency,
    faults,
    gyro,
    liars,
    modes,
    scenes,
    search,
    targets,
)
from tools.experiments.evidence.jobs import Cache, run_jobs, run_reals
from tools.experiments.evidence.plan import (
    FULL,
    QUICK,
    ROOT,
    Plan,
    Results,
    jobs_for,
    real_jobs,
)
from tools.experiments.evidence.report import write, write_readme_table

if TYPE_CHECKING:
    from tools.experiments.scenario import Suite

# Every experiment, in the report's order: a module with ``section(results) -> Section | None``.
EXPERIMENTS = (targets, scenes, accuracy, consistency, liars, search, faults, modes, gyro)


def _say(text: str) -> None:
    print(text, flush=True)


def _commit() -> str:
    """The checkout measured: its commit, and whether its sources differ from it (the
    report's own modules aside: they change no run and no measure)."""
    import subprocess

    from tools.experiments.evidence.jobs import _runs_it

    def git(*a: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *a], check=False,
                              capture_output=True, text=True, timeout=30).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = [line.split(maxsplit=1)[-1] for line in git(
        "status", "--porcelain", "--", "agents", "protocol", "worlds", "tools", "scenarios"
    ).splitlines()]  # "XY path": the status letters, a space, the path
    measured = [p for p in dirty if _runs_it(ROOT / p)]
    return head + (" with uncommitted changes" if measured else "")


def _full_cost(suite: Suite, plan: Plan, res: dict[str, dict[str, Any]]) -> str:
    """What the suite's own seeds would cost, from the runs' measured seconds (by scene and
    variant); empty when this plan is the suite's."""
    if plan == FULL:
        return ""
    cost: dict[tuple[str, str], list[float]] = {}
    for job in jobs_for(suite, plan):
        if job.key in res:
            cost.setdefault((job.scene, job.variant), []).append(res[job.key]["seconds"])
    full = jobs_for(suite, FULL)
    known = [sum(v) / len(v) for j in full if (v := cost.get((j.scene, j.variant)))]
    return (f". The suite's own seeds would be {len(full)} lockstep runs, about "
            f"{sum(known) / 3600:.1f} h of compute at the cost per run measured here")


def main(argv: Sequence[str] | None = None) -> int:
    from tools.experiments.cluster import ClusterError
    from tools.experiments.scenario import ScenarioError
    from tools.experiments.scenario_file import SUITE_FILE, load_suite

    parser = argparse.ArgumentParser(prog="python -m tools.experiments.evidence",
                                     description=package.__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="2 seeds (4 places), no real runs: a smoke test, not evidence")
    parser.add_argument("--suite", type=Path, default=SUITE_FILE, help="the suite file")
    parser.add_argument("--out", type=Path, default=None,
                        help="where evidence.md and the figures go (default docs/, or "
                        "runs/evidence-quick/ with --quick)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="worker processes of the local Dask cluster (default: the cores; "
                        "1: in this process)")
    parser.add_argument("--scheduler", default=None, metavar="ADDR",
                        help="run the lockstep jobs on the Dask cluster of this scheduler")
    parser.add_argument("--seeds", type=int, default=None, metavar="N",
                        help="at most N seeds per scene (default: the suite's); the page says "
                        "how many ran")
    parser.add_argument("--places", type=int, default=None, metavar="N",
                        help="at most N hiding places for a search scene (default: the suite's)")
    parser.add_argument("--seeds-of", default=None, metavar="SCENE=N,...",
                        help="at most N seeds (places) for these scenes, beside --seeds")
    parser.add_argument("--real", default=None, metavar="SCENE,...",
                        help="real-process runs of these scenes only (default: every scene)")
    parser.add_argument("--no-real", action="store_true", help="skip the real-process runs")
    parser.add_argument("--fresh", action="store_true",
                        help="ignore the cache (runs/evidence-cache/): run every job again")
    parser.add_argument("--no-readme", action="store_true",
                        help="leave the README's evidence table alone")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    try:
        suite = load_suite(args.suite)
    except ScenarioError as exc:
        print(f"evidence: {exc}", flush=True)
        return 2
    plan = QUICK if args.quick else FULL
    if any(v is not None for v in (args.seeds, args.places, args.real, args.seeds_of)):
        only = frozenset(args.real.split(",")) if args.real else None
        try:
            own = tuple((k, int(n)) for k, n in (item.split("=") for item in
                                                  (args.seeds_of or "").split(",") if item))
        except ValueError:
            print(f"evidence: --seeds-of wants SCENE=N,..., not {args.seeds_of!r}", flush=True)
            return 2
        unknown = sorted(({*(only or ()), *(k for k, _ in own)}) - {s.name for s in suite.scenes})
        if unknown or min(args.seeds or 1, args.places or 1, *(n for _, n in own)) < 1:
            print(f"evidence: no scene {', '.join(unknown)} in the suite" if unknown else
                  "evidence: --seeds, --places and --seeds-of are at least 1", flush=True)
            return 2
        plan = replace(plan, seeds=args.seeds or plan.seeds or 1000,
                       search_seeds=args.places or plan.search_seeds, real_scenes=only,
                       scene_seeds=own)
    out: Path = args.out or (ROOT / "runs" / "evidence-quick" if args.quick else ROOT / "docs")
    figdir = out / "evidence"
    figdir.mkdir(parents=True, exist_ok=True)
    cache = None if args.fresh else Cache(ROOT / "runs" / "evidence-cache")
    jobs = jobs_for(suite, plan)
    _say(f"evidence: {len(suite.scenes)} scenes, {len(jobs)} lockstep runs")
    try:
        res = run_jobs(jobs, scheduler=args.scheduler, workers=args.jobs, cache=cache, say=_say)
    except ClusterError as exc:
        print(f"evidence: {exc}", flush=True)
        return 2
    lock_s = time.perf_counter() - began
    real = {} if args.no_real else run_reals(real_jobs(suite, plan), ROOT / "runs" /
                                             "evidence-real", cache, _say)
    real_s = time.perf_counter() - began - lock_s
    real_run = sum(r["seconds"] for r in real.values())  # the runs' own time, cached or not
    computed = sum(r["seconds"] for r in res.values())
    fewer = "" if plan == FULL else f" (the suite asks {suite.seeds} seeds)"
    measured = (f"{plan.describe(suite)}{fewer}, at commit {_commit()}: {len(res)} "
                f"lockstep runs "
                f"({computed / 60:.0f} min of compute; this "
                f"regeneration {lock_s / 60:.1f} min for them, the rest from the cache) and "
                f"{len(real)} real-process runs ({real_run / 60:.0f} min; this regeneration "
                f"{real_s / 60:.1f} min), on {os.cpu_count()} "
                f"cores shared with other work ({time.strftime('%Y-%m-%d %H:%M')})"
                + _full_cost(suite, plan, res))
    results = Results(res, real, suite, plan, figdir)
    sections = [s for s in (e.section(results) for e in EXPERIMENTS) if s is not None]
    failed = sorted(k for k, r in res.items() if "error" in r)
    failed_real = sorted(k for k, r in real.items() if "error" in r)
    extra = {"failed_runs": failed, "failed_real_runs": failed_real,
             "seconds": {k: r["seconds"] for k, r in res.items()},
             "real": {k: {key: v for key, v in r.items() if key not in ("series", "deps")}
                      for k, r in real.items()}}
    command = " ".join(["python -m tools.experiments.evidence",
                        *(sys.argv[1:] if argv is None else argv)])
    md = write(sections, out, quick=args.quick, measured=measured, extra=extra, command=command)
    if not args.quick and not args.no_readme and args.out is None:
        met = sum(1 for t in targets.evaluate(results) if t.met)
        total = len(targets.evaluate(results))
        intro = (f"[docs/evidence.md](docs/evidence.md), written by `{command}` from the "
                 f"scenario suite (`scenarios/suite.toml`: "
                 f"{len(suite.scenes)} scenes, lockstep, {plan.describe(suite)}{fewer}; "
                 f"{len(real)} real-process run(s)). {met} of {total} "
                 "targets met. Each target is shown on its **worst** scene; the page gives "
                 "every scene and a figure per target.")
        if not write_readme_table(ROOT / "README.md", targets.readme_table(results), intro):
            _say("evidence: README.md has no evidence-table markers; its table is unchanged")
    _say(f"evidence: wrote {md} ({len(failed)} failed lockstep run(s), {len(failed_real)} "
         f"failed real run(s)) in {(time.perf_counter() - began) / 60:.1f} min")
    return 1 if failed or failed_real else 0
