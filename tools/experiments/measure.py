"""One lockstep or real run measured: the numbers that sweeps and the evidence compare.

:func:`trial_metrics` reads a run directory with ``tools.replay`` and adds what
only the ground truth can say: the cells each robot's camera covered
(:func:`camera_footprints`) and how much two robots looked at the same place
(:func:`footprint_overlap`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from tools.replay.metrics import Analysis, Truth
    from worlds.arena import Arena

FOOTPRINT_STEP = 0.5  # s between camera footprints


FOOTPRINT_WINDOW = 10.0  # s: overlap of what two robots covered within the same window


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
