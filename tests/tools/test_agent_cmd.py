"""`stigmesh agent` refuses clearly: no key, a bad key, no car, a car another agent holds."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.carserver import ModelCar, free_address
from tools.swarmkey import write_key
from worlds.arena import shipped_arena


def agent(tmp: Path, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tools.cli", "agent", "--name", "walnut",
         "--arena", str(shipped_arena("two_cars")), "--run-dir", str(tmp / "run"),
         "--no-mdns", "--port", "0", *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )


def test_missing_and_malformed_keys_are_refused(tmp_path: Path) -> None:
    missing = agent(tmp_path, "--car", "127.0.0.1", "--swarm-key", str(tmp_path / "nope"))
    assert missing.returncode == 2
    assert "does not exist" in missing.stderr and "stigmesh keygen" in missing.stderr
    bad = tmp_path / "bad.key"
    bad.write_text("not hex at all\n")
    result = agent(tmp_path, "--car", "127.0.0.1", "--swarm-key", str(bad))
    assert result.returncode == 2 and "hexadecimal" in result.stderr
    short = tmp_path / "short.key"
    short.write_text("abcd\n")
    result = agent(tmp_path, "--car", "127.0.0.1", "--swarm-key", str(short))
    assert result.returncode == 2 and "at least 16" in result.stderr


def test_an_unreachable_car_is_a_clear_error(tmp_path: Path) -> None:
    key = tmp_path / "swarm.key"
    write_key(key)
    result = agent(tmp_path, "--car", free_address(), "--swarm-key", str(key),
                   "--car-timeout", "1")
    assert result.returncode == 3, result.stderr
    assert "did not answer HELLO" in result.stderr


def test_a_car_held_by_another_agent_names_the_holder(tmp_path: Path) -> None:
    key = tmp_path / "swarm.key"
    write_key(key)
    with ModelCar(free_address()) as car:
        holder = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(f"""
                import sys
                from agents.carlink.lock import CarLock
                CarLock({car.address!r}).acquire()
                print("held", flush=True)
                sys.stdin.readline()
            """)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            result = agent(tmp_path, "--car", car.address, "--swarm-key", str(key))
        finally:
            holder.kill()
            holder.wait(5)
    assert result.returncode == 4, result.stderr
    assert f"PID {holder.pid}" in result.stderr
