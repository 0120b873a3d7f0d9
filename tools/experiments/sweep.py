"""A sweep: a scenario in lockstep over a grid of link faults (and world settings) × seeds ×
fusion rules.

``stigmesh sweep`` (:mod:`tools.commands.sweep`) runs the scenario in lockstep
for every point of the grid (each ``--over`` axis × seeds × fusion rules) on a
Dask cluster (:mod:`tools.experiments.cluster`: a local one on the machine's cores
by default, ``--scheduler ADDR`` for a real one), measures each run with
``tools.replay`` and writes ONE table: per cell, mean ± std over the seeds of the
track error while held after 20 s (median, p95), the fraction of time a track is
held, NEES consistency (each agent's own model), speed at detection, time to first
detection, the footprint redundancy of what the robots' cameras covered, bytes
per second per agent, and the robots' own heading error (p95 over their belief records)
and its NEES.

Axes (each sets every agent's *inbound* link faults from t = 0; a scenario step
that later sets an agent's inbound faults replaces them):

- ``loss=P,...``: drop probability (``drop=P``).
- ``delay=D,...``: delay, ``50ms`` or seconds (``delay=D``).
- ``burst=P,...``: Gilbert–Elliott burst loss with stationary loss P and a mean
  burst of ``--burst-length`` datagrams (``burst=ENTER,LEAVE``, LEAVE = 1/length).

A world axis sets the arena instead (every car; the run directory's ``arena.toml`` says
it, :meth:`~tools.experiments.scenario.Scenario.with_car_model`):

- ``gyro=1,0``: every car with a yaw-rate gyro (1, on, true) or without (0, off, false:
  its telemetry's ``gyro_z`` is null, as on the Freenove FNK0053 kit); 1.0 / 0.0 in the
  point, the table and the files.
- ``gyro_angle=1,0``: the cars' firmware integrates the gyro (telemetry's ``gyro_angle``)
  or is one from before that (the rate alone).
- ``gyro_scale=0,0.015,0.03``: the σ of the scale error each car's gyro draws at boot
  (worlds/ARENA.md), a number.

An axis named by a dotted agent setting (an :class:`~agents.config.AgentConfig` key, as a
scenario's ``[agents.NAME.set]`` takes it) sets it on every agent, a number per value:
``localizer.gyro_scale_std=0,0.02`` runs the pose filter without and with its gyro-scale
state.

The seeds are the scenario's seed and the next ``--seeds`` − 1 integers; for
one seed every fusion rule and every axis value sees the same world, and the
fault streams lose nested sets of datagrams (paired comparisons).
"""

from __future__ import annotations

import csv
import io
import itertools
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools.experiments.measure import trial_metrics
from tools.experiments.progress import progress_bar

if TYPE_CHECKING:
    from agents.faults import LinkFaults
    from tools.experiments.scenario import Scenario

PROG = "stigmesh sweep"


LINK_AXES = ("loss", "delay", "burst")  # every agent's inbound link faults (link_faults)
WORLD_AXES = ("gyro", "gyro_angle")  # the arena's car switches (build)
WORLD_NUMBERS = ("gyro_scale",)  # the arena's car constants (build)
AXES = (*LINK_AXES, *WORLD_AXES, *WORLD_NUMBERS)
SWITCH = {"1": 1.0, "on": 1.0, "true": 1.0, "0": 0.0, "off": 0.0, "false": 0.0}


COLUMNS = (
    ("err_after_20_m", "err p50 after 20 s (m)", "{:.3f}"),
    ("err_p95", "err p95 after 20 s (m)", "{:.3f}"),
    ("held", "track held", "{:.2f}"),
    ("nees4_inside", "NEES4 in 95 % bounds", "{:.2f}"),
    ("nees4_mean", "mean NEES4", "{:.2f}"),
    ("matched_nees4_mean", "mean NEES4, own filter and a matched sensor", "{:.2f}"),
    ("nees2_inside", "NEES2 in 95 % bounds", "{:.2f}"),
    ("speed_within_10", "speed within 10 %", "{:.2f}"),
    ("first_detection_s", "1st detection (s)", "{:.1f}"),
    ("redundancy", "footprint redundancy", "{:.2f}"),
    ("kbytes_per_s", "sent (KB/s/agent)", "{:.2f}"),
    ("pose_heading_p95_deg", "robot heading error p95 (°)", "{:.1f}"),
    ("pose_nees1_mean", "robot heading NEES1 (ideal 1)", "{:.2f}"),
)


