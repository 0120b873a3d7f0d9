"""A rehearsal of a real deployment, in network namespaces this test makes.

- "cars": the world with every car running the ESP32 sketch itself (SITL) and
  rendering camera frames, the cars on 198.18.N.x (N drawn per run: an agent locks its
  car's address host-wide, so a second run beside this one must not share it);
- two "laptops", each running `stigmesh agent --config robot.toml` with its own
  directory holding only a site file, a robot file, a calibration and the key
  (no arena in it), camera sensing, control on TCP;
- an "ops" host that lists the swarm with `stigmesh status` and injects a fault
  into one agent over TCP.

Only the test reads the world's truth, to judge the agents.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agents.perception.tagmap import intrinsics_toml
from protocol.robotfile import merge, to_toml
from protocol.runlog import log_path, read_run_log
from protocol.site import site_to_toml
from tests.support.netns import SKIP, Net
from tests.system.conftest import BACKSTOP, RunLogs, private_swarm_args, wait_for
from tools.agent_config import simulated_intrinsics, simulated_robot
from tools.commands import replay as replay_main
from tools.procs import Proc
from tools.swarmkey import write_key
from worlds.arena import load_arena, shipped_arena
from worlds.sitl_host import check_binary

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
SETTLE = 20.0  # s after which the track error counts (as in the replay's metrics)
RUN = 45.0  # s of each agent's beliefs before the test stops it
CONTROL_PORT = 47100
FIRMWARE = "sitl"


def _spawn(ns: str, out: Path, *args: str) -> Proc:
    with out.open("wb") as handle:
        popen = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-m", "tools.cli", *args],
            stdout=handle, stderr=subprocess.STDOUT, cwd=REPO,
        )
    return Proc(out.stem, popen, out)


def _cli(ns: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-m", "tools.cli", *args],
        capture_output=True, text=True, timeout=60, check=False, cwd=REPO,
    )


def _laptop(home: Path, arena_file: Path, name: str, car: str, key: Path) -> Path:
    """A laptop's directory: site, calibration, key and robot file, nothing else."""
    arena = load_arena(arena_file)
    home.mkdir(mode=0o700)
    (home / "site.toml").write_text(site_to_toml(arena.site))
    (home / "camera.toml").write_text(intrinsics_toml(simulated_intrinsics(arena)))
    (home / "swarm.key").write_bytes(key.read_bytes())
    (home / "swarm.key").chmod(0o600)
    robot = simulated_robot(arena, name)  # the mount and drive a real robot file would state
    robot |= {"car": car, "site": home / "site.toml", "intrinsics": home / "camera.toml",
              "swarm_key": home / "swarm.key", "run_dir": home / "log", "sensing": "camera"}
    path = home / f"{name}.robot.toml"
    path.write_text(to_toml(merge({}, robot)))
    return path


