"""`stigmesh car` end to end: real processes and sockets, the model or the SITL car on loopback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.carserver import ModelCar, free_address
from tests.support.sitlcar import SitlCar
from tools.procs import wait_for


def car(*args: str, timeout: float = 20.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tools.cli", "car", *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )


@pytest.fixture
def model_car():
    with ModelCar(free_address(), robot_id=3) as served:
        yield served


@pytest.fixture(params=["model", "sitl"])
def any_car(request: pytest.FixtureRequest):
    """The Python model, or the ESP32 sketch itself as a host process (SITL)."""
    kind = ModelCar if request.param == "model" else SitlCar
    with kind(free_address(), robot_id=3) as served:
        yield served


def settled(served: ModelCar | SitlCar, predicate, what: str) -> None:
    """The car has read what the tool sent: the model's thread in this (busy) process may
    not have got to it yet; the SITL car's motors follow its safety task's next tick."""
    if isinstance(served, SitlCar):
        served.wait_for(predicate, 10.0, what)
    else:
        wait_for(lambda: predicate(served.firmware), 10.0, what)
    assert predicate(served.firmware), what


@pytest.mark.timeout(240)  # eight processes of the tool, each slow to start on a busy machine
def test_status_probe_drive_stop_estop_reset(any_car: ModelCar | SitlCar) -> None:
    model_car = any_car
    addr = model_car.address
    status = car(addr, "status")
    assert status.returncode == 0, status.stderr
    assert "car 3: disarmed" in status.stdout and "boot b0071d00" in status.stdout

    probe = car(addr, "probe", "--count", "4")
    assert probe.returncode == 0, probe.stdout + probe.stderr
    assert "synchronised: yes" in probe.stdout

    drive = car(addr, "drive", "--left", "0.5", "--right", "-0.5", "--for", "0.6")
    assert drive.returncode == 0, drive.stdout + drive.stderr
    moved = [w for _, w in model_car.wheel_log if w != (0.0, 0.0)]
    assert moved and moved[0] == pytest.approx((0.5, -0.5), abs=1 / 4095)  # 12-bit PWM
    # stopped by the tool's STOP, not by the car's watchdog
    settled(model_car, lambda fw: fw.wheels == (0.0, 0.0) and not fw.armed, "wheels stopped")
    assert model_car.firmware.reason == "stop"

    estop = car(addr, "estop")
    assert estop.returncode == 0 and "e-stop latched" in estop.stdout
    refused = car(addr, "drive", "--left", "0.5", "--right", "0.5", "--for", "0.5")
    assert refused.returncode == 1 and "e-stop latched" in refused.stdout
    reset = car(addr, "reset-estop")
    assert reset.returncode == 0 and "cleared" in reset.stdout
    settled(model_car, lambda fw: not fw.estop, "e-stop cleared")
    stop = car(addr, "stop")
    assert stop.returncode == 0 and "stopped" in stop.stdout
    settled(model_car, lambda fw: fw.reason == "stop", "reason stop")


def test_an_absent_car_is_a_clear_error() -> None:
    result = car(free_address(), "status", "--timeout", "0.5")
    assert result.returncode == 3
    assert "no telemetry from" in result.stderr and "4210" in result.stderr


def test_bad_arguments_are_refused() -> None:
    result = car("127.0.0.1", "drive", "--left", "2", "--right", "0", "--for", "1")
    assert result.returncode == 2 and "--left must be in [-1, 1]" in result.stdout



def test_status_says_the_gyro_its_angle_or_an_older_firmware() -> None:
    from protocol.mz01.telemetry import Telemetry
    from tools.cartool import describe

    base = Telemetry(id=3, boot=1, token=2, uptime_ms=5000, armed=False, estop=False,
                     reason="", rssi=-60, camera_ok=True, motor_ok=True, seq=0,
                     duty=(0.0, 0.0), gyro_z=None)
    assert "gyro none;" in describe(base)
    older = Telemetry(**{**base.__dict__, "gyro_z": 0.25})
    assert "gyro +0.250 rad/s (no angle: firmware older than gyro_angle);" in describe(older)
    current = Telemetry(**{**base.__dict__, "gyro_z": 0.25, "gyro_angle": -1.5708})
    assert "gyro +0.250 rad/s, angle -90.0 deg;" in describe(current)
