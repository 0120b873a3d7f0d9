"""The ESP32 sketch's safety structure and the kit constants, read from the sources.

No ESP32 compiler exists here, so these read the sketch as text: what runs
first after a reset, the task watchdog on the safety task, the checked task
creation, the I2C speed and timeout, and one minimum start duty shared by the
firmware, the simulator and the agents' drive model. The duty mapping itself is
compiled and tested on the host (firmware/test/test_motor.c).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agents.drive_model import DriveModel
from worlds.arena import CarModel

SKETCH = Path(__file__).resolve().parents[2] / "firmware" / "esp32" / "stigmesh_car"
INO = (SKETCH / "stigmesh_car.ino").read_text(encoding="utf-8")
MOTORS = (SKETCH / "pca9685_motors.cpp").read_text(encoding="utf-8")
CONFIG = (SKETCH / "car_config.h").read_text(encoding="utf-8")
LINK = (SKETCH / "car_link.cpp").read_text(encoding="utf-8")


def body(source: str, signature: str) -> str:
    """The text between the braces of the function that starts with ``signature``."""
    start = source.index(signature)
    i = source.index("{", start)
    depth = 0
    for j in range(i, len(source)):
        depth += {"{": 1, "}": -1}.get(source[j], 0)
        if depth == 0:
            return source[i + 1 : j]
    raise AssertionError(f"unbalanced braces after {signature}")


def statements(code: str) -> list[str]:
    """Code lines without comments and blank lines."""
    lines = (re.sub(r"//.*", "", line).strip() for line in code.splitlines())
    return [line for line in lines if line]


def define(name: str) -> int:
    match = re.search(rf"^#define {name} (-?\d+)", CONFIG, re.MULTILINE)
    assert match, name
    return int(match.group(1))


def test_setup_switches_every_output_off_before_anything_else() -> None:
    assert "motors_all_off()" in statements(body(INO, "void setup()"))[0]
    all_off = statements(body(MOTORS, "bool motors_all_off()"))
    assert all_off[0] == "output_enable(false);" and all_off[1] == "wire_begin();"
    assert all_off[2] == "return write_reg(REG_ALL_LED_OFF_H, FULL_BIT);"
    assert "REG_ALL_LED_OFF_H = 0xFD;" in MOTORS and "FULL_BIT = 0x10;" in MOTORS


def test_output_enable_is_driven_where_the_board_wires_it() -> None:
    enable = body(MOTORS, "void output_enable(bool on)")
    assert "#if PIN_PCA9685_OE >= 0" in enable and "on ? LOW : HIGH" in enable
    begin = statements(body(MOTORS, "bool motors_begin()"))
    assert begin[-4:] == ["if (ok) {", "output_enable(true);", "}", "return ok;"]


def test_the_safety_task_is_watched_by_the_task_watchdog() -> None:
    task = body(INO, "void safety_task(void *)")
    assert "esp_task_wdt_add(nullptr) == ESP_OK" in task
    loop = body(task, "for (;;)")
    assert statements(loop)[:3] == [
        "vTaskDelayUntil(&wake, pdMS_TO_TICKS(SAFETY_TICK_MS));", "if (watched) {",
        "esp_task_wdt_reset();",
    ]  # fmt: skip
    assert "motors_apply(left, right) && watched" in loop  # unwatched: unhealthy, no ARM
    init = body(INO, "bool task_watchdog_init()")
    assert "config.trigger_panic = true;" in init and "esp_task_wdt_init(seconds, true)" in init
    assert define("SAFETY_WDT_TIMEOUT_MS") <= 300  # a stalled task resets the chip quickly


def test_the_safety_task_creation_is_checked() -> None:
    setup = " ".join(statements(body(INO, "void setup()")))
    assert re.search(r"if \(xTaskCreatePinnedToCore\(safety_task,[^;]*!= pdPASS\) \{ halt\(", setup)
    assert "motors_all_off();" in body(INO, "void halt(const char *why)")


def test_i2c_runs_at_the_line_sensors_speed_with_room_for_the_motor_burst() -> None:
    hz = define("I2C_CLOCK_HZ")
    assert hz <= 100_000  # the PCF8574 line sensor shares the bus
    channels = len(re.findall(r"#define MOTOR_M\d_IN\d ", CONFIG))
    burst_bytes = 2 + channels * 4  # address, register, 4 registers per channel
    burst_us = (burst_bytes * 9 + 2) * 1e6 / hz
    assert burst_us == pytest.approx(3080)
    assert define("I2C_TIMEOUT_MS") * 1000 >= 3 * burst_us
    assert "Wire.begin(PIN_I2C_SDA, PIN_I2C_SCL, I2C_CLOCK_HZ);" in MOTORS
    assert "Wire.setTimeOut(I2C_TIMEOUT_MS);" in MOTORS


def test_one_minimum_start_duty_for_firmware_simulator_and_drive_model() -> None:
    start = define("MOTOR_MIN_START_COUNT")
    assert start == 1600  # Freenove's Motor_Move: constrain(speed, 1600, 4095)
    assert CarModel().duty_deadband == pytest.approx(start / 4095, abs=1e-4)
    assert DriveModel().deadband == CarModel().duty_deadband
    assert "motor_duty_to_count(duty, MOTOR_MIN_START_COUNT)" in MOTORS


def test_due_telemetry_is_merged_not_overwritten() -> None:
    """A disarm's telemetry must not be lost to a periodic one due 5 ms later."""
    assert "xQueueOverwrite" not in LINK
    assert "merge_pending(due);" in body(LINK, "void car_link_tick(")
