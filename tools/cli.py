"""The ``stigmesh`` command line: one entry point, a subcommand per job.

Every subcommand lives in a module exposing ``add_arguments(parser)`` and
``main(args) -> int`` (the exit status); this table is the only place that
names them. Only the named command's module is imported: ``stigmesh car ADDR
estop`` must not wait for the replay's statistics or the tag sheet's PDF code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    name: str
    module: str
    help: str
    add: str = "add_arguments"
    run: str = "main"


COMMANDS = (
    Command("demo", "tools.commands.demo",
            "the main job: a world, N agents as separate processes, a live view, a summary"),
    Command("world", "worlds.main",
            "the simulated world: every car behind its own loopback address"),
    Command("agent", "tools.commands.agent", "one robot's agent (its own process, its own car)"),
    Command("car", "tools.commands.car",
            "bring-up and bench tools for one car (status, probe, stop, estop, drive, teleop)"),
    Command("tags", "tools.commands.tags",
            "a PDF of every tag of a site at its physical size, with ids and cut marks"),
    Command("run", "tools.commands.run",
            "run a scenario: real processes, or --lockstep in virtual time"),
    Command("sweep", "tools.commands.sweep",
            "lockstep runs over faults x seeds x fusion rules, in parallel: one table"),
    Command("replay", "tools.commands.replay",
            "measure how beliefs converged in a run; re-run agents with other settings"),
    Command("log", "tools.commands.log",
            "a run's logs as JSON lines (cat, export --jsonl) or as one MCAP file"),
    Command("view", "tools.commands.view",
            "the swarm live in Foxglove, read-only (it never sends on the swarm)"),
    Command("faults", "tools.commands.faults",
            "inject or clear faults on a running agent (or the world's cars)",
            add="add_faults_arguments", run="faults_main"),
    Command("status", "tools.commands.faults", "running agents: peers, reputation, counters",
            add="add_status_arguments", run="status_main"),
    Command("calibrate", "tools.commands.calibrate",
            "camera intrinsics from checkerboard views (a car's stream or a folder)"),
    Command("keygen", "tools.commands.keygen", "write a new random swarm key file"),
    Command("bench", "tools.commands.bench", "run a benchmark and print what it measured"),
)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv`` (default ``sys.argv[1:]``): every command is listed with its
    help, but only the command ``argv`` names is imported and given its arguments."""
    chosen = _command_named(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="stigmesh",
        description="Decentralized robot swarm: agents, world server, car tools, replay, "
        "benchmarks. `stigmesh COMMAND --help` for each.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        if command is not chosen:
            sub.add_parser(command.name, help=command.help)
            continue
        module = importlib.import_module(command.module)
        p = sub.add_parser(
            command.name,
            help=command.help,
            description=module.__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        getattr(module, command.add)(p)
    return parser


def _command_named(argv: Sequence[str]) -> Command | None:
    """The command ``argv`` runs: its first word that is not an option (the top level has
    no option that takes a value), if that is a command's name."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return next((c for c in COMMANDS if c.name == word), None)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser(argv).parse_args(argv)
    command = next(c for c in COMMANDS if c.name == args.command)
    try:
        status: int = getattr(importlib.import_module(command.module), command.run)(args)
        sys.stdout.flush()  # here, so that a closed pipe is seen here and not at exit
    except BrokenPipeError:  # `stigmesh ... | head` closed the pipe: that is not an error
        quiet_stdout()
        return 0
    return status


def quiet_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit does not fail again."""
    import os

    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
