"""One agent's settings: every key of a robot file (protocol/ROBOT.md) ends up here.

:class:`AgentConfig` is frozen and checked on construction; its parts are the
estimators' own parameter classes. ``tools.agent_config`` makes one from a
site and a robot's settings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from agents.belief import FusionRule, GridParams, ReputationParams, TrackParams
from agents.belief.constraints import FreeSpace
from agents.belief.deposit import CAMERA_FOV, CAMERA_RANGE, inscribed_distance
from agents.belief.search import SearchParams
from agents.drive_model import DriveModel
from agents.gyro_bias import GyroBiasParams
from agents.localizer_params import LocalizerParams
from agents.navigation import NavParams
from agents.peers import PeerLimits
from agents.room import Room
from protocol.swarm.limits import ClaimLimits

FUSION_NONE = "none"  # a fusion setting: share nothing received (the no-sharing baseline)


def track_for_target(
    max_speed: float | None, max_accel: float | None, radius: float | None,
    base: TrackParams | None = None,
) -> TrackParams:
    """The track's parameters for a declared target (a site's ``[target]``): its
    ``max_speed``, ``max_accel`` and half-width where the site gives them, ``base``'s
    defaults (TrackParams: 1.5 m/s, 2 m/s²) where it does not."""
    base = base if base is not None else TrackParams()
    return replace(
        base,
        max_speed=base.max_speed if max_speed is None else max_speed,
        max_accel=base.max_accel if max_accel is None else max_accel,
        target_radius=base.target_radius if radius is None else radius,
    )


PENDING_TIMEOUT = 5.0  # and for this long at most (SWARM.md: a claim is at most 5 s old)


@dataclass(frozen=True)
class Rates:
    """Message and decision rates, Hz (validated)."""

    tick: float = 10.0
    heartbeat: float = 1.0
    patch: float = 2.0
    track: float = 5.0  # a TRACK at least this often (the last one resent when nothing is new)
    track_burst: float = 20.0  # a new detection is sent at once, at most this often
    ping: float = 1.0

    def __post_init__(self) -> None:
        for name, lo, hi in (
            ("tick", 2.0, 50.0),
            ("heartbeat", 0.1, 10.0),
            ("patch", 0.1, 20.0),
            ("track", 0.5, 50.0),
            ("track_burst", 1.0, 100.0),
            ("ping", 0.1, 10.0),
        ):
            value = getattr(self, name)
            if not (math.isfinite(value) and lo <= value <= hi):
                raise ValueError(f"rate {name} must be in {lo:g}..{hi:g} Hz, got {value}")


@dataclass(frozen=True)
class Sensing:
    """What the camera sees: used for the footprint of negative evidence."""

    range: float = CAMERA_RANGE
    fov: float = CAMERA_FOV
    min_range: float = 0.15

    @property
    def view_distance(self) -> float:
        """m: where the largest disc fits in the camera's view (:func:`inscribed_distance`):
        the distance at which the robot holds a target or looks at a place."""
        return inscribed_distance(self.range, self.fov)

    @property
    def view_radius(self) -> float:
        """m: the radius of that largest disc (1.02 m for a 3 m, 62° camera)."""
        return self.view_distance * math.sin(min(0.5 * self.fov, 0.5 * math.pi))


def default_confident_spread(sensing: Sensing) -> float:
    """m: half the camera's ``view_radius``, the default ``track_confident_spread``."""
    return 0.5 * sensing.view_radius


def confident(spread: npt.ArrayLike, seen_age: npt.ArrayLike, *, limit: float,
              max_speed: float) -> npt.NDArray[np.bool_]:
    """Whether a track's target is known to ``limit`` (m): in the room (the track's position
    ``spread``), or from where the robot stands (its own camera saw the target ``seen_age``
    seconds ago, so at ``max_speed`` it is at most that far from where it was seen). The
    robot's own pose error, part of the spread, moves the robot and what it sees alike."""
    spread_, age = np.asarray(spread, dtype=np.float64), np.asarray(seen_age, dtype=np.float64)
    return np.asarray((spread_ <= limit) | (age * max_speed <= limit))


