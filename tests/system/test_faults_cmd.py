"""`stigmesh faults` and `stigmesh status` on running agents, through the control socket."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from agents.drivers.control import ControlError, control_path, request
from protocol.runlog import log_path, read_run_log
from tests.system.conftest import BACKSTOP, RunLogs, private_swarm_args, wait_for
from tools import cli as stigmesh
from tools.commands import faults  # noqa: F401  (imported now: cli_here must not wait for it)
from tools.procs import Swarm

# Each wait below has its own deadline; this bounds the whole test on a busy machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tools.cli", *args], capture_output=True,
                          text=True, timeout=60, check=False)


def cli_here(*args: str) -> tuple[int, str]:
    """The same command in this process (exit status, output): no interpreter to start,
    which takes seconds on a busy machine."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = stigmesh.main(list(args))
    return code, out.getvalue()


def test_faults_status_and_the_key(two_car_swarm: Swarm) -> None:
    swarm = two_car_swarm
    run = str(swarm.run_dir)
    args = private_swarm_args()
    live = RunLogs(swarm.run_dir)
    # No fixed run length: the test stops the agents once it has seen what it checks.
    procs = [swarm.start_world(duration=BACKSTOP)]
    procs += [swarm.start_agent(n, duration=BACKSTOP, extra=args) for n in ("walnut", "hazel")]

    def peer_event(me: str, event: str, other: str) -> list[dict]:
        return [line for line in live.events(me, event) if line["peer"] == other]

    wait_for(lambda: all(control_path(swarm.run_dir, n).exists() for n in ("walnut", "hazel"))
             and peer_event("walnut", "peer_joined", "hazel")
             and peer_event("hazel", "peer_joined", "walnut"), 90,
             "both control sockets and both agents to know each other", procs)

    status = cli("status", "--run-dir", run)
    assert status.returncode == 0, status.stderr
    assert "walnut (epoch" in status.stdout and "peers: hazel" in status.stdout

    cut = cli("faults", "hazel", "set", "drop=1", "--dir", "in", "--run-dir", run)
    assert cut.returncode == 0, cut.stderr
    assert cut.stdout.splitlines() == ["hazel: faults in: drop=1 (was clear)",
                                       "hazel: faults out: clear (unchanged)"], cut.stdout
    # Silent for longer than the 3 s after which a silent peer is lost: hazel says so.
    # From here to the clear runs in this process: a peer silent for 30 s is forgotten
    # rather than lost, and two new interpreters can take that long on a busy machine.
    wait_for(lambda: peer_event("hazel", "peer_lost", "walnut"), 60,
             "hazel to lose walnut behind the cut", procs)
    code, out = cli_here("status", "--json", "--run-dir", run)
    assert code == 0
    every = [json.loads(line) for line in out.splitlines()]
    hazel = next(s for s in every if s["agent"] == "hazel")
    assert hazel["peers"]["walnut"]["lost"]
    assert hazel["faults"]["counters_in"]["drop"] > 10

    # Cleared at once: hazel hears walnut again.
    assert cli_here("faults", "hazel", "clear", "--run-dir", run)[0] == 0
    wait_for(lambda: peer_event("hazel", "peer_returned", "walnut"), 60,
             "walnut to return to hazel after the clear", procs)

    lie = cli("faults", "walnut", "byzantine", "bias=2,0", "--json", "--run-dir", run)
    assert lie.returncode == 0 and json.loads(lie.stdout)["byzantine"]["bias"] == [2.0, 0.0]
    # The world's cars by name, as scenario files name them.
    code, out = cli_here("faults", "world", "drop-link", "walnut", "0.2", "--run-dir", run)
    assert code == 0, out
    bad = cli("faults", "hazel", "set", "drop=2", "--run-dir", run)
    assert bad.returncode == 2 and "drop" in bad.stderr

    # Only the swarm key opens the control socket.
    with pytest.raises(ControlError, match="wrong swarm key"):
        request(control_path(swarm.run_dir, "hazel"), b"x" * 32, {"cmd": "clear"})
    # Then the test stops both.
    assert swarm.stop("walnut", "hazel") == {"walnut": 0, "hazel": 0}, (procs[1].tail(),
                                                                        procs[2].tail())
    hazel_log = list(read_run_log(log_path(Path(run), "hazel")))
    events = [line["event"] for line in hazel_log]
    assert "faults_set" in events and "peer_lost" in events and "peer_returned" in events
    walnut_log = list(read_run_log(log_path(Path(run), "walnut")))
    assert any(line["event"] == "byzantine" for line in walnut_log)
