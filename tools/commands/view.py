"""``stigmesh view``: the swarm live in Foxglove, from any host of its network.

    stigmesh view --swarm NAME --swarm-key K [--iface IF] [--port P] [--run-dir D]
                  [--host 127.0.0.1] [--ws-port 8765] [--duration S]

It joins the swarm read-only with its key (the socket it listens on never
sends), draws what every agent broadcasts — pose and covariance, published
track, the cells it shares — and serves it as a Foxglove WebSocket on
``--host`` (127.0.0.1 unless told otherwise). With ``--run-dir`` on the host of
a run it also reads the world's log (the target's truth, the room) and asks
each agent's control socket for its peers' reputation. Open the printed URL
in Foxglove with the layout tools/view/stigmesh.layout.json. A finished run's
MCAP logs show the same channels (``stigmesh log export RUN --mcap FILE``).
"""

from __future__ import annotations

import argparse
import contextlib
import selectors
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.swarm.messages import DEFAULT_SWARM_PORT

if TYPE_CHECKING:
    from tools.procs import Swarm

LAYOUT = Path(__file__).resolve().parents[1] / "view" / "stigmesh.layout.json"
EXIT_OK, EXIT_USAGE = 0, 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--swarm", required=True, help="the swarm's name")
    p.add_argument("--swarm-key", type=Path, default=None,
                   help="swarm key file (default RUN_DIR/swarm.key)")
    p.add_argument("--iface", default="lo", help="interface to listen on (default lo)")
    p.add_argument("--port", type=int, default=DEFAULT_SWARM_PORT,
                   help=f"the swarm's UDP port (default {DEFAULT_SWARM_PORT})")
    p.add_argument("--run-dir", type=Path, default=None,
                   help="a run on this host: the world's truth and the agents' control sockets")
    p.add_argument("--host", default="127.0.0.1",
                   help="address the Foxglove WebSocket listens on (default 127.0.0.1)")
    p.add_argument("--ws-port", type=int, default=8765,
                   help="its port (default 8765; 0 picks a free one)")
    p.add_argument("--duration", type=float, default=None, help="stop after S seconds")


def add_view_options(p: argparse.ArgumentParser) -> None:
    """``--view`` for demo and run: the live view beside the swarm."""
    p.add_argument("--view", action="store_true",
                   help="serve a live Foxglove view beside the swarm (prints its URL)")
    p.add_argument("--view-port", type=int, default=8765,
                   help="the view's WebSocket port on 127.0.0.1 (default 8765; 0: a free one)")


def view_args(run_dir: Path, swarm: str, port: int, ws_port: int,
              duration: float | None) -> list[str]:
    """The command line of a view beside a run (for tools.procs)."""
    args = ["view", "--swarm", swarm, "--port", str(port), "--run-dir", str(run_dir),
            "--ws-port", str(ws_port)]
    return [*args, "--duration", f"{duration:g}"] if duration is not None else args


def start_view(swarm: Swarm, swarm_name: str, port: int, ws_port: int, duration: float) -> None:
    """``stigmesh view`` beside the swarm (stopped with it; ``demo --view``, ``run --view``);
    prints the URL to open."""
    proc = swarm.start_process("view", view_args(swarm.run_dir, swarm_name, port, ws_port,
                                                 duration))
    wait = time.monotonic() + 30.0
    while time.monotonic() < wait and proc.alive():
        text = proc.output.read_text(errors="replace") if proc.output.exists() else ""
        for line in text.splitlines():
            if line.strip().startswith("open "):
                print(f"live view: {line.strip()[5:]}\n  in Foxglove, with the layout {LAYOUT}",
                      flush=True)
                return
        time.sleep(0.1)
    print(f"live view did not start:\n{proc.tail()}", file=sys.stderr, flush=True)


def main(args: argparse.Namespace) -> int:
    from agents.drivers.net import InterfaceError, broadcast_socket, resolve_interface
    from tools.listen import SwarmListener
    from tools.swarmkey import KeyFileError, read_key
    from tools.view.live import SwarmScene, ViewServer

    key_file = args.swarm_key or (args.run_dir / "swarm.key" if args.run_dir else None)
    if key_file is None:
        print("stigmesh view: --swarm-key (or --run-dir holding swarm.key) is needed",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        key = read_key(key_file)
        iface = resolve_interface(args.iface)
    except (KeyFileError, InterfaceError) as exc:
        print(f"stigmesh view: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        server = ViewServer(args.host, args.ws_port)
    except Exception as exc:  # the SDK reports a port in use as a RuntimeError
        print(f"stigmesh view: cannot serve on {args.host}:{args.ws_port}: {exc}",
              file=sys.stderr)
        return EXIT_USAGE
    listener = SwarmListener(key, args.swarm)
    view = SwarmScene(server.publish)
    print(f"stigmesh view: listening to swarm {args.swarm} on {iface.name}:{args.port} "
          f"(never sending); Foxglove WebSocket ws://{args.host}:{server.port}\n"
          f"  open {server.url}\n  layout {LAYOUT}", flush=True)
    sock = broadcast_socket(iface, args.port)
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    side = _RunSide(args.run_dir, key, view) if args.run_dir is not None else None
    end = time.monotonic() + args.duration if args.duration is not None else float("inf")
    next_side = 0.0
    try:
        while (now := time.monotonic()) < end:
            if selector.select(timeout=0.2):
                _drain(sock, listener, view)
            if side is not None and now >= next_side:
                next_side = now + 1.0
                side.poll(now)
    except KeyboardInterrupt:
        pass
    finally:
        selector.close()
        sock.close()
        server.close()
    return EXIT_OK


def _drain(sock: Any, listener: Any, view: Any) -> None:
    while True:
        try:
            data, src = sock.recvfrom(65536)
        except BlockingIOError:
            return
        now = time.monotonic()
        message = listener.receive_datagram(data, (str(src[0]), int(src[1])), now)
        if message is not None and message.epoch == listener.agents[message.sender].epoch:
            view.on_message(message, now)


class _RunSide:
    """On the run's host: the world's log (truth, room) and the agents' control sockets."""

    def __init__(self, run_dir: Path, key: bytes, view: Any) -> None:
        from protocol.runlog import LogReader, log_path

        self.run_dir, self.key, self.view = run_dir, key, view
        self.world = LogReader(log_path(run_dir, "world"))
        self.room: bytes | None = None

    def poll(self, now: float) -> None:
        from agents.drivers.control import ControlError, request
        from protocol import scene

        events = self.world.read()
        for event in events:
            if event.get("event") == "start" and self.room is None:
                self.room = _room(event)
        self.view.on_world(events)
        if self.room is not None:  # again and again, for a Foxglove that joins late
            self.view.publish(scene.ROOM, self.room, now)
        for sock in sorted(self.run_dir.glob("*.sock")):
            if sock.name == "world.sock":
                continue
            with contextlib.suppress(ControlError, OSError):
                status = request(sock, self.key, {"cmd": "status"}, timeout=0.5)
                self.view.on_status(sock.stem, status, now)


def _room(start: dict[str, Any]) -> bytes | None:
    from worlds.arena import ArenaError, load_arena
    from worlds.main import room_scene

    source = start.get("source")
    if not isinstance(source, str):
        return None
    try:
        return room_scene(load_arena(Path(source)), float(start["t"]))
    except (ArenaError, OSError):
        return None
