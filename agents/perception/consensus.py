"""Multi-tag consensus: the largest set of tags that agree on where the car is.

Each world tag seen in a frame implies a car pose (x, y, theta) with a
covariance (:class:`Candidate`). Two candidates are **compatible** when they
are within 0.15 m and 15 degrees of each other, or when their difference is
explained by their joint uncertainty (Mahalanobis distance below the χ²(3)
quantile ``consistency_quantile``; a far tag pins the heading loosely, and
two honest far tags may be 0.2 m apart while both are within their own
error). The compatibility graph's **maximal cliques** are enumerated with
Bron–Kerbosch (with pivoting); the largest clique wins. When several cliques
share the largest size and their fused poses are not compatible with each
other, the frame has two equally supported, contradictory stories and
**no pose is returned** (``contradictory_cliques``): a wrong pose is worse than
none. Tags outside the winning clique are **outliers**.

The clique is fused in information form, each candidate's covariance already
inflated for its decision margin and reprojection error by the caller, with
headings unwrapped around the first member; when the members scatter more
than their covariances allow (χ²/dof > 1) the fused covariance is scaled up
by that ratio.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import chdtri

FloatArray = npt.NDArray[np.float64]

OK = ""
NO_CANDIDATES = "no_candidates"
CONTRADICTORY = "contradictory_cliques"
SINGULAR = "singular_covariance"


@dataclass(frozen=True)
class ConsensusParams:
    max_distance: float = 0.15
    max_angle: float = math.radians(15.0)
    consistency_quantile: float = 0.999
    """Also compatible when the Mahalanobis distance passes this χ²(3) quantile; 0 disables."""

    def __post_init__(self) -> None:
        if not (self.max_distance > 0 and self.max_angle > 0):
            raise ValueError("gates must be > 0")
        if not 0.0 <= self.consistency_quantile < 1.0:
            raise ValueError("consistency_quantile must be in [0, 1)")

    @property
    def chi2_gate(self) -> float:
        if self.consistency_quantile == 0.0:
            return 0.0
        return float(chdtri(3, 1.0 - self.consistency_quantile))


@dataclass(frozen=True, eq=False)
class Candidate:
    """One tag's vote: the car pose it implies and the covariance of that pose."""

    key: int  # the tag id
    pose: FloatArray  # x, y, theta
    cov: FloatArray  # 3x3


@dataclass(frozen=True, eq=False)
class ConsensusResult:
    """The fused pose of the winning clique, or a named refusal."""

    reason: str
    pose: FloatArray | None = None
    cov: FloatArray | None = None
    members: tuple[int, ...] = ()
    outliers: tuple[int, ...] = ()
    cliques: tuple[tuple[int, ...], ...] = ()
    chi2: float = 0.0

    @property
    def ok(self) -> bool:
        return self.reason == OK


def wrap(a: float) -> float:
    return math.remainder(a, math.tau)


def difference(a: FloatArray, b: FloatArray) -> FloatArray:
    d = np.asarray(a - b, dtype=np.float64)
    d[2] = wrap(float(d[2]))
    return d


def compatible(
    a: FloatArray,
    b: FloatArray,
    params: ConsensusParams,
    cov_a: FloatArray | None = None,
    cov_b: FloatArray | None = None,
) -> bool:
    """Within the metric gates, or statistically indistinguishable.

    The statistical test uses the sum of the covariances given (a missing one
    counts as exact); with neither, only the metric gates apply.
    """
    d = difference(a, b)
    if (
        math.hypot(float(d[0]), float(d[1])) <= params.max_distance
        and abs(float(d[2])) <= params.max_angle
    ):
        return True
    gate = params.chi2_gate
    if gate <= 0.0 or (cov_a is None and cov_b is None):
        return False
    total = np.zeros((3, 3))
    for cov in (cov_a, cov_b):
        if cov is not None:
            total = total + cov
    try:
        m2 = float(d @ np.linalg.solve(total, d))
    except np.linalg.LinAlgError:
        return False
    return math.isfinite(m2) and m2 <= gate


def maximal_cliques(adjacency: Mapping[int, set[int]]) -> list[frozenset[int]]:
    """Every maximal clique of an undirected graph (Bron–Kerbosch with pivoting)."""
    out: list[frozenset[int]] = []

    def expand(r: set[int], p: set[int], x: set[int]) -> None:
        if not p and not x:
            out.append(frozenset(r))
            return
        pivot = max(p | x, key=lambda u: len(adjacency[u] & p))
        for v in sorted(p - adjacency[pivot]):
            expand(r | {v}, p & adjacency[v], x & adjacency[v])
            p = p - {v}
            x = x | {v}

    expand(set(), set(adjacency), set())
    return out


def fuse(members: Sequence[Candidate]) -> tuple[FloatArray, FloatArray, float] | None:
    """Information-form fusion; (pose, covariance, χ² of the members about it) or None."""
    ref = members[0].pose
    info = np.zeros((3, 3))
    vec = np.zeros(3)
    infos: list[tuple[FloatArray, FloatArray]] = []
    try:
        for c in members:
            inv = np.asarray(np.linalg.inv(c.cov), dtype=np.float64)
            x = ref + difference(c.pose, ref)
            infos.append((inv, x))
            info += inv
            vec += inv @ x
        cov = np.linalg.inv(info)
    except np.linalg.LinAlgError:
        return None
    mean = cov @ vec
    chi2 = 0.0
    for inv, x in infos:
        d = x - mean
        chi2 += float(d @ inv @ d)
    dof = 3 * (len(members) - 1)
    if dof > 0 and chi2 > dof:
        cov = cov * (chi2 / dof)
    mean[2] = wrap(float(mean[2]))
    return mean, 0.5 * (cov + cov.T), chi2


def consensus(candidates: Sequence[Candidate], params: ConsensusParams) -> ConsensusResult:
    """The largest mutually compatible set of candidates, fused; or a refusal."""
    if not candidates:
        return ConsensusResult(NO_CANDIDATES)
    by_key = {c.key: c for c in candidates}
    if len(by_key) != len(candidates):
        raise ValueError("candidate keys must be unique")
    adjacency: dict[int, set[int]] = {k: set() for k in by_key}
    keys = sorted(by_key)
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            ca, cb = by_key[a], by_key[b]
            if compatible(ca.pose, cb.pose, params, ca.cov, cb.cov):
                adjacency[a].add(b)
                adjacency[b].add(a)
    cliques = maximal_cliques(adjacency)
    size = max(len(q) for q in cliques)
    largest = sorted(tuple(sorted(q)) for q in cliques if len(q) == size)
    all_cliques = tuple(sorted(tuple(sorted(q)) for q in cliques))
    fused: list[tuple[tuple[int, ...], FloatArray, FloatArray, float]] = []
    for clique in largest:
        f = fuse([by_key[k] for k in clique])
        if f is None:
            return ConsensusResult(SINGULAR, cliques=all_cliques)
        fused.append((clique, *f))
    for i in range(len(fused)):
        for j in range(i + 1, len(fused)):
            _, pose_a, cov_a, _ = fused[i]
            _, pose_b, cov_b, _ = fused[j]
            if not compatible(pose_a, pose_b, params, cov_a, cov_b):
                return ConsensusResult(CONTRADICTORY, cliques=all_cliques)
    # ties that tell the same story: the best-determined one (smallest covariance)
    clique, pose, cov, chi2 = min(fused, key=lambda f: float(np.linalg.det(f[2])))
    outliers = tuple(k for k in keys if k not in clique)
    return ConsensusResult(OK, pose, cov, clique, outliers, all_cliques, chi2)
