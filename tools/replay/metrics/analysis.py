"""A whole run measured: every metric family per agent, and between agents (the one place that
composes the families of :mod:`tools.replay.metrics`)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import combinations
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from agents.belief.params import GridParams, TrackParams
from agents.config import AgentConfig
from agents.config import confident as track_confident
from tools.replay.load import ProcessLog, Progress, RunDir, swarm_id_of
from tools.replay.metrics.common import SETTLE, STEP, FloatArray, summary
from tools.replay.metrics.detections import (
    DetectionSpeed,
    detection_nis,
    detection_nis_values,
    detection_speeds,
    detection_summary,
    seen_ages,
    sightings_of,
)
from tools.replay.metrics.grid import (
    COVERAGE_VAR,
    GridRecord,
    coverage,
    coverage_overlap,
    grid_peak_errors,
    grid_record,
    room_mean_var,
)
from tools.replay.metrics.latency import Latency, latency, latency_summary
from tools.replay.metrics.matched import matched_nees, seed_of
from tools.replay.metrics.pose import (
    PoseRow,
    localizer_errors,
    localizer_summary,
    pose_row,
    pose_series,
)
from tools.replay.metrics.track import (
    CONFIDENT_SPREAD,
    NEES_DOF,
    TrackErrors,
    TrackSamples,
    TrackSeries,
    agreement,
    consistency,
    error_summary,
    nees_bounds,
    outside_room,
    recorded_track,
    resample,
    track_errors,
)
from tools.replay.metrics.truth import Truth, truth_of
from tools.replay.metrics.wire import Wire, wire_of, wire_summary

if TYPE_CHECKING:
    from worlds.arena import Arena


@dataclass
class AgentAnalysis:
    name: str
    swarm_id: int | None
    samples: TrackSamples
    series: TrackSeries
    errors: TrackErrors | None
    grids: list[GridRecord]
    speeds: list[DetectionSpeed]
    wire: Wire
    coverage: dict[str, Any]
    grid_var: FloatArray  # mean var per belief record (in the room when known)
    peak_errors: FloatArray
    pose: dict[str, FloatArray]  # per belief record: position, heading, nees1, nees3
    metrics: dict[str, Any] = field(default_factory=dict)
    config: AgentConfig | None = None  # the agent's own settings, when they could be known
    sightings: dict[str, FloatArray] = field(default_factory=dict)  # NIS, "live" / "placed"
    matched: dict[str, FloatArray] = field(default_factory=dict)  # NEES4/2, matched sensor


@dataclass
class Analysis:
    run: RunDir
    truth: Truth | None
    times: FloatArray
    cell_size: float
    agents: dict[str, AgentAnalysis]
    agreement: dict[tuple[str, str], FloatArray]
    overlap: dict[tuple[str, str], dict[str, FloatArray]]
    latency: Latency
    coverage_var: float
    room_cells: tuple[int, int] | None
    swarm: dict[str, Any] = field(default_factory=dict)

    @property
    def t_start(self) -> float:
        return self.run.t_start

    def rel(self, t: npt.ArrayLike) -> FloatArray:
        """Run-relative seconds."""
        return np.asarray(t, dtype=np.float64) - self.t_start


def _schedule_sets(run: RunDir, name: str) -> dict[str, str]:
    """The ``[agents.set]`` settings a scenario run gave ``name`` (its ``schedule.json``)."""
    try:
        record = json.loads((run.path / "schedule.json").read_text(encoding="utf-8"))
        agents = record["scenario"]["agents"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    for a in agents if isinstance(agents, list) else []:
        if isinstance(a, dict) and a.get("name") == name and isinstance(a.get("set"), dict):
            return {str(k): str(v) for k, v in a["set"].items()}
    return {}


def own_config(run: RunDir, name: str, arena: Arena | None = None
               ) -> tuple[AgentConfig | None, str]:
    """The agent's own settings and where they came from: the site and settings its start
    event records (``stigmesh agent``), else the run's arena with the fusion rule and
    reputation of its start event and the settings of the scenario's ``schedule.json``
    (lockstep). None when neither can be had."""
    from tools.replay.load import find_arena
    from tools.replay.overrides import OverrideError, apply_overrides, recorded_config
    from worlds.arena import ArenaError

    log = run.agents.get(name)
    start = log.first("start") if log is not None else None
    try:
        if start is not None and isinstance(start.get("settings"), dict):
            return recorded_config(None, name, start), "its start event (site and settings)"
        if arena is None:
            arena, _ = find_arena(run)
        if arena is None:
            return None, "unknown (no settings in the log, no arena)"
        config = recorded_config(arena, name, start)
        sets = _schedule_sets(run, name)
        if sets:
            return apply_overrides(config, sets), "the arena, its start event and schedule.json"
        return config, "the arena and its start event"
    except (ArenaError, OverrideError, ValueError, KeyError) as exc:
        return None, f"unknown ({exc})"


def analyse_agent(
    run: RunDir,
    log: ProcessLog,
    truth: Truth | None,
    times: FloatArray,
    *,
    cell_size: float,
    coverage_var: float,
    room_cells: tuple[int, int] | None,
    config: AgentConfig | None = None,
    config_source: str = "given",
    matched: bool = False,
) -> AgentAnalysis:
    """One agent's numbers; its track predicted with its own model (``config``; the
    defaults when None). ``matched``: also the NEES of its own filter fed a matched sensor
    (:mod:`.matched`; needs the truth and ``config``)."""
    t_start = run.t_start
    swarm_id = swarm_id_of(log)
    samples = recorded_track(log, swarm_id)
    params = config.track if config is not None else TrackParams()
    timeout = config.track_timeout if config is not None else AgentConfig.track_timeout
    dropped = [float(e["t"]) for e in log.events("track_dropped")]
    series = resample(samples, times, params.accel_psd, max_age=timeout,
                      until=log.t_last if log.t_last is not None else math.inf, dropped=dropped)
    grids: list[GridRecord] = []
    rows: list[PoseRow] = []
    for line in log.events("belief"):  # one pass over the heaviest stream of the log
        grid = grid_record(line)
        if grid is not None:
            grids.append(grid)
        rows.append(pose_row(line))
    poses = pose_series(rows)
    speeds = detection_speeds(log, samples, truth)
    wire = wire_of(log)
    cov = coverage(grids, coverage_var, room_cells)
    grid_var = room_mean_var(grids, room_cells)
    errors = track_errors(series, truth) if truth is not None else None
    peak = grid_peak_errors(grids, truth, cell_size, TrackParams().peak_min_mu) if truth else None
    pose = localizer_errors(poses, truth, log.name) if truth else None
    t_first, t_last = log.t_first or t_start, log.t_last or t_start
    ever = int(cov["ever"][-1]) if len(cov["ever"]) else 0
    unc = series.uncertainty
    limit = config.confident_spread if config is not None else CONFIDENT_SPREAD
    confident = np.flatnonzero(series.valid & track_confident(
        series.spread, seen_ages(log, times), limit=limit, max_speed=params.max_speed))
    m: dict[str, Any] = {
        "active_s": [t_first - t_start, t_last - t_start],
        "events": len(log.lines),
        "damaged_lines": log.stats.bad_lines,
        "unread_bytes": log.stats.unread_bytes,
        "track_samples": len(samples),
        "belief_records": len(grids),
        "time_with_track_fraction": float(np.mean(series.valid)) if times.size else None,
        "model": {"accel_psd": params.accel_psd, "track_timeout": timeout,
                  "from": config_source if config is not None else "defaults"},
        "time_to_confident_track_s": (
            float(times[confident[0]] - t_start) if confident.size else None
        ),
        "track_uncertainty": summary(unc),
        "grid_mean_var": summary(grid_var),
        "grid_mean_var_last": float(grid_var[-1]) if grid_var.size else None,
        "grid_mean_var_over": "room" if room_cells is not None else "window",
        "coverage": {
            "var_below": coverage_var,
            "over": "room" if room_cells is not None else "window",
            "searched_now_cells": summary(cov["now"]),
            "searched_ever_cells": ever,
            "searched_ever_m2": ever * cell_size**2,
            "searched_ever_room_fraction": (
                ever / (room_cells[0] * room_cells[1]) if room_cells is not None else None
            ),
        },
        "wire": wire_summary(wire, t_last - t_first),
    }
    m.update(detection_summary(log, t_start, speeds))
    sightings = detection_nis_values(log, truth) if truth is not None else {}
    if sightings:
        m["detection_nis"] = detection_nis(sightings)
    if errors is not None:
        m["errors"] = error_summary(errors, t_start)
    if config is not None:
        m["estimates_outside_room"] = outside_room(samples, config.room.width, config.room.height)
    reference: dict[str, FloatArray] = {}
    if matched and config is not None and truth is not None:
        reference = matched_nees(sightings_of(log), truth, times, series.valid,
                                 params=config.track, space=config.target_space,
                                 seed=seed_of(log.name))
        m["matched_sensor"] = {key: consistency(values, nees_bounds(NEES_DOF[key]))
                               for key, values in reference.items()}
    if peak is not None:
        m["grid_peak_error_m"] = summary(peak)
    if pose is not None and truth is not None:
        m["pose_error_m"] = summary(pose["position"])
        if np.isfinite(poses.P).any():  # logs with the pose's covariance
            m["pose"] = localizer_summary(poses, truth, log.name, t_start, errors=pose)
    return AgentAnalysis(
        log.name,
        swarm_id,
        samples,
        series,
        errors,
        grids,
        speeds,
        wire,
        cov,
        grid_var,
        peak if peak is not None else np.zeros(0),
        pose if pose is not None else {},
        m,
        config,
        sightings,
        reference,
    )


def analyse(
    run: RunDir,
    *,
    cell_size: float = GridParams().cell_size,
    coverage_var: float = COVERAGE_VAR,
    room_cells: tuple[int, int] | None = None,
    progress: Progress | None = None,
    configs: Mapping[str, AgentConfig] | None = None,
    arena: Arena | None = None,
    matched: bool = False,
) -> Analysis:
    """Every metric of the brief, per agent and between agents. Each agent's track is
    measured with its own settings: ``configs[name]`` when given (a scenario knows them),
    else :func:`own_config` (``arena`` helps a log that does not record its settings).
    ``matched``: also each agent's matched-sensor reference (:mod:`.matched`)."""
    truth = truth_of(run)
    t0, t1 = run.t_start, run.t_end
    times: FloatArray = t0 + STEP * np.arange(
        max(1, math.floor((t1 - t0) / STEP) + 1), dtype=np.float64
    )
    agents: dict[str, AgentAnalysis] = {}
    for name, log in sorted(run.agents.items()):
        config: AgentConfig | None
        if configs is not None and name in configs:
            config, source = configs[name], "the scenario"
        else:
            config, source = own_config(run, name, arena)
        agents[name] = analyse_agent(
            run,
            log,
            truth,
            times,
            cell_size=cell_size,
            coverage_var=coverage_var,
            room_cells=room_cells,
            config=config,
            config_source=source,
            matched=matched,
        )
        if progress is not None:
            progress(
                f"analysed {name}: {len(log.lines)} events, {len(agents[name].samples)} track "
                f"samples, {len(agents[name].grids)} belief records"
            )
    pairs = list(combinations(sorted(agents), 2))
    agree = {(a, b): agreement(agents[a].series, agents[b].series) for a, b in pairs}
    overlap = {
        (a, b): coverage_overlap(agents[a].grids, agents[b].grids, coverage_var, room_cells)
        for a, b in pairs
    }
    lat = latency(run.agents.values())
    analysis = Analysis(
        run, truth, times, cell_size, agents, agree, overlap, lat, coverage_var, room_cells
    )
    analysis.swarm = _swarm_metrics(analysis)
    return analysis


