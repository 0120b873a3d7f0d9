"""Where to drive next: search the shared belief, pursue a confident track, never collide.

:class:`Navigator` turns plain data (own pose, the belief window's arrays, the
track, other robots' positions, the room) into a :class:`NavDecision` at the
decision rate (10 Hz): a desired (v, omega), the wheel duties the
:class:`~agents.drive_model.DriveModel` mixes from it, the mode and the goal.

- **NO_POSE**: a turn on the spot, so the camera sweeps for tags; a robot that had a
  pose and is still lost one full turn later creeps, on the pose the core dead-reckons,
  towards the viewpoints of mapped tags, each leg followed by a full turn
  (:mod:`agents.relocation`).
- **RELOCALIZE** (a pose whose covariance has used ``relocalize_at`` of the localizer's
  loss limits, until it is back under ``relocalized_at``): whatever it was doing, the
  robot drives on the pose it still has, at the usual speed, to a tag viewpoint (as a lost
  robot would creep to, :mod:`agents.relocation`) and turns to face the tag: the one of
  least detour on the way to its search goal, the nearest when it has none (a searcher
  sent back to the nearest one each time drove back and forth between it and a goal
  whose way lost its pose).
  Lost, it would only creep there at ``creep_speed``, after a full turn: in an 8 m room
  whose middle no tag reaches, pursuers lost their pose a third of the time (eight_robots)
  and spent up to 15 s finding it again.
- **VERIFY** (pose and a place to verify: a peer's disputed claim that no own
  detection can settle, :meth:`agents.vetting.Vetting.to_verify`): approach the place
  as PURSUE approaches a track, so the camera sees whether the target is there.
- **PURSUE** (pose and a confident track): head for the track's position
  predicted ``pursue_lookahead`` seconds ahead, hold the standoff from
  it and face it so the camera keeps it in view: straight at it, facing it all the
  way, while the straight line keeps the planner's clearance, along the planner's path
  otherwise (a path's waypoint turns the camera away by up to 45°). The standoff is, unless
  ``NavParams.standoff`` says otherwise, the camera's *view distance*: where the
  largest disc fits in its view (:func:`~agents.belief.deposit.inscribed_distance`,
  1.98 m for a 3 m, 62° camera), so a target's uncertainty and motion stay in view,
  and a claimed place's whole disc can be seen empty. Within ``near_standoff`` of the
  standoff the robot keeps facing the place: other robots brake it but do not turn it
  away, and it holds still within dead bands of distance and bearing
  (:class:`~agents.standoff.Hold`). When another robot stands on its line to a place to
  verify, it drives to the nearest viewpoint at the standoff that sees the place past it
  (:func:`~agents.viewpoint.free_viewpoint`).
- **GLANCE** (a pursuer at its standoff from a slow target whose heading has grown
  uncertain): it turns to a mapped tag until its heading is known again, then back
  (:class:`~agents.standoff.Glance`).
- **SEARCH on the search map** (otherwise, when the agent keeps one,
  :class:`SearchView`): the goal is a *viewpoint* (x, y, θ), chosen for the
  probability of the target its camera would cover from there (the footprint's
  integral over the room-scale search map, :mod:`agents.belief.search`) per
  second of travel: path length / ``v_max`` (the planner's path on the window,
  the search map's coarse path beyond it) + turning / ``turn_rate`` + a fixed
  ``look_time``. The goal is kept until another scores ``switch_ratio`` times
  more (the goal's own score falls as the camera covers it on the way), or
  progress stalls short of it (then it is banned). Within ``arrive_radius`` the
  robot stops and turns to the viewpoint's heading, and stays while it scores best.
- **SEARCH** (otherwise, without a search map): over the window, utility = ``w_mass`` · local belief
  mass (mu averaged over the camera-sized ``footprint_cells``) + ``w_explore``
  · var / var_max − ``w_distance`` · path length − ``w_turn`` · |bearing|. The
  best cell becomes the goal, kept until another beats it by ``hysteresis``,
  it comes within ``min_goal_distance``, or progress stalls (then it is
  banned for ``ban_time``). Path lengths are shortest paths on the window's
  cells around walls and obstacles, and the robot steers at a waypoint on that
  path, so a box between robot and goal is driven around (:mod:`agents.planning`).

**Collisions.** Only short range: walls, obstacles and other robots within
``repulsion_radius`` (gap between surfaces; robots are discs of
``robot_radius``) push the heading away, and a brake caps the speed of
approach towards each of them at ``brake_gain`` · (gap − ``min_gap``). Other
robots affect nothing else: there is no rule that keeps robots apart over
areas; they spread because the variance they share says where has been seen.

Deterministic: no random numbers; the same sequence of inputs gives the same
decisions bit for bit.

Why ~590 lines, over the ~500 of the rest: it is one policy (search, pursue, verify,
relocalize, steer, brake) over one set of inputs and one goal. Its inputs, settings and
output are :mod:`agents.navigation_io` (re-exported here); its parts with their own state
are apart: the relocation of a lost robot and the tag viewpoints (:mod:`agents.relocation`),
the path planner and its graphs (:mod:`agents.planning`), where to look from past another
robot (:mod:`agents.viewpoint`), holding and glancing at the standoff
(:mod:`agents.standoff`); the room is :mod:`agents.room`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.ndimage import uniform_filter

from agents.belief.deposit import CAMERA_FOV, CAMERA_RANGE, inscribed_distance
from agents.checks import finite, require
from agents.drive_model import DriveModel
from agents.navigation_io import (
    BeliefView,
    NavDecision,
    NavMode,
    NavParams,
    SearchView,
    TrackView,
)
from agents.planning import Paths, WindowPlanner, cell_of
from agents.pose_geometry import wrap_angle
from agents.relocation import Relocation
from agents.room import Room
from agents.standoff import Glance, Hold
from agents.viewpoint import free_viewpoint, line_clear, view_blocked

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int32]


@dataclass(frozen=True)
class _Scene:
    """One decision's inputs, with a pose."""

    pose: tuple[float, float, float]
    belief: BeliefView
    others: Sequence[tuple[float, float]]
    room: Room


