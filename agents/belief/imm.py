"""Interacting multiple model (IMM) maths, as in Bar-Shalom, Li and Kirubarajan (2001), §11.6.6.

With modes ``j = 1..M``, mode probabilities ``μ`` and the Markov switching
matrix ``Π`` (``p_ij``: from mode i to mode j), one cycle is:

1. mixing probabilities: ``c̄_j = Σ_i p_ij μ_i``, ``μ_{i|j} = p_ij μ_i / c̄_j``;
2. mixed initial conditions: ``x₀ⱼ = Σ_i μ_{i|j} x_i``,
   ``P₀ⱼ = Σ_i μ_{i|j} [P_i + (x_i − x₀ⱼ)(x_i − x₀ⱼ)ᵀ]``;
3. mode-matched prediction and update of each ``(x₀ⱼ, P₀ⱼ)`` (the caller's);
4. mode probabilities: ``μ_j = Λ_j c̄_j / Σ_k Λ_k c̄_k`` with ``Λ_j`` the
   likelihood of the measurement under mode j;
5. the output, moment-matched: ``x = Σ_j μ_j x_j``,
   ``P = Σ_j μ_j [P_j + (x_j − x)(x_j − x)ᵀ]``.

Measurements arrive at irregular times, so ``Π`` is that of a continuous-time
Markov chain over the interval: mode j is kept with ``p_jj = exp(−dt/τ_j)``
(``τ_j`` its mean sojourn time), the rest spread evenly over the other modes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def switching_matrix(dt: float, sojourn: Sequence[float]) -> FloatArray:
    """``Π(dt)``: row i holds the probabilities of going from mode i to each mode."""
    m = len(sojourn)
    if m < 1:
        raise ValueError("at least one mode")
    Pi = np.zeros((m, m))
    for i, tau in enumerate(sojourn):
        stay = math.exp(-max(dt, 0.0) / tau) if m > 1 else 1.0
        Pi[i, :] = (1.0 - stay) / (m - 1) if m > 1 else 0.0
        Pi[i, i] = stay
    return Pi


def mixing_probabilities(mu: FloatArray, Pi: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``(c̄, M)`` with ``c̄_j = Σ_i p_ij μ_i`` and ``M[i, j] = μ_{i|j}``."""
    joint = Pi * mu[:, None]  # p_ij μ_i
    cbar = joint.sum(axis=0)
    if bool((cbar > 0.0).all()):  # the usual case: every mode receives some probability
        return cbar, joint / cbar
    with np.errstate(divide="ignore", invalid="ignore"):
        M = np.where(cbar > 0.0, joint / cbar, 0.0)
    # A mode nothing flows into keeps its own estimate (its column would be all zero).
    for j in np.flatnonzero(~(cbar > 0.0)):
        M[:, j] = 0.0
        M[j, j] = 1.0
    return cbar, M


def moment_match(
    weights: FloatArray, xs: Sequence[FloatArray], Ps: Sequence[FloatArray]
) -> tuple[FloatArray, FloatArray]:
    """``(Σ w_i x_i, Σ w_i [P_i + (x_i − x)(x_i − x)ᵀ])`` for weights summing to one."""
    # Plain loops and d[:, None] * d (the outer product): the same operations in the same
    # order as sum() and np.outer, hence the same bits, at a fraction of their call overhead.
    x = np.zeros(np.shape(xs[0]))
    for w, xi in zip(weights, xs, strict=True):
        x = x + w * xi
    P = np.zeros(np.shape(Ps[0]))
    for w, xi, Pi in zip(weights, xs, Ps, strict=True):
        d = xi - x
        P = P + w * (Pi + d[:, None] * d)
    return x, 0.5 * (P + P.T)


def mix(
    mu: FloatArray, Pi: FloatArray, xs: Sequence[FloatArray], Ps: Sequence[FloatArray]
) -> tuple[FloatArray, list[FloatArray], list[FloatArray], FloatArray]:
    """Steps 1 and 2: ``(c̄, [x₀ⱼ], [P₀ⱼ], M)``."""
    cbar, M = mixing_probabilities(mu, Pi)
    # moment_match(M[:, j], xs, Ps) for every j at once (j along the first axis): the same
    # products and sums in the same order, hence the same bits, in a third of the calls.
    m = len(xs)
    x = np.zeros((m, *np.shape(xs[0])))
    for i in range(m):
        x = x + M[i][:, None] * xs[i]
    P = np.zeros((m, *np.shape(Ps[0])))
    for i in range(m):
        d = xs[i] - x
        P = P + M[i][:, None, None] * (Ps[i] + d[:, :, None] * d[:, None, :])
    P = 0.5 * (P + P.transpose(0, 2, 1))
    return cbar, [xj.copy() for xj in x], [Pj.copy() for Pj in P], M


def gaussian_likelihood(nu: FloatArray, S: FloatArray) -> float:
    """``N(ν; 0, S)`` for a 2-vector (0 when S is not positive definite)."""
    det = float(S[0, 0] * S[1, 1] - S[0, 1] * S[1, 0])
    if not (det > 0.0 and S[0, 0] > 0.0):
        return 0.0
    nis = float((S[1, 1] * nu[0] ** 2 - (S[0, 1] + S[1, 0]) * nu[0] * nu[1]
                 + S[0, 0] * nu[1] ** 2) / det)
    return math.exp(-0.5 * nis) / (2.0 * math.pi * math.sqrt(det))


def posterior_mode_probabilities(
    cbar: FloatArray, likelihoods: Sequence[float], floor: float = 0.0
) -> FloatArray:
    """Step 4, with every probability kept at least ``floor`` (then renormalised).

    When every likelihood underflows to zero the predicted probabilities ``c̄`` stand.
    """
    lam = np.asarray(likelihoods, dtype=np.float64)
    post = lam * cbar
    total = float(post.sum())
    mu = post / total if total > 0.0 and math.isfinite(total) else cbar / cbar.sum()
    if floor > 0.0:
        mu = np.maximum(mu, floor)
        mu = mu / mu.sum()
    return mu


__all__ = [
    "gaussian_likelihood",
    "mix",
    "mixing_probabilities",
    "moment_match",
    "posterior_mode_probabilities",
    "switching_matrix",
]
