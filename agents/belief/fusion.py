"""Fusion rules for two estimates of the same quantity.

Scalar rules work element-wise on arrays (one grid cell per element). Matrix
rules fuse two Gaussian state estimates ``(x, P)``.

Covariance intersection (CI) is consistent for *any* unknown correlation
between the two estimates: it never claims more certainty than the pair
holds, so beliefs that have already been exchanged can be fused again
without double counting. Naive (information-sum) fusion assumes independence
and becomes overconfident when that is false; it is kept as the named
alternative for comparisons.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np
import numpy.typing as npt
from scipy.linalg import lapack

FloatArray = npt.NDArray[np.float64]


class FusionRule(Enum):
    """How a received cell is fused with the own cell."""

    CI = "ci"
    NAIVE = "naive"
    MAX_CONFIDENCE = "max_confidence"


def ci_scalar(
    mu_a: npt.ArrayLike, var_a: npt.ArrayLike, mu_b: npt.ArrayLike, var_b: npt.ArrayLike
) -> tuple[FloatArray, FloatArray]:
    """Fast covariance intersection, element-wise.

    ``ω = var_b / (var_a + var_b)`` weights ``a``;
    ``1/var = ω/var_a + (1-ω)/var_b``;
    ``mu = var · (ω·mu_a/var_a + (1-ω)·mu_b/var_b)``.
    The fused var always lies between ``min(var_a, var_b)`` and ``max(var_a, var_b)``.
    """
    ma, va = np.asarray(mu_a, dtype=np.float64), np.asarray(var_a, dtype=np.float64)
    mb, vb = np.asarray(mu_b, dtype=np.float64), np.asarray(var_b, dtype=np.float64)
    total = va + vb
    wa = vb / total / va  # ω / var_a
    wb = va / total / vb  # (1 - ω) / var_b
    var = 1.0 / (wa + wb)
    mu = var * (wa * ma + wb * mb)
    return mu, var


def naive_scalar(
    mu_a: npt.ArrayLike, var_a: npt.ArrayLike, mu_b: npt.ArrayLike, var_b: npt.ArrayLike
) -> tuple[FloatArray, FloatArray]:
    """Information-form fusion assuming independence: ``1/var = 1/var_a + 1/var_b``."""
    ma, va = np.asarray(mu_a, dtype=np.float64), np.asarray(var_a, dtype=np.float64)
    mb, vb = np.asarray(mu_b, dtype=np.float64), np.asarray(var_b, dtype=np.float64)
    var = 1.0 / (1.0 / va + 1.0 / vb)
    mu = var * (ma / va + mb / vb)
    return mu, var


def max_confidence_scalar(
    mu_a: npt.ArrayLike, var_a: npt.ArrayLike, mu_b: npt.ArrayLike, var_b: npt.ArrayLike
) -> tuple[FloatArray, FloatArray]:
    """Keep whichever estimate has the smaller variance (``a`` on a tie)."""
    ma, va = np.asarray(mu_a, dtype=np.float64), np.asarray(var_a, dtype=np.float64)
    mb, vb = np.asarray(mu_b, dtype=np.float64), np.asarray(var_b, dtype=np.float64)
    take_b = vb < va
    return np.where(take_b, mb, ma), np.where(take_b, vb, va)


SCALAR_RULES = {
    FusionRule.CI: ci_scalar,
    FusionRule.NAIVE: naive_scalar,
    FusionRule.MAX_CONFIDENCE: max_confidence_scalar,
}


@dataclass(frozen=True, eq=False)
class MatrixFusion:
    """A fused estimate; ``w`` is the weight of the first input's information (1.0 for naive)."""

    x: FloatArray
    P: FloatArray
    w: float


def _omega_search(t: list[float], s: list[float], criterion: str) -> float:
    """Minimise the CI criterion over ω ∈ [0, 1] in the whitened basis.

    With ``Pa = T Tᵀ`` and ``Pb = T diag(s) Tᵀ`` (``T = La·U``), the fused covariance is
    ``P(ω) = T diag(s_k / (1 + ω(s_k - 1))) Tᵀ``, so with ``t_k = |T[:, k]|²``
        trace P(ω) = Σ t_k s_k / (1 + ω(s_k - 1)),
        log det P(ω) = const - Σ log(1 + ω(s_k - 1)).
    Both are convex in ω, so the minimiser is the unique root of the derivative in
    (0, 1) or an end point. The search is a safeguarded Newton iteration on the
    derivative inside a shrinking bracket (bisection whenever Newton leaves it).
    """
    a = [sk - 1.0 for sk in s]
    if criterion == "trace":
        c = [tk * sk for tk, sk in zip(t, s, strict=True)]

        def slope(w: float) -> tuple[float, float]:
            d1 = d2 = 0.0
            for ck, ak in zip(c, a, strict=True):
                inv = 1.0 / (1.0 + w * ak)
                g = ck * ak * inv * inv
                d1 -= g
                d2 += 2.0 * g * ak * inv
            return d1, d2

    elif criterion == "det":

        def slope(w: float) -> tuple[float, float]:
            d1 = d2 = 0.0
            for ak in a:
                g = ak / (1.0 + w * ak)
                d1 -= g
                d2 += g * g
            return d1, d2

    else:
        raise ValueError(f"unknown CI criterion {criterion!r} (use 'trace' or 'det')")

    if slope(0.0)[0] >= 0.0:
        return 0.0
    if slope(1.0)[0] <= 0.0:
        return 1.0
    lo, hi, w = 0.0, 1.0, 0.5
    for _ in range(100):
        d1, d2 = slope(w)
        if d1 > 0.0:
            hi = w
        else:
            lo = w
        if d2 > 0.0:
            step = d1 / d2
            if abs(step) <= 1e-12:
                return w
            if lo < w - step < hi:
                w -= step
                continue
        w = 0.5 * (lo + hi)
        if hi - lo <= 1e-12:
            break
    return w


