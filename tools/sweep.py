"""``stigmesh sweep SCENARIO.toml --over loss=0,0.5,0.9 --seeds 10 --fusion ci,naive,none``.

Runs the scenario in lockstep for every point of the grid (each ``--over`` axis ×
seeds × fusion rules) in parallel on the machine's cores, measures each run with
``tools.replay`` and writes ONE table: per cell, mean ± std over the seeds of the
median track error after 20 s, NEES consistency, time to first detection, the
overlap of what the robots' cameras covered, and bytes per second per agent.

Axes (each sets every agent's *inbound* link faults from t = 0; a scenario step
that later sets an agent's inbound faults replaces them):

- ``loss=P,...``: drop probability (``drop=P``).
- ``delay=D,...``: delay, ``50ms`` or seconds (``delay=D``).
- ``burst=P,...``: Gilbert–Elliott burst loss with stationary loss P and a mean
  burst of ``--burst-length`` datagrams (``burst=ENTER,LEAVE``, LEAVE = 1/length).

The seeds are the scenario's seed and the next ``--seeds`` − 1 integers; for
one seed every fusion rule and every axis value sees the same world, and the
fault streams lose nested sets of datagrams (paired comparisons).
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import math
import os
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from agents.faults import LinkFaults
    from tools.replay.metrics import Analysis, Truth
    from tools.scenario import Scenario
    from worlds.arena import Arena

PROG = "stigmesh sweep"
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
AXES = ("loss", "delay", "burst")
FUSIONS = ("ci", "naive", "max_confidence", "none")
FOOTPRINT_STEP = 0.5  # s between camera footprints
FOOTPRINT_WINDOW = 10.0  # s: overlap of what two robots covered within the same window

# (key in a trial's metrics, column title, format)
COLUMNS = (
    ("err_after_20_m", "err p50 after 20 s (m)", "{:.3f}"),
    ("nees4_inside", "NEES4 in 95 % bounds", "{:.2f}"),
    ("nees2_inside", "NEES2 in 95 % bounds", "{:.2f}"),
    ("first_detection_s", "1st detection (s)", "{:.1f}"),
    ("footprint_overlap", "footprint overlap", "{:.2f}"),
    ("kbytes_per_s", "sent (KB/s/agent)", "{:.2f}"),
)


class SweepError(ValueError):
    """A bad ``--over``, ``--seeds``, ``--fusion`` or ``--jobs`` value."""


# ---------------------------------------------------------------- the grid


@dataclass(frozen=True)
class Axis:
    name: str
    values: tuple[float, ...]
    texts: tuple[str, ...]  # as given, for the table


def parse_axis(text: str) -> Axis:
    from agents.faults.tokens import FaultSpecError, parse_duration, parse_probability

    name, sep, rest = text.partition("=")
    name = name.strip().lower()
    if not sep or name not in AXES:
        raise SweepError(f"--over {text!r}: expected NAME=V1,V2,... with NAME one of "
                         f"{', '.join(AXES)}")
    texts = tuple(v.strip() for v in rest.split(",") if v.strip())
    if not texts:
        raise SweepError(f"--over {text!r}: no values")
    values = []
    for v in texts:
        try:
            if name == "delay":
                values.append(parse_duration(v, "delay", unit_required=False))
            else:
                p = parse_probability(v, name)
                if name == "burst" and p >= 1.0:
                    raise SweepError(f"--over {text!r}: a burst loss must be below 1")
                values.append(p)
            link_faults({name: values[-1]})  # the spec's own ranges
        except FaultSpecError as exc:
            raise SweepError(f"--over {text!r}: {exc.problem}") from None
    if len(set(values)) != len(values):
        raise SweepError(f"--over {text!r}: a value is repeated")
    return Axis(name, tuple(values), texts)


def link_faults(point: Mapping[str, float], burst_length: float = 8.0) -> LinkFaults:
    """The inbound faults of one grid point."""
    from agents.faults import BurstLoss, LinkFaults

    kw: dict[str, Any] = {}
    if point.get("loss"):
        kw["drop"] = point["loss"]
    if point.get("delay"):
        kw["delay"] = point["delay"]
    p = point.get("burst", 0.0)
    if p:
        leave = 1.0 / burst_length
        kw["burst"] = BurstLoss(enter=min(1.0, p * leave / (1.0 - p)), leave=leave)
    return LinkFaults(**kw)


@dataclass(frozen=True)
class Trial:
    """One lockstep run of the grid (picklable: the scenario travels as its file)."""

    scenario: str
    seed: int
    fusion: str | None  # None: as the scenario says
    point: tuple[tuple[str, float], ...]
    burst_length: float = 8.0
    keep: str | None = None  # a directory to keep the run in

    @property
    def label(self) -> str:
        parts = [f"{k}={v:g}" for k, v in self.point]
        return "-".join([*parts, self.fusion or "as-file", f"seed{self.seed}"])


def build(trial: Trial) -> Scenario:
    from agents.transport import Direction
    from tools.scenario import every_agent_faults, load_scenario

    scenario = load_scenario(trial.scenario).with_seed(trial.seed)
    if trial.fusion is not None:
        scenario = scenario.with_fusion(trial.fusion)
    spec = link_faults(dict(trial.point), trial.burst_length)
    if not spec.is_clear:
        scenario = scenario.with_actions([every_agent_faults(0.0, spec, Direction.IN)])
    return scenario


def run_trial(trial: Trial) -> dict[str, Any]:
    """Run one trial in lockstep and measure it; never raises (an error is a result)."""
    from tools.lockstep import run_scenario

    began = time.perf_counter()
    out: dict[str, Any] = {"label": trial.label, "seed": trial.seed, "fusion": trial.fusion,
                           "point": dict(trial.point)}
    try:
        scenario = build(trial)
        if trial.keep is not None:
            run_dir = Path(trial.keep) / trial.label
            run_dir.mkdir(parents=True, exist_ok=True)
            run_scenario(scenario, run_dir)
            out["metrics"] = trial_metrics(run_dir, scenario.arena)
            out["run_dir"] = str(run_dir)
        else:
            with tempfile.TemporaryDirectory(prefix="stigmesh-sweep-") as tmp:
                run_scenario(scenario, Path(tmp))
                out["metrics"] = trial_metrics(Path(tmp), scenario.arena)
    except Exception:
        out["error"] = traceback.format_exc(limit=8)
    out["seconds"] = time.perf_counter() - began
    return out


# ---------------------------------------------------------------- measuring one run


def _mean(values: Iterable[float | None]) -> float | None:
    v = [x for x in values if x is not None and math.isfinite(x)]
    return sum(v) / len(v) if v else None


def camera_footprints(
    truth: Truth, arena: Arena, name: str, times: npt.NDArray[np.float64]
) -> list[npt.NDArray[np.int64]]:
    """Room cells (flat indices, 0.1 m lattice) in the camera's view at each time.

    Range and field of view from the arena's sensing, line of sight blocked by
    obstacles at least as tall as the camera (their bounding boxes).
    """
    import numpy as np

    cell = 0.1
    nx = math.ceil(arena.room.size_x / cell - 1e-9)
    ny = math.ceil(arena.room.size_y / cell - 1e-9)
    gx, gy = np.meshgrid((np.arange(nx) + 0.5) * cell, (np.arange(ny) + 0.5) * cell)
    px, py = gx.ravel(), gy.ravel()
    s, model = arena.sensing, arena.car_model
    blockers = []
    for ob in arena.obstacles:
        if ob.height < model.camera_height:
            continue
        c, n = abs(math.cos(ob.yaw)), abs(math.sin(ob.yaw))
        hx, hy = (c * ob.size_x + n * ob.size_y) / 2, (n * ob.size_x + c * ob.size_y) / 2
        blockers.append((ob.x - hx, ob.x + hx, ob.y - hy, ob.y + hy))
    poses = truth.car_at(name, times)
    out = []
    for x, y, yaw in poses:
        if not math.isfinite(x):
            out.append(np.zeros(0, dtype=np.int64))
            continue
        cx, cy = x + model.camera_forward * math.cos(yaw), y + model.camera_forward * math.sin(yaw)
        dx, dy = px - cx, py - cy
        r = np.hypot(dx, dy)
        bearing = np.abs(np.remainder(np.arctan2(dy, dx) - yaw + math.pi, 2 * math.pi) - math.pi)
        seen = (r >= 0.15) & (r <= s.range) & (bearing <= math.radians(s.hfov_deg) / 2)
        with np.errstate(divide="ignore", invalid="ignore"):
            ix, iy = 1.0 / dx, 1.0 / dy
            for x0, x1, y0, y1 in blockers:
                ax, bx = (x0 - cx) * ix, (x1 - cx) * ix
                ay, by = (y0 - cy) * iy, (y1 - cy) * iy
                enter = np.maximum(np.minimum(ax, bx), np.minimum(ay, by))
                leave = np.minimum(np.maximum(ax, bx), np.maximum(ay, by))
                seen &= ~((enter <= leave) & (leave >= 0.0) & (enter <= 1.0))
        out.append(np.flatnonzero(seen))
    return out


def footprint_overlap(
    truth: Truth,
    arena: Arena,
    names: Sequence[str],
    t_from: float,
    t_to: float,
    *,
    window: float = FOOTPRINT_WINDOW,
) -> dict[str, Any]:
    """How much the robots' cameras looked at the same cells in the same time windows.

    Per window of ``window`` seconds, the cells each camera covered; the overlap is
    |A ∩ B| / |A ∪ B| averaged over windows and pairs of robots. ``union_fraction``:
    the fraction of the room any camera covered over the whole span.
    """
    import numpy as np

    times = np.arange(t_from, t_to, FOOTPRINT_STEP)
    if times.size == 0 or len(names) < 1:
        return {"overlap": None, "union_fraction": None, "windows": 0}
    cells = {n: camera_footprints(truth, arena, n, times) for n in names}
    n_cells = math.ceil(arena.room.size_x / 0.1 - 1e-9) * math.ceil(arena.room.size_y / 0.1 - 1e-9)
    every: set[int] = set()
    for per_time in cells.values():
        for c in per_time:
            every.update(c.tolist())
    ratios = []
    bins = np.floor((times - t_from) / window).astype(int)
    for b in np.unique(bins):
        sets = {n: set(np.concatenate([cells[n][k] for k in np.flatnonzero(bins == b)]).tolist())
                for n in names}
        for first, second in itertools.combinations(names, 2):
            union = sets[first] | sets[second]
            if union:
                ratios.append(len(sets[first] & sets[second]) / len(union))
    return {
        "overlap": float(np.mean(ratios)) if ratios else None,
        "union_fraction": len(every) / n_cells,
        "windows": len(ratios),
    }


def analysis_of(run_dir: Path, arena: Arena) -> Analysis:
    from tools.replay.load import load_run
    from tools.replay.metrics import analyse, room_cells_of

    room = room_cells_of(arena.room.size_x, arena.room.size_y, 0.1)
    return analyse(load_run(run_dir), room_cells=room)


def trial_metrics(run_dir: Path, arena: Arena, an: Analysis | None = None) -> dict[str, Any]:
    """The numbers of one run, from its logs (``tools.replay.metrics``) and its truth."""
    import numpy as np

    from tools.replay.metrics import jsonable, nees_bounds, run_metrics

    an = an if an is not None else analysis_of(run_dir, arena)
    m = jsonable(run_metrics(an))
    tails: dict[str, dict[str, float | None]] = {}
    for name, agent in an.agents.items():
        tails[name] = {}
        if agent.errors is None:
            continue
        for key, values, dof in (("nees4", agent.errors.nees4, 4),
                                 ("nees2", agent.errors.nees2, 2)):
            v = values[np.isfinite(values)]
            lo, hi = nees_bounds(dof)
            tails[name][f"{key}_below"] = float(np.mean(v < lo)) if v.size else None
            tails[name][f"{key}_above"] = float(np.mean(v > hi)) if v.size else None
    per: dict[str, dict[str, Any]] = {}
    for name, ag in m["agents"].items():
        e = ag.get("errors", {})
        per[name] = {
            "err_after_20_m": e.get("position_error_after_settle_m", {}).get("median"),
            "err_all_m": e.get("position_error_m", {}).get("median"),
            "nees4_inside": e.get("nees4", {}).get("fraction_inside"),
            "nees2_inside": e.get("nees2", {}).get("fraction_inside"),
            "nees4_mean": e.get("nees4", {}).get("mean"),
            "unc_after_20": e.get("uncertainty_after_settle", {}).get("median"),
            "unc_below_0_15": e.get("uncertainty_after_settle_below_0_15"),
            "speed_within_10": ag["speed_at_detection"]["within_10_percent"],
            "speed_n": ag["speed_at_detection"]["n"],
            "first_detection_s": ag.get("time_to_first_detection_s"),
            "kbytes_per_s": (ag["wire"]["tx_bytes_per_s"] or 0.0) / 1000.0,
            "detections": ag["detections"],
            "detections_per_s": ag["detections"] / max(1e-9, m["run"]["duration_s"]),
            "grid_peak_m": ag.get("grid_peak_error_m", {}).get("median"),
            **tails.get(name, {}),
        }
    out: dict[str, Any] = {
        key: _mean(p[key] for p in per.values())
        for key in ("err_after_20_m", "err_all_m", "nees4_inside", "nees2_inside", "nees4_mean",
                    "unc_after_20", "unc_below_0_15", "speed_within_10", "kbytes_per_s",
                    "detections_per_s", "grid_peak_m", "nees4_below", "nees4_above",
                    "nees2_below", "nees2_above")
    }
    out["first_detection_s"] = m["swarm"].get("time_to_first_detection_s")
    belief = [v["jaccard_now"]["median"] for v in m["swarm"]["coverage_overlap"].values()]
    out["belief_overlap"] = _mean(belief)
    if an.truth is not None:
        fp = footprint_overlap(an.truth, arena, sorted(an.agents), an.t_start, an.run.t_end)
        out["footprint_overlap"] = fp["overlap"]
        out["footprint_union"] = fp["union_fraction"]
    out["agents"] = per
    return out


# ---------------------------------------------------------------- the table


def mean_std(values: Sequence[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def aggregate(results: Sequence[Mapping[str, Any]], axes: Sequence[Axis],
              fusions: Sequence[str | None]) -> list[dict[str, Any]]:
    """One row per (axis values, fusion): mean, std and count of each metric over seeds."""
    rows = []
    grid = list(itertools.product(*(a.values for a in axes))) if axes else [()]
    for values in grid:
        point = dict(zip((a.name for a in axes), values, strict=True))
        for fusion in fusions:
            mine = [r for r in results if r["point"] == point and r["fusion"] == fusion]
            ok = [r["metrics"] for r in mine if "metrics" in r]
            row: dict[str, Any] = {"point": point, "fusion": fusion or "as file",
                                   "trials": len(mine), "failed": len(mine) - len(ok)}
            for key in (*(c[0] for c in COLUMNS), "footprint_union", "belief_overlap",
                        "unc_after_20", "nees4_mean", "detections_per_s"):
                vals = [float(m[key]) for m in ok if m.get(key) is not None]
                mean, std = mean_std(vals)
                row[key] = {"mean": mean, "std": std, "n": len(vals)}
            rows.append(row)
    return rows


def _cell(stat: Mapping[str, Any], fmt: str, trials: int) -> str:
    if stat["mean"] is None:
        return "–"
    text = f"{fmt.format(stat['mean'])} ± {fmt.format(stat['std'])}"
    return text + (f" ({stat['n']}/{trials})" if stat["n"] < trials else "")


def markdown(rows: Sequence[Mapping[str, Any]], axes: Sequence[Axis]) -> str:
    head = [a.name for a in axes] + ["fusion", "runs"] + [c[1] for c in COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        ok = row["trials"] - row["failed"]
        cells = [f"{row['point'][a.name]:g}" for a in axes] + [
            row["fusion"], f"{ok}" + (f" ({row['failed']} failed)" if row["failed"] else "")
        ]
        cells += [_cell(row[key], fmt, ok) for key, _, fmt in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def to_csv(rows: Sequence[Mapping[str, Any]], axes: Sequence[Axis]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    keys = [c[0] for c in COLUMNS] + ["footprint_union", "belief_overlap"]
    w.writerow([a.name for a in axes] + ["fusion", "trials", "failed"]
               + [f"{k}_{s}" for k in keys for s in ("mean", "std", "n")])
    for row in rows:
        w.writerow([row["point"][a.name] for a in axes] + [row["fusion"], row["trials"],
                                                            row["failed"]]
                   + [row[k][s] for k in keys for s in ("mean", "std", "n")])
    return buf.getvalue()


# ---------------------------------------------------------------- running the grid


def progress_bar(done: int, total: int, began: float, width: int = 24) -> str:
    elapsed = time.perf_counter() - began
    n = round(width * done / total) if total else width
    eta = elapsed / done * (total - done) if done else math.nan
    eta_text = "?" if not math.isfinite(eta) else f"{eta:.0f} s"
    return f"[{'#' * n}{'.' * (width - n)}] {done}/{total} runs, {elapsed:.0f} s, ETA {eta_text}"


def run_trials(trials: Sequence[Trial], jobs: int, quiet: bool = False) -> list[dict[str, Any]]:
    """Every trial, ``jobs`` at a time in worker processes; results in the trials' order."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    began = time.perf_counter()
    results: dict[int, dict[str, Any]] = {}
    tty = sys.stdout.isatty()
    if jobs <= 1:
        for i, trial in enumerate(trials):
            results[i] = run_trial(trial)
            _report(results[i], i + 1, len(trials), began, tty=tty, quiet=quiet)
        return [results[i] for i in range(len(trials))]
    context = multiprocessing.get_context("spawn")  # fresh interpreters: no shared PyBullet
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {pool.submit(run_trial, t): i for i, t in enumerate(trials)}
        for n, future in enumerate(as_completed(futures), start=1):
            i = futures[future]
            results[i] = future.result()
            _report(results[i], n, len(trials), began, tty=tty, quiet=quiet)
    return [results[i] for i in range(len(trials))]


