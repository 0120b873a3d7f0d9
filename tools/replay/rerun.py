"""Re-run each agent's core on its recorded inputs under another fusion rule or parameter set.

Open loop: the core sees exactly the recorded inputs (:func:`agents.node.replay_inputs`),
so the agent's own motion, its sightings and its peers' messages are as they were
recorded; only what the core makes of them changes. Time is the log's, no
sleeping. Each agent is re-run twice: with the recorded configuration (its
belief digests must match the recorded ones, which proves the replay is
faithful) and with the variant; both are sampled after every tick.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.belief.track import cv_predict
from agents.config import AgentConfig
from agents.core import AgentCore
from agents.node import replay_inputs
from tools.replay.load import Line, ProcessLog, Progress, RunDir, swarm_id_of
from tools.replay.metrics import (
    SPEED_TOLERANCE,
    DetectionSpeed,
    FloatArray,
    PoseSeries,
    TrackSeries,
    Truth,
    error_summary,
    localizer_summary,
    summary,
    track_errors,
    window_mean_var,
)
from tools.replay.overrides import apply_overrides, config_diff, recorded_config
from worlds.arena import Arena


class RerunError(Exception):
    """An agent cannot be re-run (no arena, no swarm id); the message says why."""


# ---------------------------------------------------------------- re-running


@dataclass(frozen=True)
class RerunTrace:
    """A re-run core sampled after every tick."""

    label: str
    t: FloatArray
    x: FloatArray  # (n, 4), NaN before the track exists
    P: FloatArray  # (n, 4, 4)
    mean_var: FloatArray
    pose: PoseSeries  # the localizer after every tick, at the time its estimate refers to
    digests: list[tuple[float, str]]
    speeds_at_detection: list[tuple[float, float]]  # (track time, speed) after accepted updates
    input_errors: list[tuple[float, str, str]]  # (t, input, exception): the re-run stopped
    seconds: float

    @property
    def series(self) -> TrackSeries:
        return TrackSeries(self.t, self.x, self.P)


class _Sampler:
    """Wraps the log's lines; after each tick (and each detection) reads the core's state."""

    def __init__(self, core: AgentCore, room_cells: tuple[int, int] | None, cell: float) -> None:
        self.core = core
        self.room_cells = room_cells
        self.cell = cell
        self.t: list[float] = []
        self.x: list[FloatArray] = []
        self.P: list[FloatArray] = []
        self.mean_var: list[float] = []
        self.pose_t: list[float] = []
        self.pose: list[FloatArray] = []
        self.pose_P: list[FloatArray] = []
        self.speeds: list[tuple[float, float]] = []
        self.last: Line | None = None  # the newest line handed on

    def lines(self, lines: Iterable[Line]) -> Iterator[Line]:
        core = self.core
        for line in lines:
            self.last = line
            event = line.get("event")
            before = (core.stats["detections"], core.track.update_count, core.track.reinit_count)
            was_init = core.track.initialised
            yield line  # replay_inputs has fed it to the core when it asks for the next one
            if event == "tick":
                self._sample(float(line["t"]))
            elif event == "obs" and was_init:
                after = (core.stats["detections"], core.track.update_count, core.track.reinit_count)
                if after[0] > before[0] and after[1] > before[1] and after[2] == before[2]:
                    self.speeds.append((core.track.time, core.track.speed))

    def _sample(self, t: float) -> None:
        core, track = self.core, self.core.track
        self.t.append(t)
        if track.initialised:
            x, P = track.state, track.covariance
            if t > track.time:
                x, P = cv_predict(x, P, t - track.time, track.params.accel_psd)
        else:
            x, P = np.full(4, np.nan), np.full((4, 4), np.nan)
        self.x.append(x)
        self.P.append(P)
        self.mean_var.append(window_mean_var(core.grid.var, core.grid.origin, self.room_cells))
        localizer = core.localizer
        pose, cov = localizer.pose, localizer.cov
        self.pose_t.append(localizer.t)
        self.pose.append(np.full(3, np.nan) if pose is None else np.array(pose))
        self.pose_P.append(np.full((3, 3), np.nan) if cov is None else cov)

    def pose_series(self) -> PoseSeries:
        n = len(self.pose_t)
        return PoseSeries(np.asarray(self.pose_t, dtype=np.float64),
                          np.stack(self.pose) if n else np.zeros((0, 3)),
                          np.stack(self.pose_P) if n else np.zeros((0, 3, 3)))


def agent_t0(log: ProcessLog) -> float:
    """When the agent's core was made: its start event, else its first line."""
    start = log.first("start")
    if start is None:
        return float(log.lines[0]["t"])
    t0 = start.get("t0")  # the core's own start, when the log says it
    return float(t0) if isinstance(t0, float | int) else float(start["t"])


def rerun_agent(
    log: ProcessLog,
    config: AgentConfig,
    swarm_id: int,
    label: str,
    room_cells: tuple[int, int] | None = None,
) -> RerunTrace:
    """Re-run one agent's core with ``config`` on its recorded inputs, in the log's time."""
    began = time.perf_counter()
    core = AgentCore(config, agent_t0(log))
    sampler = _Sampler(core, room_cells, config.grid.cell_size)
    digests: list[tuple[float, str]] = []
    errors: list[tuple[float, str, str]] = []
    inputs = replay_inputs(core, sampler.lines(log.lines), swarm_id)
    while True:  # the core refuses bad messages itself; any other failure ends the agent
        try:
            digests.append(next(inputs))
        except StopIteration:
            break
        except Exception as exc:
            line = sampler.last or {}
            errors.append((float(line.get("t", math.nan)), str(line.get("event", "?")),
                           f"{type(exc).__name__}: {exc}"))
            break
    n = len(sampler.t)
    return RerunTrace(
        label,
        np.asarray(sampler.t, dtype=np.float64),
        np.stack(sampler.x) if n else np.zeros((0, 4)),
        np.stack(sampler.P) if n else np.zeros((0, 4, 4)),
        np.asarray(sampler.mean_var, dtype=np.float64),
        sampler.pose_series(),
        digests,
        sampler.speeds,
        errors,
        time.perf_counter() - began,
    )