def ci_matrix(
    xa: npt.ArrayLike,
    Pa: npt.ArrayLike,
    xb: npt.ArrayLike,
    Pb: npt.ArrayLike,
    criterion: str = "trace",
) -> MatrixFusion:
    """Covariance intersection with ω chosen to minimise trace(P) or det(P).

    ``P = (ω Pa⁻¹ + (1-ω) Pb⁻¹)⁻¹``, ``x = P (ω Pa⁻¹ xa + (1-ω) Pb⁻¹ xb)``.
    Both covariances must be symmetric positive definite
    (``numpy.linalg.LinAlgError`` otherwise).
    """
    X = np.empty((np.shape(xa)[0], 2))
    X[:, 0] = xa
    X[:, 1] = xb
    # Whiten by Pa: La⁻¹ Pa La⁻ᵀ = I and La⁻¹ Pb La⁻ᵀ = U diag(s) Uᵀ. The LAPACK routines
    # are called directly (numpy.linalg's wrappers cost more than the 4×4 maths) and read
    # only the lower triangle, so a slightly asymmetric input is treated as symmetric.
    La, info = lapack.dpotrf(np.asarray(Pa, dtype=np.float64), lower=1, clean=1)
    if info != 0:
        raise np.linalg.LinAlgError("Pa is not positive definite")
    La_inv, info = lapack.dtrtri(La, lower=1)
    if info != 0:
        raise np.linalg.LinAlgError("Pa is singular")
    s, U, info = lapack.dsyev(La_inv @ np.asarray(Pb, dtype=np.float64) @ La_inv.T, lower=1)
    if info != 0 or not s[0] > 0.0:
        raise np.linalg.LinAlgError("Pb is not positive definite")
    T = La @ U
    w = _omega_search((T * T).sum(axis=0).tolist(), s.tolist(), criterion)
    # In the whitened basis both estimates are diagonal: fuse component-wise.
    Y = U.T @ (La_inv @ X)
    info = w + (1.0 - w) / s
    y = (w * Y[:, 0] + (1.0 - w) * Y[:, 1] / s) / info
    x = T @ y
    P = (T / info) @ T.T
    return MatrixFusion(x=x, P=0.5 * (P + P.T), w=w)


def naive_matrix(
    xa: npt.ArrayLike, Pa: npt.ArrayLike, xb: npt.ArrayLike, Pb: npt.ArrayLike
) -> MatrixFusion:
    """Information sum assuming independence: ``P⁻¹ = Pa⁻¹ + Pb⁻¹``."""
    Ia = np.linalg.inv(np.asarray(Pa, dtype=np.float64))
    Ib = np.linalg.inv(np.asarray(Pb, dtype=np.float64))
    P = np.linalg.inv(Ia + Ib)
    x = P @ (Ia @ np.asarray(xa, dtype=np.float64) + Ib @ np.asarray(xb, dtype=np.float64))
    return MatrixFusion(x=x, P=0.5 * (P + P.T), w=1.0)


def ci_criterion_value(Pa: npt.ArrayLike, Pb: npt.ArrayLike, w: float, criterion: str) -> float:
    """trace or det of the CI covariance at a given ω (direct formula, for checks and plots)."""
    Ia = np.linalg.inv(np.asarray(Pa, dtype=np.float64))
    Ib = np.linalg.inv(np.asarray(Pb, dtype=np.float64))
    P = np.linalg.inv(w * Ia + (1.0 - w) * Ib)
    if criterion == "trace":
        return float(np.trace(P))
    if criterion == "det":
        return float(np.linalg.det(P))
    raise ValueError(f"unknown CI criterion {criterion!r}")


__all__ = [
    "SCALAR_RULES",
    "FusionRule",
    "MatrixFusion",
    "ci_criterion_value",
    "ci_matrix",
    "ci_scalar",
    "max_confidence_scalar",
    "naive_matrix",
    "naive_scalar",
]
