"""The agent's control socket, for real: hostile lines get a clean refusal; the key opens it."""

from __future__ import annotations

import asyncio
import socket
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agents.drivers.control import ControlError, control_path, request, serve_control
from tests.support.control import raw_exchange

KEY = bytes(range(32))


@contextmanager
def serving(path: Path, handle: Any) -> Iterator[None]:
    """``serve_control`` on its own event loop thread, closed at the end."""
    loop = asyncio.new_event_loop()
    box: dict[str, asyncio.AbstractServer] = {}
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        box["server"] = loop.run_until_complete(serve_control(path, "walnut", KEY, handle))
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10.0)
    try:
        yield
    finally:

        async def close() -> None:
            box["server"].close()
            await asyncio.wait_for(box["server"].wait_closed(), 5.0)

        asyncio.run_coroutine_threadsafe(close(), loop).result(10.0)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10.0)
        loop.close()


def raw(path: Path, payload: bytes) -> dict[str, Any]:
    """Send ``payload`` after the greeting; the reply (empty when the server said nothing)."""
    hello, reply = raw_exchange(path, payload)
    assert len(bytes.fromhex(hello["challenge"])) == 16  # from a fresh random source
    return reply


def _status(req: dict[str, Any]) -> dict[str, Any]:
    if req.get("cmd") != "status":
        raise ValueError(f"unknown command {req.get('cmd')!r}")
    return {"agent": "walnut"}


@pytest.fixture
def agent_socket(tmp_path: Path) -> Iterator[Path]:
    path = control_path(tmp_path, "walnut")
    with serving(path, _status):
        yield path


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b'{"request": ' + b"[" * 30000 + b"]" * 30000 + b', "mac": "00"}\n', "too_deep"),
        (b'{"request": {"cmd": "' + b"x" * 70000 + b'"}, "mac": "00"}\n', "too_long"),
        (b"\xff\xfe not json\n", "malformed"),
    ],
)
def test_hostile_lines_get_a_clean_refusal_and_the_agent_carries_on(
    agent_socket: Path, payload: bytes, reason: str
) -> None:
    reply = raw(agent_socket, payload)
    assert reply.get("ok") is False and reply.get("reason") == reason, reply
    assert request(agent_socket, KEY, {"cmd": "status"})["agent"] == "walnut"


def test_only_the_key_opens_it_and_only_its_owner_reaches_it(agent_socket: Path) -> None:
    assert stat.S_IMODE(agent_socket.stat().st_mode) == 0o600
    with pytest.raises(ControlError, match="not authorised: wrong swarm key") as info:
        request(agent_socket, b"x" * 32, {"cmd": "status"})
    assert info.value.reason == "unauthorised"
    with pytest.raises(ControlError, match="unknown command 'fly'") as info:
        request(agent_socket, KEY, {"cmd": "fly"})
    assert info.value.reason == "bad_request"
    with pytest.raises(ControlError, match="nothing listens") as info:
        request(agent_socket.with_name("nobody.sock"), KEY, {"cmd": "status"})
    assert info.value.reason == "unreachable"


def test_a_stale_socket_file_is_replaced(tmp_path: Path) -> None:
    path = control_path(tmp_path, "walnut")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens
    with serving(path, _status):
        assert request(path, KEY, {"cmd": "status"}) == {"ok": True, "agent": "walnut"}
