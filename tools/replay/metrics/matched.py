"""A reference for the track's consistency: the agent's own filter fed a perfectly matched sensor.

An agent's NEES mixes three things: its filter's motion model against how the target
really moves, its sightings' covariance against their errors, and what fusing peers did.
This takes the last two away. For each of the agent's own detections (its capture time
and the covariance it was logged with, whatever the agent made of it) a synthetic one is
drawn: the truth then plus Gaussian noise of exactly that covariance, independent between
detections. A fresh :class:`~agents.belief.track.TrackFilter` with the agent's own track
settings and the room it knows takes them in capture order, no peers and no lag, and is
judged on the run's time base where the agent holds a track, as the agent is.

Its NEES is what the filter's model alone allows on this scene's motion: a target
declared able to accelerate that moves on exact circles, legs or not at all leaves the
filter's covariance larger than its errors (NEES below 4) however good the sensing.
Where the agent's NEES is near this one, its miss is the model's; where it is below, the
sensing or the fusion made it more cautious still.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from agents.belief.constraints import FreeSpace
from agents.belief.params import TrackParams
from agents.belief.track import TrackFilter
from tools.replay.metrics.common import FloatArray
from tools.replay.metrics.detections import Sighting
from tools.replay.metrics.truth import Truth


def matched_draws(sightings: Sequence[Sighting], truth: Truth,
                  seed: int) -> list[tuple[float, FloatArray, FloatArray]]:
    """``(t_det, z, cov)`` in capture order: the truth at each capture time plus noise drawn
    from its covariance (sightings without a positive-definite covariance or a truth left
    out)."""
    rng = np.random.default_rng(seed)
    rows = sorted(sightings, key=lambda s: s.t_det)
    true = truth.target_at([s.t_det for s in rows]) if rows else np.zeros((0, 4))
    out: list[tuple[float, FloatArray, FloatArray]] = []
    for s, x in zip(rows, true, strict=True):
        noise = rng.standard_normal(2)  # drawn for every row: one sighting's fate moves no other
        if not (np.isfinite(x[:2]).all() and np.isfinite(s.cov).all()):
            continue
        try:
            L = np.linalg.cholesky(0.5 * (s.cov + s.cov.T))
        except np.linalg.LinAlgError:
            continue
        out.append((s.t_det, x[:2] + L @ noise, s.cov))
    return out


def matched_nees(
    sightings: Sequence[Sighting],
    truth: Truth,
    times: FloatArray,
    held: np.ndarray,
    *,
    params: TrackParams,
    space: FreeSpace | None,
    seed: int,
) -> dict[str, FloatArray]:
    """NEES4 and NEES2 of the matched-sensor filter at ``times`` (NaN where ``held`` is false
    or before its first detection)."""
    f = TrackFilter(params, space)
    draws = matched_draws(sightings, truth, seed)
    true = truth.target_at(times)
    n4 = np.full(times.shape, np.nan)
    n2 = np.full(times.shape, np.nan)
    k = 0
    for i, t in enumerate(times):
        while k < len(draws) and draws[k][0] <= t:
            t_det, z, cov = draws[k]
            f.update_position(z, cov, t_det)
            k += 1
        if not (held[i] and f.initialised and np.isfinite(true[i]).all()):
            continue
        x, P = f.state_at(float(t))
        d = x - true[i]
        try:
            n4[i] = float(d @ np.linalg.solve(P, d))
            n2[i] = float(d[:2] @ np.linalg.solve(P[:2, :2], d[:2]))
        except np.linalg.LinAlgError:
            continue
    return {"nees4": n4, "nees2": n2}


def seed_of(name: str) -> int:
    """A fixed seed per agent name: the same run gives the same reference."""
    return zlib.crc32(name.encode())


__all__ = ["matched_draws", "matched_nees", "seed_of"]
