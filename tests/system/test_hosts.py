"""One swarm, many hosts, on loopback: status from the swarm itself, faults over TCP,
and an agent with the wrong key is named, not taken for a peer."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from protocol.runlog import log_path, read_run_log
from tests.system.conftest import make_swarm, private_swarm_args
from tools.procs import Swarm, running
from tools.swarmkey import write_key
from worlds.arena import shipped_arena

pytestmark = pytest.mark.slow


def cli(*args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tools.cli", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def wait_for(what: str, check: Callable[[], bool], within: float = 40.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {within:g} s"
        time.sleep(0.2)


def heard(swarm: Swarm, args: list[str], seconds: float = 2.0) -> dict[str, dict]:
    """The agents ``stigmesh status --swarm`` hears, by name (it only listens)."""
    result = cli("status", "--swarm", args[1], "--port", args[3], "--iface", "lo",
                 "--swarm-key", str(swarm.key_file), "--seconds", f"{seconds:g}", "--json")
    return {row["agent"]: row for row in map(json.loads, result.stdout.splitlines())}


@pytest.mark.timeout(180)
def test_status_from_the_swarm_faults_over_tcp_and_a_wrong_key(tmp_path: Path) -> None:
    swarm = make_swarm(tmp_path, shipped_arena("three_cars"))
    args = private_swarm_args()
    control = (f"127.{random.randint(100, 250)}.{random.randint(1, 250)}.1",
               random.randint(20000, 40000))
    other_key = tmp_path / "other.key"
    write_key(other_key)
    with running(swarm):
        swarm.start_world(duration=None)
        swarm.start_agent("walnut", duration=None,
                          extra=[*args, "--control-listen", f"{control[0]}:{control[1]}"])
        swarm.start_agent("hazel", duration=None, extra=args)
        swarm.start_agent("pecan", duration=None, extra=[*args, "--swarm-key", str(other_key)])

        # status joins the swarm read-only and hears both keyed agents, each with its peer
        rows: dict[str, dict] = {}

        def both_see_each_other() -> bool:
            rows.update(heard(swarm, args))
            return all(rows.get(n, {}).get("peers") == 1 for n in ("walnut", "hazel"))

        wait_for("walnut and hazel heard with one peer each", both_see_each_other)
        assert "pecan" not in rows  # its datagrams fail the MAC: nobody hears it
        assert rows["walnut"]["host"].startswith("127.") and "mode" in rows["walnut"]

        # faults over TCP, with the swarm key, from "another host"
        at = f"{control[0]}:{control[1]}"
        cut = cli("faults", "walnut", "set", "drop=0.5", "--dir", "in", "--at", at,
                  "--swarm-key", str(swarm.key_file), "--json")
        assert cut.returncode == 0, cut.stderr
        assert json.loads(cut.stdout)["faults"]["in"]["drop"] == 0.5
        wrong = cli("faults", "walnut", "clear", "--at", at, "--swarm-key", str(other_key))
        assert wrong.returncode == 1 and "wrong swarm key" in wrong.stderr
        asked = cli("status", "--swarm", args[1], "--port", args[3], "--iface", "lo",
                    "--swarm-key", str(swarm.key_file), "--seconds", "1", "--at", at)
        assert "walnut (epoch" in asked.stdout and "faults: in" in asked.stdout

        # walnut names the agent whose datagrams fail the MAC, and never takes it as a peer
        out = swarm.run_dir / "walnut.out"
        wait_for("walnut warns of a wrong key",
                 lambda: "wrong swarm key on 127." in out.read_text(errors="replace"))
    walnut = list(read_run_log(log_path(swarm.run_dir, "walnut")))
    # mDNS may name pecan (adverts carry no key): an address to try, never a peer
    assert not [e for e in walnut if e.get("peer") == "pecan" and e["event"] != "discovered"]
    assert any(e["event"] == "warning" and e["key"].startswith("bad_mac:") for e in walnut)
    pecan = list(read_run_log(log_path(swarm.run_dir, "pecan")))
    assert not [e for e in pecan if e["event"] in ("peer_joined", "peer_confirmed")]