def _swarm_metrics(an: Analysis) -> dict[str, Any]:
    late = an.times - an.t_start >= SETTLE
    out: dict[str, Any] = {"agreement_m": {}, "coverage_overlap": {}}
    for (a, b), d in an.agreement.items():
        both = np.isfinite(d)
        out["agreement_m"][f"{a}-{b}"] = {
            "all": summary(d),
            "after_settle": summary(d[late]),
            "time_both_tracking_fraction": float(np.mean(both)) if d.size else None,
        }
    for (a, b), ov in an.overlap.items():
        ever_a = an.agents[a].coverage["ever_cells"]
        ever_b = an.agents[b].coverage["ever_cells"]
        union = len(ever_a | ever_b)
        out["coverage_overlap"][f"{a}-{b}"] = {
            "jaccard_now": summary(ov["jaccard"]),
            "searched_both_now_cells": summary(ov["both"]),
            "ever_both_cells": len(ever_a & ever_b),
            "ever_either_cells": union,
            "ever_jaccard": len(ever_a & ever_b) / union if union else None,
        }
    ever_all: set[int] = set()
    for ag in an.agents.values():
        ever_all |= ag.coverage["ever_cells"]
    out["searched_ever_by_any_m2"] = len(ever_all) * an.cell_size**2
    if an.room_cells is not None:
        out["searched_ever_by_any_room_fraction"] = len(ever_all) / (
            an.room_cells[0] * an.room_cells[1]
        )
    firsts = [
        ag.metrics["time_to_first_detection_s"]
        for ag in an.agents.values()
        if ag.metrics.get("time_to_first_detection_s") is not None
    ]
    first = min(firsts) if firsts else None
    out["time_to_first_detection_s"] = first
    # "held": the agent holds a track (not dropped), from the swarm's first detection on
    out["held_after_first_detection"] = {}
    for name, ag in an.agents.items():
        after = an.times - an.t_start >= first if first is not None else None
        fraction = float(np.mean(ag.series.valid[after])) if after is not None and after.any() \
            else None
        out["held_after_first_detection"][name] = fraction
        ag.metrics["held_after_first_detection"] = fraction
    return out


def run_metrics(an: Analysis) -> dict[str, Any]:
    """The machine-readable summary (metrics.json), without the per-sample arrays."""
    run = an.run
    start = run.world_start or {}
    return {
        "run": {
            "dir": str(run.path),
            "t_start": an.t_start,
            "duration_s": run.t_end - an.t_start,
            "arena": start.get("arena"),
            "sensing": start.get("sensing"),
            "seed": start.get("seed"),
            "agents": sorted(an.agents),
            "ground_truth": an.truth is not None,
            "notes": list(run.notes),
            "settle_s": SETTLE,
            "time_step_s": STEP,
        },
        "agents": {name: ag.metrics for name, ag in an.agents.items()},
        "swarm": an.swarm,
        "latency": latency_summary(an.latency),
    }
