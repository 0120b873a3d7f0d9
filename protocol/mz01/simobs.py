"""The ``sim`` object of simulated telemetry: one synthetic observation (MZ01.md, "sim").

The world writes it (:meth:`SimObservation.to_json`) into every telemetry
object of a car in ``synthetic`` mode; the agent reads it back
(:func:`parse_sim`), and anything malformed raises :class:`SimObsError` with
a named reason. A sighting is ``(tag id, range m, bearing rad)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from protocol.errors import ProtocolError

MAX_SIGHTINGS = 64

Sighting = tuple[int, float, float]


class SimObsError(ProtocolError):
    """The ``sim`` object of a telemetry datagram is not a valid observation."""


@dataclass(frozen=True)
class SimObservation:
    """One observation: the car's uptime at capture, the wall tags, the target, the noise."""

    obs_ms: int
    tags: tuple[Sighting, ...]
    target: Sighting | None
    sigma_range: float
    sigma_bearing: float

    def to_json(self) -> dict[str, Any]:
        """The object as it travels in the telemetry (sightings as ``[id, range, bearing]``)."""
        return {
            "obs_ms": self.obs_ms,
            "tags": [list(s) for s in self.tags],
            "target": list(self.target) if self.target is not None else None,
            "sigma": [self.sigma_range, self.sigma_bearing],
        }


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SimObsError("bad_type", f"{what} must be a number")
    f = float(value)
    if not math.isfinite(f):
        raise SimObsError("not_finite", what)
    return f


def _sighting(raw: Any, what: str) -> Sighting:
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
