"""The swarm as real, separate processes on loopback: discovery, flows, authentication,
replay. Each test starts a world and agents, waits on what they log, and stops them."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from agents.core import AgentCore
from agents.node import replay_inputs
from protocol.runlog import log_path, read_run_log, rejection
from protocol.swarm import Kind, swarm_id_from_name
from protocol.swarm.codec import decode_payload
from protocol.swarm.messages import MAC_LEN
from tests.system.conftest import BACKSTOP, RunLogs, private_swarm_args, wait_for
from tools.procs import Swarm
from tools.replay.overrides import recorded_config

# Each wait below has its own deadline; this bounds the whole test on a busy machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
KINDS = ("PATCH", "TRACK", "HEARTBEAT", "SNAPSHOT", "PING", "PONG")


def lines(run_dir: Path, name: str) -> list[dict]:
    return list(read_run_log(log_path(run_dir, name)))


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
    sid = swarm_id_from_name(swarm_name)
    # No fixed run length: the test stops the agents once it has seen what it checks.
    world = swarm.start_world(duration=BACKSTOP)
    walnut = swarm.start_agent("walnut", duration=BACKSTOP, extra=args)
    hazel = swarm.start_agent("hazel", duration=BACKSTOP, extra=args)
    assert walnut.pid != hazel.pid and len({walnut.pid, hazel.pid, os.getpid()}) == 3
    live = RunLogs(swarm.run_dir)
    pairs = (("walnut", "hazel"), ("hazel", "walnut"))

    def discovered(me: str, other: str) -> bool:
        return any(line["peer"] == other for line in live.events(me, "discovered"))

    wait_for(lambda: all(discovered(me, other) for me, other in pairs), 90,
             "both agents to discover each other", [world, walnut, hazel])
    # A third process, without the key, sends forged beliefs and garbage to both agents.
    unicast = [f"{line['unicast'][0]}:{line['unicast'][1]}"
               for name in ("walnut", "hazel") for line in live.events(name, "listening")]
    assert len(unicast) == 2
    forger = subprocess.run(
        [sys.executable, "-c", FORGER, swarm_name, str(port), *unicast],
        timeout=60, check=True, cwd=Path(__file__).resolve().parents[2],
    )
    assert forger.returncode == 0
    # Both keep running until each has heard every kind of message from the other
    # and logged ten belief records; then the test stops them.
    heard = {me: Counter[str]() for me, _ in pairs}
    done = dict.fromkeys(heard, 0)

    def shared_enough() -> bool:
        for me, other in pairs:
            log = live.lines(me)
            heard[me] += kinds_from(log[done[me]:], other, sid)
            done[me] = len(log)
        return all(len(live.events(me, "belief")) >= 10 and all(heard[me][k] > 0 for k in KINDS)
                   for me, _ in pairs)

    wait_for(shared_enough, 90, "every kind of message both ways and ten belief records",
             [world, walnut, hazel], every=0.5)
    codes = swarm.stop("walnut", "hazel")
    assert codes == {"walnut": 0, "hazel": 0}, (walnut.tail(), hazel.tail())

    logs = {name: lines(swarm.run_dir, name) for name in ("walnut", "hazel")}
    for me, other in (("walnut", "hazel"), ("hazel", "walnut")):
        log = logs[me]
        start = next(line["t"] for line in log if line["event"] == "start")
        found = [line["t"] for line in log if line["event"] == "discovered"
                 and line["peer"] == other]
        assert found, f"{me} never discovered {other} through mDNS"
        other_start = next(line["t"] for line in logs[other] if line["event"] == "start")
        discovery = found[0] - max(start, other_start)
        listening = max(next(line["t"] for line in logs[n] if line["event"] == "listening")
                        for n in (me, other))
        print(f"{me} discovered {other} through zeroconf {discovery:.2f} s after both started, "
              f"{found[0] - listening:.2f} s after both listened")
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
    core = AgentCore(recorded_config(None, "walnut", start), start["t0"])
    replayed = [d for _, d in replay_inputs(core, log, start["swarm_id"])]
    recorded = [line["digest"] for line in log if line["event"] == "belief"]
    assert len(recorded) >= 10
    assert replayed == recorded
