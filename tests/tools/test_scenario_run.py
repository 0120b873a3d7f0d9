"""`stigmesh run SCENARIO.toml` with real processes: a 15 s scenario with every kind of step,
applied through the control sockets at its times, then the replay report.

The runner runs in this process, so the test reads its clock directly: when the
schedule started and when each step began and ended, in the monotonic clock every
run log uses. A step is checked against those measured times (it took effect
while the runner was applying it, and the runner began it on time), never against
the agents' own start, which a busy machine delays by seconds.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from protocol.runlog import log_path, read_run_log
from tests.support.lateness import Lateness
from tools.commands import run as run_cmd
from tools.experiments import realrun
from worlds.arena import shipped_arena

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

# The restart comes 7.5 s before the end: a restarted agent, slow to start on a busy
# machine, still logs its start well before the runner stops it.
SCENARIO = """
name = "real_short"
arena = "arena.toml"
duration = 15.0
seed = 3
[[schedule]]
at = 0.0
agent = "walnut"
faults = {delay = "10ms"}
direction = "out"
[[schedule]]
at = 3.0
partition = "walnut|hazel"
duration = 2.0
[[schedule]]
at = 6.0
agent = "hazel"
byzantine = {bias = [1, 0]}
[[schedule]]
at = 6.5
agent = "hazel"
kill = true
duration = 1.0
[[schedule]]
at = 11.0
world = {drop_link = {car = "walnut", duration = 0.5}}
"""
EPS = 1e-6  # s: float rounding between a log's stamp and the runner's clock


def test_real_processes_follow_the_schedule(tmp_path: Path, capsys, monkeypatch) -> None:
    prefix = f"127.{random.randint(100, 250)}.{random.randint(1, 250)}."
    arena = shipped_arena("two_cars").read_text().replace("127.0.2.", prefix)
    (tmp_path / "arena.toml").write_text(arena)
    (tmp_path / "short.toml").write_text(SCENARIO)
    run_dir = tmp_path / "run"

    # The runner's own times: the schedule's origin, each step's start, each progress
    # refresh (the runner's loop refreshes between steps; a refresh can delay a step),
    # and how late this process woke from short sleeps while the schedule ran.
    starts: list[float] = []
    began: list[float] = []
    refresh: list[float] = []
    lateness = Lateness()
    start, apply, loop = realrun.RealRun.start, realrun.RealRun.apply, realrun.RealRun.loop
    real_lines = realrun._real_lines

    def timed_start(self: realrun.RealRun) -> None:
        start(self)
        starts.append(self.t_start)

    def timed_apply(self: realrun.RealRun, op: Any) -> None:
        began.append(time.monotonic())
        apply(self, op)

    def timed_loop(self: realrun.RealRun, *a: Any) -> None:
        with lateness:
            loop(self, *a)

    def timed_lines(*a: Any) -> Any:
        lines = real_lines(*a)

        def timed() -> Any:
            t = time.monotonic()
            out = lines()
            refresh.append(time.monotonic() - t)
            return out

        return timed

    monkeypatch.setattr(realrun.RealRun, "start", timed_start)
    monkeypatch.setattr(realrun.RealRun, "apply", timed_apply)
    monkeypatch.setattr(realrun.RealRun, "loop", timed_loop)
    monkeypatch.setattr(realrun, "_real_lines", timed_lines)
    parser = argparse.ArgumentParser()
    run_cmd.add_arguments(parser)
    args = parser.parse_args([str(tmp_path / "short.toml"), "--run-dir", str(run_dir),
                              "--port", str(random.randint(20000, 40000)), "--quiet"])
    code = run_cmd.main(args)
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    applied = json.loads((run_dir / "schedule.json").read_text())["applied"]
    assert [a["text"] for a in applied] == [
        "walnut: faults out delay=10ms",
        "walnut: faults in partition=walnut|hazel",
        "hazel: faults in partition=walnut|hazel",
        "walnut: faults in clear",
        "hazel: faults in clear",
        "hazel: byzantine bias=1,0",
        "hazel: kill",
        "hazel: restart",
        "world: drop_link car walnut 0.5 s",
    ]
    assert not [a for a in applied if "error" in a]

    # Each step in the runner's clock: [began, ended], ended being what it recorded.
    (t0,) = starts
    assert len(began) == len(applied)
    window = [(b, t0 + a["at"]) for b, a in zip(began, applied, strict=True)]
    assert all(b <= e for b, e in window)
    # Never early, and on time: the runner begins a step when it is due, or as soon as
    # the step before it is done (steps due together go one after the other; the first
    # waits for the agent's control socket). What it may add is one wake-up from its
    # sleep, measured beside it, and one progress refresh, measured too.
    assert all(b >= t0 + a["t"] - EPS for (b, _), a in zip(window, applied, strict=True))
    slack = 0.05 + 2 * lateness.worst + max(refresh, default=0.0)
    late = [b - max(t0 + a["t"], window[k - 1][1])
            for k, (a, (b, _)) in enumerate(zip(applied, window, strict=True)) if k > 0]
    print(f"\nsteps began {', '.join(f'{x * 1000:.0f}' for x in late)} ms after due; allowed "
          f"{slack * 1000:.0f} ms (worst wake-up {lateness.worst * 1000:.1f} ms over "
          f"{lateness.samples} naps, slowest refresh {max(refresh, default=0) * 1000:.1f} ms); "
          f"steps took {', '.join(f'{(e - b) * 1000:.0f}' for b, e in window)} ms")
    assert all(x <= slack for x in late), (late, slack)

    def lines(name: str) -> list[dict]:
        return list(read_run_log(log_path(run_dir, name)))

    def within(t: float, step: int) -> bool:
        return window[step][0] - EPS <= t <= window[step][1] + EPS

    walnut, hazel, world = lines("walnut"), lines("hazel"), lines("world")
    # Every change took effect in the agent while the runner was applying that step.
    sets = [(e["t"], e["direction"], e["spec"]) for e in walnut if e["event"] == "faults_set"]
    assert [s[1:] for s in sets] == [
        ("out", {"delay": 0.01}),
        ("in", {"partition": [["walnut"], ["hazel"]]}),
        ("in", {}),
    ]
    assert all(within(s[0], step) for s, step in zip(sets, (0, 1, 3), strict=True)), (sets, window)
    hazel_sets = [e["t"] for e in hazel if e["event"] == "faults_set"]
    assert len(hazel_sets) == 2 and within(hazel_sets[0], 2) and within(hazel_sets[1], 4)
    byz = [e for e in hazel if e["event"] == "byzantine"]
    assert [e["spec"] for e in byz] == [{"bias": [1.0, 0.0]}] and within(byz[0]["t"], 5)
    starts_h = [e for e in hazel if e["event"] == "start"]
    assert len(starts_h) == 2 and starts_h[0]["epoch"] != starts_h[1]["epoch"]
    assert starts_h[1]["t"] >= window[7][0]  # the restarted process, not a survivor
    # The kill stops hazel's car by its watchdog. (On a loaded machine a stalled agent can
    # let the watchdog fire earlier too, and re-arm: that is the same safety path.)
    disarm = [e for e in world if e["event"] == "disarm" and e["car"] == 2
              and e["t"] >= window[6][0]]
    assert disarm and disarm[0]["reason"] == "watchdog"
    drops = [e for e in world if e["event"] == "fault" and e["kind"] == "drop_link"]
    assert len(drops) == 1 and within(drops[0]["t"], 8)
    report = json.loads((run_dir / "report" / "metrics.json").read_text())
    assert set(report["agents"]) == {"walnut", "hazel"}
    assert (run_dir / "report" / "report.md").exists() and (run_dir / "scenario.toml").exists()
    assert "summary" in out.out
