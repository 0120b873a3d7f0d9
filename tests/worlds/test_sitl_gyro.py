"""The sketch's gyro: an MPU-6050 added on the FNK0053's I2C bus, read by the sketch's own
driver (firmware/esp32/stigmesh_car/imu_gyro.cpp) from the SITL bus's chip model.

The kit has no gyro; a car without the chip reports ``gyro_z`` null whatever the world
reads, a car with one reports the world's reading as the chip gives it: in counts of
1/65.5 deg/s (its +-500 deg/s range; beyond it, saturated, none), less the chip's output
at rest that setup() measured while the car stood still. ``gyro_angle`` is that rate
integrated on the car (a trapezoid per reading, extrapolated to the telemetry's time),
wrapped to (-pi, pi], null whenever ``gyro_z`` is.
"""

from __future__ import annotations

import itertools
import math
import signal
import time

import numpy as np
import pytest

from protocol.mz01 import Telemetry, to_binary32
from tests.support.carserver import free_address
from tests.support.sitlcar import SitlCar
from tests.worlds.rawcar import RawCar

LSB_PER_DPS = 65.5
ONE_COUNT = math.radians(1.0 / LSB_PER_DPS)  # rad/s: the chip's resolution
PI32 = float(np.float32(math.pi))  # binary32 pi, just above pi: the wrapped angle's top
HALF_ULP_PI = 2.0**-23  # rad: one binary32 rounding of an angle in [2, 4)
READS_PER_S = 200  # at most one gyro reading per safety tick (SAFETY_TICK_MS 5)


def chip(rate: float) -> float:
    """What the sketch reports for a true rate (rad/s): the chip's count, scaled back in
    float32 as the driver does."""
    counts = max(-32768.0, min(32767.0, round(float(np.float32(rate)) * 180.0 / math.pi
                                              * LSB_PER_DPS)))
    per_lsb = np.float32(np.float32(math.pi / 180.0) / np.float32(LSB_PER_DPS))
    return float(np.float32(counts) * per_lsb)


def counts(rate: float) -> int:
    """The chip's GYRO_ZOUT for a true rate (rad/s), as the SITL bus's model rounds it."""
    return int(max(-32768.0, min(32767.0, round(float(np.float32(rate)) * 180.0 / math.pi
                                                * LSB_PER_DPS))))


def chip_less_zero(rate: float, zero: float) -> float:
    """What the sketch reports for a true rate when setup() measured the chip reading
    ``zero`` at rest: the difference of two counts, scaled in float32 as the driver does."""
    per_lsb = np.float32(np.float32(math.pi / 180.0) / np.float32(LSB_PER_DPS))
    return float(np.float32(counts(rate) - counts(zero)) * per_lsb)


def collect(raw: RawCar, span_ms: int) -> list[Telemetry]:
    """The car's periodic telemetries (to ``raw``, whose HELLO made it their destination)
    over ``span_ms`` of its uptime, each read as it arrives."""
    raw.drain()
    got = [raw.telemetry(timeout=2.0)]
    while got[-1].uptime_ms - got[0].uptime_ms < span_ms:
        got.append(raw.telemetry(timeout=2.0))
    return got


def tolerance(rate: float, rate_error: float, ms: int) -> float:
    """Bound on |change of gyro_angle - rate x uptime change| between two telemetries
    ``ms`` apart in ``uptime_ms``, when the car's rate is ``rate`` within ``rate_error``:
    uptime_ms is floored at both ends (the true span is within 1 ms of it), the chip's
    rate error over that span, and one binary32 rounding of the integral per reading
    plus those of the two extrapolations."""
    span = (ms + 1) / 1000.0
    return ((abs(rate) + rate_error) * 1e-3 + rate_error * span
            + (READS_PER_S * span + 2) * HALF_ULP_PI)  # fmt: skip


