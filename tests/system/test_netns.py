"""Agents in their own network namespaces, on a bridge, as on separate laptops.

The test builds its own network: a hub namespace holding a bridge and the
world (cars on 198.18.2.x), and one namespace per agent with a veth pair onto
the bridge and its own 198.18.0.x address. Discovery (mDNS multicast) and the
swarm's broadcast (198.18.255.255) cross real interfaces. Nothing leaves the
namespaces the test made; they are deleted at the end.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.runlog import read_run_log
from protocol.site import site_to_toml
from tests.system.conftest import BACKSTOP, RunLogs, private_swarm_args, wait_for
from tools.procs import Proc
from tools.swarmkey import write_key
from worlds.arena import load_arena, shipped_arena

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def _netns_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    name = f"stgprobe{random.getrandbits(16):04x}"
    try:
        _ip("netns", "add", name)
        _ip("netns", "del", name)
    except (subprocess.CalledProcessError, OSError) as exc:
        return f"ip netns does not work here: {exc}"
    return None


SKIP = _netns_reason()


class Net:
    """A hub namespace with a bridge, and agent namespaces wired to it."""

    def __init__(self) -> None:
        tag = f"{random.getrandbits(16):04x}"
        self.hub = f"stg-hub-{tag}"
        self.spaces: list[str] = [self.hub]
        _ip("netns", "add", self.hub)
        self.run(self.hub, "link", "set", "lo", "up")
        self.run(self.hub, "link", "add", "br0", "type", "bridge")
        self.run(self.hub, "link", "set", "br0", "up")
        self.tag = tag

    def run(self, ns: str, *args: str) -> None:
        _ip("-n", ns, *args)

    def add_host(self, index: int, address: str) -> str:
        ns = f"stg-{index}-{self.tag}"
        _ip("netns", "add", ns)
        self.spaces.append(ns)
        self.run(ns, "link", "set", "lo", "up")
        inside, outside = f"veth{index}", f"vh{index}{self.tag}"
        self.run(ns, "link", "add", inside, "type", "veth", "peer", "name", outside)
        self.run(ns, "link", "set", outside, "netns", self.hub)
        self.run(ns, "addr", "add", f"{address}/16", "brd", "+", "dev", inside)
        self.run(ns, "link", "set", inside, "up")
        self.run(self.hub, "link", "set", outside, "master", "br0")
        self.run(self.hub, "link", "set", outside, "up")
        return ns

    def close(self) -> None:
        for ns in reversed(self.spaces):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10, check=False)


@pytest.fixture
def net() -> Iterator[Net]:
    n = Net()
    try:
        yield n
    finally:
        n.close()


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
    arena = tmp_path / "two_cars.toml"
    arena.write_text(shipped_arena("two_cars").read_text().replace("127.0.2.", "198.18.2."))
    site = tmp_path / "site.toml"  # what the agents read: never the arena
    site.write_text(site_to_toml(load_arena(arena).site))
    for car in ("198.18.2.1", "198.18.2.2"):
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
                "--car", f"198.18.2.{index}", "--site", str(site), "--iface", f"veth{index}",
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
        log = list(read_run_log(run / f"{me}.jsonl"))
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