@dataclass(frozen=True)
class AgentConfig:
    name: str
    room: Room
    landmarks: Mapping[int, tuple[float, float]]
    target_tag: int
    drive: DriveModel = field(default_factory=DriveModel)
    sensing: Sensing = field(default_factory=Sensing)
    grid: GridParams = field(default_factory=GridParams)
    track: TrackParams = field(default_factory=TrackParams)
    reputation: ReputationParams = field(default_factory=ReputationParams)
    localizer: LocalizerParams = field(default_factory=LocalizerParams)
    gyro_bias: GyroBiasParams = field(default_factory=GyroBiasParams)
    """The gyro's bias, learnt while the car stands still (agents.gyro_bias)."""
    nav: NavParams = field(default_factory=NavParams)
    rates: Rates = field(default_factory=Rates)
    search: SearchParams = field(default_factory=SearchParams)
    """The search map, looks (LOOK) and viewpoint goals (``search.share``: send and apply
    LOOKs; off, the no-sharing baseline of the search)."""
    fusion: str = FusionRule.CI.value  # "ci", "naive", "max_confidence" or "none"
    use_reputation: bool = True
    peer_lost_after: float = 3.0
    patch_max_cells: int = 100  # one PATCH datagram of at most 100 cells at 2 Hz: ~1.7 KB/s
    track_confident_spread: float | None = None
    """m: a track is pursued (and the HEARTBEAT says TRACK) while its position's standard
    deviation along its most uncertain direction is at most this; None: half the
    camera's ``view_radius`` (0.51 m), so that at the standoff the 2σ disc fits in view.
    Position only: the velocity's uncertainty (the turn at a waypoint's corner) must not
    turn a robot away from a target its camera sees; nor its own pose's (a target it has
    just seen is pursued whatever the spread, ``AgentCore.track_confident``)."""
    track_max_age: float = 3.0  # a track with no new information for this long is not pursued
    track_timeout: float = 6.0  # ... and after this long it is dropped: refuse, not guess
    max_peers: int = 64
    claim_margin: float = 1.0  # positions claimed up to this far outside the room are plausible
    max_claimed_speed: float = 10.0  # m/s: a peer track faster than this is refused

    def __post_init__(self) -> None:
        if self.fusion not in {*(r.value for r in FusionRule), FUSION_NONE}:
            raise ValueError(f"unknown fusion rule {self.fusion!r}")
        if not 1 <= self.patch_max_cells <= 4096:
            raise ValueError("patch_max_cells must be in 1..4096")
        if not (0.0 <= self.claim_margin <= 100.0 and 0.0 < self.max_claimed_speed <= 1000.0):
            raise ValueError("claim_margin must be in 0..100 m, max_claimed_speed in (0, 1000] m/s")
        _ = self.peer_limits  # validates max_peers and peer_lost_after
        if not (math.isfinite(self.confident_spread) and self.confident_spread > 0.0):
            raise ValueError("track_confident_spread must be a positive number of metres")

    @property
    def confident_spread(self) -> float:
        """m: ``track_confident_spread``, or its default from the camera."""
        if self.track_confident_spread is not None:
            return self.track_confident_spread
        return default_confident_spread(self.sensing)

    @property
    def target_space(self) -> FreeSpace:
        """Where the target's centre can be (the track's limits): the room and its obstacles
        for a target of half-width ``track.target_radius``."""
        return FreeSpace.of_room(self.room, margin=self.track.target_radius)

    @property
    def peer_limits(self) -> PeerLimits:
        return PeerLimits(max_peers=self.max_peers, lost_after=self.peer_lost_after,
                          forget_after=max(30.0, self.peer_lost_after))

    @property
    def claim_limits(self) -> ClaimLimits:
        """What a peer's message may claim here (SWARM.md §10)."""
        g = self.grid
        return ClaimLimits.for_room(
            self.room.width, self.room.height, margin=self.claim_margin,
            max_speed=self.max_claimed_speed, max_age=PENDING_TIMEOUT,
            cell_var_min=g.var_min / 2, cell_var_max=4 * g.var_max,
        )