@pytest.mark.skipif(SKIP is not None, reason=SKIP or "")
@pytest.mark.timeout(420)  # each wait has its own deadline; this bounds the whole test
def test_a_deployment_rehearsal_in_namespaces(net: Net, tmp_path: Path) -> None:
    why = check_binary()
    assert why is None, why  # make test builds the SITL car (make -C firmware sitl)
    cars_dir = tmp_path / "cars"
    cars_dir.mkdir()
    arena = cars_dir / "two_cars.toml"
    block = f"198.18.{random.randint(2, 254)}"
    arena.write_text(shipped_arena("two_cars").read_text().replace("127.0.2.", f"{block}."))
    for car in (f"{block}.1", f"{block}.2"):
        net.run(net.hub, "addr", "add", f"{car}/16", "brd", "+", "dev", "br0")
    laptops = {"walnut": (net.add_host(1, "198.18.0.1"), "198.18.0.1", f"{block}.1"),
               "hazel": (net.add_host(2, "198.18.0.2"), "198.18.0.2", f"{block}.2")}
    ops = net.add_host(9, "198.18.0.9")
    key = tmp_path / "swarm.key"
    write_key(key)
    swarm_args = private_swarm_args()
    world = _spawn(net.hub, cars_dir / "world.out", "world", str(arena), "--run-dir",
                   str(cars_dir), "--firmware", FIRMWARE, "--sensing", "camera", "--duration",
                   f"{BACKSTOP:g}")
    agents: dict[str, Proc] = {}
    try:
        wait_for((cars_dir / "world.sock").exists, 60, "the world with SITL cars", [world])
        for index, (name, (ns, address, car)) in enumerate(laptops.items(), start=1):
            home = tmp_path / f"laptop-{name}"
            robot = _laptop(home, arena, name, car, key)
            agents[name] = _spawn(
                ns, home / "agent.out", "agent", "--config", str(robot), "--iface",
                f"veth{index}", "--control-listen", f"{address}:{CONTROL_PORT}",
                "--duration", f"{BACKSTOP:g}", *swarm_args,
            )
        live = {n: RunLogs(tmp_path / f"laptop-{n}" / "log") for n in laptops}

        def first_peer(name: str) -> float | None:
            start = live[name].events(name, "start")
            joined = live[name].events(name, "peer_confirmed")
            return None if not (start and joined) else joined[0]["t"] - start[0]["t"]

        wait_for(lambda: all(first_peer(n) is not None for n in laptops), 90,
                 "each agent to confirm the other across the bridge",
                 [world, *agents.values()], every=0.5)

        # ops: the swarm as heard from a third host, then a fault over TCP
        port = swarm_args[swarm_args.index("--port") + 1]
        status = _cli(ops, "status", "--swarm", swarm_args[1], "--port", port,
                      "--iface", "veth9", "--swarm-key", str(key), "--seconds", "3", "--json")
        rows = {r["agent"]: r for r in map(json.loads, status.stdout.splitlines())}
        assert set(rows) == set(laptops), status.stdout + status.stderr
        assert {rows[n]["host"] for n in laptops} == {a for _, a, _ in laptops.values()}
        at = f"{laptops['hazel'][1]}:{CONTROL_PORT}"
        cut = _cli(ops, "faults", "hazel", "set", "drop=0.2", "--dir", "in", "--at", at,
                   "--swarm-key", str(key))
        assert cut.returncode == 0, cut.stderr

        def ran(name: str) -> bool:
            start = live[name].events(name, "start")
            return bool(start) and any(b["t"] > start[0]["t"] + RUN
                                       for b in live[name].events(name, "belief"))

        wait_for(lambda: all(ran(n) for n in laptops), RUN + 150,
                 f"{RUN:g} s of both agents' beliefs", [world, *agents.values()], every=1.0)
        asked = _cli(ops, "status", "--swarm", swarm_args[1], "--port", port, "--iface",
                     "veth9", "--swarm-key", str(key), "--seconds", "1", "--at", at, "--json")
        hazel = next(json.loads(line) for line in asked.stdout.splitlines()
                     if '"faults"' in line)
        assert hazel["faults"]["counters_in"]["drop"] > 0
        for proc in agents.values():
            proc.signal(signal.SIGTERM)
        for proc in agents.values():
            assert proc.stop(20) == 0, proc.tail()
    finally:
        for proc in [*agents.values(), world]:
            proc.stop(10)
    # the test's side only: gather the logs beside the world's truth and measure
    judged = tmp_path / "judged"
    judged.mkdir()
    log_path(judged, "world").symlink_to(log_path(cars_dir, "world"))
    for name in laptops:
        log_path(judged, name).symlink_to(log_path(tmp_path / f"laptop-{name}" / "log", name))
    parser = argparse.ArgumentParser()
    replay_main.add_arguments(parser)
    assert replay_main.main(parser.parse_args([str(judged)])) == 0
    metrics = json.loads((judged / "report" / "metrics.json").read_text())
    for name in laptops:
        after = metrics["agents"][name]["errors"]["position_error_after_settle_m"]
        heading = metrics["agents"][name]["pose"]["heading_error_deg"]
        summary = (tmp_path / f"laptop-{name}" / "agent.out").read_text(errors="replace")
        assert after["median"] is not None, (
            f"{name} held no track after {SETTLE:g} s; its output ends:\n{summary[-3000:]}")
        print(f"rehearsal: {name} confirmed its first peer {first_peer(name):.2f} s after "
              f"start; track error after {SETTLE:g} s: median {after['median']:.3f} m, "
              f"p95 {after['p95']:.3f} m; heading error median {heading['median']:.1f}°, "
              f"p95 {heading['p95']:.1f}°")
        assert after["median"] < 0.15
        # The sketch's own integral of its gyro reached the agent (the MPU-6050 model on the
        # simulated bus, read by imu_gyro.cpp): every telemetry after the first carries it.
        cars = [line for line in read_run_log(log_path(judged, name))
                if line.get("event") == "car"]
        assert len(cars) > 10 * RUN // 2 and all(line["angle"] is not None for line in cars[1:])
