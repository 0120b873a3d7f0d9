"""`stigmesh faults` and `stigmesh status` on running agents, through the control socket."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents.control import ControlError, control_path, request
from protocol.runlog import read_run_log
from tests.system.conftest import private_swarm_args
from tools.procs import Swarm

pytestmark = pytest.mark.slow


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tools.cli", *args], capture_output=True,
                          text=True, timeout=30, check=False)


def test_faults_status_and_the_key(two_car_swarm: Swarm) -> None:
    swarm = two_car_swarm
    run = str(swarm.run_dir)
    args = private_swarm_args()
    swarm.start_world(duration=40)
    for name in ("walnut", "hazel"):
        swarm.start_agent(name, duration=20, extra=args)
    deadline = time.monotonic() + 15
    while not all(control_path(swarm.run_dir, n).exists() for n in ("walnut", "hazel")):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    time.sleep(3.0)

    status = cli("status", "--run-dir", run)
    assert status.returncode == 0, status.stderr
    assert "walnut (epoch" in status.stdout and "peers: hazel" in status.stdout

    cut = cli("faults", "hazel", "set", "drop=1", "--dir", "in", "--run-dir", run)
    assert cut.returncode == 0, cut.stderr
    assert json.loads(cut.stdout)["faults"]["in"]["drop"] == 1.0
    time.sleep(4.5)  # longer than the 3 s after which a silent peer is lost
    every = [json.loads(line) for line in cli("status", "--json", "--run-dir", run)
             .stdout.splitlines()]
    hazel = next(s for s in every if s["agent"] == "hazel")
    assert hazel["peers"]["walnut"]["lost"]
    assert hazel["faults"]["counters_in"]["drop"] > 10

    lie = cli("faults", "walnut", "byzantine", "bias=2,0", "--run-dir", run)
    assert lie.returncode == 0 and json.loads(lie.stdout)["byzantine"]["bias"] == [2.0, 0.0]
    assert cli("faults", "hazel", "clear", "--run-dir", run).returncode == 0
    bad = cli("faults", "hazel", "set", "drop=2", "--run-dir", run)
    assert bad.returncode == 2 and "drop" in bad.stderr

    # Only the swarm key opens the control socket.
    with pytest.raises(ControlError, match="wrong swarm key"):
        request(control_path(swarm.run_dir, "hazel"), b"x" * 32, {"cmd": "clear"})
    for name in ("walnut", "hazel"):
        assert swarm.procs[name].popen.wait(timeout=40) == 0, swarm.procs[name].tail()
    hazel_log = list(read_run_log(Path(run) / "hazel.jsonl"))
    events = [line["event"] for line in hazel_log]
    assert "faults_set" in events and "peer_lost" in events and "peer_returned" in events
    walnut_log = list(read_run_log(Path(run) / "walnut.jsonl"))
    assert any(line["event"] == "byzantine" for line in walnut_log)