class SweepError(ValueError):
    """A bad ``--over``, ``--seeds``, ``--fusion`` or ``--jobs`` value."""


@dataclass(frozen=True)
class Axis:
    name: str
    values: tuple[float, ...]
    texts: tuple[str, ...]  # as given, for the table


def parse_axis(text: str) -> Axis:
    from agents.faults.tokens import FaultSpecError, parse_duration, parse_probability

    name, sep, rest = text.partition("=")
    name = name.strip()
    if "." not in name:
        name = name.lower()
    if not sep or (name not in AXES and "." not in name):
        raise SweepError(f"--over {text!r}: expected NAME=V1,V2,... with NAME one of "
                         f"{', '.join(AXES)}, or a dotted agent setting")
    texts = tuple(v.strip() for v in rest.split(",") if v.strip())
    if not texts:
        raise SweepError(f"--over {text!r}: no values")
    values: list[float] = []
    for v in texts:
        if name in WORLD_NUMBERS or "." in name:
            values.append(_number_value(text, name, v))
            continue
        if name in WORLD_AXES:
            if v.lower() not in SWITCH:
                raise SweepError(f"--over {text!r}: {v!r} is not one of 1, 0, on, off, true, "
                                 "false")
            values.append(SWITCH[v.lower()])
            continue
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


def _number_value(text: str, name: str, v: str) -> float:
    """A numeric axis's value, checked where it goes: the arena's range for a car constant,
    the agent's settings for a dotted one."""
    from tools.agent_config import agent_config
    from tools.replay.overrides import OverrideError, apply_overrides
    from worlds.arena import load_arena, shipped_arena

    try:
        value = float(v)
    except ValueError:
        raise SweepError(f"--over {text!r}: {v!r} is not a number") from None
    if "." in name:
        try:
            arena = load_arena(shipped_arena("two_cars"))  # any agent's settings will do
            apply_overrides(agent_config(arena, arena.cars[0].name), {name: repr(value)})
        except OverrideError as exc:
            raise SweepError(f"--over {text!r}: {exc}") from None
    elif not 0.0 <= value <= 0.5:  # worlds/arena.py's range for gyro_scale
        raise SweepError(f"--over {text!r}: {name} must be in [0, 0.5]")
    return value


def agent_sets(point: Mapping[str, float]) -> tuple[tuple[str, str], ...]:
    """The dotted agent settings of a grid point, as a scenario's ``sets``."""
    return tuple((name, repr(value)) for name, value in point.items() if "." in name)


def link_faults(point: Mapping[str, float], burst_length: float = 8.0) -> LinkFaults:
    """The inbound faults of one grid point (its world axes are not faults: :func:`build`)."""
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
    """The trial's scenario: its seed, fusion rule, world axes (the arena's car constants)
    and link faults; raises ScenarioError."""
    from agents.transport import Direction
    from tools.experiments.scenario_file import load_scenario
    from tools.experiments.schedule import every_agent_faults

    scenario = load_scenario(trial.scenario).with_seed(trial.seed)
    if trial.fusion is not None:
        scenario = scenario.with_fusion(trial.fusion)
    point = dict(trial.point)
    world: dict[str, bool | float] = {
        name: bool(point[name]) for name in WORLD_AXES if name in point}
    world.update({name: point[name] for name in WORLD_NUMBERS if name in point})
    if world:
        scenario = scenario.with_car_model(**world)
    sets = agent_sets(point)
    if sets:
        scenario = replace(scenario, agents=tuple(replace(a, sets=(*a.sets, *sets))
                                                  for a in scenario.agents))
    spec = link_faults(point, trial.burst_length)
    if not spec.is_clear:
        scenario = scenario.with_actions([every_agent_faults(0.0, spec, Direction.IN)])
    return scenario


