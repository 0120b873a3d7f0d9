"""Two demos on one host each find their own loopback block for their cars."""

from __future__ import annotations

import random
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.runlog import log_path, read_run_log
from tools.procs import claim_loopback, private_swarm
from worlds.arena import shipped_arena

pytestmark = pytest.mark.slow


def test_a_busy_block_and_port_are_stepped_over(tmp_path: Path) -> None:
    swarm = private_swarm(tmp_path, shipped_arena("two_cars"))
    first = swarm.arena.cars[0].address
    busy = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    held_port = random.randint(30000, 39000)
    taken = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        busy.bind((first, 4210))  # as another world serving that car would
        taken.bind(("127.255.255.255", held_port))  # as another swarm would
        port = claim_loopback(swarm, None, ports=(held_port, held_port + 1))
    finally:
        busy.close()
        taken.close()
    assert port == held_port + 1
    assert swarm.cars_on is not None and swarm.arena.cars[0].address != first
    assert swarm.arena.cars[0].address.startswith(swarm.cars_on + ".")


@pytest.mark.timeout(150)
def test_two_demos_run_side_by_side(tmp_path: Path) -> None:
    arena = private_swarm(tmp_path, shipped_arena("two_cars")).arena_path  # a private block
    port = random.randint(20000, 39000)
    demos = [
        subprocess.Popen(
            [sys.executable, "-m", "tools.cli", "demo", "--arena", str(arena), "--duration", "10",
             "--run-dir", str(tmp_path / name), "--port", str(port + i), "--quiet"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for i, name in enumerate(("a", "b"))
    ]
    outputs = []
    try:
        for demo in demos:
            out, _ = demo.communicate(timeout=120)
            outputs.append(out)
    finally:
        for demo in demos:
            if demo.poll() is None:
                demo.kill()
                demo.wait(5)
    assert [d.returncode for d in demos] == [0, 0], "\n".join(outputs)
    blocks = set()
    for name in ("a", "b"):
        world = log_path(tmp_path / name, "world")
        boots = [e for e in read_run_log(world) if e["event"] == "boot"]
        blocks.add(boots[0]["address"].rsplit(".", 1)[0])
        assert "Traceback" not in outputs[0] + outputs[1]
    assert len(blocks) == 2  # each world served its cars on its own /24
