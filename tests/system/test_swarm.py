"""The swarm as real, separate processes on loopback: discovery, flows, authentication,
replay. Each test starts a world and agents, bounds them in time and stops them."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from agents.core import AgentCore
from agents.node import replay_inputs
from protocol.runlog import read_run_log, rejection
from protocol.swarm import Kind
from protocol.swarm.codec import decode_payload
from protocol.swarm.messages import MAC_LEN
from tests.system.conftest import private_swarm_args
from tools.procs import Swarm
from tools.replay.rerun import recorded_config

pytestmark = pytest.mark.slow


def lines(run_dir: Path, name: str) -> list[dict]:
    return list(read_run_log(run_dir / f"{name}.jsonl"))


def kinds_from(log: list[dict], sender: str, swarm_id: int) -> Counter[str]:
    out: Counter[str] = Counter()
    for line in log:
        if line["event"] == "rx" and line.get("ok"):
            raw = base64.b64decode(line["raw"])
            msg = decode_payload(raw[:-MAC_LEN], swarm_id)
            if msg.sender == sender:
                out[Kind(msg.kind).name] += 1
    return out


FORGER = textwrap.dedent(
    """
    import socket, sys, time
    from protocol.swarm import SwarmSender, Track, swarm_id_from_name
    swarm, port, targets = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    liar = SwarmSender(b"not-the-swarm-key-0123456789abcd", swarm_id_from_name(swarm),
                       "mallory", 666)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    s.bind(("127.0.0.1", 0))
    end = time.monotonic() + 4.0
    while time.monotonic() < end:
        t = time.monotonic()
        data = liar.seal(Track((40.0, 40.0, 0.0, 0.0), (1e-4,) + (0.0,) * 3 + (1e-4,) +
                               (0.0,) * 2 + (1e-4, 0.0, 1e-4), t, 999), t)
        for target in ["127.255.255.255:" + str(port), *targets]:
            host, p = target.rsplit(":", 1)
            s.sendto(data, (host, int(p)))
        s.sendto(b"\\x00garbage\\xff" * 3, ("127.255.255.255", port))
        time.sleep(0.05)
    """
)


def test_two_agents_discover_share_and_ignore_a_forger(two_car_swarm: Swarm) -> None:
    swarm = two_car_swarm
    args = private_swarm_args()
    swarm_name, port = args[1], int(args[3])
    swarm.start_world(duration=30)
    walnut = swarm.start_agent("walnut", duration=16, extra=args)
    hazel = swarm.start_agent("hazel", duration=16, extra=args)
    assert walnut.pid != hazel.pid and len({walnut.pid, hazel.pid, os.getpid()}) == 3
    time.sleep(6.0)
    # A third process, without the key, sends forged beliefs and garbage to both agents.
    unicast = []
    for name in ("walnut", "hazel"):
        for line in lines(swarm.run_dir, name):
            if line["event"] == "listening":
                unicast.append(f"{line['unicast'][0]}:{line['unicast'][1]}")
    forger = subprocess.run(
        [sys.executable, "-c", FORGER, swarm_name, str(port), *unicast],
        timeout=20, check=True, cwd=Path(__file__).resolve().parents[2],
    )
    assert forger.returncode == 0
    for name in ("walnut", "hazel"):
        assert swarm.procs[name].popen.wait(timeout=30) == 0, swarm.procs[name].tail()

    from protocol.swarm import swarm_id_from_name

    sid = swarm_id_from_name(swarm_name)
    logs = {name: lines(swarm.run_dir, name) for name in ("walnut", "hazel")}
    for me, other in (("walnut", "hazel"), ("hazel", "walnut")):
        log = logs[me]
        start = next(line["t"] for line in log if line["event"] == "start")
        found = [line["t"] for line in log if line["event"] == "discovered"
                 and line["peer"] == other]
        assert found, f"{me} never discovered {other} through mDNS"
        other_start = next(line["t"] for line in logs[other] if line["event"] == "start")
        discovery = found[0] - max(start, other_start)
        print(f"{me} discovered {other} through zeroconf {discovery:.2f} s after both started")
        assert discovery < 3.0
        got = kinds_from(log, other, sid)
        print(f"{me} accepted from {other}: {dict(got)}")
        assert got["PATCH"] > 0 and got["TRACK"] > 0 and got["HEARTBEAT"] > 0
        assert got["SNAPSHOT"] > 0 and got["PING"] > 0 and got["PONG"] > 0
        rejected: Counter[str] = Counter()
        for line in log:
            if (refused := rejection(line)) is not None:
                rejected[refused[0]] += refused[1]
        print(f"{me} rejected: {dict(rejected)}")
        assert rejected["bad_mac"] >= 40  # the forger's datagrams, each counted
        # Nothing forged reached the belief: no such peer, no fused track from it.
        assert not any(line.get("peer") == "mallory" for line in log)
        tracks = [line["track"]["x"] for line in log
                  if line["event"] == "belief" and "track" in line]
        assert all(abs(x[0]) < 10 and abs(x[1]) < 10 for x in tracks)

    # Replaying one agent's recorded inputs through a fresh AgentCore reproduces
    # every belief snapshot it logged, bit for bit.
    log = logs["walnut"]
    start = next(line for line in log if line["event"] == "start")
    # from what the log itself records (site and settings): no arena, as for a real robot
    core = AgentCore(recorded_config(None, "walnut", start), start["t"])
    replayed = [d for _, d in replay_inputs(core, log, start["swarm_id"])]
    recorded = [line["digest"] for line in log if line["event"] == "belief"]
    assert len(recorded) >= 10
    assert replayed == recorded
