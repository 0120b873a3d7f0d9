"""``stigmesh agent``: one robot's agent process, configured by a robot file and flags.

Every setting of protocol/ROBOT.md is a key of the robot file (``--config``)
and a flag; a flag given wins over the file, the file over the default.
``--print-config`` shows the effective settings as a robot file and exits.
The agent reads its site file and nothing of the simulator.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.drivers.net import InterfaceError, resolve_interface
from agents.drivers.runtime import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    AgentRuntime,
    RuntimeOptions,
    StartupError,
)
from protocol.control import parse_address
from protocol.robotfile import KEYS, Key, merge, missing, read_robot, to_toml
from protocol.runlog import log_path
from protocol.site import load_site, site_to_toml
from protocol.swarm.fields import check_name
from protocol.tomlfile import FileError
from tools.agent_config import ConfigError, config_from_site, mount_of
from tools.swarmkey import KeyFileError, read_key


def _agent_name(text: str) -> str:
    try:
        return check_name(text, "agent name")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[-1]) from None


def _peer(text: str) -> str:
    name, sep, where = text.partition("=")
    host, colon, port = where.rpartition(":")
    if not (sep and colon and name and host and port.isdigit()):
        raise argparse.ArgumentTypeError(f"expected NAME=ADDRESS:PORT, got {text!r}")
    return text


def parse_peer(text: str) -> tuple[str, tuple[str, int]]:
    name, _, where = text.partition("=")
    host, _, port = where.rpartition(":")
    return name, (host, int(port))


def _flag(p: argparse.ArgumentParser, key: Key) -> None:
    kw: dict[str, Any] = {"dest": key.dest, "default": None}
    default = "" if key.default is None else f" (default {key.default})"
    if key.kind is bool:
        p.add_argument(key.flag, action=argparse.BooleanOptionalAction,
                       help=key.help + default, **kw)
    elif key.kind is list:
        p.add_argument(key.flag.rstrip("s"), action="append", type=_peer, metavar="NAME=ADDR:PORT",
                       help=key.help + " (repeatable)", **kw)
    else:
        kind: Any = key.kind
        if key.name == "name":
            kind = _agent_name
        elif key.kind in (int, float):
            kind = _ranged(key)
        choices = key.choices or None
        p.add_argument(key.flag, type=kind, choices=choices, help=key.help + default, **kw)


def _ranged(key: Key) -> Callable[[str], Any]:
    """A number flag held to its key's range, as the robot file's value is."""
    def convert(text: str) -> Any:
        try:
            value = key.kind(text)
        except ValueError:
            kind = "an integer" if key.kind is int else "a number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind}") from None
        if not (math.isfinite(value) and key.low <= value <= key.high):
            raise argparse.ArgumentTypeError(f"{text} is outside {key.low:g}..{key.high:g}")
        return value
    return convert


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, default=None,
                   help="robot file (protocol/ROBOT.md); flags given here win over it")
    p.add_argument("--print-config", action="store_true",
                   help="print the effective settings as a robot file and exit")
    for key in KEYS:
        _flag(p, key)


def _error(message: str) -> None:
    print(f"stigmesh agent: error: {message}", file=sys.stderr)


def settings_of(args: argparse.Namespace) -> dict[str, Any]:
    """The effective settings: flags, then the robot file, then the defaults."""
    file = read_robot(args.config) if args.config is not None else {}
    flags = {key.name: getattr(args, key.dest) for key in KEYS}
    return merge(file, flags)


def main(args: argparse.Namespace) -> int:
    try:
        s = settings_of(args)
    except FileError as exc:
        _error(str(exc))
        return EXIT_USAGE
    if args.print_config:
        sys.stdout.write(to_toml(s))
        return EXIT_OK
    unset = missing(s)
    if unset:
        _error(f"missing {', '.join(unset)} (or the same keys in --config ROBOT.toml)")
        return EXIT_USAGE
    try:
        check_name(s["name"], "agent name")
        key = read_key(s["swarm_key"])
        site = load_site(s["site"])
        config = config_from_site(site, s)
        iface = resolve_interface(s["iface"])
        car = socket.gethostbyname(s["car"])
        pipeline = _pipeline(site, s) if s["sensing"] == "camera" else None
        if s["control_listen"] is not None:
            parse_address(s["control_listen"])
    except (KeyFileError, FileError, InterfaceError, ConfigError, ValueError) as exc:
        _error(str(exc))
        return EXIT_USAGE
    except OSError as exc:
        _error(f"cannot resolve the car address {s['car']!r}: {exc}")
        return EXIT_USAGE
    options = RuntimeOptions(
        config=config, car=car, iface=iface, key=key, swarm=s["swarm"], run_dir=s["run_dir"],
        swarm_port=s["port"], static_peers=tuple(parse_peer(p) for p in s["peers"]),
        mdns=s["mdns"], duration=s["duration"], car_timeout=s["car_timeout"],
        pipeline=pipeline, car_id=s["car_id"], status_every=None if s["quiet"] else
        s["status_every"], control_listen=s["control_listen"],
        recorded={"site_toml": site_to_toml(site), "settings": _plain(s)},
    )
    print(
        f"stigmesh agent {s['name']}: car {car}, site {site.name}, interface {iface.name} "
        f"({iface.address}, broadcast {iface.broadcast}:{s['port']}), "
        f"log {log_path(s['run_dir'], s['name'])}",
        flush=True,
    )
    try:
        runtime = AgentRuntime(options)
    except OSError as exc:  # its log and epoch file: a run directory it cannot write
        _error(f"--run-dir {s['run_dir']}: cannot write there "
               f"({exc.filename or s['run_dir']}: {exc.strerror or exc})")
        return EXIT_USAGE
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


def _plain(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings as JSON can log them (paths as text)."""
    return {k: str(v) if isinstance(v, Path) else v for k, v in settings.items()}


def _pipeline(site: Any, s: dict[str, Any]) -> Any:
    from agents.perception.pipeline import Pipeline
    from agents.perception.tagmap import load_intrinsics, map_from_site

    if s["intrinsics"] is None:
        raise ConfigError("camera sensing needs the camera's intrinsics: run `stigmesh "
                          "calibrate` and set intrinsics = FILE in the robot file")
    return Pipeline(map_from_site(site, load_intrinsics(s["intrinsics"]), mount_of(s)))
