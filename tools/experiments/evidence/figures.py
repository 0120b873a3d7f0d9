"""The evidence's figures: matplotlib on the Agg canvas, curves as medians over runs."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tools.experiments.evidence.stats import rolling_median

FIGURE_DPI = 110


SMOOTH = 10  # samples (1 s) of rolling median on the time-series figures


FLOOR = 1e-3  # m: the bottom of the log-scale figures


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, figdir: Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(figdir / name, dpi=FIGURE_DPI)
    pyplot().close(fig)
    return name


def mean_curve(results: Sequence[Mapping[str, Any]], pick: Callable[[Mapping[str, Any]],
                                                                      list[np.ndarray]]
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per time, the median over runs (and over the arrays ``pick`` returns per run)."""
    rows = []
    t = None
    for r in results:
        if "series" not in r:
            continue
        tt = np.asarray(r["series"]["t"])
        t = tt if t is None or tt.size < t.size else t
        rows += pick(r)
    if t is None or not rows:
        return np.zeros(0), np.zeros(0)
    stack = np.vstack([np.asarray(x[: t.size], dtype=float) for x in rows])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a time where no run has a value
        curve = np.nanmedian(stack, axis=0)
    return t, rolling_median(curve, SMOOTH)
