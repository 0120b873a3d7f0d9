"""What every metric family shares: the time base, the settle time, summaries, JSON values."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


STEP = 0.1  # the common time base, s


SETTLE = 20.0  # "after 20 s": errors are also summarised from this time on (run-relative)


def summary(values: npt.ArrayLike) -> dict[str, float | int | None]:
    """Median, 95th percentile, mean, max and count of the finite values."""
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {"n": 0, "median": None, "p95": None, "mean": None, "max": None}
    return {
        "n": int(v.size),
        "median": float(np.median(v)),
        "p95": float(np.percentile(v, 95)),
        "mean": float(v.mean()),
        "max": float(v.max()),
    }


def jsonable(value: Any) -> Any:
    """Plain JSON values: NaN and infinity become null, tuples lists, numpy scalars numbers."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, set | frozenset):
        return len(value)
    return value
