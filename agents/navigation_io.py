"""The navigator's inputs, settings and output: plain data with their checks.

What :class:`~agents.navigation.Navigator` decides from (the belief window, the track,
the search map's viewpoints), how it is tuned (:class:`NavParams`) and what it returns
(:class:`NavDecision` in a :class:`NavMode`). ``agents.navigation`` re-exports them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from agents.checks import finite, require

FloatArray = npt.NDArray[np.float64]

class NavMode(StrEnum):
    NO_POSE = "no_pose"
    SEARCH = "search"
    PURSUE = "pursue"
    GLANCE = "glance"
    VERIFY = "verify"
    RELOCALIZE = "relocalize"


@dataclass(frozen=True, eq=False)
class BeliefView:
    """The belief window as arrays: mu and var shaped (H, W), cell-centre xs (W,) and ys (H,)."""

    mu: FloatArray
    var: FloatArray
    xs: FloatArray
    ys: FloatArray
    var_max: float

    def __post_init__(self) -> None:
        mu = np.asarray(self.mu, dtype=np.float64)
        var = np.asarray(self.var, dtype=np.float64)
        xs = np.asarray(self.xs, dtype=np.float64)
        ys = np.asarray(self.ys, dtype=np.float64)
        require(xs.ndim == 1 and ys.ndim == 1, "xs and ys must be 1-D")
        require(xs.size >= 2 and ys.size >= 2, "the window needs at least 2x2 cells")
        require(mu.shape == (ys.size, xs.size), "mu must be shaped (len(ys), len(xs))")
        require(var.shape == mu.shape, "var must be shaped like mu")
        for a in (mu, var, xs, ys):
            require(bool(np.all(np.isfinite(a))), "belief arrays must be finite")
        require(math.isfinite(self.var_max) and self.var_max > 0.0, "var_max must be > 0")
        require(bool(np.all(np.diff(xs) > 0) and np.all(np.diff(ys) > 0)), "xs, ys must increase")
        for name, a in (("mu", mu), ("var", var), ("xs", xs), ("ys", ys)):
            object.__setattr__(self, name, a)

    @property
    def cell_size(self) -> float:
        return float(self.xs[1] - self.xs[0])


@dataclass(frozen=True)
class TrackView:
    """The fused target track: position and velocity at time ``t``, and whether it is confident."""

    x: float
    y: float
    vx: float
    vy: float
    t: float
    confident: bool

    def __post_init__(self) -> None:
        require(finite(self.x, self.y, self.vx, self.vy, self.t), "track values must be finite")


@dataclass(frozen=True, eq=False)
class SearchView:
    """The viewpoints of the search map, as the navigator scores them.

    Arrays of one length: each viewpoint's position and camera heading, ``gains`` (the
    probability of the target its camera would cover) and ``distance`` (the coarse path
    length from the robot, inf: unreachable); then how travel is priced.
    """

    x: FloatArray
    y: FloatArray
    heading: FloatArray
    gains: FloatArray
    distance: FloatArray
    turn_rate: float = 1.5
    look_time: float = 1.0
    switch_ratio: float = 1.25
    arrive_radius: float = 0.2

    def __post_init__(self) -> None:
        n = len(self.x)
        for name in ("x", "y", "heading", "gains", "distance"):
            a = np.asarray(getattr(self, name), dtype=np.float64)
            require(a.shape == (n,), f"{name} must be 1-D, like x")
            object.__setattr__(self, name, a)
        require(finite(self.turn_rate, self.look_time, self.switch_ratio, self.arrive_radius)
                and self.turn_rate > 0.0 and self.look_time > 0.0, "bad search view pricing")


@dataclass(frozen=True)
class NavParams:
    """Tuning of :class:`Navigator` (metres, seconds, radians)."""

    v_max: float = 0.5
    omega_max: float = 3.0
    search_turn_rate: float = 2.0
    """Turn rate on the spot while there is no pose, rad/s (positive: counter-clockwise)."""
    heading_gain: float = 2.0
    """omega = heading_gain · heading error, clipped to omega_max."""
    turn_in_place_angle: float = math.radians(50.0)
    """Heading errors beyond this turn on the spot first."""
    turn_hysteresis: float = math.radians(30.0)
    """rad: a turn on the spot keeps the way it turns while the heading error stays within
    this of ±π, where either way is about as short (more than one decision's turn at
    ``omega_max``, 0.3 rad: a turn that passes π does not turn back)."""
    standoff: float | None = None
    """How far (m) the robot holds from a target or a place to verify, facing it. None: the
    camera's view distance, given by the core (the default camera's without one). It was
    0.8 m: there the view is 0.96 m wide, which a target crossing it at 1 m/s leaves within
    half a second (90 % of the lost-track time on waypoints), and it holds no disc over
    0.41 m in radius, less than a claim's (0.4-0.6 m), so a lie could not be seen empty."""
    standoff_tolerance: float = 0.05
    """m: a robot this near its standoff stops closing in, and holds ..."""
    hold_slack: float = 0.2
    """m: ... until its distance error passes this."""
    aligned_bearing: float = math.radians(2.0)
    """rad: near the standoff, a robot turned to within this of its target stops turning, and
    holds ..."""
    hold_bearing: float = math.radians(10.0)
    """rad: ... until the target's bearing passes this (the middle third of a 62° view)."""
    near_standoff: float = 0.5
    """m: nearer than this beyond the standoff the robot aims straight at the target or place
    and other robots only brake it (farther, they also bend its heading, and a blocked
    straight line is driven around)."""
    distance_gain: float = 0.8
    """Pursuit speed per metre of distance error, 1/s."""
    v_back: float = 0.15
    """Fastest reverse speed when the target comes closer than the standoff."""
    pursue_lookahead: float = 0.5
    max_track_extrapolation: float = 2.0
    """Never predict the track further than this beyond its own time."""
    w_mass: float = 2.0
    w_explore: float = 1.0
    w_distance: float = 0.2
    """Utility lost per metre of path."""
    w_turn: float = 0.1
    """Utility lost per radian of bearing."""
    footprint_cells: int = 5
    """Side of the square (cells) over which mu and var are averaged."""
    hysteresis: float = 0.1
    min_goal_distance: float = 0.3
    waypoint_distance: float = 0.5
    robot_radius: float = 0.13
    planning_margin: float = 0.05
    """Cells closer than robot_radius + this to a wall or obstacle are not driven through."""
    repulsion_radius: float = 0.35
    repulsion_gain: float = 1.5
    brake_gain: float = 2.0
    """Approach speed allowed per metre of gap, 1/s; keep brake_gain · period < 1."""
    min_gap: float = 0.03
    period: float = 0.1
    """Decision period, s (used to look half a turn ahead in the brake)."""
    stuck_time: float = 4.0
    stuck_progress: float = 0.1
    ban_time: float = 10.0
    ban_radius: float = 0.3
    creep_speed: float = 0.12
    """Fastest translation without a pose, m/s: chosen slow (≤ 0.15) so that driving into a
    wall unseen should not harm the car (not yet tried on a real one). 0: only turns."""
    relocate_turn_margin: float = 1.0
    """Seconds beyond one full turn on the spot before a lost robot creeps."""
    creep_time: float = 8.0
    """Longest creep leg without a pose, s; then a full turn on the spot again."""
    relocate_view_distance: float = 1.8
    """A tag viewpoint lies this far (m) from its tag towards the room's centre: in the
    camera's range, far enough back that neighbouring tags share its view."""
    relocate_arrive_radius: float = 0.2
    """A creep leg ends this near (m, on the estimate) to its viewpoint."""
    relocate_sight_margin: float = 0.3
    """m: a lost robot turns on the spot only where a mapped tag is within the camera's range
    and this much more of its estimate (the estimate's σ when the pose is lost at the
    localizer's ``max_position_trace``); farther from every tag a turn cannot see one, and
    it creeps at once."""
    glance_heading_std: float = math.radians(3.0)
    """A pursuer at its standoff from a slow target whose heading's standard deviation
    passes this (rad) glances at a tag (agents.standoff); 3° is 0.1 m at the 1.98 m standoff."""
    glance_max_speed: float = 0.2
    """m/s: only a target slower than this is left for a glance."""
    glance_tag_distance: float = 2.8
    """m: a tag this near can be glanced at (inside the default camera's 3 m range)."""
    glance_time: float = 3.0
    """s: a glance ends after this at most ..."""
    glance_interval: float = 5.0
    """s: ... and the next begins no sooner than this after it."""
    relocalize_at: float = 0.5
    """A robot whose pose has used this share of the localizer's loss limits (position
    trace over ``max_position_trace``, heading variance over ``max_heading_var``, the
    larger) drives, with the pose it still has, to a tag viewpoint (the nearest, or the one
    of least detour on the way to its search goal) and faces the tag (RELOCALIZE), whatever
    it was doing; above 1: never (the pose is lost first)."""
    relocalized_at: float = 0.25
    """... until its pose is back under this share."""

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if name == "footprint_cells" or (name == "standoff" and value is None):
                continue
            require(math.isfinite(value) and value >= 0.0, f"{name} must be finite and >= 0")
        for name in ("v_max", "omega_max", "robot_radius", "period", "brake_gain"):
            require(getattr(self, name) > 0.0, f"{name} must be > 0")
        require(self.brake_gain * self.period < 1.0, "brake_gain * period must be < 1")
        require(
            isinstance(self.footprint_cells, int) and self.footprint_cells >= 1,
            "footprint_cells must be an int >= 1",
        )
        require(self.search_turn_rate <= self.omega_max, "search_turn_rate must be <= omega_max")
        require(self.creep_speed <= self.v_max, "creep_speed must be <= v_max")
        require(self.relocalized_at < self.relocalize_at,
                "relocalized_at must be < relocalize_at")


@dataclass(frozen=True)
class NavDecision:
    """One decision: desired motion, the duties for it, the mode and the goal (for logs)."""

    t: float
    mode: NavMode
    v: float
    omega: float
    duty_left: float
    duty_right: float
    goal: tuple[float, float] | None = None
    utility: float | None = None
    goal_heading: float | None = None  # a viewpoint's camera heading (search map)


__all__ = ["BeliefView", "NavDecision", "NavMode", "NavParams", "SearchView", "TrackView"]