def check_integral(tels: list[Telemetry], rate: float, rate_error: float) -> int:
    """Each telemetry's angle lies in (-pi, pi] and is null exactly when its gyro_z is; the
    angle advances by ``rate`` x the uptime between successive telemetries, and from the
    first to the last one (compared wrapped: no unwrapping to get wrong). Returns the wraps
    seen."""
    for t in tels:
        assert (t.gyro_angle is None) == (t.gyro_z is None), t
        if t.gyro_angle is not None:
            assert -PI32 < to_binary32(t.gyro_angle) <= PI32, t
    got = [(t.uptime_ms, t.gyro_angle) for t in tels if t.gyro_angle is not None]
    assert len(got) >= max(5, len(tels) // 2), tels  # a null only when the car stalled
    for (ms_a, a), (ms_b, b) in [*itertools.pairwise(got), (got[0], got[-1])]:
        ms = ms_b - ms_a
        residual = math.remainder(b - a - rate * ms / 1000.0, 2 * math.pi)
        assert abs(residual) <= tolerance(rate, rate_error, ms), (rate, ms_a, a, ms_b, b, residual)
    return sum(abs(b - a) > math.pi for (_, a), (_, b) in itertools.pairwise(got))


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
                t = raw.hello(timeout=2.0)
                assert t.gyro_z is None and t.gyro_angle is None, t
                time.sleep(0.05)
            tels = collect(raw, 300)
            assert all(t.gyro_z is None and t.gyro_angle is None for t in tels), tels
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
            assert raw.hello(timeout=2.0).gyro_angle is not None
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
            t = raw.hello(timeout=2.0)
            assert t.gyro_z is None and t.gyro_angle is None, t
            tels = collect(raw, 300)
            assert all(t.gyro_z is None and t.gyro_angle is None for t in tels), tels
            assert car.running  # no panic: the task watchdog never fired
        finally:
            raw.close()


@pytest.mark.timeout(120)
def test_the_car_integrates_its_gyro_into_gyro_angle() -> None:
    """A constant rate fed to the chip: successive telemetries' angles advance by the rate
    x their uptime difference, within the chip's count error (the reading and the output
    at rest setup() took off: one count in all) and the 1 ms of uptime_ms; a fast turn
    wraps the angle within (-pi, pi]; a saturated spell (no readings) is bridged by the
    straight line between the readings around it."""
    address = free_address()
    zero = 0.05  # rad/s: the chip's output at rest, measured at boot and taken off
    with SitlCar(address, robot_id=8, imu=True, gyro_at_boot=zero) as car:
        raw = RawCar(address, 8)
        try:
            for rate, span_ms, wraps in ((1.0, 2000, 0), (-0.5, 2000, 0), (6.0, 2500, 2)):
                want = chip_less_zero(zero + rate, zero)
                assert abs(want - rate) <= ONE_COUNT
                seen = reported(car, raw, zero + rate, want)
                assert seen is not None and to_binary32(seen) == want, (rate, seen, want)
                tels = collect(raw, span_ms)
                assert check_integral(tels, rate, ONE_COUNT) >= wraps, (rate, tels)

            # Saturated (beyond +-500 deg/s) readings are skipped: across the spell the
            # angle follows the line between the good readings around it (1 rad/s here),
            # not the 20 rad/s the car turned at, nor a restart from zero.
            want = chip_less_zero(zero + 1.0, zero)
            assert reported(car, raw, zero + 1.0, want) is not None
            before = collect(raw, 100)[-1]
            assert before.gyro_z is not None and to_binary32(before.gyro_z) == want
            assert reported(car, raw, 20.0, None) is None
            spell = collect(raw, 300)  # 0.3 s of the car's time without a reading
            assert all(t.gyro_z is None and t.gyro_angle is None for t in spell), spell
            assert reported(car, raw, zero + 1.0, want) is not None
            after = collect(raw, 500)
            assert check_integral([before, *after], want, 0.0) == 0
            assert after[0].uptime_ms - before.uptime_ms >= 300
        finally:
            raw.close()
