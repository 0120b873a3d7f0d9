"""``stigmesh bench replay``: the peak memory of ``stigmesh replay`` on long runs, with a floor.

A 60 s lockstep run of scenarios/default.toml (two agents and the world) is
tiled into runs of several lengths: its events written again and again, each
tile shifted by the run's span, through the same log writer (so the logs hold
what a real run's do: datagrams, belief grids, truth). ``stigmesh replay RUN``
then runs on each in a child process, and its peak resident memory
(``ru_maxrss``) is the figure; the floor is a child that imports what replay
imports and reads no run. The issue's target: an hour-long run under 500 MB,
and a replay's memory that does not grow with the run's length as the
in-memory reader's did (589 MB for 10 minutes).
"""

from __future__ import annotations

import base64
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from protocol.runlog import RunLog, log_path, process_logs, read_run_log

BYTES_FIELDS = ("raw", "mu_f32", "var_f32")  # base64 in what a reader yields: bytes again
TARGET_MB = 500.0  # an hour-long run
FLOOR_CODE = ("import tools.commands.replay, tools.replay.load, tools.replay.metrics, "
              "tools.replay.report, tools.replay.figures, tools.replay.rerun")


def base_run(run_dir: Path) -> None:
    """scenarios/default.toml in lockstep (60 s of two agents, ~10 s on one core)."""
    from tools.experiments.lockstep import run_scenario
    from tools.experiments.scenario_file import find_scenario, load_scenario

    run_scenario(load_scenario(find_scenario("default")), run_dir)


def tile(src: Path, dst: Path, minutes: float) -> float:
    """``src``'s logs repeated to ``minutes``; the tiled run's span in seconds."""
    dst.mkdir(parents=True, exist_ok=True)
    logs = {name: list(read_run_log(path)) for name, path in process_logs(src).items()}
    t0 = min(e["t"] for events in logs.values() for e in events)
    t1 = max(e["t"] for events in logs.values() for e in events)
    span = t1 - t0 + 0.1
    tiles = max(1, round(minutes * 60 / span))
    for name, events in logs.items():
        log = RunLog(log_path(dst, name), name, lambda: 0.0, idle_flush=False)
        for k in range(tiles):
            for e in events:
                if k and e["event"] == "start":
                    continue  # one start per process, as a run that was not restarted
                fields = {f: v for f, v in e.items() if f not in ("t", "proc", "event")}
                for f in BYTES_FIELDS:
                    if isinstance(fields.get(f), str):
                        fields[f] = base64.b64decode(fields[f])
                log.log(e["event"], t=e["t"] + k * span, **fields)
        log.close()
    for extra in ("swarm.key", "schedule.json", "scenario.toml"):
        if (src / extra).exists():
            (dst / extra).write_bytes((src / extra).read_bytes())
    return tiles * span


def peak_mb(args: list[str]) -> tuple[float, float]:
    """A command's peak resident memory (MB) and wall time (s).

    ``ru_maxrss`` of RUSAGE_CHILDREN is the largest child a process ever had, so each
    command runs under a fresh python of its own that reports its one child's peak."""
    began = time.perf_counter()
    code = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
            "stdout=subprocess.DEVNULL); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True,
                         text=True, timeout=3600)
    return int(out.stdout.strip()) / 1024, time.perf_counter() - began


def run(quick: bool) -> list[dict[str, Any]]:
    lengths = (1.0, 5.0) if quick else (1.0, 10.0, 60.0)
    cases: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="stigmesh-bench-replay-") as tmp:
        base = Path(tmp) / "base"
        base_run(base)
        floor, _ = peak_mb([sys.executable, "-c", FLOOR_CODE])
        for minutes in lengths:
            run_dir = Path(tmp) / f"run{minutes:g}"
            span = tile(base, run_dir, minutes)
            size = sum(p.stat().st_size for p in process_logs(run_dir).values()) / 1e6
            peak, wall = peak_mb([sys.executable, "-m", "tools.cli", "replay", str(run_dir)])
            case: dict[str, Any] = {
                "case": f"replay of a {span / 60:.0f}-minute two-agent run",
                "logs_mb": round(size, 1), "peak_mb": round(peak, 1),
                "floor_mb": round(floor, 1), "above_floor_mb": round(peak - floor, 1),
                "wall_s": round(wall, 1)}
            if minutes >= 60:
                case["target_mb"] = TARGET_MB
                case["meets_target"] = peak < TARGET_MB
            cases.append(case)
            print(f"# {case}", file=sys.stderr, flush=True)
    return cases
