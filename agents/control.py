"""The agent's local control socket: faults and status for a running agent.

A UNIX stream socket at ``RUN_DIR/NAME.sock`` speaking one JSON line each way
per step, opened only by the swarm key (challenge-response):

    agent  -> client  {"agent": NAME, "challenge": HEX}
    client -> agent   {"request": {...}, "mac": HEX}
    agent  -> client  {"ok": true, ...} or {"ok": false, "error": "..."}

where mac = HMAC-SHA256(swarm key, challenge || the request as canonical JSON).

Requests: ``{"cmd": "status"}``, ``{"cmd": "set", "faults": "drop=0.3 ...",
"direction": "in|out|both"}``, ``{"cmd": "byzantine", "spec": "bias=2,0"}``,
``{"cmd": "clear"}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import secrets
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

MAX_LINE = 64 * 1024
Handler = Callable[[dict[str, Any]], dict[str, Any]]


class ControlError(RuntimeError):
    """The control request could not be made or was refused."""


def control_path(run_dir: Path, name: str) -> Path:
    return run_dir / f"{name}.sock"


def _mac(key: bytes, challenge: bytes, request: bytes) -> str:
    return hmac.new(key, challenge + request, hashlib.sha256).hexdigest()


def _canonical(request: dict[str, Any]) -> bytes:
    return json.dumps(request, sort_keys=True, separators=(",", ":")).encode()


async def serve_control(
    path: Path, name: str, key: bytes, handle: Handler
) -> asyncio.AbstractServer:
    """Serve requests on ``path`` (replacing a stale socket file) until closed."""

    async def one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        challenge = secrets.token_bytes(16)
        try:
            writer.write(json.dumps({"agent": name, "challenge": challenge.hex()}).encode()
                         + b"\n")
            await writer.drain()
            line = await asyncio.wait_for(reader.readline(), 5.0)
            reply = _answer(line, key, challenge, handle)
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    server = await asyncio.start_unix_server(one, path=str(path), limit=MAX_LINE)
    path.chmod(0o600)
    return server


def _answer(line: bytes, key: bytes, challenge: bytes, handle: Handler) -> dict[str, Any]:
    try:
        message = json.loads(line)
        request = message["request"]
        mac = message["mac"]
        if not isinstance(request, dict) or not isinstance(mac, str):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        return {"ok": False, "error": "malformed request"}
    if not hmac.compare_digest(_mac(key, challenge, _canonical(request)), mac):
        return {"ok": False, "error": "not authorised: wrong swarm key"}
    try:
        return {"ok": True, **handle(request)}
    except (ValueError, KeyError, TypeError) as exc:
        return {"ok": False, "error": str(exc)}


def request(path: Path, key: bytes, req: dict[str, Any], timeout: float = 5.0) -> dict[str, Any]:
    """Send one request to a running agent; raises :class:`ControlError` on refusal."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        try:
            sock.connect(str(path))
        except OSError as exc:
            raise ControlError(f"no agent listens on {path}: {exc.strerror}") from None
        stream = sock.makefile("rwb")
        hello = json.loads(stream.readline(MAX_LINE))
        challenge = bytes.fromhex(hello["challenge"])
        body = _canonical(req)
        stream.write(json.dumps({"request": req, "mac": _mac(key, challenge, body)}).encode()
                     + b"\n")
        stream.flush()
        reply: dict[str, Any] = json.loads(stream.readline(MAX_LINE))
    except (OSError, ValueError, KeyError) as exc:
        raise ControlError(f"control exchange with {path} failed: {exc}") from None
    finally:
        sock.close()
    if not reply.get("ok"):
        raise ControlError(str(reply.get("error", "refused")))
    return reply
