"""The world's control socket: JSON lines over a UNIX stream socket at ``RUN_DIR/world.sock``.

Requests (one JSON object a line, one reply line each)::

    {"cmd": "status"}
    {"cmd": "drop_link", "car": 1, "duration": 2.0}
    {"cmd": "reboot", "car": "walnut", "down": 0.0}
    {"cmd": "freeze_camera", "car": 1, "duration": 2.0}
    {"cmd": "stop"}

Replies: ``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}``. A car is
named by id or by name. :class:`WorldControl` is the client for tests and
for ``stigmesh faults``.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SOCKET_NAME = "world.sock"
MAX_LINE = 65536
COMMANDS = ("status", "drop_link", "reboot", "freeze_camera", "stop")


class ControlError(ValueError):
    """A control request that cannot be carried out; the reply carries the message."""


@dataclass(frozen=True)
class ControlRequest:
    cmd: str
    car: int | str | None = None
    duration: float = 0.0


def control_path(run_dir: Path) -> Path:
    return Path(run_dir) / SOCKET_NAME


def parse_request(line: bytes) -> ControlRequest:
    """Validate one request line; raises :class:`ControlError`."""
    try:
        obj = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ControlError(f"not a JSON line: {exc}") from None
    if not isinstance(obj, dict):
        raise ControlError("a request is a JSON object")
    cmd = obj.get("cmd")
    if cmd not in COMMANDS:
        raise ControlError(f"cmd must be one of {', '.join(COMMANDS)}, got {cmd!r}")
    allowed = {"cmd"}
    car: int | str | None = None
    duration = 0.0
    if cmd in ("drop_link", "reboot", "freeze_camera"):
        allowed.add("car")
        car = obj.get("car")
        if isinstance(car, bool) or not isinstance(car, int | str):
            raise ControlError(f'{cmd} needs "car": an id or a name')
        key = "down" if cmd == "reboot" else "duration"
        allowed.add(key)
        value = obj.get(key, 0.0 if cmd == "reboot" else None)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 3600:
            raise ControlError(f'{cmd} needs "{key}" in [0, 3600] seconds')
        duration = float(value)
    extra = set(obj) - allowed
    if extra:
        raise ControlError(f"unknown field(s) for {cmd}: {', '.join(sorted(extra))}")
    return ControlRequest(cmd, car, duration)


def send_control(path: Path, request: dict[str, Any], timeout: float = 5.0) -> dict[str, Any]:
    """Send one request to a running world and return its reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        sock.sendall(json.dumps(request).encode("utf-8") + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = sock.recv(MAX_LINE)
            if not chunk:
                break
            buf += chunk
            if len(buf) > 16 * MAX_LINE:
                raise ControlError("reply too long")
    if not buf:
        raise ControlError("the world closed the connection without a reply")
    reply = json.loads(buf.decode("utf-8"))
    if not isinstance(reply, dict):
        raise ControlError("reply is not a JSON object")
    return reply


class WorldControl:
    """A client for a running world's control socket."""

    def __init__(self, run_dir: Path, timeout: float = 5.0) -> None:
        self.path = control_path(run_dir)
        self.timeout = timeout

    def request(self, request: dict[str, Any]) -> dict[str, Any]:
        reply = send_control(self.path, request, self.timeout)
        if not reply.get("ok"):
            raise ControlError(str(reply.get("error", "request failed")))
        return reply

    def status(self) -> dict[str, Any]:
        status = self.request({"cmd": "status"})["status"]
        assert isinstance(status, dict)
        return status

    def drop_link(self, car: int | str, duration: float) -> dict[str, Any]:
        return self.request({"cmd": "drop_link", "car": car, "duration": duration})

    def reboot(self, car: int | str, down: float = 0.0) -> dict[str, Any]:
        return self.request({"cmd": "reboot", "car": car, "down": down})

    def freeze_camera(self, car: int | str, duration: float) -> dict[str, Any]:
        return self.request({"cmd": "freeze_camera", "car": car, "duration": duration})

    def stop(self) -> dict[str, Any]:
        return self.request({"cmd": "stop"})
