"""The statistics of the evidence's tables: mean ± std, paired and unpaired tests, recovery."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np


def ms(values: Iterable[float | None], fmt: str = "{:.3f}") -> str:
    """``mean ± std (n)`` of the values that exist."""
    v = [x for x in values if x is not None and math.isfinite(x)]
    if not v:
        return "–"
    sd = statistics.stdev(v) if len(v) > 1 else 0.0
    return f"{fmt.format(statistics.fmean(v))} ± {fmt.format(sd)}"


def vals(results: Sequence[Mapping[str, Any]], key: str) -> list[float | None]:
    return [r["metrics"].get(key) if "metrics" in r else None for r in results]


def paired_p(a: Sequence[float | None], b: Sequence[float | None]) -> float | None:
    """Two-sided Wilcoxon signed-rank p for paired values (same seeds); None if too few."""
    from scipy.stats import wilcoxon

    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    diffs = [x - y for x, y in pairs]
    if len(pairs) < 5 or all(d == 0 for d in diffs):
        return None
    return float(wilcoxon([p[0] for p in pairs], [p[1] for p in pairs]).pvalue)


def unpaired_p(a: Sequence[float | None], b: Sequence[float | None]) -> float | None:
    from scipy.stats import mannwhitneyu

    x = [v for v in a if v is not None]
    y = [v for v in b if v is not None]
    if len(x) < 2 or len(y) < 2:
        return None
    return float(mannwhitneyu(x, y, alternative="two-sided").pvalue)


def fp(p: float | None) -> str:
    return "–" if p is None else f"{p:.3g}"


def rolling_median(x: np.ndarray, n: int) -> np.ndarray:
    out = np.full(x.size, np.nan)
    for k in range(x.size):
        w = x[max(0, k - n + 1): k + 1]
        w = w[np.isfinite(w)]
        if w.size:
            out[k] = np.median(w)
    return out


def recovered_after(
    t: np.ndarray, excess: np.ndarray, start: float, hold: float = 2.0
) -> float | None:
    """Seconds from ``start`` to the last time ``excess`` > 0 (0.0 if never): from then on
    it stays <= 0 to the end of the run. None when it is still > 0 within the last ``hold``
    seconds (not recovered by the end). NaN counts as > 0."""
    after = t >= start
    bad = after & ~(np.nan_to_num(excess, nan=np.inf) <= 0.0)
    if not bad.any():
        return 0.0
    last = float(t[np.flatnonzero(bad)[-1]])
    if last > float(t[-1]) - hold:
        return None
    return max(0.0, last - start)


def ok(results: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs that were measured (not failed)."""
    return [r for r in results if "metrics" in r and "series" in r]


def pooled(results: Iterable[dict[str, Any]], key: str = "err", *, after: float = 0.0,
           before: float = math.inf, agents: Iterable[str] | None = None) -> np.ndarray:
    """Every finite value of series ``key`` (err, nees4, nees2) of every agent (or only
    ``agents``) of every run, at run times in [after, before)."""
    wanted = set(agents) if agents is not None else None
    parts = []
    for r in ok(results):
        t = np.asarray(r["series"]["t"], dtype=float)
        window = (t >= after) & (t < before)
        for name, values in r["series"].get(key, {}).items():
            if wanted is not None and name not in wanted:
                continue
            v = np.asarray(values, dtype=float)[window[: len(values)]]
            parts.append(v[np.isfinite(v)])
    return np.concatenate(parts) if parts else np.zeros(0)


def percentile(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if values.size else None


def median(values: Iterable[float | None]) -> float | None:
    v = [x for x in values if x is not None and math.isfinite(x)]
    return float(np.median(v)) if v else None


def fmt(value: float | None, f: str = "{:.3f}") -> str:
    return "–" if value is None or not math.isfinite(value) else f.format(value)


def back_under(t: np.ndarray, err: np.ndarray, start: float, limit: float, *, hold: float,
               window: int = 10) -> float | None:
    """Seconds from ``start`` until the error is back under ``limit``: the first time at or
    after it at which the agent holds a track whose rolling median (``window`` samples, held
    samples only) is under the limit and stays under it for the next ``hold`` seconds. NaN
    (no track held) neither breaks nor makes it; None: never."""
    rm = rolling_median(err, window)
    after = t >= start
    bad_t = t[after & np.isfinite(rm) & (rm > limit)]
    for i in np.flatnonzero(after & np.isfinite(err) & np.isfinite(rm) & (rm <= limit)):
        k = int(np.searchsorted(bad_t, t[i]))
        if k == bad_t.size or bad_t[k] > t[i] + hold:
            return float(t[i] - start)
    return None


def recovery(t: np.ndarray, err: np.ndarray, start: float, limit: float,
             window: int = 10) -> float | None:
    """Seconds from ``start`` until the error is back under ``limit`` for good: the first
    time at or after the last moment its rolling median (``window`` samples, held samples
    only) exceeds ``limit``, at which the agent holds a track whose rolling median is under
    it. NaN (no track held) neither breaks nor makes a recovery; None: never."""
    rm = rolling_median(err, window)
    after = t >= start
    bad = after & np.isfinite(rm) & (rm > limit)
    last = int(np.flatnonzero(bad)[-1]) if bad.any() else -1
    good = after & np.isfinite(err) & np.isfinite(rm) & (rm <= limit)
    good[: last + 1] = False
    hit = np.flatnonzero(good)
    return float(t[hit[0]] - start) if hit.size else None
