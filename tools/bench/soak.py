"""``stigmesh bench soak``: a long run with peers coming and going, and what it leaves behind.

Three agents in lockstep (the ``three_cars`` arena) for 20 minutes (5 with ``--quick``),
every agent losing 30 % of what it receives in bursts (scenarios/burst_loss.toml's faults), and
every :data:`KILL_EVERY` seconds walnut or hazel (in turn) killed for :data:`KILL_FOR`
seconds and restarted as a new process (a new epoch). pecan is never killed: it is the
long-lived agent whose memory is the question. Measured:

- **state**: what pecan's agent object holds (every object reachable from it, numpy
  buffers included; classes, functions and modules excluded), sampled every
  :data:`SAMPLE_EVERY` simulated seconds from :data:`FIRST_SAMPLE` (by then pecan has
  met both peers and seen each restart once): first, last, largest, and the
  least-squares slope per 1000 s. The floor is the first sample. No target: a state
  that grows with the run's length shows as a slope comparable to the state itself;
- **SNAPSHOTs**: each agent's SNAPSHOT bursts per destination; the shortest gap between
  two to the same peer. Target (issue 13): at most one per peer per 5 s whatever the churn;
- **bytes**: what each agent sent per second over its log (as the run's summary counts
  them; 1 KB = 1000 B);
- the harness's peak resident memory (the world, the three agents, the logs' writers).
"""

from __future__ import annotations

import gc
import itertools
import resource
import sys
import tempfile
import types
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from protocol.runlog import log_path, read_run_log
from tools.summary import summarize

AGENTS = ("walnut", "hazel", "pecan")
KEPT = "pecan"  # never killed
KILL_EVERY = 40.0  # s between two kills
KILL_FOR = 8.0  # s a killed agent stays down
FIRST_KILL = 20.0
FIRST_SAMPLE = 100.0  # s: pecan has met both peers and seen each restart once
SAMPLE_EVERY = 50.0
SNAPSHOT_GAP = 5.0  # s: the target's shortest gap between SNAPSHOTs to one peer
LOSS_SCENE = "burst_loss.toml"  # its inbound faults: 30 % stationary loss, mean burst of 8
_OPAQUE = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType,
           types.MethodType)


def burst_faults() -> str:
    """The inbound faults of scenarios/burst_loss.toml, as text (its one faults action)."""
    from agents.faults import format_faults
    from tools.experiments.scenario_file import SCENARIO_DIR, load_scenario
    from tools.experiments.schedule import ActionKind

    (spec,) = [a.faults for a in load_scenario(SCENARIO_DIR / LOSS_SCENE).schedule
               if a.kind is ActionKind.FAULTS and a.faults is not None]
    return format_faults(spec)


def scenario_text(duration: float) -> str:
    """The soak as a scenario file (tools/SCENARIO.md)."""
    lines = [
        f'name = "soak{duration:.0f}"', 'arena = "three_cars"', f"duration = {duration:.1f}",
        "seed = 1", f"agents = {list(AGENTS)!r}".replace("'", '"'), "",
        "[[schedule]]", "at = 0.0", 'agent = "*"', 'direction = "in"',
        f'faults = "{burst_faults()}"',
    ]
    t, k = FIRST_KILL, 0
    while t + KILL_FOR < duration - 1.0:
        lines += ["", "[[schedule]]", f"at = {t:.1f}", f'agent = "{AGENTS[k % 2]}"',
                  "kill = true", f"duration = {KILL_FOR:.1f}"]
        t += KILL_EVERY
        k += 1
    return "\n".join(lines) + "\n"


def reachable(root: object) -> tuple[int, int]:
    """(objects, bytes) reachable from ``root``: ``sys.getsizeof`` of each (a numpy array's
    includes the buffer it owns; a view's does not); classes, functions and modules are
    not followed."""
    seen: set[int] = set()
    stack = [root]
    count = size = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _OPAQUE):
            continue
        seen.add(id(obj))
        count += 1
        size += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return count, size


def snapshot_gaps(run_dir: Path, name: str) -> tuple[int, float]:
    """(SNAPSHOT bursts, shortest gap in s between two to the same peer) in ``name``'s log;
    a burst is the datagrams of one SNAPSHOT (sent within 0.5 s of each other)."""
    bursts: dict[str, list[float]] = defaultdict(list)
    for event in read_run_log(log_path(run_dir, name)):
        if event["event"] == "tx" and event.get("kind") == "snapshot":
            times = bursts[str(event.get("to"))]
            if not times or event["t"] - times[-1] > 0.5:
                times.append(float(event["t"]))
    gaps = [b - a for times in bursts.values() for a, b in itertools.pairwise(times)]
    return sum(len(v) for v in bursts.values()), min(gaps, default=float("inf"))


def soak(duration: float, run_dir: Path) -> dict[str, Any]:
    """Run the soak into ``run_dir``; the state samples and the per-agent figures."""
    from tools.experiments.lockstep import Lockstep, run_scenario
    from tools.experiments.scenario_file import load_scenario

    source = run_dir.parent / f"{run_dir.name}.toml"
    source.write_text(scenario_text(duration), encoding="utf-8")
    samples: list[tuple[float, int, int]] = []

    def sample(elapsed: float, ls: Lockstep) -> None:
        if elapsed >= FIRST_SAMPLE and (elapsed - FIRST_SAMPLE) % SAMPLE_EVERY < 0.5:
            member = ls.agents[KEPT]
            samples.append((elapsed, *reachable(member.agent)))
            print(f"# soak: {elapsed:.0f} of {duration:.0f} simulated s", file=sys.stderr,
                  flush=True)

    run_scenario(load_scenario(source), run_dir, progress=sample, every=1.0)
    return {"samples": samples,
            "snapshots": {n: snapshot_gaps(run_dir, n) for n in AGENTS},
            "kbps": {a.name: a.bytes_per_second / 1000.0
                     for a in summarize(run_dir, list(AGENTS)).agents}}


def run(quick: bool) -> list[dict[str, Any]]:
    duration = 300.0 if quick else 1200.0
    with tempfile.TemporaryDirectory(prefix="stigmesh-soak-") as tmp:
        result = soak(duration, Path(tmp) / "run")
    t = np.array([s[0] for s in result["samples"]])
    kb = np.array([s[2] for s in result["samples"]]) / 1000.0
    slope = float(np.polyfit(t, kb, 1)[0]) * 1000.0 if t.size >= 2 else float("nan")
    kills = scenario_text(duration).count("kill = true")
    cases: list[dict[str, Any]] = [{
        "case": f"soak state of the agent never killed ({KEPT})",
        "sim_s": duration, "kills_of_peers": kills,
        "first_kb": round(float(kb[0]), 1), "last_kb": round(float(kb[-1]), 1),
        "max_kb": round(float(kb.max()), 1), "slope_kb_per_1000s": round(slope, 1),
        "objects_first": result["samples"][0][1], "objects_last": result["samples"][-1][1],
        "floor": f"the first sample, at {FIRST_SAMPLE:.0f} s",
    }]
    for name in AGENTS:
        bursts, gap = result["snapshots"][name]
        cases.append({
            "case": f"soak SNAPSHOTs and bytes: {name}", "snapshots": bursts,
            "shortest_gap_s": round(gap, 2), "target_gap_s": SNAPSHOT_GAP,
            "kbytes_per_s": round(result["kbps"][name], 2),
            "meets_target": gap >= SNAPSHOT_GAP,
        })
    cases.append({"case": "soak harness peak RSS",
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3,
                                       1)})
    return cases