@dataclass
class AgentRerun:
    name: str
    changes: dict[str, tuple[Any, Any]]
    baseline: RerunTrace
    variant: RerunTrace
    recorded_digests: int
    reproduced: int  # baseline digests equal to the recorded ones (same time)
    variant_differs: int  # variant digests that differ from the recorded ones


def _matches(trace: RerunTrace, recorded: Mapping[float, str]) -> int:
    return sum(1 for t, d in trace.digests if recorded.get(t) == d)


def agent_configs(
    run: RunDir, arena: Arena | None, sets: Mapping[str, str]
) -> dict[str, tuple[AgentConfig, AgentConfig]]:
    """Each agent's (recorded, variant) configuration; raises OverrideError or RerunError."""
    out = {}
    for name, log in sorted(run.agents.items()):
        try:
            base = recorded_config(arena, name, log.first("start"))
        except ValueError as e:
            where = "its recorded site" if arena is None else f"arena {arena.name}"
            raise RerunError(f"{name}: no configuration from {where}: {e}") from None
        out[name] = (base, apply_overrides(base, sets))
    return out


def rerun_run(
    run: RunDir,
    arena: Arena | None,
    sets: Mapping[str, str],
    *,
    room_cells: tuple[int, int] | None = None,
    progress: Progress | None = None,
) -> dict[str, AgentRerun]:
    """Re-run every agent with its recorded configuration and with ``sets`` applied."""
    out: dict[str, AgentRerun] = {}
    configs = agent_configs(run, arena, sets)
    for name, log in sorted(run.agents.items()):
        swarm_id = swarm_id_of(log)
        if swarm_id is None:
            raise RerunError(f"{name}: the log records no swarm id (no start event, no datagram)")
        base_config, variant_config = configs[name]
        label = ", ".join(f"{k}={v}" for k, v in sets.items())
        baseline = rerun_agent(log, base_config, swarm_id, "recorded config", room_cells)
        variant = rerun_agent(log, variant_config, swarm_id, label, room_cells)
        recorded = {float(line["t"]): str(line.get("digest")) for line in log.events("belief")}
        result = AgentRerun(
            name,
            config_diff(base_config, variant_config),
            baseline,
            variant,
            len(recorded),
            _matches(baseline, recorded),
            len(variant.digests) - _matches(variant, recorded),
        )
        out[name] = result
        if progress is not None:
            progress(
                f"re-ran {name}: recorded config reproduces {result.reproduced}/"
                f"{result.recorded_digests} belief digests ({baseline.seconds:.1f} s); "
                f"{label}: {result.variant_differs}/{len(variant.digests)} differ "
                f"({variant.seconds:.1f} s)"
            )
            for trace in (baseline, variant):
                if trace.input_errors:
                    t, what, err = trace.input_errors[0]
                    progress(
                        f"  {name} ({trace.label}): {len(trace.input_errors)} input(s) raised "
                        f"in the core, first at {what} t={t:.3f}: {err}"
                    )
    return out


def trace_metrics(trace: RerunTrace, truth: Truth | None, t_start: float,
                  car: str | None = None) -> dict[str, Any]:
    """A re-run's numbers; ``car``: the agent's car in the truth, for its own pose."""
    unc = np.trace(trace.P, axis1=1, axis2=2) / 4.0
    m: dict[str, Any] = {
        "ticks": int(trace.t.size),
        "seconds": trace.seconds,
        "track_uncertainty": summary(unc),
        "grid_mean_var": summary(trace.mean_var),
    }
    if truth is not None and trace.t.size:
        m["errors"] = error_summary(track_errors(trace.series, truth), t_start)
        speeds = []
        for t, speed in trace.speeds_at_detection:
            true = truth.target_at(t)[0]
            if np.isfinite(true).all():
                speeds.append(DetectionSpeed(t, speed, math.hypot(true[2], true[3])))
        rel = np.array([abs(s.relative_error) for s in speeds])
        m["speed_at_detection"] = {
            "n": len(speeds),
            "abs_relative_error": summary(rel),
            "within_10_percent": float(np.mean(rel <= SPEED_TOLERANCE)) if rel.size else None,
        }
        if car is not None and car in truth.cars:
            m["pose"] = localizer_summary(trace.pose, truth, car, t_start)
    return m


def rerun_metrics(
    reruns: Mapping[str, AgentRerun], truth: Truth | None, t_start: float
) -> dict[str, Any]:
    out: dict[str, Any] = {"open_loop": True, "agents": {}}
    for name, r in reruns.items():
        out["agents"][name] = {
            "changes": {k: list(v) for k, v in r.changes.items()},
            "recorded_digests": r.recorded_digests,
            "reproduced_digests": r.reproduced,
            "variant_digests_differing": r.variant_differs,
            "input_errors": {
                "recorded_config": _errors(r.baseline),
                "variant": _errors(r.variant),
            },
            "recorded_config": trace_metrics(r.baseline, truth, t_start, name),
            "variant": trace_metrics(r.variant, truth, t_start, name),
        }
    return out


def _errors(trace: RerunTrace) -> dict[str, Any]:
    kinds: dict[str, int] = {}
    for _, what, err in trace.input_errors:
        key = f"{what}: {err}"
        kinds[key] = kinds.get(key, 0) + 1
    return {"count": len(trace.input_errors), "by_kind": kinds}
