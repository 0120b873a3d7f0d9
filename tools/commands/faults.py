"""``stigmesh faults`` and ``stigmesh status``: change and inspect a running swarm.

    stigmesh faults AGENT set drop=0.3 burst=0.05,0.5 delay=50ms jitter=10ms [--dir in|out|both]
    stigmesh faults AGENT byzantine bias=2,0 noise=0.3 replay=5s overconfident=10
    stigmesh faults AGENT clear | status
    stigmesh faults AGENT ... --at HOST:PORT --swarm-key K     (an agent on another host)
    stigmesh faults world drop-link CAR SECONDS | reboot CAR | freeze-camera CAR SECONDS
        (CAR: an id or a name; set, byzantine and clear print what changed, --json all)
    stigmesh status [--run-dir D]
    stigmesh status --swarm NAME --swarm-key K --iface IF [--port P] [--at HOST:PORT ...]

Agents are reached through their control sockets in the run directory, which
only the swarm key opens, or over TCP where an agent was started with
``--control-listen`` (the same challenge-response); the world through its own
control socket, which its control key ``RUN_DIR/world.key`` opens. With
``--swarm``, status joins the swarm read-only on the interface and lists every
agent it hears, on any host.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from agents.drivers.control import ControlError, control_path, request
from agents.drivers.net import InterfaceError, resolve_interface
from agents.faults import FaultSpecError, parse_byzantine, parse_faults
from protocol.control import Target, parse_address
from protocol.swarm.messages import DEFAULT_SWARM_PORT
from tools.listen import SwarmListener, listen, status_table
from tools.swarmkey import KeyFileError, read_key


def _newest_run() -> Path | None:
    runs = [p for p in Path("runs").glob("*") if p.is_dir() and any(p.glob("*.sock"))]
    return max(runs, key=lambda p: p.stat().st_mtime) if runs else None


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--run-dir", type=Path, default=None,
                   help="the run directory (default: the newest live one under runs/)")
    p.add_argument("--swarm-key", type=Path, default=None,
                   help="swarm key file (default: RUN_DIR/swarm.key)")


def add_faults_arguments(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("target", metavar="AGENT", help="an agent's name, or 'world'")
    p.add_argument("action", help="set, byzantine, clear, status; for the world: drop-link, "
                   "reboot, freeze-camera")
    p.add_argument("tokens", nargs="*", help="fault tokens (see agents/faults) or arguments")
    p.add_argument("--dir", choices=("in", "out", "both"), default="both",
                   help="which way network faults apply (default both)")
    p.add_argument("--json", action="store_true",
                   help="print the agent's whole reply (counters too), not what changed")
    p.add_argument("--at", type=_address, default=None, metavar="HOST:PORT",
                   help="reach the agent over TCP (its --control-listen) instead of a socket "
                   "in the run directory; needs --swarm-key")


def add_status_arguments(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--json", action="store_true", help="print the raw status objects")
    p.add_argument("--swarm", default=None,
                   help="join this swarm read-only and list every agent heard (any host)")
    p.add_argument("--iface", default="lo", help="interface to listen on (default lo)")
    p.add_argument("--port", type=int, default=DEFAULT_SWARM_PORT,
                   help=f"the swarm's UDP port (default {DEFAULT_SWARM_PORT})")
    p.add_argument("--seconds", type=float, default=3.0,
                   help="how long to listen (default 3; agents send a HEARTBEAT a second)")
    p.add_argument("--at", type=_address, action="append", default=[], metavar="HOST:PORT",
                   help="also ask the agent listening there for control (repeatable)")


def _address(text: str) -> tuple[str, int]:
    try:
        return parse_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _fail(message: str, code: int = 2) -> int:
    print(f"stigmesh: {message}", file=sys.stderr)
    return code


def _resolve(args: argparse.Namespace) -> tuple[Path, bytes] | str:
    run_dir = args.run_dir or _newest_run()
    if run_dir is None:
        return "no live run found under runs/; give --run-dir"
    try:
        key = read_key(args.swarm_key or run_dir / "swarm.key")
    except KeyFileError as exc:
        return str(exc)
    return run_dir, key


def _car(token: str) -> int | str:
    """A car by id or by name (as scenario files name it); the world resolves the name."""
    return int(token) if token.isdigit() else token


def _world(run_dir: Path, action: str, tokens: list[str]) -> int:
    from worlds.control import WorldControl

    usage = ("world faults: drop-link CAR SECONDS | reboot CAR [DOWN_S] | "
             "freeze-camera CAR SECONDS | status (CAR: an id or a name)")
    world = WorldControl(run_dir)  # its key: RUN_DIR/world.key, read at the request
    try:
        if action == "drop-link" and len(tokens) == 2:
            reply = world.drop_link(_car(tokens[0]), float(tokens[1]))
        elif action == "reboot" and len(tokens) in (1, 2):
            reply = world.reboot(_car(tokens[0]), float(tokens[1]) if len(tokens) == 2 else 0.0)
        elif action == "freeze-camera" and len(tokens) == 2:
            reply = world.freeze_camera(_car(tokens[0]), float(tokens[1]))
        elif action == "status" and not tokens:
            reply = world.status()
        else:
            return _fail(usage)
    except ValueError:  # SECONDS not a number
        return _fail(usage)
    except ControlError as exc:
        return _fail(f"world: {exc}", 1)
    print(json.dumps(reply, indent=2))
    return 0


def _faults_text(mapping: object) -> str:
    from agents.faults import LinkFaults, format_faults

    if not isinstance(mapping, dict):
        return "?"
    try:
        return format_faults(LinkFaults.from_mapping(mapping)) or "none"
    except (FaultSpecError, ValueError, TypeError):
        return json.dumps(mapping)


def changes(agent: str, before: dict[str, Any] | None, after: dict[str, Any]) -> list[str]:
    """What a set, byzantine or clear changed, one line per direction or behaviour."""
    from agents.faults import ByzantineSpec, format_byzantine

    lines = []
    if "faults" in after:
        old = (before or {}).get("faults") or {}
        for way in ("in", "out"):
            was, now = _faults_text(old.get(way, {})), _faults_text(after["faults"].get(way))
            lines.append(f"{agent}: faults {way}: {now}" + ("" if before is None else
                         " (unchanged)" if was == now else f" (was {was})"))
    if "byzantine" in after or (before or {}).get("byzantine") is not None:
        spec = after.get("byzantine")
        text = format_byzantine(ByzantineSpec.from_mapping(spec)) if isinstance(spec, dict) \
            else "honest"
        lines.append(f"{agent}: byzantine: {text or 'honest'}")
    return lines


def faults_main(args: argparse.Namespace) -> int:
    if args.target == "world":  # the world has its own key: no swarm key needed
        run_dir = args.run_dir or _newest_run()
        if run_dir is None:
            return _fail("no live run found under runs/; give --run-dir")
        return _world(run_dir, args.action, args.tokens)
    target: Target
    if args.at is not None:
        if args.swarm_key is None:
            return _fail("--at needs --swarm-key (the swarm's key opens an agent's control)")
        try:
            key = read_key(args.swarm_key)
        except KeyFileError as exc:
            return _fail(str(exc))
        target = args.at
    else:
        where = _resolve(args)
        if isinstance(where, str):
            return _fail(where)
        run_dir, key = where
        target = control_path(run_dir, args.target)
    text = " ".join(args.tokens)
    try:
        if args.action == "set":
            parse_faults(text)  # a clear error before anything is sent
            req: dict[str, Any] = {"cmd": "set", "faults": text, "direction": args.dir}
        elif args.action == "byzantine":
            parse_byzantine(text)
            req = {"cmd": "byzantine", "spec": text}
        elif args.action in ("clear", "status") and not args.tokens:
            req = {"cmd": args.action}
        else:
            return _fail(f"unknown action {args.action!r}: set, byzantine, clear or status")
        before = None
        if not args.json and args.action != "status":  # to say what changed
            before = request(target, key, {"cmd": "status"})
        reply = request(target, key, req)
        if args.at is not None and reply.get("agent") not in (None, args.target):
            return _fail(f"{args.at[0]}:{args.at[1]} is {reply.get('agent')}, not {args.target}")
    except FaultSpecError as exc:
        return _fail(str(exc))
    except ControlError as exc:
        return _fail(f"{args.target}: {exc}", 1)
    reply.pop("ok", None)
    if args.json or args.action == "status":
        print(json.dumps(reply, indent=2))
    else:
        print("\n".join(changes(args.target, before, reply)))
    return 0


def _line(status: dict[str, Any]) -> str:
    peers = ", ".join(
        f"{name}{' (lost)' if p['lost'] else ''} score {p['score']:.2f}"
        f"{'' if p['fused'] else ' NOT FUSED'}"
        for name, p in status["peers"].items()
    ) or "none"
    track = status.get("track")
    track_text = "no track" if not track else (
        f"track ({track['x'][0]:.2f}, {track['x'][1]:.2f}) ±{track['uncertainty']:.3f}"
    )
    rejected = ", ".join(f"{k} {v}" for k, v in status["rejected"].items()) or "none"
    active = [d for d in ("in", "out") if status["faults"][d]]
    return (
        f"{status['agent']} (epoch {status['epoch']:08x}): {track_text}; "
        f"car {status['car']['state'] if status['car'] else '-'}\n"
        f"  peers: {peers}\n"
        f"  datagrams in {status['datagrams']['in']} out {status['datagrams']['out']}; "
        f"rejected: {rejected}; faults: {', '.join(active) or 'none'}"
        + (f"; byzantine {status['byzantine']}" if status.get("byzantine") else "")
    )


def status_main(args: argparse.Namespace) -> int:
    if args.swarm is not None:
        return _swarm_status(args)
    where = _resolve(args)
    if isinstance(where, str):
        return _fail(where)
    run_dir, key = where
    sockets = sorted(p for p in run_dir.glob("*.sock") if p.name != "world.sock")
    if not sockets:
        return _fail(f"no running agent in {run_dir}", 1)
    return _ask(list(sockets), key, args.json)


def _ask(targets: list[Target], key: bytes, as_json: bool) -> int:
    failed = 0
    for target in targets:
        name = target.stem if isinstance(target, Path) else f"{target[0]}:{target[1]}"
        try:
            status = request(target, key, {"cmd": "status"})
        except ControlError as exc:
            print(f"{name}: {exc}")
            failed += 1
            continue
        status.pop("ok", None)
        print(json.dumps(status) if as_json else _line(status))
    return 1 if failed else 0


def _swarm_status(args: argparse.Namespace) -> int:
    """Every agent heard on the swarm, then what the asked control sockets add."""
    if args.swarm_key is None and args.run_dir is None:
        return _fail("--swarm needs --swarm-key (the swarm's key authenticates what it hears)")
    try:
        key = read_key(args.swarm_key or args.run_dir / "swarm.key")
        iface = resolve_interface(args.iface)
    except (KeyFileError, InterfaceError) as exc:
        return _fail(str(exc))
    listener = SwarmListener(key, args.swarm)
    try:
        listen(listener, iface, args.port, args.seconds)
    except OSError as exc:
        return _fail(f"cannot listen on {iface.broadcast}:{args.port}: {exc.strerror or exc}")
    rows = listener.summaries(time.monotonic())
    if args.json:
        for row in rows:
            print(json.dumps(row))
    elif rows:
        print(status_table(rows))
    else:
        print(f"no agent heard on swarm {args.swarm!r} at {iface.broadcast}:{args.port} "
              f"in {args.seconds:g} s")
    rejected = listener.rejected
    if rejected and not args.json:
        print("rejected while listening: " + ", ".join(f"{k} {v}" for k, v in rejected.items())
              + (" (another swarm, or a wrong key?)" if "bad_mac" in rejected else ""))
    targets: list[Target] = list(args.at)
    if args.run_dir is not None:
        targets += sorted(p for p in args.run_dir.glob("*.sock") if p.name != "world.sock")
    code = _ask(targets, key, args.json) if targets else 0
    return code if rows else 1
