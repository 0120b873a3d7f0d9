"""The ``stigmesh`` command line: one entry point, a subcommand per job."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stigmesh",
        description="Decentralized robot swarm: agents, world server, car tools, benchmarks.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    from worlds import main as world_main

    world = sub.add_parser(
        "world",
        help="run the simulated world: every car behind its own loopback address",
        description="PyBullet world server: the room, the cars (each on its own loopback "
        "address, ports 4210/4211/8080), the target and the ground-truth log.",
    )
    world_main.add_arguments(world)

    from tools import agent_cmd

    agent = sub.add_parser(
        "agent",
        help="run one robot's agent (its own process, its own car)",
        description="One agent: private belief, peers found by mDNS, beliefs shared over UDP "
        "broadcast, its own car driven over MZ01.",
    )
    agent_cmd.add_arguments(agent)

    from tools import car_cmd

    car = sub.add_parser(
        "car",
        help="bring-up and bench tools for one car (status, probe, stop, estop, drive)",
        description=car_cmd.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    car_cmd.add_arguments(car)

    from tools import demo

    demo_p = sub.add_parser(
        "demo",
        help="the main job: a world, N agents as separate processes, a live view, a summary",
        description=demo.__doc__,
    )
    demo.add_arguments(demo_p)

    from tools.replay import main as replay_main

    replay = sub.add_parser(
        "replay",
        help="measure how beliefs converged in a run, and re-run agents with other settings",
        description="Replay a run directory: errors against ground truth, uncertainty, "
        "agreement, NEES, coverage, traffic; a markdown report with figures.",
    )
    replay_main.add_arguments(replay)

    from tools import faults_cmd

    faults = sub.add_parser(
        "faults",
        help="inject or clear faults on a running agent (or the world's cars)",
        description=faults_cmd.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    faults_cmd.add_faults_arguments(faults)
    status = sub.add_parser("status", help="running agents: peers, reputation, counters")
    faults_cmd.add_status_arguments(status)

    keygen = sub.add_parser("keygen", help="write a new random swarm key file")
    keygen.add_argument("path", type=Path, help="where to write the key (hex, mode 0600)")

    bench = sub.add_parser("bench", help="run a benchmark and print what it measured")
    bench.add_argument(
        "suite",
        choices=["belief", "carlink", "world", "swarm", "perception", "all"],
        help="which benchmark suite",
    )
    bench.add_argument("--json", action="store_true", help="one JSON object per case")
    bench.add_argument("--quick", action="store_true", help="fewer repetitions (smoke test)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "world":
        from worlds import main as world_main

        return world_main.main(args)
    if args.command == "agent":
        from tools import agent_cmd

        return agent_cmd.main(args)
    if args.command == "car":
        from tools import car_cmd

        return car_cmd.main(args)
    if args.command == "demo":
        from tools import demo

        return demo.main(args)
    if args.command == "replay":
        from tools.replay import main as replay_main

        return replay_main.main(args)
    if args.command == "faults":
        from tools import faults_cmd

        return faults_cmd.faults_main(args)
    if args.command == "status":
        from tools import faults_cmd

        return faults_cmd.status_main(args)
    if args.command == "keygen":
        from tools.swarmkey import write_key

        try:
            write_key(args.path)
        except FileExistsError:
            print(f"stigmesh keygen: {args.path} exists; not overwritten", file=sys.stderr)
            return 2
        print(f"wrote a new swarm key to {args.path}")
        return 0
    if args.command == "bench":
        from tools.bench import run_bench

        return run_bench(args.suite, as_json=args.json, quick=args.quick)
    raise AssertionError(f"unhandled command {args.command}")  # argparse guards this


if __name__ == "__main__":
    sys.exit(main())
