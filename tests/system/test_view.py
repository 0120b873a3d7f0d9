"""``stigmesh view`` beside a small swarm, seen by a plain Foxglove WebSocket client.

The client speaks the Foxglove WebSocket protocol itself (JSON text frames for
``serverInfo``/``advertise``/``subscribe``, binary ``MessageData`` frames: op 1,
subscription id u32, log time u64, payload), subscribes to every channel the
view advertises and decodes at least one message of each: protobuf ones with
the schema the server sent (a FileDescriptorSet), JSON ones as JSON. The
channels and schemas must be the ones the run logs write (protocol/scene.py).
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from protocol import scene
from protocol.mcapread import iter_messages
from protocol.runlog import log_path
from tests.system.conftest import BACKSTOP, RunLogs, make_swarm, private_swarm_args, wait_for
from tools.commands.view import view_args
from tools.procs import Swarm, running
from worlds.arena import shipped_arena

# Each wait below has its own deadline (60 s to serve, 90 s to see every channel); this
# bounds the whole test on a busy machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]
NAMES = ("walnut", "hazel")
EXPECTED = {f"/{n}/{kind}" for n in NAMES for kind in ("scene", "grid", "stats", "peers")} | {
    "/world/room", "/world/truth"}


def _protobuf_class(schema_name: str, schema_b64: str) -> Any:
    fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(schema_b64))
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(schema_name))


def _agents_said(swarm: Swarm) -> str:
    """Why an agent's scene may be missing: it had no pose and sent no TRACK, or it died."""
    live = RunLogs(swarm.run_dir)
    said = []
    for n in NAMES:
        proc = swarm.procs.get(n)
        counts = {e: len(live.events(n, e)) for e in ("pose_acquired", "pose_lost", "detection")}
        tracks = sum(1 for line in live.events(n, "tx") if line.get("kind") == "track")
        alive = proc is not None and proc.alive()
        said.append(f"{n}: alive {alive}, {counts}, {tracks} TRACKs sent"
                    + ("" if alive or proc is None else f", output: {proc.tail(5)!r}"))
    return "; ".join(said)


async def _watch(url: str, seconds: float) -> dict[str, Any]:
    """Subscribe to every channel as it is advertised; the first decoded message of each."""
    import websockets
    from websockets.typing import Subprotocol

    decoded: dict[str, Any] = {}
    channels: dict[int, dict[str, Any]] = {}
    subs: dict[int, int] = {}
    protocols = [Subprotocol("foxglove.sdk.v1"), Subprotocol("foxglove.websocket.v1")]
    async with websockets.connect(url, subprotocols=protocols) as ws:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not decoded.keys() >= EXPECTED:
            try:
                frame = await asyncio.wait_for(ws.recv(), timeout=1.0)
            except TimeoutError:
                continue
            if isinstance(frame, str):
                msg = json.loads(frame)
                again = re.fullmatch(r"Unknown channel ID: (\d+)", str(msg.get("message", "")))
                if msg.get("op") == "advertise":
                    ids = [ch["id"] for ch in msg["channels"]]
                    channels.update((ch["id"], ch) for ch in msg["channels"])
                elif msg.get("op") == "status" and again and int(again[1]) in channels:
                    # foxglove-sdk 0.30 may take a subscription to a channel it has just
                    # advertised before it knows the channel itself (busy.py, ~1 run in 8):
                    # ask again a little later, as a user would by reconnecting.
                    ids = [int(again[1])]
                    await asyncio.sleep(0.05)
                else:
                    continue
                new = []
                for channel_id in ids:
                    sub = len(subs) + 1
                    subs[sub] = channel_id
                    new.append({"id": sub, "channelId": channel_id})
                await ws.send(json.dumps({"op": "subscribe", "subscriptions": new}))
                continue
            if frame[0] != 1:  # MessageData only
                continue
            sub, _ = struct.unpack_from("<IQ", frame, 1)
            payload = bytes(frame[13:])
            ch = channels[subs[sub]]
            if ch["topic"] in decoded:
                continue
            if ch["encoding"] == "protobuf":
                decoded[ch["topic"]] = (ch, _protobuf_class(ch["schemaName"], ch["schema"])
                                        .FromString(payload))
            else:
                decoded[ch["topic"]] = (ch, json.loads(payload))
    return decoded


def test_a_foxglove_client_decodes_every_channel_of_the_view(tmp_path: Path) -> None:
    swarm = make_swarm(tmp_path, shipped_arena("two_cars"))
    swarm_args = private_swarm_args()
    name, port = swarm_args[1], int(swarm_args[3])
    with running(swarm):
        swarm.start_world(BACKSTOP)
        for n in NAMES:
            swarm.start_agent(n, BACKSTOP, swarm_args)
        view = swarm.start_process("view", view_args(swarm.run_dir, name, port, 0, BACKSTOP))
        url: list[str] = []

        def served() -> bool:
            found = re.search(r"ws://127\.0\.0\.1:(\d+)", view.output.read_text()
                              if view.output.exists() else "")
            if found:
                url.append(f"ws://127.0.0.1:{found.group(1)}")
            return bool(found)

        wait_for(served, 60, "the view's WebSocket", watch=[view])
        decoded = asyncio.run(_watch(url[0], 90))
        missing = sorted(EXPECTED - decoded.keys())
        assert not missing, f"never decoded: {missing}; {_agents_said(swarm)}"
    # what the messages say: a grid of two uint8 fields, the agents' own entities, the room
    _, grid = decoded["/walnut/grid"]
    assert [f.name for f in grid.fields] == ["mean", "variance"]
    assert len(grid.data) == grid.row_stride * (len(grid.data) // grid.row_stride) > 0
    _, pose = decoded["/walnut/scene"]
    assert {e.id for e in pose.entities} & {"walnut/pose", "walnut/track"}
    _, room = decoded["/world/room"]
    assert room.entities[0].cubes, "walls"
    ch, stats = decoded["/hazel/stats"]
    assert ch["schemaEncoding"] == "jsonschema" and "t" in stats
    # the same channels as the run logs: same topics, schema names and schema bytes
    logged = {c.topic: s for path in (log_path(swarm.run_dir, "walnut"),
                                      log_path(swarm.run_dir, "world"))
              for c, s, _, _ in iter_messages(path)}
    for topic in ("/walnut/grid", "/walnut/scene", "/walnut/stats", "/world/truth"):
        ch, _ = decoded[topic]
        schema = logged[topic]
        assert schema is not None and ch["schemaName"] == schema.name
        data = ch["schema"].encode() if ch["schemaEncoding"] == "jsonschema" else \
            base64.b64decode(ch["schema"])
        assert data == schema.data, topic
    assert scene.grid_channel("walnut").topic == "/walnut/grid"
