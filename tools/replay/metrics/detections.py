"""The detection family: what an agent's detections were judged, and the track's speed at the
moments it detected the target (the seed's "within 10 %")."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tools.replay.load import ProcessLog
from tools.replay.metrics.common import FloatArray, summary
from tools.replay.metrics.track import TrackSamples, nees_bounds
from tools.replay.metrics.truth import Truth

DETECTION_TRACK_WINDOW = 0.5  # s: the TRACK that carries a detection follows it within this


SPEED_TOLERANCE = 0.10  # the seed's claim: speed within 10 % at the moments of detection


@dataclass(frozen=True)
class DetectionSpeed:
    """The track's speed in the TRACK sent with an accepted detection, and the truth's."""

    t: float  # the time the track refers to
    speed: float
    true_speed: float

    @property
    def relative_error(self) -> float:
        return (self.speed - self.true_speed) / self.true_speed if self.true_speed > 0 else math.nan


def detection_speeds(
    log: ProcessLog, samples: TrackSamples, truth: Truth | None
) -> list[DetectionSpeed]:
    """Speed estimates at the moments of detection (updates of a running track only)."""
    if truth is None or not len(samples):
        return []
    out: list[DetectionSpeed] = []
    for det in log.events("detection"):
        if not det.get("accepted") or det.get("reason") != "accepted":
            continue
        t_det = det.get("t_det")
        if not isinstance(t_det, int | float):
            continue
        i = int(np.searchsorted(samples.t_log, det["t"], side="left"))
        while i < len(samples) and samples.t[i] < t_det - 1e-9:
            i += 1
        if i >= len(samples) or samples.t_log[i] - det["t"] > DETECTION_TRACK_WINDOW:
            continue
        vx, vy = samples.x[i, 2], samples.x[i, 3]
        true = truth.target_at(samples.t[i])[0]
        if not np.isfinite(true).all():
            continue
        out.append(
            DetectionSpeed(float(samples.t[i]), math.hypot(vx, vy), math.hypot(true[2], true[3]))
        )
    return out


@dataclass(frozen=True)
class Sighting:
    """One own detection as logged: its capture time, place and covariance (2×2, m²)."""

    t_det: float
    x: float
    y: float
    cov: FloatArray
    placed: bool  # seen before the robot had a pose, placed once it came


def sightings_of(log: ProcessLog) -> list[Sighting]:
    """Every detection event with a capture time, a place and a 2×2 covariance, in log order
    (whatever the track made of it)."""
    rows: list[Sighting] = []
    for d in log.events("detection"):
        t_det, x, y, cov_ = d.get("t_det"), d.get("x"), d.get("y"), d.get("cov")
        if (isinstance(t_det, int | float) and isinstance(x, int | float)
                and isinstance(y, int | float) and isinstance(cov_, list) and len(cov_) == 2
                and all(isinstance(r, list) and len(r) == 2
                        and all(isinstance(v, int | float) for v in r) for r in cov_)):
            rows.append(Sighting(float(t_det), float(x), float(y),
                                 np.asarray(cov_, dtype=np.float64), "placed_at" in d))
        # else: not a detection this reader knows
    return rows


def detection_nis_values(log: ProcessLog, truth: Truth) -> dict[str, FloatArray]:
    """Each own detection against the truth at its capture time: ``dᵀ C⁻¹ d``, ``C`` the
    covariance it was logged with (the camera's and the robot's own pose's; 2 dof, so a
    consistent one has a mean of 2). ``live`` and ``placed`` (a frame seen before the pose
    came, :mod:`agents.backfill`) apart."""
    rows = sightings_of(log)
    out: dict[str, list[float]] = {"live": [], "placed": []}
    true = truth.target_at([r.t_det for r in rows]) if rows else np.zeros((0, 4))
    for r, (tx, ty, _, _) in zip(rows, true, strict=True):
        off = np.array([r.x - tx, r.y - ty], dtype=np.float64)
        cov = r.cov
        if np.isfinite(off).all() and np.isfinite(cov).all() and np.linalg.det(cov) > 0.0:
            out["placed" if r.placed else "live"].append(float(off @ np.linalg.solve(cov, off)))
    return {kind: np.array(v, dtype=np.float64) for kind, v in out.items()}


def nis_summary(values: FloatArray) -> dict[str, Any]:
    """How many, their mean, and the fraction inside the 2-dof 95 % bounds."""
    lo, hi = nees_bounds(2)
    return {"n": int(values.size),
            "mean": float(values.mean()) if values.size else None,
            "inside": float(np.mean((values >= lo) & (values <= hi))) if values.size else None}


def detection_nis(values: dict[str, FloatArray]) -> dict[str, Any]:
    """:func:`detection_nis_values` summarised: per kind, :func:`nis_summary`."""
    return {"bounds": list(nees_bounds(2)),
            **{kind: nis_summary(v) for kind, v in values.items()}}


def seen_ages(log: ProcessLog, times: FloatArray) -> FloatArray:
    """At each of ``times``: how long ago the newest own detection the track took, as the
    log knew it then, was captured (inf before the first)."""
    dets = [(float(d["t"]), float(d["t_det"])) for d in log.events("detection")
            if d.get("accepted") and isinstance(d.get("t_det"), int | float)]
    out = np.full(np.shape(times), np.inf)
    if not dets:
        return out
    t_log = np.array([t for t, _ in dets])
    t_det = np.maximum.accumulate(np.array([t for _, t in dets]))
    i = np.searchsorted(t_log, times, side="right") - 1
    ok = i >= 0
    out[ok] = np.asarray(times)[ok] - t_det[i[ok]]
    return out


def detection_summary(
    log: ProcessLog, t_start: float, speeds: Sequence[DetectionSpeed]
) -> dict[str, Any]:
    dets = log.events("detection")
    verdicts: dict[str, int] = {}
    for d in dets:
        key = str(d.get("reason", "?"))
        verdicts[key] = verdicts.get(key, 0) + 1
    # A frame seen without a pose is known only once the pose came and placed it.
    firsts = [d["placed_at"] if isinstance(d.get("placed_at"), int | float) else d["t_det"]
              for d in dets if isinstance(d.get("t_det"), int | float)]
    accepted = [
        d["t_det"] for d in dets if d.get("accepted") and isinstance(d.get("t_det"), int | float)
    ]
    rel = np.array([abs(s.relative_error) for s in speeds])
    return {
        "detections": len(dets),
        "verdicts": dict(sorted(verdicts.items())),
        "time_to_first_detection_s": (min(firsts) - t_start) if firsts else None,
        "time_to_first_accepted_detection_s": (min(accepted) - t_start) if accepted else None,
        "speed_at_detection": {
            "n": len(speeds),
            "abs_relative_error": summary(rel),
            "within_10_percent": float(np.mean(rel <= SPEED_TOLERANCE)) if rel.size else None,
            "speed_mps": summary([s.speed for s in speeds]),
        },
    }
