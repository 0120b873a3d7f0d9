"""The ``stigmesh`` command line: one entry point, a subcommand per job."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stigmesh",
        description="Decentralized robot swarm: agents, world server, car tools, benchmarks.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

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
    if args.command == "bench":
        from tools.bench import run_bench

        return run_bench(args.suite, as_json=args.json, quick=args.quick)
    raise AssertionError(f"unhandled command {args.command}")  # argparse guards this


if __name__ == "__main__":
    sys.exit(main())
