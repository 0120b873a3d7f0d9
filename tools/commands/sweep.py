"""``stigmesh sweep SCENARIO.toml --over loss=0,0.5,0.9 --seeds 10 --fusion ci,naive,none``
(``--over gyro=1,0``: with and without the cars' gyro; ``--over localizer.gyro_scale_std=0,0.02``:
an agent setting, on every agent).

Runs the scenario in lockstep for every point of the grid on a Dask cluster (a local
one on the machine's cores, or ``--scheduler ADDR``), and writes ONE table (``.md``,
with ``.csv`` and ``.json`` beside it); the grid, the measures and the table are
:mod:`tools.experiments.sweep`'s.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tools.experiments.cluster import ClusterError
from tools.experiments.measure import FOOTPRINT_WINDOW
from tools.experiments.scenario import FUSIONS
from tools.experiments.sweep import (
    AXES,
    PROG,
    Axis,
    SweepError,
    Trial,
    aggregate,
    build,
    markdown,
    parse_axis,
    run_trials,
    to_csv,
)

if TYPE_CHECKING:
    from tools.experiments.scenario import Scenario

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", metavar="SCENARIO.toml", help="scenario file or shipped name")
    p.add_argument("--over", action="append", default=[], metavar="AXIS=V1,V2,...",
                   help=f"an axis of the grid ({', '.join(AXES)}), repeatable; loss, "
                   "delay and burst are every agent's inbound link faults from t = 0 "
                   "(loss=0,0.5 delay=0,50ms burst=0,0.3), gyro=1,0 (or on,off / true,false) "
                   "runs every car with and without its yaw-rate gyro, gyro_scale=0,0.03 sets "
                   "the σ of its gyro's scale error; a dotted agent setting sets it on every "
                   "agent (localizer.gyro_scale_std=0,0.02)")
    p.add_argument("--seeds", type=int, default=10, help="seeds per cell (default 10)")
    p.add_argument("--seed", type=int, default=None,
                   help="the first seed (default: the scenario's)")
    p.add_argument("--fusion", default=None,
                   help="comma-separated fusion rules (ci,naive,max_confidence,none); "
                   "default: as the scenario says")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="worker processes of the local Dask cluster (default: the number of "
                   "cores; 1: one run after the other in this process)")
    p.add_argument("--scheduler", default=None, metavar="ADDR",
                   help="run on the Dask cluster of this scheduler (tcp://HOST:8786) instead "
                   "of a local one; its workers must run this checkout's code")
    p.add_argument("--burst-length", type=float, default=8.0,
                   help="mean burst length in datagrams for the burst axis (default 8)")
    p.add_argument("--out", type=Path, default=None,
                   help="the table's file (.md; .csv and .json are written beside it); "
                   "default runs/sweep-NAME-DATE.md")
    p.add_argument("--keep-runs", type=Path, default=None,
                   help="keep every run directory under this one (default: deleted)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _fail(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return EXIT_USAGE


def plan(args: argparse.Namespace) -> tuple[Scenario, list[Axis], list[str | None], list[Trial]]:
    """The scenario, the axes, the fusion rules and every trial; raises SweepError or
    ScenarioError."""
    from tools.experiments.scenario_file import find_scenario, load_scenario

    path = find_scenario(args.scenario)
    scenario = load_scenario(path)
    axes = [parse_axis(text) for text in args.over]
    names = [a.name for a in axes]
    if len(set(names)) != len(names):
        raise SweepError("an axis is given twice")
    fusions: list[str | None] = [None]
    if args.fusion:
        given = [f.strip() for f in args.fusion.split(",") if f.strip()]
        bad = [f for f in given if f not in FUSIONS]
        fusions = list(given)
        if bad or not given or len(set(given)) != len(given):
            raise SweepError(f"--fusion: {', '.join(bad) or 'none given'}: one of "
                             f"{', '.join(FUSIONS)}")
    if not 1 <= args.seeds <= 1000:
        raise SweepError("--seeds must be in 1..1000")
    if not 1 <= args.jobs <= 64:
        raise SweepError("--jobs must be in 1..64")
    if not 1.0 <= args.burst_length <= 1e4:
        raise SweepError("--burst-length must be in 1..10000 datagrams")
    first = scenario.seed if args.seed is None else args.seed
    if first < 0 or first + args.seeds > 2**32:
        raise SweepError("seeds must stay in [0, 2^32)")
    keep = str(args.keep_runs) if args.keep_runs is not None else None
    trials = [
        Trial(str(path), first + k, fusion, tuple(zip(names, values, strict=True)),
              args.burst_length, keep)
        for values in (itertools.product(*(a.values for a in axes)) if axes else [()])
        for fusion in fusions
        for k in range(args.seeds)
    ]
    for trial in trials[:: args.seeds]:  # each cell's first seed
        build(trial)  # a combination the scenario refuses fails now, not in a worker
    return scenario, axes, fusions, trials


def main(args: argparse.Namespace) -> int:
    from tools.experiments.scenario import ScenarioError

    try:
        scenario, axes, fusions, trials = plan(args)
    except (SweepError, ScenarioError) as exc:
        return _fail(str(exc))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out: Path = args.out or Path("runs") / f"sweep-{scenario.name}-{stamp}.md"
    if out.parent.exists() and not out.parent.is_dir():  # found before the runs, not after
        return _fail(f"--out {out}: {out.parent} is a file, not a folder")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _fail(f"--out {out}: its folder {out.parent} cannot be made "
                     f"({exc.strerror or exc})")
    sizes = [*(f"{len(a.values)} {a.name}" for a in axes), f"{len(fusions)} fusion",
             f"{args.seeds} seeds"]
    where = (f"the Dask cluster at {args.scheduler}" if args.scheduler else
             f"{args.jobs} local worker(s)")
    print(f"{PROG}: {scenario.name}: {len(trials)} lockstep runs of {scenario.duration:g} s "
          f"({' × '.join(sizes)}) on {where}", flush=True)
    began = time.perf_counter()
    try:
        results = run_trials(trials, args.jobs, args.quiet, args.scheduler)
    except ClusterError as exc:
        return _fail(str(exc))
    rows = aggregate(results, axes, fusions)
    table = markdown(rows, axes)
    failed = sum(1 for r in results if "error" in r)
    seed = [f"--seed {args.seed}"] if args.seed is not None else []
    fusion = [f"--fusion {args.fusion}"] if args.fusion else []
    command = " ".join(["stigmesh sweep", args.scenario, *(f"--over {o}" for o in args.over),
                        f"--seeds {args.seeds}", *seed, *fusion])
    title = (f"# Sweep: {scenario.name}\n\n`{command}`\n\n"
             f"{len(trials)} lockstep runs of {scenario.duration:g} s, seeds "
             f"{trials[0].seed}..{trials[0].seed + args.seeds - 1}, "
             f"{time.perf_counter() - began:.0f} s on {where}; mean ± std over "
             "seeds; errors after 20 s are per agent, then averaged over agents; the footprint "
             f"overlap is |A∩B|/|A∪B| of the cells two cameras covered in the same "
             f"{FOOTPRINT_WINDOW:g} s window.\n\n")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".md").write_text(title + table, encoding="utf-8")
        out.with_suffix(".csv").write_text(to_csv(rows, axes), encoding="utf-8")
        out.with_suffix(".json").write_text(json.dumps(
            {"scenario": scenario.name, "source": scenario.source,
             "axes": {a.name: list(a.values) for a in axes},
             "fusions": [f or "as file" for f in fusions], "seeds": args.seeds,
             "rows": rows, "trials": results}, indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        print(f"{PROG}: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        print(table)
        return EXIT_FAILED
    print(table, flush=True)
    print(f"{PROG}: wrote {out.with_suffix('.md')}, .csv and .json"
          + (f"; {failed} run(s) FAILED" if failed else ""), flush=True)
    return EXIT_FAILED if failed else EXIT_OK
