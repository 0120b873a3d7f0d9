"""``stigmesh bench SUITE``: run a benchmark suite and print what it measured.

Each suite is a module with ``run(quick: bool) -> list[dict]``; every dict is
one case with at least ``case`` and the measured figures. Timings carry a
``ratio`` against a floor measured in the same run, because shared machines
are noisy.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
from typing import Any

SUITES = {
    "belief": "tools.bench.belief",
    "carlink": "tools.bench.carlink",
    "world": "tools.bench.world",
    "swarm": "tools.bench.swarm",
    "perception": "tools.bench.perception",
    "lockstep": "tools.bench.lockstep",
    "replay": "tools.bench.replay",
    "soak": "tools.bench.soak",
}


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def run_bench(suite: str, as_json: bool, quick: bool) -> int:
    names = list(SUITES) if suite == "all" else [suite]
    failed = 0
    for name in names:
        try:
            module = importlib.import_module(SUITES[name])
        except ModuleNotFoundError as exc:
            if exc.name != SUITES[name]:
                raise
            print(f"# bench {name}: not built yet, skipped", file=sys.stderr)
            continue
        print(f"# bench {name} on {platform.node()} ({platform.machine()})", file=sys.stderr)
        cases: list[dict[str, Any]] = module.run(quick)
        for measured in cases:
            case = {"suite": name, **measured}
            if as_json:
                print(json.dumps(case), flush=True)
            else:
                print("  ".join(f"{k}={_fmt(v)}" for k, v in case.items()), flush=True)
            if case.get("meets_target") is False:
                failed += 1
    if failed:
        print(f"# {failed} case(s) missed their target", file=sys.stderr)
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("suite", choices=[*SUITES, "all"], help="which benchmark suite")
    p.add_argument("--json", action="store_true", help="one JSON object per case")
    p.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke test)")


def main(args: argparse.Namespace) -> int:
    return run_bench(args.suite, as_json=args.json, quick=args.quick)
