"""`stigmesh agent` refuses clearly: no key, a bad key, no car, a car another agent holds."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from protocol.site import site_to_toml
from tests.support.carserver import ModelCar, free_address
from tools.swarmkey import write_key
from worlds.arena import load_arena, shipped_arena


def agent(tmp: Path, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    site = tmp / "site.toml"
    site.write_text(site_to_toml(load_arena(shipped_arena("two_cars")).site))
    return subprocess.run(
        [sys.executable, "-m", "tools.cli", "agent", "--name", "walnut",
         "--site", str(site), "--run-dir", str(tmp / "run"),
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
                from agents.drivers.carlock import CarLock
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


def test_robot_file_flags_win_and_print_config(tmp_path: Path) -> None:
    key = tmp_path / "swarm.key"
    write_key(key)
    robot = tmp_path / "walnut.robot.toml"
    robot.write_text(f'name = "walnut"\ncar = "192.168.1.50"\nsite = "site.toml"\n'
                     f'swarm_key = "{key}"\nfusion = "naive"\n\n[drive]\ndeadband = 0.35\n')
    result = agent(tmp_path, "--config", str(robot), "--fusion", "ci", "--print-config")
    assert result.returncode == 0, result.stderr
    printed = tomllib.loads(result.stdout)
    assert printed["fusion"] == "ci"  # the flag wins
    assert printed["car"] == "192.168.1.50" and printed["drive"]["deadband"] == 0.35
    assert printed["site"] == str(tmp_path / "site.toml")  # beside the robot file


def test_robot_file_refuses_unknown_keys_with_line_and_a_suggestion(tmp_path: Path) -> None:
    robot = tmp_path / "walnut.robot.toml"
    robot.write_text('name = "walnut"\ncar = "127.0.0.1"\n\n[drive]\ndeadbnd = 0.3\n')
    result = agent(tmp_path, "--config", str(robot))
    assert result.returncode == 2
    assert f"{robot}:5: drive.deadbnd: unknown key (did you mean 'deadband'?)" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_settings_and_a_site_without_target_are_one_line_errors(tmp_path: Path) -> None:
    bare = subprocess.run([sys.executable, "-m", "tools.cli", "agent", "--name", "walnut"],
                          capture_output=True, text=True, timeout=30, check=False)
    assert bare.returncode == 2 and "missing --car, --site, --swarm-key" in bare.stderr
    key = tmp_path / "swarm.key"
    write_key(key)
    site = tmp_path / "empty.toml"
    site.write_text('name = "empty"\n[room]\nsize = [3.0, 3.0]\n')
    result = subprocess.run(
        [sys.executable, "-m", "tools.cli", "agent", "--name", "walnut", "--car", "127.0.0.1",
         "--site", str(site), "--swarm-key", str(key), "--run-dir", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=30, check=False,
    )
    assert result.returncode == 2 and "has no [target]" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_run_dir_it_cannot_write_is_one_line(tmp_path: Path) -> None:
    key = tmp_path / "swarm.key"
    write_key(key)
    (tmp_path / "run").write_text("a file where the run directory should be\n")
    result = agent(tmp_path, "--car", "127.0.0.1", "--swarm-key", str(key), "--duration", "2")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert f"--run-dir {tmp_path / 'run'}: cannot write there" in result.stderr


def test_number_flags_are_held_to_the_robot_files_ranges(capsys) -> None:
    """A flag wins over the file, and is refused where the file's value would be."""
    from tools import cli

    for flag, value, said in (("--port", "70000", "70000 is outside 0..65535"),
                              ("--view-range", "100", "100 is outside 0.1..20"),
                              ("--port", "x", "'x' is not an integer")):
        with pytest.raises(SystemExit) as exc:
            cli.main(["agent", "--name", "walnut", flag, value])
        assert exc.value.code == 2
        assert f"argument {flag}: {said}" in capsys.readouterr().err
