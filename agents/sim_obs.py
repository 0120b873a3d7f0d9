"""Synthetic observations carried in simulated telemetry's ``sim`` object.

The contract is in ``worlds/ARENA.md`` ("Synthetic observations"). This is a
decoder: anything malformed raises :class:`SimObsError` with a named reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agents.observations import ObservationBatch, ObservationError, TagSighting
from protocol.errors import ProtocolError

MAX_SIGHTINGS = 64


class SimObsError(ProtocolError):
    """The ``sim`` object of a telemetry datagram is not a valid observation."""


@dataclass(frozen=True)
class SimObservation:
    obs_ms: int
    tags: tuple[tuple[int, float, float], ...]
    target: tuple[int, float, float] | None
    sigma_range: float
    sigma_bearing: float


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SimObsError("bad_type", f"{what} must be a number")
    f = float(value)
    if not math.isfinite(f):
        raise SimObsError("not_finite", what)
    return f


def _sighting(raw: Any, what: str) -> tuple[int, float, float]:
    if not isinstance(raw, list) or len(raw) != 3:
        raise SimObsError("bad_shape", f"{what} must be [id, range, bearing]")
    tag_id = raw[0]
    if isinstance(tag_id, bool) or not isinstance(tag_id, int) or not 0 <= tag_id < 2**16:
        raise SimObsError("bad_type", f"{what} id")
    rng, bearing = _number(raw[1], f"{what} range"), _number(raw[2], f"{what} bearing")
    if rng < 0 or abs(bearing) > math.pi + 1e-9:
        raise SimObsError("out_of_range", f"{what}: range {rng}, bearing {bearing}")
    return tag_id, rng, bearing


def parse_sim(sim: Mapping[str, Any]) -> SimObservation:
    """Validate the ``sim`` object; raise :class:`SimObsError` on anything malformed."""
    obs_ms = sim.get("obs_ms")
    if isinstance(obs_ms, bool) or not isinstance(obs_ms, int) or not 0 <= obs_ms < 2**63:
        raise SimObsError("bad_type", "obs_ms must be a non-negative integer")
    tags_raw = sim.get("tags")
    if not isinstance(tags_raw, list) or len(tags_raw) > MAX_SIGHTINGS:
        raise SimObsError("bad_shape", "tags must be a list of at most 64 sightings")
    tags = tuple(_sighting(t, "tag") for t in tags_raw)
    target_raw = sim.get("target")
    target = None if target_raw is None else _sighting(target_raw, "target")
    sigma = sim.get("sigma")
    if not isinstance(sigma, list) or len(sigma) != 2:
        raise SimObsError("bad_shape", "sigma must be [range_std, bearing_std]")
    s_range, s_bearing = _number(sigma[0], "sigma range"), _number(sigma[1], "sigma bearing")
    if s_range <= 0 or s_bearing <= 0:
        raise SimObsError("out_of_range", "sigmas must be > 0")
    return SimObservation(obs_ms, tags, target, s_range, s_bearing)


def to_batch(
    obs: SimObservation,
    received_at: float,
    car_to_local: Callable[[float], float] | None,
) -> ObservationBatch:
    """The observation as a batch stamped on the local clock.

    ``car_to_local`` maps car uptime (s) to local time; ``None`` while the car's
    clock is unsynchronised, and the batch falls back to its receipt time,
    flagged ``synchronized=False``.
    """

    def sighting(s: tuple[int, float, float]) -> TagSighting:
        return TagSighting(s[0], s[1], s[2], obs.sigma_range, obs.sigma_bearing)

    if car_to_local is None:
        t, synced = received_at, False
    else:
        t, synced = car_to_local(obs.obs_ms / 1000.0), True
    try:
        return ObservationBatch(
            t_capture=t,
            synchronized=synced,
            tags=tuple(sighting(s) for s in obs.tags),
            target=None if obs.target is None else sighting(obs.target),
        )
    except ObservationError as exc:
        raise SimObsError(exc.reason, str(exc)) from None
