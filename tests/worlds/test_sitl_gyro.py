"""The sketch's gyro: an MPU-6050 added on the FNK0053's I2C bus, read by the sketch's own
driver (firmware/esp32/stigmesh_car/imu_gyro.cpp) from the SITL bus's chip model.

The kit has no gyro; a car without the chip reports ``gyro_z`` null whatever the world
reads, a car with one reports the world's reading as the chip gives it: in counts of
1/65.5 deg/s (its +-500 deg/s range; beyond it, saturated, none), less the chip's output
at rest that setup() measured while the car stood still.
"""

from __future__ import annotations

import math
import signal
import time

import numpy as np
import pytest

from tests.support.carserver import free_address
from tests.support.sitlcar import SitlCar
from tests.worlds.rawcar import RawCar

LSB_PER_DPS = 65.5


def chip(rate: float) -> float:
    """What the sketch reports for a true rate (rad/s): the chip's count, scaled back in
    float32 as the driver does."""
    counts = max(-32768.0, min(32767.0, round(float(np.float32(rate)) * 180.0 / math.pi
                                              * LSB_PER_DPS)))
    per_lsb = np.float32(np.float32(math.pi / 180.0) / np.float32(LSB_PER_DPS))
    return float(np.float32(counts) * per_lsb)


def reported(car: SitlCar, raw: RawCar, rate: float | None, want: float | None,
             tol: float = 1e-7) -> float | None:
    """Send the world's gyro reading until the telemetry reports ``want`` within ``tol``
    (or 10 s pass); the last ``gyro_z`` seen."""
    deadline = time.monotonic() + 10.0
    seen: float | None = math.nan
    while time.monotonic() < deadline:
        car.sensors(rate)
        seen = raw.hello(timeout=2.0).gyro_z
        if seen == want or (seen is not None and want is not None
                            and math.isclose(seen, want, abs_tol=tol)):
            return seen
        time.sleep(0.05)
    return seen


@pytest.mark.timeout(60)
def test_an_mpu6050_on_the_bus_gives_the_telemetry_its_gyro() -> None:
    address = free_address()
    with SitlCar(address, robot_id=4, imu=True) as car:
        raw = RawCar(address, 4)
        try:
            for rate in (1.234, -0.5, 0.0):
                want = chip(rate)
                assert abs(want - rate) <= math.radians(0.5 / LSB_PER_DPS) + 1e-7
                seen = reported(car, raw, rate, want)
                assert seen is not None and math.isclose(seen, want, abs_tol=1e-7), (rate, seen)
            # Beyond +-500 deg/s (8.73 rad/s) the chip saturates: no reading, null.
            assert reported(car, raw, 20.0, None) is None
            assert reported(car, raw, -20.0, None) is None
            assert reported(car, raw, 1.0, chip(1.0)) == pytest.approx(chip(1.0), abs=1e-7)
            assert any("gyro 1" in line for line in car.serial), car.serial
        finally:
            raw.close()


@pytest.mark.timeout(60)
def test_the_kit_without_the_chip_reports_no_gyro() -> None:
    address = free_address()
    with SitlCar(address, robot_id=5, imu=False) as car:
        raw = RawCar(address, 5)
        try:
            for _ in range(5):  # the world reads a rate; nothing on the bus can tell it
                car.sensors(1.0)
                assert raw.hello(timeout=2.0).gyro_z is None
                time.sleep(0.05)
            assert any("gyro 0" in line for line in car.serial), car.serial
        finally:
            raw.close()


@pytest.mark.timeout(60)
def test_the_chips_output_at_rest_is_measured_at_boot_and_taken_off() -> None:
    """An MPU-6050 reads up to +-20 deg/s at rest (datasheet): setup() measures it while
    the car stands still, so a car whose chip reads 2.9 deg/s at rest reports 0 at rest
    and the change from it when turning."""
    address = free_address()
    zero = 0.05  # rad/s, 2.9 deg/s: more than the agent's prior for a bias (1.1 deg/s)
    with SitlCar(address, robot_id=6, imu=True, gyro_at_boot=zero) as car:
        raw = RawCar(address, 6)
        try:
            line = next(line for line in car.serial if "gyro 1" in line)
            assert "zero 2.86 deg/s" in line or "zero 2.87 deg/s" in line, line
            one_count = math.radians(1.0 / LSB_PER_DPS)
            seen = reported(car, raw, zero, 0.0, tol=one_count)
            assert seen is not None and abs(seen) <= one_count, seen
            seen = reported(car, raw, zero + 1.0, 1.0, tol=1.5 * one_count)
            assert seen is not None and abs(seen - 1.0) <= 1.5 * one_count, seen
        finally:
            raw.close()


@pytest.mark.timeout(60)
def test_a_chip_that_stops_answering_leaves_no_gyro_and_the_car_still_stops() -> None:
    """A loose wire (SIGUSR2: the chip answers no more, each try costing the I2C timeout)
    while the car drives: its gyro goes null, and the safety task, which reads the chip,
    still stops the wheels on the MZ01 watchdog and never trips its own."""
    address = free_address()
    with SitlCar(address, robot_id=7, imu=True) as car:
        raw = RawCar(address, 7)
        try:
            assert reported(car, raw, 0.3, chip(0.3)) is not None
            raw.sync()
            raw.arm()
            raw.drive_for(0.5, 0.5, 0.2)
            car.send_signal(signal.SIGUSR2)
            raw.drive_for(0.5, 0.5, 0.3)  # through the chip's ten failed reads
            last_drive = raw.last_drive_sent
            assert last_drive is not None
            tel = raw.wait_disarmed(timeout=3.0)  # no more DRIVEs: the watchdog
            assert tel.reason == "watchdog", tel
            car.wait_for(lambda fw: fw.wheels == (0.0, 0.0), 5.0, "the wheels to stop")
            stopped = next(t for t, wheels in car.wheel_log
                           if t > last_drive and wheels == (0.0, 0.0))
            print(f"\nwheels stopped {stopped - last_drive:.3f} s after the last DRIVE")
            assert stopped - last_drive <= 0.3 + 0.25
            car.sensors(0.3)
            assert raw.hello(timeout=2.0).gyro_z is None
            assert car.running  # no panic: the task watchdog never fired
        finally:
            raw.close()
