"""Agents in their own network namespaces, on a bridge, as on separate laptops.

The test builds its own network: a hub namespace holding a bridge and the
world (cars on 198.18.N.x, N drawn per run), and one namespace per agent with a veth pair onto
the bridge and its own 198.18.0.x address. Discovery (mDNS multicast) and the
swarm's broadcast (198.18.255.255) cross real interfaces. Nothing leaves the
namespaces the test made; they are deleted at the end.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.runlog import log_path, read_run_log
from protocol.site import site_to_toml
from tests.support.netns import SKIP, Net
from tests.system.conftest import BACKSTOP, RunLogs, private_swarm_args, wait_for
from tools.procs import Proc
from tools.swarmkey import write_key
from worlds.arena import load_arena, shipped_arena

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def _spawn(ns: str, run: Path, name: str, *args: str) -> Proc:
    out = run / f"{name}.out"
    with out.open("wb") as handle:
        popen = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-m", "tools.cli", *args],
            stdout=handle, stderr=subprocess.STDOUT, cwd=REPO,
        )
    return Proc(name, popen, out)  # ip netns exec execs the command: signals reach it


def _across_the_bridge(log: list[dict], other: str) -> tuple[list[dict], list[dict], list[dict]]:
    """(discoveries of ``other``, datagrams accepted from the bridge, peer tracks fused)."""
    found = [line for line in log if line["event"] == "discovered" and line["peer"] == other]
    heard = [line for line in log if line["event"] == "rx" and line["ok"]
             and line["src"][0].startswith("198.18.0.")]
    fused = [line for line in log if line["event"] == "peer_track" and line["fused"]]
    return found, heard, fused


@pytest.mark.skipif(SKIP is not None, reason=SKIP or "")
@pytest.mark.timeout(240)  # each wait has its own deadline; this bounds the whole test
def test_agents_in_their_own_namespaces_discover_and_share(net: Net, tmp_path: Path) -> None:
    # The cars on a block of their own: an agent locks its car's address host-wide, and
    # another run of this test may be going on beside this one, in its own namespaces.
    cars = f"198.18.{random.randint(2, 254)}"
    arena = tmp_path / "two_cars.toml"
    arena.write_text(shipped_arena("two_cars").read_text().replace("127.0.2.", f"{cars}."))
    site = tmp_path / "site.toml"  # what the agents read: never the arena
    site.write_text(site_to_toml(load_arena(arena).site))
    for car in (f"{cars}.1", f"{cars}.2"):
        net.run(net.hub, "addr", "add", f"{car}/16", "brd", "+", "dev", "br0")
    spaces = {"walnut": net.add_host(1, "198.18.0.1"), "hazel": net.add_host(2, "198.18.0.2")}
    run = tmp_path / "run"
    run.mkdir()
    key = run / "swarm.key"
    write_key(key)
    live = RunLogs(run)
    pairs = (("walnut", "hazel"), ("hazel", "walnut"))
    # No fixed run length: the test stops every process once it has seen what it checks.
    world = _spawn(net.hub, run, "world", "world", str(arena), "--run-dir", str(run),
                   "--duration", f"{BACKSTOP:g}")
    agents: list[Proc] = []
    try:
        wait_for((run / "world.sock").exists, 60, "the world server", [world])
        args = private_swarm_args()
        for index, (name, ns) in enumerate(spaces.items(), start=1):
            agents.append(_spawn(
                ns, run, name, "agent", "--name", name,
                "--car", f"{cars}.{index}", "--site", str(site), "--iface", f"veth{index}",
                "--swarm-key", str(key), "--run-dir", str(run), "--duration", f"{BACKSTOP:g}",
                *args,
            ))

        def shared() -> bool:
            for me, other in pairs:
                found, heard, fused = _across_the_bridge(live.lines(me), other)
                if not (found and len(heard) > 50 and fused):
                    return False
            return True

        wait_for(shared, 90, "both agents to discover each other and share across the bridge",
                 [world, *agents], every=0.5)
        for agent in agents:
            agent.signal(signal.SIGTERM)
        for agent in agents:
            assert agent.stop(15) == 0, agent.tail()
    finally:
        for proc in [*agents, world]:
            proc.stop(10)
    for me, other in (("walnut", "hazel"), ("hazel", "walnut")):
        log = list(read_run_log(log_path(run, me)))
        start = next(line for line in log if line["event"] == "start")
        assert start["address"].startswith("198.18.0.")
        assert start["broadcast"] == "198.18.255.255"
        found, heard, fused = _across_the_bridge(log, other)
        assert found, f"{me} did not discover {other} across the bridge"
        assert found[0]["addr"][0] == ("198.18.0.2" if me == "walnut" else "198.18.0.1")
        print(f"{me}: discovered {other} at {found[0]['addr']} "
              f"{found[0]['t'] - start['t']:.2f} s after start; {len(heard)} datagrams "
              f"accepted across the bridge, {len(fused)} peer tracks fused")
        assert len(heard) > 50 and fused
