"""Pose chaining: a robot without its own fix placed through robots that see each other.

An **anchor** is a robot's own world pose (from wall tags). A **link** says
that one robot (the observer) saw another robot's tag at a capture time and
gives the other robot's planar pose in the observer's car frame
(:class:`~agents.perception.pipeline.RobotSighting` plus the observer's name).
A link can be walked both ways (the inverse relative pose).

:func:`chain_pose` finds the best chain from any anchor to the wanted robot:

- at most ``max_hops`` links (2 by default): every hop compounds error;
- every time in the chain (the anchor's and each link's capture time) within
  ``max_skew`` (0.1 s) of every other: moving robots make older relations wrong;
- never a frame or anchor whose time was not synchronised: its capture time
  is only a receipt time, so the skew itself is unknown.

Times must all be on one clock (the caller maps peers' times through its
clock-offset estimates). Among the valid chains the one with the smallest
position covariance wins; with none, the result names why (the most specific
reason met: ``unsynchronized``, ``skew``, ``too_many_hops``, else ``no_path``).
Covariances compose to first order: ``J_a C_a J_aᵀ + J_r C_r J_rᵀ``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from agents.perception.records import RobotSighting

FloatArray = npt.NDArray[np.float64]

OK = ""
UNSYNCHRONIZED = "unsynchronized"
SKEW = "skew"
TOO_MANY_HOPS = "too_many_hops"
NO_PATH = "no_path"

MAX_HOPS = 2
MAX_SKEW = 0.1


@dataclass(frozen=True, eq=False)
class AnchorPose:
    """A robot's own world pose at time ``t``."""

    robot: str
    pose: FloatArray  # x, y, theta
    cov: FloatArray
    t: float
    synchronized: bool


@dataclass(frozen=True, eq=False)
class Link:
    """``observer`` saw ``subject`` at ``t``: the subject's pose in the observer's frame."""

    observer: str
    subject: str
    pose: FloatArray
    cov: FloatArray
    t: float
    synchronized: bool


@dataclass(frozen=True, eq=False)
class ChainResult:
    reason: str
    pose: FloatArray | None = None
    cov: FloatArray | None = None
    path: tuple[str, ...] = ()  # anchor first, the wanted robot last
    t_span: tuple[float, float] | None = None

    @property
    def ok(self) -> bool:
        return self.reason == OK

    @property
    def hops(self) -> int:
        return max(0, len(self.path) - 1)


def compose(
    a: FloatArray, cov_a: FloatArray, rel: FloatArray, cov_rel: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Pose ``a ⊕ rel`` (``rel`` expressed in ``a``'s frame) with its covariance."""
    c, s = math.cos(float(a[2])), math.sin(float(a[2]))
    px, py = float(rel[0]), float(rel[1])
    pose = np.array(
        [a[0] + c * px - s * py, a[1] + s * px + c * py, math.remainder(a[2] + rel[2], math.tau)]
    )
    Ja = np.array([[1.0, 0.0, -s * px - c * py], [0.0, 1.0, c * px - s * py], [0.0, 0.0, 1.0]])
    Jr = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    cov = Ja @ cov_a @ Ja.T + Jr @ cov_rel @ Jr.T
    return pose, 0.5 * (cov + cov.T)


def invert(rel: FloatArray, cov: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The inverse relative pose (the observer seen from the subject) and its covariance."""
    c, s = math.cos(float(rel[2])), math.sin(float(rel[2]))
    x, y = float(rel[0]), float(rel[1])
    pose = np.array([-c * x - s * y, s * x - c * y, math.remainder(-float(rel[2]), math.tau)])
    J = np.array([[-c, -s, s * x - c * y], [s, -c, c * x + s * y], [0.0, 0.0, -1.0]])
    out = J @ cov @ J.T
    return pose, 0.5 * (out + out.T)


class _Step(NamedTuple):
    pose: FloatArray
    cov: FloatArray
    path: tuple[str, ...]
    t_lo: float
    t_hi: float
    taint: str


def link_from_sighting(observer: str, sighting: RobotSighting) -> Link:
    """A pipeline's sighting of another robot as a :class:`Link` from ``observer``."""
    return Link(
        observer,
        sighting.robot,
        sighting.pose,
        sighting.cov,
        sighting.t_capture,
        sighting.synchronized,
    )


_SPECIFICITY = {UNSYNCHRONIZED: 3, SKEW: 2, TOO_MANY_HOPS: 1, NO_PATH: 0}


def chain_pose(
    robot: str,
    anchors: Sequence[AnchorPose],
    links: Sequence[Link],
    max_hops: int = MAX_HOPS,
    max_skew: float = MAX_SKEW,
) -> ChainResult:
    """``robot``'s world pose through at most ``max_hops`` links, or a named refusal."""
    if max_hops < 1 or not max_skew > 0.0:
        raise ValueError("max_hops must be >= 1 and max_skew > 0")
    best: ChainResult | None = None
    refusal = NO_PATH

    def refuse(reason: str) -> None:
        nonlocal refusal
        if _SPECIFICITY[reason] > _SPECIFICITY[refusal]:
            refusal = reason

    def consider(result: ChainResult) -> None:
        nonlocal best
        assert result.cov is not None
        if (
            best is None
            or best.cov is None
            or np.trace(result.cov[:2, :2]) < np.trace(best.cov[:2, :2])
        ):
            best = result

    # each directed edge: (from, to, relative pose of `to` in `from`'s frame, cov, link)
    edges: list[tuple[str, str, FloatArray, FloatArray, Link]] = []
    for link in links:
        edges.append((link.observer, link.subject, link.pose, link.cov, link))
        inv_pose, inv_cov = invert(link.pose, link.cov)
        edges.append((link.subject, link.observer, inv_pose, inv_cov, link))

    def walk(state: _Step) -> None:
        """Depth-first over simple paths; a tainted path only reports why it failed."""
        for src, dst, rel, rel_cov, link in edges:
            if src != state.path[-1] or dst in state.path:
                continue
            why = state.taint
            lo, hi = min(state.t_lo, link.t), max(state.t_hi, link.t)
            if not link.synchronized:
                why = why or UNSYNCHRONIZED
            elif hi - lo > max_skew:
                why = why or SKEW
            elif len(state.path) > max_hops:
                why = why or TOO_MANY_HOPS
            pose, cov = compose(state.pose, state.cov, rel, rel_cov)
            path = (*state.path, dst)
            if dst != robot:
                walk(_Step(pose, cov, path, lo, hi, why))
            elif why:
                refuse(why)
            else:
                consider(ChainResult(OK, pose, cov, path, (lo, hi)))

    for anchor in anchors:
        if anchor.robot == robot:
            if anchor.synchronized:
                consider(ChainResult(OK, anchor.pose, anchor.cov, (robot,), (anchor.t, anchor.t)))
            continue
        walk(
            _Step(
                np.asarray(anchor.pose, dtype=np.float64),
                np.asarray(anchor.cov, dtype=np.float64),
                (anchor.robot,),
                anchor.t,
                anchor.t,
                "" if anchor.synchronized else UNSYNCHRONIZED,
            )
        )
    if best is not None:
        return best
    return ChainResult(refusal)
