"""The agent's local control socket: faults and status for a running agent.

A UNIX stream socket at ``RUN_DIR/NAME.sock``, mode 0600, speaking the
control protocol of :mod:`protocol.control` (one challenge-response request
per connection), opened only by the swarm key.

Requests: ``{"cmd": "status"}``, ``{"cmd": "set", "faults": "drop=0.3 ...",
"direction": "in|out|both"}``, ``{"cmd": "byzantine", "spec": "bias=2,0"}``,
``{"cmd": "clear"}``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from protocol.control import MAX_LINE, ControlError, Handler, request
from protocol.control import serve_control as _serve

__all__ = ["MAX_LINE", "ControlError", "Handler", "control_path", "request", "serve_control"]


def control_path(run_dir: Path, name: str) -> Path:
    return run_dir / f"{name}.sock"


async def serve_control(
    path: Path, name: str, key: bytes, handle: Handler
) -> asyncio.Server:
    """Serve requests on ``path`` (replacing a stale socket file) until closed."""
    return await _serve(path, name, key, handle, key_label="swarm key")
