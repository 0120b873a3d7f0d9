"""The end-of-run summary of a run directory: the numbers a user looks at first.

Per agent: median and 95th-percentile track position error after the first
``settle`` seconds, median track uncertainty, agreement with the other agents,
bytes per second sent, datagrams rejected by reason (and the peer TRACKs the
reputation refused, as ``reputation``). Read from the logs only.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from protocol.runlog import datagram_size, process_logs, read_run_log, rejection

REPUTATION = "reputation"  # the reason a distrusted peer's TRACK is counted under


@dataclass
class AgentSummary:
    name: str
    errors: list[float] = field(default_factory=list)
    uncertainty: list[float] = field(default_factory=list)
    agreement: list[float] = field(default_factory=list)
    bytes_sent: int = 0
    seconds: float = 0.0
    rejected: Counter[str] = field(default_factory=Counter)
    first_detection: float | None = None

    @staticmethod
    def _pct(values: list[float], q: float) -> float | None:
        if not values:
            return None
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]

    @property
    def median_error(self) -> float | None:
        return self._pct(self.errors, 0.5)

    @property
    def p95_error(self) -> float | None:
        return self._pct(self.errors, 0.95)

    @property
    def bytes_per_second(self) -> float:
        return self.bytes_sent / self.seconds if self.seconds > 0 else 0.0


@dataclass
class RunSummary:
    agents: list[AgentSummary]
    settle: float

    def table(self) -> str:
        def f(v: float | None, fmt: str) -> str:
            return "-" if v is None else format(v, fmt)

        rows = [
            f"{'agent':10s} {'err p50':>8s} {'err p95':>8s} {'unc p50':>8s} {'agree p50':>9s} "
            f"{'sent':>9s} {'1st det':>8s}  rejected",
        ]
        for a in self.agents:
            rejected = ", ".join(f"{k} {v}" for k, v in sorted(a.rejected.items())) or "none"
            rows.append(
                f"{a.name:10s} {f(a.median_error, '.2f'):>7s}m {f(a.p95_error, '.2f'):>7s}m "
                f"{f(statistics.median(a.uncertainty) if a.uncertainty else None, '.3f'):>8s} "
                f"{f(statistics.median(a.agreement) if a.agreement else None, '.2f'):>8s}m "
                f"{a.bytes_per_second / 1000:6.2f}KB/s "
                f"{f(a.first_detection, '.1f'):>7s}s  {rejected}"
            )
        return (
            f"summary (track error against ground truth after the first {self.settle:g} s; "
            "unc = trace(P)/4; agree = distance to the other agents' tracks):\n"
            + "\n".join(rows)
        )


def _either_log(run_dir: Path, name: str) -> Path | None:
    return process_logs(run_dir).get(name)


def summarize(run_dir: Path, names: list[str], settle: float = 20.0) -> RunSummary:
    truth_t: list[float] = []
    truth_xy: list[tuple[float, float]] = []
    world = _either_log(run_dir, "world")
    if world is not None:
        for line in read_run_log(world):
            if line["event"] == "truth" and isinstance(line.get("target"), dict):
                truth_t.append(float(line["t"]))
                truth_xy.append((float(line["target"]["x"]), float(line["target"]["y"])))

    def target_at(t: float) -> tuple[float, float] | None:
        if not truth_t:
            return None
        i = min(bisect.bisect_left(truth_t, t), len(truth_t) - 1)
        return truth_xy[i] if abs(truth_t[i] - t) <= 0.1 else None

    tracks: dict[str, list[tuple[float, float, float]]] = {}
    agents = []
    for name in names:
        s = AgentSummary(name)
        path = _either_log(run_dir, name)
        start = end = None
        tracks[name] = []
        if path is not None:
            for line in read_run_log(path):
                event, t = line["event"], float(line["t"])
                start = t if start is None else start
                end = t
                if event == "tx":
                    s.bytes_sent += datagram_size(line)
                elif (refused := rejection(line)) is not None:
                    s.rejected[refused[0]] += refused[1]
                elif event == "peer_track" and line.get("outcome") == "distrusted":
                    s.rejected[REPUTATION] += 1  # a valid TRACK not fused: its sender is distrusted
                elif event == "detection" and s.first_detection is None:
                    s.first_detection = t - start
                elif event == "belief" and isinstance(line.get("track"), dict):
                    x, tt = line["track"]["x"], float(line["track"]["t"])
                    tracks[name].append((t, x[0], x[1]))
                    if t - start >= settle:
                        s.uncertainty.append(float(line["track"]["uncertainty"]))
                        where = target_at(tt)
                        if where is not None:
                            s.errors.append(math.hypot(x[0] - where[0], x[1] - where[1]))
        s.seconds = (end - start) if start is not None and end is not None else 0.0
        agents.append(s)
    for s in agents:
        mine = tracks[s.name]
        for other, theirs in tracks.items():
            if other == s.name or not theirs:
                continue
            times = [t for t, _, _ in theirs]
            for t, x, y in mine:
                i = min(bisect.bisect_left(times, t), len(times) - 1)
                if abs(times[i] - t) <= 0.6:
                    s.agreement.append(math.hypot(x - theirs[i][1], y - theirs[i][2]))
    return RunSummary(agents, settle)
