"""The world's ground truth from its log: the target's state and each car's pose, by time."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tools.replay.load import RunDir
from tools.replay.metrics.common import FloatArray


@dataclass(frozen=True)
class Truth:
    """The world's truth log: target [x, y, vx, vy] and each car's [x, y, yaw], by time."""

    t: FloatArray
    target: FloatArray
    cars: dict[str, FloatArray]

    def _interp(self, values: FloatArray, times: npt.ArrayLike) -> FloatArray:
        tq = np.atleast_1d(np.asarray(times, dtype=np.float64))
        out = np.full((tq.size, values.shape[1]), np.nan)
        if self.t.size == 0:
            return out
        inside = (tq >= self.t[0]) & (tq <= self.t[-1])
        for k in range(values.shape[1]):
            out[inside, k] = np.interp(tq[inside], self.t, values[:, k])
        return out

    def target_at(self, times: npt.ArrayLike) -> FloatArray:
        """Target state at ``times`` (linear interpolation; NaN outside the log)."""
        return self._interp(self.target, times)

    def car_at(self, name: str, times: npt.ArrayLike) -> FloatArray:
        """Car ``name``'s [x, y, yaw] at ``times`` (NaN when unknown)."""
        values = self.cars.get(name)
        if values is None:
            return np.full((np.atleast_1d(np.asarray(times)).size, 3), np.nan)
        return self._interp(values, times)


def truth_of(run: RunDir) -> Truth | None:
    """The truth of the run, or None when the world log has none."""
    if run.world is None:
        return None
    names = run.car_names()
    times: list[float] = []
    target: list[list[float]] = []
    cars: dict[str, list[list[float]]] = {name: [] for name in names.values()}
    for line in run.world.events("truth"):
        tg = line.get("target")
        if not isinstance(tg, dict):
            continue
        try:
            state = [float(tg["x"]), float(tg["y"]), float(tg["vx"]), float(tg["vy"])]
        except (KeyError, TypeError, ValueError):
            continue
        times.append(float(line["t"]))
        target.append(state)
        seen: dict[str, list[float]] = {}
        for car in line.get("cars") or []:
            try:
                name = names.get(int(car["id"]), f"car{int(car['id'])}")
                seen[name] = [float(car["x"]), float(car["y"]), float(car["yaw"])]
            except (KeyError, TypeError, ValueError):
                continue
        for name in seen.keys() - cars.keys():
            cars[name] = [[math.nan] * 3] * (len(times) - 1)
        for name, rows in cars.items():
            rows.append(seen.get(name, [math.nan] * 3))
    if not times:
        return None
    order = np.argsort(np.asarray(times), kind="stable")
    car_arrays = {}
    for name, rows in cars.items():
        arr = np.asarray(rows, dtype=np.float64)[order]
        arr[:, 2] = _unwrap_nan(arr[:, 2])
        car_arrays[name] = arr
    return Truth(
        np.asarray(times, dtype=np.float64)[order],
        np.asarray(target, dtype=np.float64)[order],
        car_arrays,
    )


def _unwrap_nan(angles: FloatArray) -> FloatArray:
    out = angles.copy()
    ok = np.isfinite(out)
    out[ok] = np.unwrap(out[ok])
    return out
