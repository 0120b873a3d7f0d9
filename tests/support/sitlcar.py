"""The ESP32 sketch as a host process (SITL) on a bench: its own sockets, a minimal world.

``SitlCar`` starts ``firmware/build/sitl/stigmesh_car_sitl`` on its own
loopback address, like ``ModelCar`` serves the Python model, and plays the
world's end of its link on a thread: every frame request gets one still JPEG,
the PCA9685 outputs become a wheel log, the trace keeps a mirror of the
firmware state. No physics; the board's sensor inputs only as a test sends them
(:meth:`SitlCar.sensors`), its gyro read through an MPU-6050 on the I2C bus when the
car has one (``imu=True``; else ``gyro_z`` is null).
"""

from __future__ import annotations

import contextlib
import select
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np

from worlds.sitl import (
    MAX_PACKET,
    SITL_BINARY,
    Boot,
    Bound,
    FrameRequest,
    Motors,
    SerialLine,
    SitlFirmware,
    Trace,
    decode,
    encode_frame,
    encode_sensors,
    spawn,
    wheel_duties,
)

REPO = Path(__file__).resolve().parents[2]
_built: list[Path] = []
PORTS = {("udp", 4210), ("udp", 4211), ("tcp", 8080)}


def sitl_binary() -> Path:
    """Build the SITL car once per test session (``make -C firmware sitl``; quick when current)."""
    if not _built:
        subprocess.run(
            ["make", "-s", "-C", str(REPO / "firmware"), "sitl"],
            check=True, timeout=600, capture_output=True,
        )  # fmt: skip
        _built.append(SITL_BINARY)
    return _built[0]


def firmware_args(firmware: str) -> tuple[str, ...]:
    """``stigmesh world`` arguments for the cars' firmware (building the SITL car if needed)."""
    if firmware == "sitl":
        sitl_binary()
    return ("--firmware", firmware)


class SitlCar:
    """One SITL car on a bench; a context manager that always stops the process."""

    def __init__(
        self, address: str, robot_id: int = 1, nonce: int = 0xB0071D00, token: int = 77,
        *, imu: bool = False, gyro_at_boot: float | None = None,
    ) -> None:
        self.address = address
        self.boot = Boot(address, robot_id, time.monotonic() - 42.0, 0.0, (nonce, token),
                         imu=imu)
        self.firmware = SitlFirmware(robot_id, nonce, token)
        self.wheel_log: list[tuple[float, tuple[float, float]]] = []
        self.serial: list[str] = []
        self.bound: set[tuple[str, int]] = set()
        self._frame = bytes(cv2.imencode(".jpg", np.full((240, 320), 128, np.uint8))[1])
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._proc, self._sock = spawn(sitl_binary(), self.boot)
        if gyro_at_boot is not None:  # queued before the car reads its link: setup() sees it
            self.sensors(gyro_at_boot)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def uptime_us(self) -> int:
        return int((time.monotonic() - self.boot.boot_time) * 1e6)

    def __enter__(self) -> SitlCar:
        self._thread.start()
        try:
            self.wait_for(
                lambda fw: self.bound >= PORTS and fw.ticked and fw.motor_ok and fw.camera_ok,
                10.0, "the SITL car to bind its ports and be healthy",
            )  # fmt: skip
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(2.0)
        self._sock.close()  # the car exits when its link closes
        try:
            self._proc.wait(2.0)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(5.0)

    def send_signal(self, sig: int) -> None:
        """A fault of the SITL platform (firmware/sitl/src/main.cpp: SIGUSR1 jams the I2C bus,
        SIGUSR2 unplugs the MPU-6050)."""
        self._proc.send_signal(sig)

    @property
    def running(self) -> bool:
        return self._proc.poll() is None

    def sensors(self, gyro_z: float | None) -> None:
        """The board's sensor inputs, as the world sends them: the gyro's reading."""
        self._sock.send(encode_sensors(gyro_z, None))

    def wait_for(
        self, predicate: Callable[[SitlFirmware], bool], timeout: float, what: str = "the car"
    ) -> None:
        """Wait until ``predicate(firmware mirror)`` holds; re-checked at each message."""
        with self._changed:
            if not self._changed.wait_for(lambda: predicate(self.firmware), timeout):
                raise AssertionError(f"timed out waiting for {what}: {self.firmware}")

    def _run(self) -> None:
        while not self._stop.is_set():
            if not select.select([self._sock], [], [], 0.05)[0]:
                continue
            try:
                packet = self._sock.recv(MAX_PACKET)
            except BlockingIOError:
                continue
            if not packet:
                return
            msg = decode(packet)
            with self._changed:
                if isinstance(msg, FrameRequest):
                    with contextlib.suppress(BlockingIOError):
                        self._sock.send(encode_frame(msg.id, self.uptime_us(), self._frame))
                elif isinstance(msg, Motors):
                    self.firmware.wheels = wheel_duties(msg.pwm)
                    self.wheel_log.append((time.monotonic(), self.firmware.wheels))
                elif isinstance(msg, Trace):
                    self.firmware.apply(msg)
                elif isinstance(msg, Bound):
                    self.bound.add((msg.proto, msg.port))
                elif isinstance(msg, SerialLine):
                    self.serial.append(msg.line)
                self._changed.notify_all()
