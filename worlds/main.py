"""``stigmesh world ARENA.toml --run-dir DIR``: the world server as a command.

Exit status: 0 after a clean stop (SIGINT, SIGTERM, ``--duration`` or a
``stop`` request), 2 for a refused arena file or an endpoint that cannot be
bound, 1 for anything else.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from protocol import scene
from protocol.runlog import RunLog, log_path
from worlds.arena import SENSING_MODES, Arena, ArenaError, load_arena
from worlds.control import control_path

if TYPE_CHECKING:  # the server pulls in PyBullet: keep `--help` light
    from worlds.server import WorldServer

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
PROCESS = "world"
WORLD_FLUSH = 0.25  # s: the world's log chunks (its size is not an agent's: no budget)


def room_scene(arena: Arena, t: float) -> bytes:
    """The room of ``arena`` (walls, tags, obstacles) as the live view and the logs draw it."""
    return scene.room_update(
        t, (arena.room.size_x, arena.room.size_y), arena.room.wall_height,
        [(tag.id, tag.x, tag.y, tag.z, tag.yaw) for tag in arena.tags],
        [(o.x, o.y, o.size_x, o.size_y) for o in arena.obstacles])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("arena", type=Path, help="arena file (TOML, see worlds/ARENA.md)")
    parser.add_argument("--run-dir", type=Path, required=True, help="where world.jsonl goes")
    parser.add_argument("--duration", type=float, default=None, help="stop after S seconds")
    parser.add_argument(
        "--sensing", choices=SENSING_MODES, default=None, help="override the arena's sensor mode"
    )
    parser.add_argument("--seed", type=int, default=None, help="override the arena's seed")
    parser.add_argument("--cars-on", default=None, metavar="A.B.C",
                        help="serve the cars on this /24 instead, each keeping its last octet "
                        "(demos on one host pick a free one)")
    parser.add_argument(
        "--firmware", choices=("model", "sitl"), default="model",
        help="the cars' firmware: the Python reference model (default), or the ESP32 sketch "
        "built for the host, one process per car (make -C firmware sitl; firmware/README.md)",
    )  # fmt: skip


def _error(message: str) -> None:
    print(f"stigmesh world: error: {message}", file=sys.stderr, flush=True)


def _banner(server: WorldServer) -> None:
    world = server.world
    cars = " ".join(f"{c.spec.name}(id {c.id})={c.spec.address}" for c in world.cars.values())
    print(
        f"stigmesh world: arena {world.arena.name} ({world.arena.sensing.mode}), "
        f"firmware {world.firmware}, cars {cars}, ports 4210/udp 4211/udp 8080/tcp, "
        f"run dir {server.run_dir}, "
        f"control {control_path(server.run_dir)}",
        flush=True,
    )


def main(args: argparse.Namespace) -> int:
    from worlds.server import serve
    from worlds.sim import World
    from worlds.sitl_host import check_binary
    from worlds.steps import BindError

    if args.duration is not None and not args.duration > 0:
        _error(f"--duration must be positive, got {args.duration}")
        return EXIT_USAGE
    try:
        arena = load_arena(args.arena)
    except ArenaError as exc:
        _error(str(exc))
        return EXIT_USAGE
    if args.sensing is not None:
        arena = arena.with_sensing(args.sensing)
    if args.cars_on is not None:
        try:
            arena = arena.with_cars_on(args.cars_on)
        except ValueError as exc:
            _error(f"--cars-on {args.cars_on}: {exc}")
            return EXIT_USAGE
    why = check_binary() if args.firmware == "sitl" else None
    if why is not None:
        _error(why)
        return EXIT_USAGE
    run_dir: Path = args.run_dir
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _error(f"cannot create run dir {run_dir}: {exc}")
        return EXIT_USAGE
    if len(str(control_path(run_dir).resolve())) > 100:
        _error(f"run dir path too long for a UNIX socket: {run_dir}")
        return EXIT_USAGE
    # The world's log is read while it runs (truth for the live view, tests): short chunks.
    try:
        log = RunLog(log_path(run_dir, PROCESS), PROCESS, time.monotonic,
                     flush_every=WORLD_FLUSH)
    except OSError as exc:
        _error(f"cannot write the log in run dir {run_dir}: {exc.strerror or exc}")
        return EXIT_USAGE
    world = World(arena, seed=args.seed, t0=time.monotonic(), firmware=args.firmware)
    log.log(
        "start", arena=arena.name, source=arena.source, seed=world.seed,
        sensing=arena.sensing.mode, firmware=world.firmware, cars=[c.__dict__ for c in arena.cars],
    )  # fmt: skip
    log.scene(scene.ROOM, room_scene(arena, time.monotonic()))  # the view's room
    server: WorldServer | None = None
    try:
        server = asyncio.run(serve(world, run_dir, log, args.duration, _banner))
    except BindError as exc:
        _error(str(exc))
        log.log("stop", error=str(exc))
        return EXIT_USAGE
    finally:
        world.close()
        if server is not None:
            log.log(
                "stop", rtf=server.rtf_total, load=server.load_total,
                physics_skipped=world.physics_skipped,
            )  # fmt: skip
        log.close()
    print(
        f"stigmesh world: stopped; real-time factor {_fmt(server.rtf_total)}, "
        f"busy {_fmt(server.load_total)}, physics skipped {world.physics_skipped:.3f} s",
        flush=True,
    )
    if log.error is not None:  # the cars ran on; their truth after this is not in the log
        _error(f"writing the log failed: {log.error} ({log.dropped} events not kept)")
        return EXIT_FAILED
    return EXIT_OK


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stigmesh world", description=__doc__)
    add_arguments(parser)
    return main(parser.parse_args(argv))