def _report(result: Mapping[str, Any], done: int, total: int, began: float, *, tty: bool,
            quiet: bool) -> None:
    if quiet:
        return
    line = progress_bar(done, total, began)
    if "error" in result:
        print(f"\n{PROG}: {result['label']} failed:\n{result['error']}", file=sys.stderr)
    if tty:
        print("\r" + line, end="\n" if done == total else "", flush=True)
    elif done == total or done % max(1, total // 10) == 0:
        print(line, flush=True)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", metavar="SCENARIO.toml", help="scenario file or shipped name")
    p.add_argument("--over", action="append", default=[], metavar="AXIS=V1,V2,...",
                   help=f"an axis of the grid ({', '.join(AXES)}), repeatable")
    p.add_argument("--seeds", type=int, default=10, help="seeds per cell (default 10)")
    p.add_argument("--seed", type=int, default=None,
                   help="the first seed (default: the scenario's)")
    p.add_argument("--fusion", default=None,
                   help="comma-separated fusion rules (ci,naive,max_confidence,none); "
                   "default: as the scenario says")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="runs at once (default: the number of cores)")
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
    from tools.scenario import find_scenario, load_scenario

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
    for trial in trials[: len(fusions)]:
        build(trial)  # a combination the scenario refuses fails now, not in a worker
    return scenario, axes, fusions, trials


def main(args: argparse.Namespace) -> int:
    from tools.scenario import ScenarioError

    try:
        scenario, axes, fusions, trials = plan(args)
    except (SweepError, ScenarioError) as exc:
        return _fail(str(exc))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out: Path = args.out or Path("runs") / f"sweep-{scenario.name}-{stamp}.md"
    sizes = [*(f"{len(a.values)} {a.name}" for a in axes), f"{len(fusions)} fusion",
             f"{args.seeds} seeds"]
    print(f"{PROG}: {scenario.name}: {len(trials)} lockstep runs of {scenario.duration:g} s "
          f"({' × '.join(sizes)}) on {args.jobs} worker(s)", flush=True)
    began = time.perf_counter()
    results = run_trials(trials, args.jobs, args.quiet)
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
             f"{time.perf_counter() - began:.0f} s on {args.jobs} worker(s); mean ± std over "
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
