"""One lockstep or real run measured: the numbers that sweeps and the evidence compare.

:func:`trial_metrics` reads a run directory with ``tools.replay`` (every agent's track
measured with its own settings: the scenario's, when given) and adds what only the
ground truth and the arena can say: what each robot's camera covered
(:mod:`tools.replay.metrics.footprint`): the redundancy Σ|A_i| / |∪A_i| per 10 s window
and over the search (the start to the first detection), and the pairwise overlap.
:func:`series_of` is a run's time series on the 10 Hz time base (errors and NEES while a
track is held), which the evidence pools over seeds.

Every error and NEES is counted only while the agent holds a track; ``held`` is the
fraction of time it does, from the swarm's first detection on.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools.replay.metrics.common import SETTLE
from tools.replay.metrics.footprint import WINDOW as FOOTPRINT_WINDOW
from tools.replay.metrics.footprint import camera_footprints, covered, redundancy, windowed

if TYPE_CHECKING:
    from agents.config import AgentConfig
    from tools.replay.metrics import AgentAnalysis, Analysis, Truth
    from worlds.arena import Arena

__all__ = ["FOOTPRINT_WINDOW", "analysis_of", "camera_footprints", "footprint_overlap",
           "series_of", "trial_metrics"]

KB = 1000.0  # bytes: "KB/s" in every table


def _mean(values: Iterable[float | None]) -> float | None:
    v = [x for x in values if x is not None and math.isfinite(x)]
    return sum(v) / len(v) if v else None


def footprint_overlap(truth: Truth, arena: Arena, names: Sequence[str], t_from: float,
                      t_to: float, *, window: float = FOOTPRINT_WINDOW) -> dict[str, Any]:
    """Per window of ``window`` s: the pairwise overlap |A∩B|/|A∪B| and the redundancy
    Σ|A_i|/|∪A_i| of the cells the cameras covered (from the truth), averaged over windows;
    the fraction of the room any camera covered (:func:`~tools.replay.metrics.windowed`)."""
    return windowed(truth, arena, names, t_from, t_to, window=window)


def analysis_of(run_dir: Path, arena: Arena,
                configs: Mapping[str, AgentConfig] | None = None) -> Analysis:
    from tools.replay.load import load_run
    from tools.replay.metrics import analyse, room_cells_of

    room = room_cells_of(arena.room.size_x, arena.room.size_y, 0.1)
    return analyse(load_run(run_dir), room_cells=room, configs=configs, arena=arena,
                   matched=True)


def series_of(an: Analysis) -> dict[str, Any]:
    """Per agent on the run's time base (run-relative seconds): the position error and the
    NEES (NaN where it holds no track; ``peer_nees4``: of the state predicted to the time
    base as a peer predicts it; ``matched_nees4``: of its own filter fed a matched sensor,
    :mod:`tools.replay.metrics.matched`), the uncertainty; the distance between each pair;
    the relative speed error at each detection."""
    out: dict[str, Any] = {"t": (an.times - an.t_start).round(3).tolist(), "err": {},
                           "nees4": {}, "nees2": {}, "peer_nees4": {}, "matched_nees4": {},
                           "unc": {}, "agree": {}, "speed_rel": {}}
    for name, ag in an.agents.items():
        out["speed_rel"][name] = [s.relative_error for s in ag.speeds]
        if ag.errors is not None:
            out["err"][name] = ag.errors.pos_err.tolist()
            out["nees4"][name] = ag.errors.nees4.tolist()
            out["nees2"][name] = ag.errors.nees2.tolist()
            out["peer_nees4"][name] = ag.errors.peer_nees4.tolist()
        if "nees4" in ag.matched:
            out["matched_nees4"][name] = ag.matched["nees4"].tolist()
        out["unc"][name] = ag.series.uncertainty.tolist()
    for (a, b), d in an.agreement.items():
        out["agree"][f"{a}-{b}"] = d.tolist()
    return out


def _own_pose(own: Mapping[str, list[Any]], held: list[float]) -> dict[str, Any]:
    """Every agent's own pose, pooled over its belief records: ``pose_held`` (mean over
    agents), heading error p50 / p95 (degrees) and position error p95, and the NEES of the
    heading (1 dof) and of the pose (3 dof): inside the bounds and the mean."""
    import numpy as np

    from tools.replay.metrics import fraction_inside, nees_bounds

    def pooled(key: str) -> Any:
        v = np.concatenate(own[key]) if own[key] else np.zeros(0)
        return v[np.isfinite(v)]

    heading = np.degrees(np.abs(pooled("heading")))
    position = pooled("position")
    out: dict[str, Any] = {
        "pose_held": float(np.mean(held)) if held else None,
        "pose_heading_p50_deg": float(np.percentile(heading, 50)) if heading.size else None,
        "pose_heading_p95_deg": float(np.percentile(heading, 95)) if heading.size else None,
        "pose_position_p95_m": float(np.percentile(position, 95)) if position.size else None,
    }
    for dof in (1, 3):
        v = pooled(f"nees{dof}")
        out[f"pose_nees{dof}_inside"] = fraction_inside(v, nees_bounds(dof))
        out[f"pose_nees{dof}_mean"] = float(v.mean()) if v.size else None
    return out


def _sightings(agents: Iterable[AgentAnalysis]) -> dict[str, Any]:
    """Every agent's own detections against the truth (their NIS, 2 dof, with the covariance
    each was logged with), pooled, live and placed (seen before the pose came) apart:
    ``sighting_nis_{live,placed}_{n,mean,inside}``."""
    import numpy as np

    from tools.replay.metrics.detections import nis_summary

    out: dict[str, Any] = {}
    for kind in ("live", "placed"):
        parts = [a.sightings[kind] for a in agents if kind in a.sightings]
        pooled = np.concatenate(parts) if parts else np.zeros(0)
        for key, value in nis_summary(pooled).items():
            out[f"sighting_nis_{kind}_{key}"] = value
    return out


def trial_metrics(run_dir: Path, arena: Arena, an: Analysis | None = None,
                  configs: Mapping[str, AgentConfig] | None = None) -> dict[str, Any]:
    """The numbers of one run, from its logs (``tools.replay.metrics``) and its truth.

    Run-level values pool the agents: the error percentiles (``err_p50``, ``err_p95``,
    ``err_max``: every held sample of every agent after 20 s), NEES (every held sample),
    speed at detection (every detection); ``held`` and ``kbytes_per_s`` are means over
    agents (``held_min``, ``kbytes_per_s_max`` the worst agent).
    """
    import numpy as np

    from tools.replay.metrics import fraction_inside, jsonable, nees_bounds, run_metrics
    from tools.replay.metrics.track import NEES_DOF

    an = an if an is not None else analysis_of(run_dir, arena, configs)
    m = jsonable(run_metrics(an))
    per: dict[str, dict[str, Any]] = {}
    late_err: list[Any] = []
    nees: dict[str, list[Any]] = {key: [] for key in NEES_DOF}
    matched: list[Any] = []
    own: dict[str, list[Any]] = {"heading": [], "position": [], "nees1": [], "nees3": []}
    own_held: list[float] = []
    for name, ag in m["agents"].items():
        e = ag.get("errors", {})
        a = an.agents[name]
        tails: dict[str, float | None] = {}
        if a.errors is not None:
            late = an.times - an.t_start >= SETTLE
            late_err.append(a.errors.pos_err[late])
            for key, parts in nees.items():
                values = getattr(a.errors, key)
                v = values[np.isfinite(values)]
                parts.append(v)
                lo, hi = nees_bounds(NEES_DOF[key])
                tails[f"{key}_below"] = float(np.mean(v < lo)) if v.size else None
                tails[f"{key}_above"] = float(np.mean(v > hi)) if v.size else None
        if "nees4" in a.matched:
            v = a.matched["nees4"]
            matched.append(v[np.isfinite(v)])
        for key, values in a.pose.items():
            own[key].append(values)
        if a.pose:
            own_held.append(float(np.mean(np.isfinite(a.pose["position"]))))
        speed = ag["speed_at_detection"]
        outside = ag.get("estimates_outside_room") or {}
        per[name] = {
            "err_after_20_m": e.get("position_error_after_settle_m", {}).get("median"),
            "err_all_m": e.get("position_error_m", {}).get("median"),
            "nees4_inside": e.get("nees4", {}).get("fraction_inside"),
            "nees2_inside": e.get("nees2", {}).get("fraction_inside"),
            "nees4_mean": e.get("nees4", {}).get("mean"),
            "unc_after_20": e.get("uncertainty_after_settle", {}).get("median"),
            "unc_below_0_15": e.get("uncertainty_after_settle_below_0_15"),
            "speed_within_10": speed["within_10_percent"],
            "speed_n": speed["n"],
            "first_detection_s": ag.get("time_to_first_detection_s"),
            "held": ag.get("held_after_first_detection"),
            "held_run": ag.get("time_with_track_fraction"),
            "outside": outside.get("outside"),
            "outside_max_m": outside.get("max_m"),
            "kbytes_per_s": (ag["wire"]["tx_bytes_per_s"] or 0.0) / KB,
            "detections": ag["detections"],
            "detections_per_s": ag["detections"] / max(1e-9, m["run"]["duration_s"]),
            "grid_peak_m": ag.get("grid_peak_error_m", {}).get("median"),
            "model": ag.get("model"),
            **tails,
        }
    out: dict[str, Any] = {
        key: _mean(p[key] for p in per.values())
        for key in ("err_after_20_m", "err_all_m", "unc_after_20", "unc_below_0_15",
                    "kbytes_per_s", "detections_per_s", "grid_peak_m", "held",
                    "held_run", "nees4_below", "nees4_above", "nees2_below", "nees2_above")
    }
    held = [p["held"] for p in per.values() if p["held"] is not None]
    out["held_min"] = min(held) if held else None
    out["kbytes_per_s_max"] = max((p["kbytes_per_s"] for p in per.values()), default=None)
    pooled = np.concatenate(late_err) if late_err else np.zeros(0)
    pooled = pooled[np.isfinite(pooled)]
    for key, q in (("err_p50", 50), ("err_p95", 95), ("err_max", 100)):
        out[key] = float(np.percentile(pooled, q)) if pooled.size else None
    for key, parts in nees.items():
        v = np.concatenate(parts) if parts else np.zeros(0)
        out[f"{key}_inside"] = fraction_inside(v, nees_bounds(NEES_DOF[key]))
        out[f"{key}_mean"] = float(v.mean()) if v.size else None
    v = np.concatenate(matched) if matched else np.zeros(0)
    out["matched_nees4_inside"] = fraction_inside(v, nees_bounds(4))
    out["matched_nees4_mean"] = float(v.mean()) if v.size else None
    out.update(_own_pose(own, own_held))
    if an.truth is not None:
        out.update(_sightings([an.agents[name] for name in sorted(an.agents)]))
    n_speed = sum(p["speed_n"] for p in per.values())
    within = sum(p["speed_n"] * p["speed_within_10"] for p in per.values()
                 if p["speed_within_10"] is not None)
    out["speed_n"] = n_speed
    out["speed_within_10"] = within / n_speed if n_speed else None
    out["outside"] = sum(p["outside"] or 0 for p in per.values())
    out["outside_max_m"] = max((p["outside_max_m"] or 0.0 for p in per.values()), default=0.0)
    first = m["swarm"].get("time_to_first_detection_s")
    out["first_detection_s"] = first
    belief = [v["jaccard_now"]["median"] for v in m["swarm"]["coverage_overlap"].values()]
    out["belief_overlap"] = _mean(belief)
    if an.truth is not None:
        names = sorted(an.agents)
        fp = windowed(an.truth, arena, names, an.t_start, an.run.t_end)
        out["redundancy"] = fp["redundancy"]
        out["footprint_overlap"] = fp["overlap"]
        out["footprint_union"] = fp["union_fraction"]
        end = an.t_start + first if first is not None else an.run.t_end
        search = covered(an.truth, arena, names, an.t_start, end)
        out["search_redundancy"] = redundancy(search)
        out["search_cells"] = len(set().union(*search.values())) if search else 0
    out["agents"] = per
    return out
