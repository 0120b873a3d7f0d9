"""The latency family: per-stage latencies from capture to DRIVE, and what any run can derive."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from tools.replay.load import Line, ProcessLog
from tools.replay.metrics.common import FloatArray, summary

STAGES = ("capture", "receipt", "decode", "detection", "pose", "decision", "drive")


@dataclass(frozen=True)
class Latency:
    """Per-stage latencies (s) when the logs carry stage timestamps, and what else was derived."""

    stages: dict[str, FloatArray]  # "capture→receipt": values, from per-stage records
    derived: dict[str, FloatArray]  # from the events every run has
    records: int  # how many per-stage records were found


def _stage_times(line: Line) -> dict[str, float]:
    """A line's stage timestamps: fields ``t_<stage>`` or a ``stages`` {stage: t} object."""
    found: dict[str, float] = {}
    nested = line.get("stages")
    for stage in STAGES:
        value = nested.get(stage) if isinstance(nested, dict) else None
        if value is None:
            value = line.get(f"t_{stage}")
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            found[stage] = float(value)
    return found


def latency(logs: Iterable[ProcessLog]) -> Latency:
    """The per-stage latency budget, and what can be derived from any run.

    A camera frame's ``obs`` line carries its stage stamps (capture, receipt, decode,
    detection, pose); the next ``decision`` and the DRIVE sent after it complete
    the chain, as the decision and the DRIVE carry that frame's information.
    """
    stages: dict[str, list[float]] = {}
    derived: dict[str, list[float]] = {
        "capture→receipt (synchronized obs)": [],
        "receipt→decision (frames with the target)": [],
        "decision→DRIVE sent": [],
    }
    records = 0

    def add(times: dict[str, float]) -> None:
        present = [s for s in STAGES if s in times]
        for a, b in pairwise(present):
            stages.setdefault(f"{a}→{b}", []).append(times[b] - times[a])
        if len(present) > 2:
            stages.setdefault(f"{present[0]}→{present[-1]}", []).append(
                times[present[-1]] - times[present[0]]
            )

    for log in logs:
        pending_obs: list[float] = []
        pending_decision: float | None = None
        frames: list[dict[str, float]] = []  # stamped frames waiting for their decision
        decided: list[dict[str, float]] = []  # ... and for the DRIVE after it
        for line in log.lines:
            times = _stage_times(line)
            event = line["event"]
            if len(times) >= 2:
                records += 1
                if event == "obs":
                    frames.append(times)
                else:
                    add(times)
            if event == "obs":
                tc = line.get("t_capture")
                if line.get("synchronized") and isinstance(tc, int | float):
                    derived["capture→receipt (synchronized obs)"].append(line["t"] - tc)
                if line.get("target") is not None:
                    pending_obs.append(line["t"])
            elif event == "decision":
                for t in pending_obs:
                    derived["receipt→decision (frames with the target)"].append(line["t"] - t)
                pending_obs = []
                pending_decision = line["t"]
                for f in frames:
                    f["decision"] = line["t"]
                decided += frames
                frames = []
            elif event == "car_tx" and line.get("kind") == "drive":
                if pending_decision is not None:
                    derived["decision→DRIVE sent"].append(line["t"] - pending_decision)
                    pending_decision = None
                for f in decided:
                    f["drive"] = line["t"]
                    add(f)
                decided = []
    return Latency(
        {k: np.asarray(v) for k, v in stages.items()},
        {k: np.asarray(v) for k, v in derived.items() if v},
        records,
    )


def latency_summary(lat: Latency) -> dict[str, Any]:
    def ms(values: FloatArray) -> dict[str, float | int | None]:
        s = summary(values * 1000.0)
        return {"n": s["n"], "median_ms": s["median"], "p95_ms": s["p95"]}

    return {
        "stage_records": lat.records,
        "stages": {k: ms(v) for k, v in lat.stages.items()},
        "derived": {k: ms(v) for k, v in lat.derived.items()},
    }
