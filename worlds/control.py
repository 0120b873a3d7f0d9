"""The world's control socket ``RUN_DIR/world.sock``, and its key ``RUN_DIR/world.key``.

The world speaks the control protocol of :mod:`protocol.control`, like an
agent: one challenge-response request per connection, on a socket of mode
0600. The world has no swarm key, so at every start it makes a fresh random
control key and writes it, mode 0600, to ``RUN_DIR/world.key`` before its
socket appears; it removes both when it stops. A client on the machine, as
the world's user, reads the key from the run directory (:class:`WorldControl`
does): whoever may read the run directory's secrets may drive the world,
and nobody else. A restarted world has a new key, so a client that kept an
old key is refused rather than obeyed by the wrong world.

Requests::

    {"cmd": "status"}
    {"cmd": "drop_link", "car": 1, "duration": 2.0}
    {"cmd": "reboot", "car": "walnut", "down": 0.0}
    {"cmd": "freeze_camera", "car": 1, "duration": 2.0}
    {"cmd": "stop"}

Replies: ``{"ok": true, ...}`` or ``{"ok": false, "reason": ..., "error":
"..."}``. A car is named by id or by name.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol.control import (
    ControlError,
    ControlReason,
    KeyFileError,
    exchange,
    read_key_file,
    write_key_file,
)
from protocol.control import (
    request as control_request,
)

__all__ = ["COMMANDS", "ControlError", "ControlRequest", "WorldControl", "control_path",
           "key_path", "parse_request", "read_world_key", "remove_world_key", "send_control",
           "write_world_key"]  # fmt: skip

SOCKET_NAME = "world.sock"
KEY_NAME = "world.key"
KEY_LABEL = "world control key"
COMMANDS = ("status", "drop_link", "reboot", "freeze_camera", "stop")


@dataclass(frozen=True)
class ControlRequest:
    cmd: str
    car: int | str | None = None
    duration: float = 0.0


def control_path(run_dir: Path) -> Path:
    return Path(run_dir) / SOCKET_NAME


def key_path(run_dir: Path) -> Path:
    return Path(run_dir) / KEY_NAME


def write_world_key(run_dir: Path) -> bytes:
    """A fresh control key in ``RUN_DIR/world.key`` (mode 0600, replacing a stale one)."""
    return write_key_file(key_path(run_dir), replace=True)


def remove_world_key(run_dir: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        key_path(run_dir).unlink()


def read_world_key(run_dir: Path) -> bytes:
    """The running world's control key; raises :class:`ControlError` (reason ``no_key``)."""
    try:
        return read_key_file(
            key_path(run_dir),
            KEY_LABEL,
            f" (is a world running with --run-dir {run_dir}?)",
            fix=" (the world writes it at start: restart the world)",
        )
    except KeyFileError as exc:
        raise ControlError(ControlReason.NO_KEY, str(exc)) from None


def _bad(message: str) -> ControlError:
    return ControlError(ControlReason.BAD_REQUEST, message)


def parse_request(obj: dict[str, Any]) -> ControlRequest:
    """Validate one authenticated request; raises :class:`ControlError` (``bad_request``)."""
    cmd = obj.get("cmd")
    if cmd not in COMMANDS:
        raise _bad(f"cmd must be one of {', '.join(COMMANDS)}, got {cmd!r}")
    allowed = {"cmd"}
    car: int | str | None = None
    duration = 0.0
    if cmd in ("drop_link", "reboot", "freeze_camera"):
        allowed.add("car")
        car = obj.get("car")
        if isinstance(car, bool) or not isinstance(car, int | str):
            raise _bad(f'{cmd} needs "car": an id or a name')
        key = "down" if cmd == "reboot" else "duration"
        allowed.add(key)
        value = obj.get(key, 0.0 if cmd == "reboot" else None)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 3600:
            raise _bad(f'{cmd} needs "{key}" in [0, 3600] seconds')
        duration = float(value)
    extra = set(obj) - allowed
    if extra:
        raise _bad(f"unknown field(s) for {cmd}: {', '.join(sorted(extra))}")
    return ControlRequest(cmd, car, duration)


def send_control(
    path: Path, request: dict[str, Any], timeout: float = 5.0, key: bytes | None = None
) -> dict[str, Any]:
    """One request to the world at ``path``; its reply, ``ok`` or not.

    The key is read from the socket's run directory unless given.
    """
    if key is None:
        key = read_world_key(Path(path).parent)
    return exchange(Path(path), key, request, timeout)


class WorldControl:
    """A client for a running world's control socket; every failure is a :class:`ControlError`."""

    def __init__(self, run_dir: Path, timeout: float = 5.0, key: bytes | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.path = control_path(run_dir)
        self.timeout = timeout
        self.key = key  # None: read RUN_DIR/world.key at each request (a restart makes a new one)

    def request(self, request: dict[str, Any]) -> dict[str, Any]:
        """The ``ok`` reply; a refusal raises :class:`ControlError` with the world's reason."""
        key = self.key if self.key is not None else read_world_key(self.run_dir)
        return control_request(self.path, key, request, self.timeout)

    def status(self) -> dict[str, Any]:
        status = self.request({"cmd": "status"}).get("status")
        if not isinstance(status, dict):
            raise ControlError(ControlReason.MALFORMED, "the world's status is not an object")
        return status

    def drop_link(self, car: int | str, duration: float) -> dict[str, Any]:
        return self.request({"cmd": "drop_link", "car": car, "duration": duration})

    def reboot(self, car: int | str, down: float = 0.0) -> dict[str, Any]:
        return self.request({"cmd": "reboot", "car": car, "down": down})

    def freeze_camera(self, car: int | str, duration: float) -> dict[str, Any]:
        return self.request({"cmd": "freeze_camera", "car": car, "duration": duration})

    def stop(self) -> dict[str, Any]:
        return self.request({"cmd": "stop"})
