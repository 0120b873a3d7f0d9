"""A raw client of the control protocol, for hostile-line tests of the agent and world sockets."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any


def raw_exchange(path: Path, payload: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """Send ``payload`` after the greeting: the greeting, and the reply (empty when the server
    said nothing)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10.0)
        sock.connect(str(path))
        stream = sock.makefile("rwb")
        hello = json.loads(stream.readline())
        sock.sendall(payload)
        line = stream.readline()
    return hello, json.loads(line) if line else {}
