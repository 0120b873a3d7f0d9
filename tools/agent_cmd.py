"""``stigmesh agent``: one robot's agent process."""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from dataclasses import replace
from pathlib import Path

from agents.belief import FusionRule
from agents.core import FUSION_NONE
from agents.net import InterfaceError, resolve_interface
from agents.runtime import (
    DEFAULT_SWARM_PORT,
    EXIT_FAILED,
    EXIT_USAGE,
    AgentRuntime,
    RuntimeOptions,
    StartupError,
)
from protocol.swarm.messages import check_name
from tools.agent_config import agent_config
from tools.swarmkey import KeyFileError, read_key
from worlds.arena import ArenaError, load_arena

FUSIONS = [*(r.value for r in FusionRule), FUSION_NONE]


def _peer(text: str) -> tuple[str, tuple[str, int]]:
    name, sep, where = text.partition("=")
    host, colon, port = where.rpartition(":")
    if not (sep and colon and name and host and port.isdigit()):
        raise argparse.ArgumentTypeError(f"expected NAME=ADDRESS:PORT, got {text!r}")
    return name, (host, int(port))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", required=True, type=_agent_name,
                   help="this agent's id, unique in the swarm (A-Z a-z 0-9 . _ -, 1..32)")
    p.add_argument("--car", required=True, help="the car's address (IPv4 or host name)")
    p.add_argument("--arena", type=Path, required=True, help="arena file: the map of tags/walls")
    p.add_argument("--iface", default="lo",
                   help="network interface or its IPv4 address; default lo (one machine)")
    p.add_argument("--swarm-key", type=Path, required=True, help="file with the swarm key (hex)")
    p.add_argument("--run-dir", type=Path, required=True, help="where NAME.jsonl goes")
    p.add_argument("--swarm", default="stigmesh", help="swarm name (default: stigmesh)")
    p.add_argument("--port", type=int, default=DEFAULT_SWARM_PORT,
                   help=f"swarm broadcast port (default {DEFAULT_SWARM_PORT})")
    p.add_argument("--peer", type=_peer, action="append", default=[], metavar="NAME=ADDR:PORT",
                   help="a static peer, where multicast does not work (repeatable)")
    p.add_argument("--no-mdns", action="store_true", help="do not use mDNS discovery")
    p.add_argument("--fusion", choices=FUSIONS, default=FusionRule.CI.value,
                   help="how peers' beliefs are fused (default ci)")
    p.add_argument("--no-reputation", action="store_true", help="fuse every peer unweighted")
    p.add_argument("--duration", type=float, default=None, help="stop after S seconds")
    p.add_argument("--car-timeout", type=float, default=5.0,
                   help="seconds to wait for the car's first telemetry (default 5)")
    p.add_argument("--sensing", choices=("synthetic", "camera"), default="synthetic",
                   help="synthetic: observations in simulated telemetry; camera: AprilTag "
                   "perception on the car's MJPEG stream (default synthetic)")
    p.add_argument("--tag-map", type=Path, default=None,
                   help="camera: a tag map / camera mount TOML (default: from the arena)")
    p.add_argument("--intrinsics", type=Path, default=None,
                   help="camera: intrinsics from `stigmesh calibrate` (default: the map's)")


def _agent_name(text: str) -> str:
    try:
        return check_name(text, "agent name")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[-1]) from None


def _error(message: str) -> None:
    print(f"stigmesh agent: error: {message}", file=sys.stderr)


def main(args: argparse.Namespace) -> int:
    try:
        key = read_key(args.swarm_key)
        arena = load_arena(args.arena)
        iface = resolve_interface(args.iface)
        car = socket.gethostbyname(args.car)
    except (KeyFileError, ArenaError, InterfaceError) as exc:
        _error(str(exc))
        return EXIT_USAGE
    except OSError as exc:
        _error(f"cannot resolve the car address {args.car!r}: {exc}")
        return EXIT_USAGE
    config = agent_config(
        arena, args.name, fusion=args.fusion, use_reputation=not args.no_reputation
    )
    pipeline = None
    if args.sensing == "camera":
        from agents.perception.pipeline import Pipeline
        from agents.perception.tagmap import (
            MapError,
            load_intrinsics,
            load_map,
            map_from_arena,
        )

        try:
            tag_map = load_map(args.tag_map) if args.tag_map else map_from_arena(arena)
            if args.intrinsics is not None:
                tag_map = replace(tag_map, camera=load_intrinsics(args.intrinsics))
        except (MapError, OSError) as exc:
            _error(f"camera map: {exc}")
            return EXIT_USAGE
        pipeline = Pipeline(tag_map)
    options = RuntimeOptions(
        config=config, car=car, iface=iface, key=key, swarm=args.swarm, run_dir=args.run_dir,
        swarm_port=args.port, static_peers=tuple(args.peer), mdns=not args.no_mdns,
        duration=args.duration, car_timeout=args.car_timeout, pipeline=pipeline,
    )
    print(
        f"stigmesh agent {args.name}: car {car}, interface {iface.name} ({iface.address}, "
        f"broadcast {iface.broadcast}:{args.port}), log {args.run_dir / (args.name + '.jsonl')}",
        flush=True,
    )
    runtime = AgentRuntime(options)
    try:
        code = asyncio.run(runtime.run())
    except StartupError as exc:
        _error(str(exc))
        return exc.exit_code
    except OSError as exc:
        _error(str(exc))
        return EXIT_FAILED
    if runtime.fatal is not None:
        _error(f"{runtime.fatal}; the car was stopped (log: {runtime.log.path})")
    return code