def run_trial(trial: Trial, scenario: Scenario | None = None) -> dict[str, Any]:
    """Run one trial in lockstep and measure it; never raises (an error is a result).
    ``scenario``: the trial already built (:func:`build`), as a cluster's task ships it."""
    from tools.experiments.lockstep import run_scenario

    began = time.perf_counter()
    out: dict[str, Any] = {"label": trial.label, "seed": trial.seed, "fusion": trial.fusion,
                           "point": dict(trial.point)}
    try:
        scenario = build(trial) if scenario is None else scenario
        configs = {n: scenario.agent_config(n) for n in scenario.names}  # each agent's own
        if scenario.target_place is not None:
            out["place"] = list(scenario.target_place)
        if trial.keep is not None:
            run_dir = Path(trial.keep) / trial.label
            run_dir.mkdir(parents=True, exist_ok=True)
            run_scenario(scenario.materialise(run_dir), run_dir)
            out["metrics"] = trial_metrics(run_dir, scenario.arena, configs=configs)
            out["run_dir"] = str(run_dir)
        else:
            with tempfile.TemporaryDirectory(prefix="stigmesh-sweep-") as tmp:
                run_scenario(scenario, Path(tmp))
                out["metrics"] = trial_metrics(Path(tmp), scenario.arena, configs=configs)
    except Exception:
        out["error"] = traceback.format_exc(limit=8)
    out["seconds"] = time.perf_counter() - began
    return out


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
            for key in (*(c[0] for c in COLUMNS), "footprint_union", "footprint_overlap",
                        "belief_overlap", "unc_after_20", "detections_per_s",
                        "search_redundancy", "err_max", "outside"):
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
    keys = [c[0] for c in COLUMNS] + ["footprint_union", "footprint_overlap", "belief_overlap",
                                      "search_redundancy"]
    w.writerow([a.name for a in axes] + ["fusion", "trials", "failed"]
               + [f"{k}_{s}" for k in keys for s in ("mean", "std", "n")])
    for row in rows:
        w.writerow([row["point"][a.name] for a in axes] + [row["fusion"], row["trials"],
                                                            row["failed"]]
                   + [row[k][s] for k in keys for s in ("mean", "std", "n")])
    return buf.getvalue()


def _task(item: tuple[Trial, Scenario]) -> dict[str, Any]:
    return run_trial(*item)


def _lost(item: tuple[Trial, Scenario], exc: BaseException) -> dict[str, Any]:
    trial = item[0]
    return {"label": trial.label, "seed": trial.seed, "fusion": trial.fusion,
            "point": dict(trial.point), "error": f"the worker was lost: {exc!r}", "seconds": 0.0}


def run_trials(trials: Sequence[Trial], jobs: int, quiet: bool = False,
               scheduler: str | None = None) -> list[dict[str, Any]]:
    """Every trial, on a Dask cluster (``jobs`` local worker processes, or the cluster of
    ``scheduler``); results in the trials' order. ``jobs`` = 1 without a scheduler runs
    them one after the other in this process."""
    from tools.experiments.cluster import Cluster

    began = time.perf_counter()
    results: dict[int, dict[str, Any]] = {}
    tty = sys.stdout.isatty()
    if jobs <= 1 and scheduler is None:
        for i, trial in enumerate(trials):
            results[i] = run_trial(trial)
            _report(results[i], i + 1, len(trials), began, tty=tty, quiet=quiet)
        return [results[i] for i in range(len(trials))]
    items = [(t, build(t)) for t in trials]  # built here: workers need the code, not the files
    with Cluster(scheduler, jobs) as cluster:
        for n, (i, result) in enumerate(cluster.map(_task, items, _lost), start=1):
            results[i] = result
            _report(result, n, len(trials), began, tty=tty, quiet=quiet)
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
