"""`stigmesh car ADDR teleop` through a pseudo-terminal, against the model car on loopback.

The command runs as a real process whose stdin and stdout are the slave side
of a pty; the test types keys into the master side and reads the screen back.
Every wait is on a condition (the car's state, a line on screen) with a deadline.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from protocol.mz01.firmware import FirmwareModel
from tests.support.carserver import ModelCar, free_address
from tools.commands.teleop import ANSI, parse_keys

# s for any one awaited condition: waiting ends as soon as it holds, and a busy machine
# may take seconds to start the tool or to schedule it
DEADLINE = 30.0


def until(condition: Callable[[], bool], timeout: float = DEADLINE, what: str = "") -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what or condition}")
        time.sleep(0.01)


# Sets SIGINT's disposition, then becomes the command (an ignored signal stays ignored
# across exec, as a shell's background job starts).
SIGINT_THEN_EXEC = (
    "import os, signal, sys; "
    "signal.signal(signal.SIGINT, signal.SIG_IGN if sys.argv[1] == 'ignore' else signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])"
)


class PtyCommand:
    """A command on a pseudo-terminal: type keys, read what it drew."""

    def __init__(self, *args: str, sigint_ignored: bool = False) -> None:
        """``sigint_ignored``: start it with SIGINT ignored, as a script's background job or
        nohup would (whatever the test runner itself was started with)."""
        master, slave = os.openpty()
        self.master = master
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SIGINT_THEN_EXEC, "ignore" if sigint_ignored else "default",
             "-m", "tools.cli", *args],
            stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
            env={**os.environ, "COLUMNS": "160", "LINES": "40"},
        )
        os.close(slave)
        self._out = bytearray()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO once the child has gone
                return
            if not data:
                return
            with self._lock:
                self._out += data

    @property
    def text(self) -> str:
        with self._lock:
            raw = bytes(self._out).decode("utf-8", "replace")
        return ANSI.sub("", raw)

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def wait_text(self, needle: str, timeout: float = DEADLINE) -> None:
        until(lambda: needle in self.text, timeout, f"{needle!r} on screen:\n{self.text[-2000:]}")

    def wait_exit(self, timeout: float = DEADLINE) -> int:
        return self.proc.wait(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        self._reader.join(2)
        os.close(self.master)


@pytest.fixture
def model_car() -> Iterator[ModelCar]:
    with ModelCar(free_address(), robot_id=3) as served:
        yield served


def teleop(car: ModelCar, *extra: str, sigint_ignored: bool = False) -> PtyCommand:
    return PtyCommand("car", car.address, "teleop", "--timeout", "5", *extra,
                      sigint_ignored=sigint_ignored)


def moved(car: ModelCar, wheels: tuple[float, float]) -> Callable[[], bool]:
    return lambda: any(w == pytest.approx(wheels) for _, w in car.wheel_log)


def hold(ui: PtyCommand, key: bytes, condition: Callable[[], bool], what: str) -> None:
    """Hold ``key`` down (auto-repeat every 0.1 s) until ``condition``: one press drives for
    --hold s only, and on a busy machine arming the car through the gesture can take longer."""
    end = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}:\n{ui.text[-2000:]}")
        ui.type(key)
        time.sleep(0.1)


def reboot(car: ModelCar, nonce: int) -> None:
    """The car restarts: a fresh firmware state, a new boot nonce, uptime from zero."""
    with car.lock:
        car.model = FirmwareModel(car.model.robot_id, nonce, token=78)
        car.booted = time.monotonic()


def test_keys_drive_stop_estop_reset_and_quit(model_car: ModelCar) -> None:
    ui = teleop(model_car, "--hold", "0.4", "--idle", "1.0")
    try:
        ui.wait_text("clock: synchronised")
        ui.wait_text("session ready")
        # a held key: auto-repeat every 0.1 s keeps the wheels turning without a gap
        for _ in range(8):
            ui.type(b"w")
            time.sleep(0.1)  # the key's auto-repeat rate, not a wait for a result
        released = time.monotonic()
        until(moved(model_car, (0.6, 0.6)), what="forward")
        ui.wait_text("ARMED")
        held = [w for t, w in model_car.wheel_log if t < released]
        assert held == [pytest.approx((0.6, 0.6))], held  # one change: no gap while held
        # released: zero wheels after --hold, then stopped (disarmed) after --idle
        until(lambda: model_car.model.wheels == (0.0, 0.0), what="wheels zero")
        until(lambda: not model_car.model.armed, what="idle stop")
        assert model_car.model.reason == "stop"
        ui.wait_text("no key for 1 s: stopped")

        # right arrow: re-arms through the gesture, turns in place
        hold(ui, b"\x1b[C", moved(model_car, (0.5, -0.5)), "turn right")
        ui.type(b" ")
        until(lambda: not model_car.model.armed and model_car.model.reason == "stop")
        ui.wait_text("STOP sent")

        ui.type(b"e")
        until(lambda: model_car.model.estop, what="e-stop latched")
        ui.wait_text("e-stop LATCHED")
        log_len = len(model_car.wheel_log)
        ui.type(b"w")
        ui.wait_text("cannot drive: e-stop latched")
        assert len(model_car.wheel_log) == log_len and not model_car.model.armed
        ui.type(b"r")
        until(lambda: not model_car.model.estop, what="e-stop reset")
        ui.wait_text("e-stop clear")

        hold(ui, b"a", moved(model_car, (-0.5, 0.5)), "turn left")  # then quit while turning
        ui.type(b"q")
        assert ui.wait_exit() == 0
        assert model_car.model.wheels == (0.0, 0.0) and not model_car.model.armed
        assert model_car.model.reason == "stop"
        assert "teleop quit: STOP sent; car 3 disarmed" in ui.text
    finally:
        ui.close()


@pytest.mark.parametrize(("sig", "sigint_ignored"), [
    (signal.SIGTERM, False), (signal.SIGHUP, False), (signal.SIGINT, False),
    (signal.SIGINT, True),  # started in a script's background: ^C still stops the car
])
def test_a_signal_while_driving_sends_stop(model_car: ModelCar, sig: signal.Signals,
                                           sigint_ignored: bool) -> None:
    ui = teleop(model_car, "--hold", "2.0", sigint_ignored=sigint_ignored)
    try:
        ui.wait_text("session ready")
        ui.wait_text("clock: synchronised")
        ui.type(b"w")
        until(lambda: model_car.model.armed and model_car.model.wheels == pytest.approx((0.6, 0.6)),
              what="driving")
        os.killpg(ui.proc.pid, sig)
        assert ui.wait_exit() == 1
        # STOP, not the car's own 0.3 s lease, ended the drive
        assert not model_car.model.armed and model_car.model.reason == "stop"
        assert f"teleop interrupted ({sig.name}): STOP sent; car 3 disarmed" in ui.text
    finally:
        ui.close()


def test_reboot_and_wrong_id_are_said_on_screen(model_car: ModelCar) -> None:
    ui = teleop(model_car, "--expect-id", "5")
    try:
        ui.wait_text("reports robot id 3, but 5 is expected")
        ui.wait_text("session ready")
        reboot(model_car, 0x12345678)
        ui.wait_text("the car rebooted: boot b0071d00 -> 12345678")
        ui.type(b"q")
        assert ui.wait_exit() == 0
        text = ui.text  # the notices are repeated after the screen is left
        assert "warning: the car rebooted" in text.split("teleop quit")[-1]
    finally:
        ui.close()


def test_teleop_needs_a_terminal(model_car: ModelCar) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tools.cli", "car", model_car.address, "teleop"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20, check=False,
    )
    assert result.returncode == 2 and "stdin is not one" in result.stderr
    assert "Traceback" not in result.stderr


def test_keys_parse_arrows_letters_and_split_sequences() -> None:
    assert parse_keys(b"w\x1b[Dq ") == (["forward", "left", "quit", "stop"], b"")
    assert parse_keys(b"d\x1b[") == (["right"], b"\x1b[")
    assert parse_keys(b"\x1b[" + b"B") == (["back"], b"")
    assert parse_keys(b"\x1bOCxE") == (["right", "estop"], b"")