class Navigator:
    """Decides (v, omega) and wheel duties from plain data; holds only the goal and its history."""

    def __init__(
        self,
        drive: DriveModel | None = None,
        params: NavParams | None = None,
        tags: Sequence[tuple[float, float]] = (),
        view_distance: float | None = None,
        camera_range: float = CAMERA_RANGE,
    ) -> None:
        """``tags``: where the mapped tags are (x, y), which a lost robot creeps towards;
        ``view_distance``: the camera's (m; None: the default camera's), the standoff unless
        ``params.standoff`` is set; ``camera_range``: how far the camera sees a tag (m)."""
        self.drive = drive if drive is not None else DriveModel()
        self.params = params if params is not None else NavParams()
        p = self.params
        if view_distance is None:
            view_distance = inscribed_distance(CAMERA_RANGE, CAMERA_FOV)
        require(math.isfinite(view_distance) and view_distance > 0.0,
                "view_distance must be finite and > 0")
        self.standoff = p.standoff if p.standoff is not None else view_distance
        """m: how far from a target or a place to verify the robot holds."""
        self.relocation = Relocation(
            tags, turn_rate=p.search_turn_rate, turn_margin=p.relocate_turn_margin,
            creep_speed=p.creep_speed, creep_time=p.creep_time,
            view_distance=p.relocate_view_distance, arrive_radius=p.relocate_arrive_radius,
            sight=camera_range + p.relocate_sight_margin,
        )
        self.glance = Glance(tags, heading_std=p.glance_heading_std,
                             tag_distance=p.glance_tag_distance, duration=p.glance_time,
                             interval=p.glance_interval)
        self._goal: tuple[float, float] | None = None
        self._turn_way = 0.0  # the sign of the turn on the spot under way (0: none)
        self._goal_best_dist = math.inf
        self._goal_progress_t = 0.0
        self._bans: list[tuple[float, float, float]] = []  # (x, y, until)
        self._view: int | None = None  # the goal's index among the search view's viewpoints
        self._relocalize: int | None = None  # the tag whose viewpoint RELOCALIZE heads for
        self.hold = Hold(tolerance=p.standoff_tolerance, slack=p.hold_slack,
                         aligned=p.aligned_bearing, bearing=p.hold_bearing)
        self.planner = WindowPlanner(p.robot_radius + p.planning_margin, p.waypoint_distance)

    @property
    def goal(self) -> tuple[float, float] | None:
        return self._goal

    def decide(
        self,
        now: float,
        *,
        pose: tuple[float, float, float] | None,
        belief: BeliefView,
        track: TrackView | None,
        others: Sequence[tuple[float, float]],
        room: Room,
        search: SearchView | None = None,
        estimate: tuple[float, float, float] | None = None,
        verify: tuple[float, float] | None = None,
        heading_std: float | None = None,
        pose_used: float | None = None,
    ) -> NavDecision:
        """The decision at ``now``; see the module docstring for the behaviour.

        ``estimate``: without a pose, the last pose dead-reckoned since it was lost (None:
        there never was one). ``verify``: a place the camera should see (VERIFY).
        ``heading_std``: the pose's heading standard deviation, rad (a pursuer glances at a
        tag when it grows, agents.standoff). ``pose_used``: the share of the localizer's
        loss limits the pose's covariance has reached (RELOCALIZE past ``relocalize_at``)."""
        require(math.isfinite(now), "now must be finite")
        self._bans = [b for b in self._bans if b[2] > now]
        if pose is None or not finite(*pose):
            self._drop_goal()
            self.glance.stop(now)
            self.hold.release()
            self._relocalize = None
            if estimate is None or not finite(*estimate):
                return self._emit(now, NavMode.NO_POSE, 0.0, self.params.search_turn_rate)
            return self._relocate(now, _Scene(estimate, belief, tuple(others), room))
        self.relocation.found()
        scene = _Scene(pose, belief, tuple(others), room)
        if self._relocalizing(scene, pose_used):
            self._drop_goal()
            self.glance.stop(now)
            self.hold.release()
            return self._relocalize_at(now, scene)
        if track is not None and track.confident and not (verify is not None and finite(*verify)):
            self._drop_goal()
            return self._pursue(now, scene, track, heading_std)
        self.glance.stop(now)
        if not (verify is not None and finite(*verify)):
            self.hold.release()
        if verify is not None and finite(*verify):
            self._drop_goal()
            return self._approach(now, scene, verify, NavMode.VERIFY)
        if search is not None and len(search.x):
            return self._search_views(now, scene, search)
        return self._search(now, scene)

    # ---------------------------------------------------------------- modes

    def _pursue(self, now: float, scene: _Scene, track: TrackView,
                heading_std: float | None) -> NavDecision:
        p = self.params
        ahead = min(max(now - track.t, 0.0) + p.pursue_lookahead, p.max_track_extrapolation)
        at = (track.x + track.vx * ahead, track.y + track.vy * ahead)
        x, y, _ = scene.pose
        holding = abs(math.hypot(at[0] - x, at[1] - y) - self.standoff) <= p.near_standoff
        if holding and math.hypot(track.vx, track.vy) <= p.glance_max_speed:
            body = 2.0 * p.robot_radius
            look = self.glance.heading(
                now, scene.pose, heading_std,
                lambda tag: line_clear((x, y), tag, scene.room)
                and not view_blocked((x, y), tag, scene.others, body))
            if look is not None:
                self.hold.release()
                v, omega = self._steer(scene, look, 0.0, repel=False)
                return self._emit(now, NavMode.GLANCE, v, omega, goal=at)
        else:
            self.glance.stop(now)
        return self._approach(now, scene, at, NavMode.PURSUE)

    def _approach(self, now: float, scene: _Scene, at: tuple[float, float],
                  mode: NavMode) -> NavDecision:
        """Hold the standoff from ``at``, facing it (around an obstacle on the way)."""
        p = self.params
        x, y, _ = scene.pose
        tx, ty = at
        dist = math.hypot(tx - x, ty - y)
        err = dist - self.standoff
        v = min(max(p.distance_gain * err, -p.v_back), p.v_max)
        if mode is NavMode.VERIFY:
            view = free_viewpoint(at, (x, y), scene.others, scene.room, standoff=self.standoff,
                                  body=2.0 * p.robot_radius, keep_out=self.planner.keep_out)
            if view is not None:
                self.hold.release()
                return self._drive_to_view(now, scene, view, at)
        # Near the standoff: straight at it, whatever is on the way (braking keeps it clear).
        far = err > p.near_standoff
        if far:
            self.hold.release()
            heading = self._heading_to(scene, at, err)
            v, omega = self._steer(scene, heading, v, repel=True)
            return self._emit(now, mode, v, omega, goal=(tx, ty))
        heading = math.atan2(ty - y, tx - x)
        hold_v, hold_omega = self.hold.update(err, wrap_angle(heading - scene.pose[2]))
        v, omega = self._steer(scene, heading, 0.0 if hold_v else v, repel=False)
        return self._emit(now, mode, v, 0.0 if hold_omega else omega, goal=(tx, ty))


    def _drive_to_view(self, now: float, scene: _Scene, view: tuple[float, float],
                       at: tuple[float, float]) -> NavDecision:
        """VERIFY with another robot in the way: drive to ``view`` (around what is between),
        whence the place is seen past it."""
        p = self.params
        dist = math.hypot(view[0] - scene.pose[0], view[1] - scene.pose[1])
        heading = self._heading_to(scene, view, dist)
        v, omega = self._steer(scene, heading, min(p.distance_gain * dist, p.v_max), repel=True)
        return self._emit(now, NavMode.VERIFY, v, omega, goal=at)

    def _heading_to(self, scene: _Scene, goal: tuple[float, float], length: float) -> float:
        """The heading to ``goal``: straight at it while the first ``length`` metres of the
        line keep the planner's clearance (the camera faces it all the way), else towards
        the planner's waypoint around what is on the line (which turns the camera away
        from the goal by up to 45 degrees)."""
        x, y, _ = scene.pose
        aim = goal
        if not self.planner.straight_clear(scene.room, (x, y), goal, length):
            route = self.planner.route(scene.belief.xs, scene.belief.ys, scene.room,
                                       start=(x, y), target=goal)
            if route is not None:
                aim = route
        return math.atan2(aim[1] - y, aim[0] - x)

    def _search(self, now: float, scene: _Scene) -> NavDecision:
        p = self.params
        belief = scene.belief
        x, y, _ = scene.pose
        utility, dist, pred, source = self._utility(scene)
        best = int(np.argmax(utility))
        best_u = float(utility.flat[best])
        if not math.isfinite(best_u):
            self._drop_goal()
            return self._emit(now, NavMode.SEARCH, 0.0, p.search_turn_rate)
        current = None if self._goal is None else cell_of(belief.xs, belief.ys, self._goal)
        if (
            self._goal is not None
            and current is not None
            and float(utility.flat[current]) + p.hysteresis >= best_u
        ):
            goal, goal_index = self._goal, current
        else:
            gy, gx = divmod(best, utility.shape[1])
            goal, goal_index = (float(belief.xs[gx]), float(belief.ys[gy])), best
            self._goal = goal
            self._goal_best_dist = math.inf
            self._goal_progress_t = now
        d_goal = float(dist.flat[goal_index])
        if d_goal < self._goal_best_dist - p.stuck_progress:
            self._goal_best_dist = d_goal
            self._goal_progress_t = now
        elif now - self._goal_progress_t > p.stuck_time:
            self._bans.append((goal[0], goal[1], now + p.ban_time))
            self._drop_goal()
            return self._emit(now, NavMode.SEARCH, 0.0, 0.0)
        aim = goal
        if source is not None and pred is not None:
            aim = self.planner.waypoint(belief.xs, belief.ys, pred=pred, dist=dist, source=source,
                                        goal_index=goal_index)
        heading = math.atan2(aim[1] - y, aim[0] - x)
        v_nominal = p.v_max * min(1.0, math.hypot(goal[0] - x, goal[1] - y) / 0.5)
        v, omega = self._steer(scene, heading, v_nominal, repel=True)
        return self._emit(
            now, NavMode.SEARCH, v, omega, goal=goal, utility=float(utility.flat[goal_index])
        )

    def _search_views(self, now: float, scene: _Scene, view: SearchView) -> NavDecision:
        """SEARCH on the search map: the viewpoint of most probability per second."""
        p = self.params
        belief = scene.belief
        x, y, th = scene.pose
        dist, pred, source, _ = self._paths(scene)
        # The planner's path length where the viewpoint lies on the window, else the
        # search map's coarse one.
        c = belief.cell_size
        h, w = belief.mu.shape
        lx = np.rint((view.x - float(belief.xs[0])) / c).astype(np.int64)
        ly = np.rint((view.y - float(belief.ys[0])) / c).astype(np.int64)
        inside = (lx >= 0) & (lx < w) & (ly >= 0) & (ly < h)
        window = np.full(len(view.x), -1, dtype=np.int64)
        window[inside] = ly[inside] * w + lx[inside]
        planned = np.full(len(view.x), np.inf)
        planned[inside] = dist.ravel()[window[inside]]
        d = np.where(np.isfinite(planned), planned, view.distance)
        bearing = np.arctan2(view.y - y, view.x - x)

        def wrapped(a: FloatArray) -> FloatArray:
            return np.abs(np.remainder(a + math.pi, 2.0 * math.pi) - math.pi)

        turn = np.where(
            np.hypot(view.x - x, view.y - y) > view.arrive_radius,
            wrapped(bearing - th) + wrapped(view.heading - bearing),
            wrapped(view.heading - th),
        )
        with np.errstate(invalid="ignore"):
            seconds = d / p.v_max + turn / view.turn_rate + view.look_time
            score = view.gains / seconds
        invalid = ~np.isfinite(score) | (view.gains <= 0.0)
        for bx, by, _ in self._bans:
            invalid |= np.hypot(view.x - bx, view.y - by) < p.ban_radius
        score = np.where(invalid, -np.inf, score)
        best = int(np.argmax(score))
        if not math.isfinite(float(score[best])):
            self._drop_goal()
            return self._emit(now, NavMode.SEARCH, 0.0, p.search_turn_rate)
        k = self._view
        if (
            k is None
            or k >= len(score)
            or self._goal != (float(view.x[k]), float(view.y[k]))
            or not math.isfinite(float(score[k]))
            or float(score[k]) * view.switch_ratio < float(score[best])
        ):
            k = best
            self._view = k
            self._goal = (float(view.x[k]), float(view.y[k]))
            self._goal_best_dist = math.inf
            self._goal_progress_t = now
        goal, goal_heading = (float(view.x[k]), float(view.y[k])), float(view.heading[k])
        d_goal = float(d[k])
        away = math.hypot(goal[0] - x, goal[1] - y)
        if d_goal < self._goal_best_dist - p.stuck_progress or away <= view.arrive_radius:
            # Nearer, or there (looking): not stuck. The look itself lowers the goal's
            # gain until another viewpoint wins.
            self._goal_best_dist = min(d_goal, self._goal_best_dist)
            self._goal_progress_t = now
        elif now - self._goal_progress_t > p.stuck_time:
            self._bans.append((goal[0], goal[1], now + p.ban_time))
            self._drop_goal()
            return self._emit(now, NavMode.SEARCH, 0.0, 0.0)
        utility = float(score[k])
        if away <= view.arrive_radius:  # there: face the viewpoint's heading
            err = wrap_angle(goal_heading - th)
            omega = min(max(p.heading_gain * err, -p.omega_max), p.omega_max)
            return self._emit(now, NavMode.SEARCH, 0.0, omega, goal=goal, utility=utility,
                              goal_heading=goal_heading)
        aim = goal
        if source is not None and pred is not None and window[k] >= 0 and math.isfinite(
            float(planned[k])
        ):
            aim = self.planner.waypoint(belief.xs, belief.ys, pred=pred, dist=dist,
                                        source=source, goal_index=int(window[k]))
        heading = math.atan2(aim[1] - y, aim[0] - x)
        v_nominal = p.v_max * min(1.0, away / 0.5)
        v, omega = self._steer(scene, heading, v_nominal, repel=True)
        return self._emit(now, NavMode.SEARCH, v, omega, goal=goal, utility=utility,
                          goal_heading=goal_heading)

    def _relocalizing(self, scene: _Scene, pose_used: float | None) -> bool:
        """Whether to head for a tag now: from ``relocalize_at`` down to ``relocalized_at``.

        The tag viewpoint is chosen once, when it begins: the one of least detour on the way
        to the search goal (distance there plus distance from there to the goal), the nearest
        without a goal."""
        p = self.params
        tags = self.relocation.tags
        used = pose_used if pose_used is not None and math.isfinite(pose_used) else None
        if used is None or not tags or (self._relocalize is not None
                                        and used <= p.relocalized_at):
            self._relocalize = None
        elif self._relocalize is None and used >= p.relocalize_at:
            x, y, _ = scene.pose
            points = self.relocation.viewpoints(scene.room)
            goal = self._goal

            def cost(k: int) -> float:
                d = math.hypot(points[k][0] - x, points[k][1] - y)
                return d if goal is None else d + math.hypot(points[k][0] - goal[0],
                                                             points[k][1] - goal[1])

            self._relocalize = min(range(len(points)), key=cost)
        return self._relocalize is not None

    def _relocalize_at(self, now: float, scene: _Scene) -> NavDecision:
        """RELOCALIZE: to the tag's viewpoint (around what is between) on the pose it still
        has, at the usual speed, then a turn to face the tag."""
        p = self.params
        assert self._relocalize is not None
        view = self.relocation.viewpoints(scene.room)[self._relocalize]
        tag = self.relocation.tags[self._relocalize]
        x, y, _ = scene.pose
        dist = math.hypot(view[0] - x, view[1] - y)
        if dist <= p.relocate_arrive_radius:
            v, omega = self._steer(scene, math.atan2(tag[1] - y, tag[0] - x), 0.0, repel=False)
        else:
            heading = self._heading_to(scene, view, dist)
            v, omega = self._steer(scene, heading, min(p.distance_gain * dist, p.v_max),
                                   repel=True)
        return self._emit(now, NavMode.RELOCALIZE, v, omega, goal=view)

    def _relocate(self, now: float, scene: _Scene) -> NavDecision:
        """NO_POSE with an estimate: a turn on the spot, or a creep leg to a tag viewpoint."""
        p = self.params
        x, y, _ = scene.pose
        goal = self.relocation.goal(now, x, y, scene.room)
        if goal is None:
            return self._emit(now, NavMode.NO_POSE, 0.0, p.search_turn_rate)
        heading = math.atan2(goal[1] - y, goal[0] - x)
        v, omega = self._steer(scene, heading, p.creep_speed, repel=True)
        return self._emit(now, NavMode.NO_POSE, min(v, p.creep_speed), omega, goal=goal)

    def _drop_goal(self) -> None:
        self._goal = None
        self._view = None
        self._goal_best_dist = math.inf

    def _emit(
        self,
        now: float,
        mode: NavMode,
        v: float,
        omega: float,
        *,
        goal: tuple[float, float] | None = None,
        utility: float | None = None,
        goal_heading: float | None = None,
    ) -> NavDecision:
        left, right = self.drive.mix(v, omega)
        return NavDecision(now, mode, v, omega, left, right, goal, utility, goal_heading)

    # ---------------------------------------------------------------- utility

    def _paths(self, scene: _Scene) -> Paths:
        x, y, _ = scene.pose
        return self.planner.paths(scene.belief.xs, scene.belief.ys, scene.room, x, y)

    def _utility(
        self, scene: _Scene
    ) -> tuple[FloatArray, FloatArray, IntArray | None, int | None]:
        p = self.params
        belief = scene.belief
        x, y, th = scene.pose
        dist, pred, source, blocked = self._paths(scene)
        size = p.footprint_cells
        mass = uniform_filter(belief.mu, size=size, mode="nearest")
        explore = uniform_filter(belief.var, size=size, mode="nearest") / belief.var_max
        gx, gy = np.meshgrid(belief.xs, belief.ys)
        bearing = np.abs(np.remainder(np.arctan2(gy - y, gx - x) - th + np.pi, 2 * np.pi) - np.pi)
        with np.errstate(invalid="ignore"):
            utility = (
                p.w_mass * mass + p.w_explore * explore - p.w_distance * dist - p.w_turn * bearing
            )
        too_near = np.hypot(gx - x, gy - y) < p.min_goal_distance
        invalid = blocked | ~np.isfinite(dist) | too_near
        for bx, by, _ in self._bans:
            invalid |= np.hypot(gx - bx, gy - by) < p.ban_radius
        utility = np.where(invalid, -np.inf, utility)
        return utility, dist, pred, source

    # ---------------------------------------------------------------- steering and safety

    def _hazards(
        self,
        x: float,
        y: float,
        others: Sequence[tuple[float, float]],
        room: Room,
    ) -> list[tuple[float, float, float]]:
        """(unit x, unit y towards the hazard, gap) for each hazard within the repulsion radius."""
        p = self.params
        reach = p.repulsion_radius + p.robot_radius
        found: list[tuple[float, float, float]] = []
        for qx, qy in room.nearby_surfaces(x, y, reach):
            d = math.hypot(qx - x, qy - y)
            if d > 1e-9:
                found.append(((qx - x) / d, (qy - y) / d, d - p.robot_radius))
        for ox, oy in others:
            d = math.hypot(ox - x, oy - y)
            gap = d - 2.0 * p.robot_radius
            if gap < p.repulsion_radius and d > 1e-9:
                found.append(((ox - x) / d, (oy - y) / d, gap))
        return found

    def _steer(
        self, scene: _Scene, heading: float, v: float, *, repel: bool
    ) -> tuple[float, float]:
        """(v, omega) towards ``heading`` at up to ``v``, bent by repulsion and braked.

        Repulsion bends the heading only while driving forward: turning on the
        spot is always safe, and a pursuer holding its standoff keeps facing the target.
        A turn on the spot keeps its way near ±π (``turn_hysteresis``): with a goal behind,
        choosing the shorter way anew each decision turned the car back and forth at full
        duty (liar_only, seed 2: ±3 rad/s every 0.1 s until its pose was lost).
        """
        p = self.params
        x, y, th = scene.pose
        hazards = self._hazards(x, y, scene.others, scene.room)
        driving = abs(wrap_angle(heading - th)) <= p.turn_in_place_angle
        if repel and v > 0.0 and hazards and driving:
            dx, dy = math.cos(heading), math.sin(heading)
            for ux, uy, gap in hazards:
                push = p.repulsion_gain * (p.repulsion_radius - max(gap, 0.0)) / p.repulsion_radius
                dx -= push * ux
                dy -= push * uy
            if math.hypot(dx, dy) > 1e-9:
                heading = math.atan2(dy, dx)
        err = wrap_angle(heading - th)
        if err * self._turn_way < 0.0 and abs(err) > math.pi - p.turn_hysteresis:
            err += math.copysign(2.0 * math.pi, self._turn_way)  # the way it was turning
        self._turn_way = math.copysign(1.0, err) if abs(err) > p.turn_in_place_angle else 0.0
        omega = min(max(p.heading_gain * err, -p.omega_max), p.omega_max)
        if abs(err) > p.turn_in_place_angle:
            v = 0.0
        else:
            v *= math.cos(err)
        for ux, uy, gap in hazards:
            allowed = p.brake_gain * max(gap - p.min_gap, 0.0)
            for a in (th, th + omega * p.period):
                closing = math.cos(a) * ux + math.sin(a) * uy  # > 0: forward motion approaches
                if v * closing > allowed:
                    v = allowed / closing
        return v, omega


__all__ = [
    "BeliefView",
    "NavDecision",
    "NavMode",
    "NavParams",
    "Navigator",
    "SearchView",
    "TrackView",
]
