"""`stigmesh run SCENARIO.toml` with real processes: a 15 s scenario with every kind of step,
applied through the control sockets at its times, then the replay report."""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import pytest

from protocol.runlog import read_run_log
from tools import run_cmd
from worlds.arena import shipped_arena

pytestmark = pytest.mark.slow

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
at = 7.0
agent = "hazel"
kill = true
duration = 2.0
[[schedule]]
at = 11.0
world = {drop_link = {car = "walnut", duration = 0.5}}
"""


def test_real_processes_follow_the_schedule(tmp_path: Path, capsys) -> None:
    prefix = f"127.{random.randint(100, 250)}.{random.randint(1, 250)}."
    arena = shipped_arena("two_cars").read_text().replace("127.0.2.", prefix)
    (tmp_path / "arena.toml").write_text(arena)
    (tmp_path / "short.toml").write_text(SCENARIO)
    run_dir = tmp_path / "run"
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
    # the first step waits for the agent's control socket; the others are on time
    assert all(a["at"] - a["t"] < 0.5 for a in applied[1:]), applied

    def lines(name: str) -> list[dict]:
        return list(read_run_log(run_dir / f"{name}.jsonl"))

    walnut, hazel, world = lines("walnut"), lines("hazel"), lines("world")
    t0 = min(e["t"] for e in walnut if e["event"] == "start")
    sets = [(e["t"] - t0, e["direction"], e["spec"]) for e in walnut if e["event"] == "faults_set"]
    assert [s[1:] for s in sets] == [
        ("out", {"delay": 0.01}),
        ("in", {"partition": [["walnut"], ["hazel"]]}),
        ("in", {}),
    ]
    assert 2.0 < sets[1][0] < 4.5 and 4.0 < sets[2][0] < 6.5
    byz = [e for e in hazel if e["event"] == "byzantine"]
    assert [e["spec"] for e in byz] == [{"bias": [1.0, 0.0]}]
    starts = [e for e in hazel if e["event"] == "start"]
    assert len(starts) == 2 and starts[0]["epoch"] != starts[1]["epoch"]
    disarm = [e for e in world if e["event"] == "disarm" and e["car"] == 2]
    assert disarm and disarm[0]["reason"] == "watchdog"
    assert [e for e in world if e["event"] == "fault" and e["kind"] == "drop_link"]
    report = json.loads((run_dir / "report" / "metrics.json").read_text())
    assert set(report["agents"]) == {"walnut", "hazel"}
    assert (run_dir / "report" / "report.md").exists() and (run_dir / "scenario.toml").exists()
    assert "summary" in out.out
