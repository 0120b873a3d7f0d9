"""The core's belief log record (once a second) and the digest replay compares.

Pure functions of the parts of :class:`~agents.core.AgentCore` they read, which the core
passes: :func:`belief_record` is the ``belief`` record, :func:`belief_digest` the SHA-256
of the exact belief state (grid, search map and track) that the record carries.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from agents.belief import PheromoneGrid, ReputationTable, TrackFilter
from agents.gyro_bias import GyroBias
from agents.localization import PoseEKF
from agents.peers import PeerTable
from agents.seeking import Seeker
from protocol.errors import RejectCounters


def belief_digest(grid: PheromoneGrid, seeker: Seeker, track: TrackFilter) -> str:
    """SHA-256 of the exact belief state (grid and track): replay compares these."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(grid.mu).tobytes())
    h.update(np.ascontiguousarray(grid.var).tobytes())
    h.update(np.asarray(grid.origin, dtype=np.int64).tobytes())
    h.update(seeker.state_bytes())
    if track.initialised:
        h.update(track.state.tobytes())
        h.update(track.covariance.tobytes())
    return h.hexdigest()


def belief_record(
    now: float,
    *,
    grid: PheromoneGrid,
    localizer: PoseEKF,
    gyro_bias: GyroBias,
    peers: PeerTable,
    reputation: ReputationTable,
    counters: RejectCounters,
    checks: dict[str, int],
    seeker: Seeker,
    track: TrackFilter,
    confident: Callable[[float], bool],
) -> dict[str, Any]:
    """The ``belief`` log record at ``now``: the grid (float32), the pose, the gyro's bias,
    the peers, the counters and ``checks`` (the reputation checks run and failed), the
    search map's fields and the track; ``confident``: whether the track is confident at a
    time."""
    pose_cov = localizer.cov
    residual = localizer.bias_residual  # what the pose filter holds of the bias, if it does
    bias, bias_std = gyro_bias.bias, gyro_bias.std
    scale, scale_var = localizer.gyro_scale
    if residual is not None:
        bias, bias_std = bias + residual[0], math.sqrt(max(residual[1], 0.0))
    record: dict[str, Any] = {
        "digest": belief_digest(grid, seeker, track),
        "origin": grid.origin,
        "shape": grid.shape,
        "mu_f32": np.ascontiguousarray(grid.mu, dtype=np.float32).tobytes(),
        "var_f32": np.ascontiguousarray(grid.var, dtype=np.float32).tobytes(),
        "pose": localizer.pose,
        "pose_t": localizer.t,
        "pose_cov": None if pose_cov is None else pose_cov.tolist(),
        "gyro_bias": [bias, bias_std, gyro_bias.updates, gyro_bias.noise_std],
        "gyro_scale": [scale, math.sqrt(max(scale_var, 0.0))],
        "mean_var": grid.mean_variance(),
        "mass": grid.total_mass(),
        "peers": {
            p.name: {
                "lost": p.lost,
                "score": reputation.score(p.name),
                "synced": p.clock.synchronized_at_time(now),
            }
            for _, p in peers.items()
        },
        "counters": counters.as_dict(),
        "checks": dict(checks),
    }
    record.update(seeker.log_fields())
    if track.initialised:
        record["track"] = {
            "t": track.time,
            "x": track.state,
            "P": track.covariance,
            "uncertainty": track.uncertainty,
            "updates": track.update_count,
            "confident": confident(now),
            "modes": track.mode_probabilities.tolist(),  # constant velocity, turn
            "turn_rate": track.turn_rate,
        }
    return record
