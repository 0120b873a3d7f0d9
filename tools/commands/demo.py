"""``stigmesh demo``: a world, N agents as separate processes, a live view, a summary.

Each agent is its own process with private memory; they find each other by
mDNS on the loopback interface and share beliefs only through authenticated
UDP datagrams. The live view and the summary read only the log files.
"""

from __future__ import annotations

import argparse
import math
import secrets
import signal
import sys
import time
from pathlib import Path

from protocol.runlog import log_path
from tools.commands.view import add_view_options, start_view
from tools.live import AgentView, LogFollower, Truth, absorb
from tools.procs import Swarm, claim_loopback, running
from tools.swarmkey import write_key
from worlds.arena import ArenaError, load_arena, shipped_arena

DEFAULT_NAMES = ("walnut", "hazel")
# Each agent counts its --duration from its own start, and on a busy machine an agent took
# 5-13 s to start: the demo waits for the agents to end by themselves, this long at most
# beyond --duration, and the world (a backstop lifetime) outlives them.
START_ALLOWANCE = 60.0
STOP_GRACE = 15.0  # a loaded world writing its last log chunk took more than 5 s to stop


def _line(view: AgentView, truth: Truth) -> str:
    pose = "no pose      " if not view.pose else f"({view.pose[0]:4.1f},{view.pose[1]:4.1f})  "
    err = "   -  "
    track = "no track         "
    if view.track is not None:
        x = view.track["x"]
        track = f"({x[0]:4.1f},{x[1]:4.1f}) ±{view.track['uncertainty']:.2f}"
        where = truth.at(float(view.track["t"]))
        if where is not None:
            err = f"{math.hypot(x[0] - where[0], x[1] - where[1]):5.2f}m"
    alive = [n for n, p in sorted(view.peers.items()) if not p.get("lost")]
    elapsed = (view.last_t or 0.0) - (view.started or 0.0)
    rate = lambda n: n / max(elapsed, 1e-9) / 1000  # noqa: E731
    return (
        f"  {view.name:8s} {view.mode:8s} pose {pose}track {track} err {err} "
        f"peers {','.join(alive) or '-':14s} out {rate(view.tx_bytes):4.1f} KB/s "
        f"in {rate(view.rx_bytes):4.1f} KB/s rejected {view.rejected}"
    )


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--agents", type=int, default=2, help="how many agents (default 2)")
    p.add_argument("--duration", type=float, default=60.0, help="seconds (default 60)")
    p.add_argument("--arena", type=Path, default=None,
                   help="arena file (default: the shipped two-car room)")
    p.add_argument("--run-dir", type=Path, default=None,
                   help="where the logs go (default runs/demo-DATE-TIME)")
    p.add_argument("--sensing", choices=("synthetic", "camera"), default=None,
                   help="override the arena's sensor mode")
    p.add_argument("--quiet", action="store_true", help="no live view, only the summary")
    p.add_argument("--port", type=int, default=None,
                   help="the swarm's UDP port (default 47000, or a free one near it)")
    add_view_options(p)


def _names(arena_cars: list[str], n: int) -> list[str]:
    preferred = [name for name in DEFAULT_NAMES if name in arena_cars]
    rest = [name for name in arena_cars if name not in preferred]
    return (preferred + rest)[:n]


def main(args: argparse.Namespace) -> int:
    arena_path: Path = args.arena or shipped_arena("two_cars")
    try:
        arena = load_arena(arena_path)
    except ArenaError as exc:
        print(f"stigmesh demo: {exc}", file=sys.stderr)
        return 2
    names = _names([c.name for c in arena.cars], args.agents)
    if args.agents < 1 or len(names) < args.agents:
        print(f"stigmesh demo: arena {arena.name} has {len(arena.cars)} cars; "
              f"--agents must be 1..{len(arena.cars)}", file=sys.stderr)
        return 2
    if not args.duration > 0:
        print("stigmesh demo: --duration must be positive", file=sys.stderr)
        return 2
    if args.port is not None and not 1 <= args.port <= 65535:
        print(f"stigmesh demo: --port must be 1..65535, got {args.port}", file=sys.stderr)
        return 2
    run_dir: Path = args.run_dir or Path("runs") / time.strftime("demo-%Y%m%d-%H%M%S")
    key_file = run_dir / "swarm.key"
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        if not key_file.exists():
            write_key(key_file)
    except OSError as exc:
        print(f"stigmesh demo: --run-dir {run_dir}: cannot write there "
              f"({exc.filename or run_dir}: {exc.strerror or exc})", file=sys.stderr)
        return 2
    swarm = Swarm(arena_path, arena, run_dir, key_file)
    try:
        port = claim_loopback(swarm, args.port)  # another demo on this host keeps its own
    except RuntimeError as exc:
        print(f"stigmesh demo: {exc}", file=sys.stderr)
        return 2
    cars = ", ".join(f"{n} {swarm.arena.car(n).address}" for n in names)
    swarm_name = f"demo-{secrets.token_hex(3)}"  # its own mDNS names beside any other demo
    print(f"stigmesh demo: {len(names)} agents in {arena.name} (cars: {cars}; swarm "
          f"{swarm_name} on port {port}), {args.duration:g} s; logs in {run_dir}", flush=True)
    extra_world = ["--sensing", args.sensing] if args.sensing else []
    extra_agent = ["--port", str(port), "--swarm", swarm_name, "--quiet"]
    if args.sensing == "camera":
        extra_agent += ["--sensing", "camera"]
    interrupted = False
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with running(swarm, grace=STOP_GRACE):
            swarm.start_world(args.duration + START_ALLOWANCE + 15.0, extra_world)
            for name in names:
                swarm.start_agent(name, args.duration, extra_agent)
            if args.view:
                start_view(swarm, swarm_name, port, args.view_port,
                           args.duration + START_ALLOWANCE + 10.0)
            views = [AgentView(n, LogFollower(log_path(run_dir, n))) for n in names]
            truth = Truth(log_path(run_dir, "world"))
            end = time.monotonic() + args.duration + START_ALLOWANCE
            next_print = time.monotonic() + 2.0
            try:
                while time.monotonic() < end:
                    if not any(swarm.procs[n].alive() for n in names):
                        break
                    time.sleep(0.25)
                    truth.update()
                    for view in views:
                        absorb(view)
                    if not args.quiet and time.monotonic() >= next_print:
                        next_print += 2.0
                        elapsed = max((v.last_t or 0) - (v.started or 0) for v in views)
                        print(f"t={elapsed:5.1f}s", flush=True)
                        for view in views:
                            print(_line(view, truth), flush=True)
            except KeyboardInterrupt:
                interrupted = True
                print("\ninterrupted: stopping every process", flush=True)
        failed = {n: p.popen.returncode for n, p in swarm.procs.items()
                  if p.popen.returncode not in (0, -signal.SIGTERM)}
    finally:
        signal.signal(signal.SIGINT, previous)
    print(summary_table(run_dir, names), flush=True)
    if failed:
        for name, code in failed.items():
            print(f"{name} exited with status {code}; last output:\n"
                  f"{swarm.procs[name].tail()}", file=sys.stderr)
        return 1
    return 130 if interrupted else 0


def summary_table(run_dir: Path, names: list[str]) -> str:
    from tools.summary import summarize

    return summarize(run_dir, names).table()


