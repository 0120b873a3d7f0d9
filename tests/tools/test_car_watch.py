"""`stigmesh car` says when the car's telemetry does not match what is expected:
another robot id than ``--expect-id``, or a new boot nonce during a session."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.mz01.firmware import FirmwareModel
from tests.support.carserver import ModelCar, free_address


def car(*args: str, timeout: float = 20.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tools.cli", "car", *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )


@pytest.fixture
def model_car() -> Iterator[ModelCar]:
    with ModelCar(free_address(), robot_id=3) as served:
        yield served


def test_status_warns_when_the_robot_id_is_not_the_expected_one(model_car: ModelCar) -> None:
    addr = model_car.address
    wrong = car(addr, "status", "--expect-id", "5")
    assert wrong.returncode == 0 and "car 3: disarmed" in wrong.stdout
    assert wrong.stderr.strip() == (
        f"warning: the car at {addr} reports robot id 3, but 5 is expected: "
        "wrong address, or the car's id is set wrong"
    )
    right = car(addr, "status", "--expect-id", "3")
    assert right.returncode == 0 and right.stderr == ""
    only = car(addr, "status", "--id", "5", "--timeout", "0.6")
    assert only.returncode == 3 and "or it is not robot 5" in only.stderr
    bad = car(addr, "status", "--expect-id", "300")
    assert bad.returncode == 2 and "robot id 1..255" in bad.stderr and "Traceback" not in bad.stderr


def test_a_robot_file_names_the_car_and_the_id_it_should_report(
    model_car: ModelCar, tmp_path: Path
) -> None:
    robot = tmp_path / "walnut.robot.toml"
    robot.write_text(f'name = "walnut"\ncar = "{model_car.address}"\ncar_id = 5\n')
    result = car(str(robot), "status")
    assert result.returncode == 0 and "car 3: disarmed" in result.stdout
    assert "reports robot id 3, but 5 is expected" in result.stderr
    broken = tmp_path / "broken.robot.toml"
    broken.write_text('name = "walnut"\ncar_idd = 5\n')
    refused = car(str(broken), "status")
    assert refused.returncode == 2 and "did you mean 'car_id'" in refused.stderr


def test_a_reboot_during_a_session_is_reported(model_car: ModelCar) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.cli", "car", model_car.address, "probe", "--count", "6"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        end = time.monotonic() + 60.0  # a busy machine may take seconds to start the tool
        while model_car.model.telemetry_to is None:  # the tool has said HELLO
            assert time.monotonic() < end and proc.poll() is None, "the tool never connected"
            time.sleep(0.01)
        with model_car.lock:  # the car restarts: fresh state, new nonce, uptime from zero
            model_car.model = FirmwareModel(3, 0x12345678, token=78)
            model_car.booted = time.monotonic()
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert "warning: the car rebooted: boot b0071d00 -> 12345678, up 0." in err
    assert "it came back disarmed, e-stop clear" in err
