"""``stigmesh run [--lockstep] SCENARIO.toml``: a scenario, its fault schedule, a report.

Real mode starts the world and every agent as separate processes, applies the
schedule at its times (agents through their control sockets, the world through
its own; ``kill`` is SIGKILL, ``restart`` a new process), shows a progress bar,
stops everything at the end or on Ctrl-C; ``--view`` serves the live Foxglove view beside
it and prints its URL (as ``demo --view``). ``--lockstep`` runs the same world and
the same agent cores in this one process in virtual time, deterministic for a
seed. Both write the same run directory (with ``scenario.toml`` and
``schedule.json`` beside the logs), then the replay report, then the summary.

Exit status: 0 done, 1 a process failed, 2 a refused scenario or option, 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.runlog import process_logs
from tools.commands.view import add_view_options
from tools.experiments.progress import AgentLine, Progress
from tools.experiments.scenario import Scenario
from tools.experiments.schedule import TimedOp

if TYPE_CHECKING:  # keep ``stigmesh --help`` light: the runners import numpy and PyBullet
    from tools.experiments.lockstep import Lockstep

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
PROG = "stigmesh run"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("scenario", metavar="SCENARIO.toml",
                   help="scenario file (tools/SCENARIO.md), or a shipped name (default, ...)")
    p.add_argument("--lockstep", action="store_true",
                   help="one process, virtual time, deterministic (default: real processes)")
    p.add_argument("--run-dir", type=Path, default=None,
                   help="where the logs go (default runs/NAME-MODE-DATE-TIME); must hold no log")
    p.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    p.add_argument("--port", type=int, default=None,
                   help="real mode: the swarm's broadcast port (default: 47000, or a free one "
                   "near it when another run holds it)")
    p.add_argument("--oracle-looks", action="store_true",
                   help="lockstep only: no LOOK sent; every robot's look goes at once to "
                   "every other robot's search map (the search's oracle baseline)")
    p.add_argument("--no-report", action="store_true", help="skip the replay report")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_view_options(p)


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return code


# ---------------------------------------------------------------- the run directory


def default_run_dir(scenario: Scenario, lockstep: bool) -> Path:
    mode = "lockstep" if lockstep else "real"
    return Path("runs") / f"{scenario.name}-{mode}-{time.strftime('%Y%m%d-%H%M%S')}"


def prepare_run_dir(run_dir: Path, scenario: Scenario) -> str | None:
    """Create it and copy the scenario in; an error message if it already holds a run."""
    if run_dir.exists() and process_logs(run_dir):
        return f"{run_dir} already holds a run (process logs); give another --run-dir"
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "scenario.toml").write_text(scenario.text, encoding="utf-8")
    except OSError as exc:
        return f"cannot write {run_dir}: {exc.strerror or exc}"
    return None


def write_schedule(run_dir: Path, scenario: Scenario, mode: str, applied: list[dict[str, Any]],
                   ops: Sequence[TimedOp]) -> None:
    from tools.experiments.scenario import mapping_of
    from tools.experiments.schedule import describe

    record = {"mode": mode, "scenario": mapping_of(scenario), "planned": describe(ops),
              "applied": applied}
    (run_dir / "schedule.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def finish(run_dir: Path, names: Sequence[str], report: bool) -> None:
    """The replay report (figures, metrics.json), then the summary table."""
    from tools.summary import summarize

    if report:
        from tools.commands import replay as replay_main

        parser = argparse.ArgumentParser()  # the replay command's own defaults
        replay_main.add_arguments(parser)
        replay_main.main(parser.parse_args(["--", str(run_dir)]))
    print(summarize(run_dir, list(names)).table(), flush=True)


# ---------------------------------------------------------------- lockstep


def _lockstep_lines(ls: Lockstep) -> list[AgentLine]:
    out = []
    for name, agent in ls.agents.items():
        decision = agent.node.decision
        peers = sum(1 for p in agent.core.peers.values() if not p.lost)
        span = max(ls.t - agent.started, 1e-9)
        out.append(AgentLine(
            name, agent.alive, decision.mode.value if decision is not None else "-",
            ls.target_error(name), peers, agent.node.bytes_out / span / 1000,
        ))  # fmt: skip
    return out


def run_lockstep(scenario: Scenario, run_dir: Path, progress: Progress) -> list[dict[str, Any]]:
    from tools.experiments.lockstep import run_scenario

    def show(elapsed: float, ls: Lockstep) -> None:
        progress.show(elapsed, _lockstep_lines(ls))

    def said(op: TimedOp, elapsed: float) -> None:
        progress.say(f"t={elapsed:6.2f} s  line {op.line}: {op.op.describe()}")

    return run_scenario(scenario, run_dir, progress=show, every=1.0, on_op=said)


# ---------------------------------------------------------------- the command


def _real_mode_problem(scenario: Scenario) -> str | None:
    if scenario.car_link is not None:
        return (f"{scenario.source}: car_link can only be applied in --lockstep (a real run's "
                "car links are the network's own)")
    for a in scenario.agents:
        if a.sets:
            keys = ", ".join(k for k, _ in a.sets)
            return (f"{scenario.source}:{a.line}: agent {a.name}: settings ({keys}) can only be "
                    "applied in --lockstep (the agent command takes --fusion and "
                    "--no-reputation only)")
    return None


def main(args: argparse.Namespace) -> int:
    from tools.experiments.scenario import ScenarioError
    from tools.experiments.scenario_file import find_scenario, load_scenario
    from tools.experiments.schedule import Kill, timeline
    from tools.swarmkey import KeyFileError

    try:
        scenario = load_scenario(find_scenario(args.scenario))
        if args.seed is not None:
            scenario = scenario.with_seed(args.seed)
    except ScenarioError as exc:
        return _fail(str(exc))
    except ValueError as exc:
        return _fail(f"--seed: {exc}")
    if args.oracle_looks:
        if not args.lockstep:
            return _fail("--oracle-looks needs --lockstep: only one process can hand every "
                         "robot's look to the others at once")
        scenario = scenario.with_oracle_looks()
    if not args.lockstep:
        problem = _real_mode_problem(scenario)
        if problem is not None:
            return _fail(problem)
        if args.port is not None and not 1024 <= args.port <= 65535:
            return _fail("--port must be in 1024..65535")
    elif args.view:
        return _fail("--view needs real mode: a lockstep run has no network to watch "
                     "(open its MCAP logs in Foxglove afterwards)")
    run_dir: Path = args.run_dir or default_run_dir(scenario, args.lockstep)
    problem = prepare_run_dir(run_dir, scenario)
    if problem is not None:
        return _fail(problem)
    scenario = scenario.materialise(run_dir)  # a hidden target's arena: RUN_DIR/arena.toml
    mode = "lockstep" if args.lockstep else "real"
    ops = timeline(scenario)
    place = scenario.target_place
    hidden = f", target hidden at ({place[0]:g}, {place[1]:g})" if place is not None else ""
    print(f"{PROG}: {scenario.name} ({mode}): {', '.join(scenario.names)} in "
          f"{scenario.arena.name}, {scenario.duration:g} s, seed {scenario.seed}{hidden}, "
          f"{len(ops)} scheduled step(s); logs in {run_dir}", flush=True)
    progress = Progress(scenario.duration, args.quiet, every=10.0 if args.lockstep else 5.0)
    interrupted = False
    codes: dict[str, int] = {}
    applied: list[dict[str, Any]] = []
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    began = time.perf_counter()
    try:
        if args.lockstep:
            applied = run_lockstep(scenario, run_dir, progress)
        else:
            from tools.experiments.realrun import run_real

            applied, codes = run_real(scenario, run_dir, args.port, progress,
                                      args.view_port if args.view else None)
    except (RuntimeError, KeyFileError) as exc:  # no free block or port; an unusable key
        signal.signal(signal.SIGINT, previous)
        return _fail(str(exc))
    except KeyboardInterrupt:
        interrupted = True
        progress.done()
        print(f"\n{PROG}: interrupted: every process stopped", flush=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    progress.done()
    print(f"{PROG}: ran {scenario.duration:g} s of scenario in "
          f"{time.perf_counter() - began:.1f} s", flush=True)
    with contextlib.suppress(OSError):
        write_schedule(run_dir, scenario, mode, applied, ops)
    if not process_logs(run_dir):
        return _fail("no log was written", EXIT_FAILED)
    finish(run_dir, scenario.names, report=not args.no_report and not interrupted)
    killed = {o.op.agent for o in ops if isinstance(o.op, Kill)}
    failed = {n: c for n, c in codes.items()
              if c not in (0, -signal.SIGTERM) and not (n in killed and c == -signal.SIGKILL)}
    if failed:
        for name, code in failed.items():
            print(f"{PROG}: {name} exited with status {code}; see {run_dir / (name + '.out')}",
                  file=sys.stderr)
        return EXIT_FAILED
    return EXIT_INTERRUPTED if interrupted else EXIT_OK
