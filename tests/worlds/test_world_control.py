"""The world's control socket on a real world process: its key, its mode, hostile lines."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from tests.support.control import raw_exchange
from tests.worlds.rawcar import arena_text, free_subnet, world_process
from worlds.control import ControlError, WorldControl, control_path, key_path, send_control

pytestmark = pytest.mark.slow


def raw(path: Path, payload: bytes) -> dict[str, Any]:
    """Send ``payload`` after the greeting; the reply (empty when the world said nothing)."""
    hello, reply = raw_exchange(path, payload)
    assert hello["server"] == "world" and "challenge" in hello
    return reply


def test_the_world_socket_is_private_and_opened_by_its_run_key(tmp_path: Path) -> None:
    arena = tmp_path / "arena.toml"
    arena.write_text(arena_text(free_subnet()))
    run_dir = tmp_path / "run"
    with world_process(arena, run_dir, "--duration", "60") as world:
        sock, key = control_path(run_dir), key_path(run_dir)
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        control = WorldControl(run_dir)  # reads RUN_DIR/world.key
        assert control.status()["cars"]

        with pytest.raises(ControlError, match="wrong world control key") as info:
            WorldControl(run_dir, key=b"k" * 32).status()
        assert info.value.reason == "unauthorised"
        unsigned = raw(sock, b'{"request": {"cmd": "stop"}}\n')  # the old, keyless protocol
        assert unsigned["ok"] is False and unsigned["reason"] == "malformed"

        deep = raw(sock, b'{"request": ' + b"[" * 30000 + b"]" * 30000 + b', "mac": "0"}\n')
        assert deep.get("ok") is False and deep.get("reason") == "too_deep", deep
        long = raw(sock, b'{"request": {"cmd": "' + b"x" * 70000 + b'"}, "mac": "0"}\n')
        assert long.get("ok") is False and long.get("reason") == "too_long", long

        reply = send_control(sock, {"cmd": "drop_link", "car": 9, "duration": 1.0})
        assert reply["ok"] is False and reply["reason"] == "bad_request"
        with pytest.raises(ControlError, match="duration"):
            control.freeze_camera(1, -1.0)
        assert control.drop_link(1, 0.2)["car"] == 1  # still serving after all that
        assert control.stop() == {"ok": True}
        # it stops by itself (a SIGTERM now could land while it shuts down: status -15)
        rc, _, err = world.stop(timeout=60, sig=None)
    assert rc == 0, err
    assert not control_path(run_dir).exists() and not key_path(run_dir).exists()
    with pytest.raises(ControlError, match="is a world running") as info:
        WorldControl(run_dir).status()
    assert info.value.reason == "no_key"
