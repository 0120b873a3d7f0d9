"""``stigmesh run [--lockstep] SCENARIO.toml``: a scenario, its fault schedule, a report.

Real mode starts the world and every agent as separate processes, applies the
schedule at its times (agents through their control sockets, the world through
its own; ``kill`` is SIGKILL, ``restart`` a new process), shows a progress bar,
stops everything at the end or on Ctrl-C. ``--lockstep`` runs the same world and
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # keep ``stigmesh --help`` light: the runners import numpy and PyBullet
    from tools.lockstep import Lockstep
    from tools.procs import Swarm
    from tools.swarmkey import KeyFileError
from tools.scenario import Scenario, TimedOp

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
PROG = "stigmesh run"
BAR = 24


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
    p.add_argument("--no-report", action="store_true", help="skip the replay report")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return code


# ---------------------------------------------------------------- progress


def bar(elapsed: float, duration: float, width: int = BAR) -> str:
    """``[#####.....]  12.0/60.0 s``."""
    done = min(1.0, max(0.0, elapsed / duration)) if duration > 0 else 1.0
    n = round(done * width)
    return f"[{'#' * n}{'.' * (width - n)}] {elapsed:5.1f}/{duration:.1f} s"


@dataclass(frozen=True)
class AgentLine:
    """What the progress line shows of one agent."""

    name: str
    alive: bool
    mode: str
    error: float | None  # track to target, m
    peers: int
    kbps: float

    def text(self) -> str:
        if not self.alive:
            return f"{self.name} DOWN"
        err = "-" if self.error is None else f"{self.error:.2f}m"
        return f"{self.name} {self.mode} err {err} peers {self.peers} {self.kbps:.1f}KB/s"


class Progress:
    """One status line, rewritten in place on a terminal, printed now and then otherwise."""

    def __init__(self, duration: float, quiet: bool, every: float) -> None:
        self.duration = duration
        self.quiet = quiet
        self.tty = sys.stdout.isatty()
        self.every = every  # seconds of run time between lines when not on a terminal
        self._next = 0.0
        self._width = 0

    def show(self, elapsed: float, agents: Sequence[AgentLine], note: str = "") -> None:
        if self.quiet:
            return
        line = f"{bar(elapsed, self.duration)} | " + " | ".join(a.text() for a in agents)
        if note:
            line += f" | {note}"
        if self.tty:
            pad = max(0, self._width - len(line))
            self._width = len(line)
            print("\r" + line + " " * pad, end="", flush=True)
        elif elapsed + 1e-9 >= self._next:
            self._next = elapsed + self.every
            print(line, flush=True)

    def say(self, message: str) -> None:
        """A line of its own (a schedule step), above the bar."""
        if self.quiet:
            return
        if self.tty and self._width:
            print("\r" + " " * self._width + "\r", end="")
            self._width = 0
        print(message, flush=True)

    def done(self) -> None:
        if not self.quiet and self.tty and self._width:
            print(flush=True)
            self._width = 0


# ---------------------------------------------------------------- the run directory


def default_run_dir(scenario: Scenario, lockstep: bool) -> Path:
    mode = "lockstep" if lockstep else "real"
    return Path("runs") / f"{scenario.name}-{mode}-{time.strftime('%Y%m%d-%H%M%S')}"


def prepare_run_dir(run_dir: Path, scenario: Scenario) -> str | None:
    """Create it and copy the scenario in; an error message if it already holds a run."""
    if run_dir.exists() and any(run_dir.glob("*.jsonl")):
        return f"{run_dir} already holds a run (*.jsonl); give another --run-dir"
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "scenario.toml").write_text(scenario.text, encoding="utf-8")
    except OSError as exc:
        return f"cannot write {run_dir}: {exc.strerror or exc}"
    return None


def write_schedule(run_dir: Path, scenario: Scenario, mode: str, applied: list[dict[str, Any]],
                   ops: Sequence[TimedOp]) -> None:
    from tools.scenario import describe, mapping_of

    record = {"mode": mode, "scenario": mapping_of(scenario), "planned": describe(ops),
              "applied": applied}
    (run_dir / "schedule.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def finish(run_dir: Path, names: Sequence[str], report: bool) -> None:
    """The replay report (figures, metrics.json), then the summary table."""
    from tools.summary import summarize

    if report:
        from tools.replay import main as replay_main

        ns = argparse.Namespace(
            run_dir=run_dir, out=None, fusion=None, sets=[], arena=None,
            coverage_var=replay_main.COVERAGE_VAR,
        )  # fmt: skip
        replay_main.main(ns)
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
    from tools.lockstep import run_scenario

    def show(elapsed: float, ls: Lockstep) -> None:
        progress.show(elapsed, _lockstep_lines(ls))

    def said(op: TimedOp, elapsed: float) -> None:
        progress.say(f"t={elapsed:6.2f} s  line {op.line}: {op.op.describe()}")

    return run_scenario(scenario, run_dir, progress=show, every=1.0, on_op=said)


# ---------------------------------------------------------------- real processes


class RealRun:
    """The world and the agents as processes; the schedule through their control sockets."""

    def __init__(self, scenario: Scenario, swarm: Swarm, key: bytes, port: int,
                 progress: Progress) -> None:
        self.scenario = scenario
        self.swarm = swarm
        self.key = key
        self.progress = progress
        self.swarm_name = f"run-{scenario.name}-{time.monotonic_ns() & 0xFFFFFFFF:08x}"
        self.port = port
        self.t_start = 0.0
        self.applied: list[dict[str, Any]] = []

    def agent_args(self, name: str) -> list[str]:
        setup = self.scenario.setup(name)
        args = ["--swarm", self.swarm_name, "--port", str(self.port), "--fusion", setup.fusion]
        return args + ([] if setup.use_reputation else ["--no-reputation"])

    def start(self) -> None:
        s = self.scenario
        self.swarm.start_world(s.duration + 15.0, ["--seed", str(s.seed)])
        for name in s.names:
            self.swarm.start_agent(name, s.duration + 5.0, self.agent_args(name))
        self.t_start = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.t_start

    def _control(self, name: str, request: dict[str, Any], patience: float = 15.0) -> None:
        from agents.drivers.control import ControlError, control_path
        from agents.drivers.control import request as send

        deadline = time.monotonic() + patience
        while True:
            try:
                send(control_path(self.swarm.run_dir, name), self.key, request)
                return
            except ControlError:
                proc = self.swarm.procs.get(name)
                if time.monotonic() > deadline or proc is None or not proc.alive():
                    raise
                time.sleep(0.1)  # the agent is still starting: its socket is not up yet

    def apply(self, op: TimedOp) -> None:
        from agents.drivers.control import ControlError
        from agents.faults import format_byzantine, format_faults
        from tools.scenario import Kill, Restart, SetByzantine, SetLink, WorldFault
        from worlds.control import ControlError as WorldControlError
        from worlds.control import WorldControl

        o = op.op
        error = None
        try:
            if isinstance(o, SetLink):
                self._control(o.agent, {"cmd": "set", "faults": format_faults(o.spec),
                                        "direction": o.direction.value})
            elif isinstance(o, SetByzantine):
                spec = "clear" if o.spec is None else format_byzantine(o.spec)
                self._control(o.agent, {"cmd": "byzantine", "spec": spec})
            elif isinstance(o, Kill):
                proc = self.swarm.procs[o.agent]
                proc.signal(signal.SIGKILL)
                proc.popen.wait(5.0)
            elif isinstance(o, Restart):
                remaining = self.scenario.duration - self.elapsed()
                self.swarm.start_agent(o.agent, max(remaining, 1.0) + 5.0,
                                       self.agent_args(o.agent))
            elif isinstance(o, WorldFault):
                world = WorldControl(self.swarm.run_dir)
                if o.kind == "drop_link":
                    world.drop_link(o.car, o.seconds)
                elif o.kind == "reboot":
                    world.reboot(o.car, o.seconds)
                else:
                    world.freeze_camera(o.car, o.seconds)
        except (ControlError, WorldControlError, OSError) as exc:
            error = str(exc)
        at = self.elapsed()
        self.applied.append({"t": op.t, "at": at, "line": op.line, "text": o.describe(),
                             **({"error": error} if error else {})})
        self.progress.say(f"t={at:6.2f} s  line {op.line}: {o.describe()}"
                          + (f"  FAILED: {error}" if error else ""))

    def loop(self, ops: Sequence[TimedOp], lines: Callable[[], list[AgentLine]]) -> None:
        pending = list(ops)
        duration = self.scenario.duration
        next_view = 0.0
        while (now := self.elapsed()) < duration:
            while pending and pending[0].t <= now:
                self.apply(pending.pop(0))
            if now >= next_view:
                next_view = now + 0.5
                self.progress.show(now, lines())
            wait = min(0.05, duration - self.elapsed())
            if pending:
                wait = min(wait, pending[0].t - self.elapsed())
            time.sleep(max(wait, 0.0))
        self.progress.show(duration, lines())


def _real_lines(run: RealRun, views: dict[str, Any], truth: Any) -> Callable[[], list[AgentLine]]:
    import math

    from tools.live import absorb

    def lines() -> list[AgentLine]:
        truth.update()
        out = []
        for name, view in views.items():
            absorb(view)
            proc = run.swarm.procs.get(name)
            err = None
            if view.track is not None:
                where = truth.at(float(view.track["t"]))
                if where is not None:
                    x = view.track["x"]
                    err = math.hypot(x[0] - where[0], x[1] - where[1])
            span = (view.last_t or 0.0) - (view.started or 0.0)
            peers = sum(1 for p in view.peers.values() if not p.get("lost"))
            out.append(AgentLine(name, proc is not None and proc.alive(), view.mode, err, peers,
                                 view.tx_bytes / max(span, 1e-9) / 1000))
        return out

    return lines


def run_real(scenario: Scenario, run_dir: Path, port: int | None,
             progress: Progress) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Returns the applied schedule and the exit status of every process."""
    from tools.live import AgentView, LogFollower, Truth
    from tools.procs import Swarm, claim_loopback, running
    from tools.scenario import timeline
    from tools.swarmkey import read_key, write_key

    key_file = run_dir / "swarm.key"
    if not key_file.exists():
        write_key(key_file)
    swarm = Swarm(Path(scenario.arena.source), scenario.arena, run_dir, key_file)
    port = claim_loopback(swarm, port)  # another run on this host keeps its own cars and port
    run = RealRun(scenario, swarm, read_key(key_file), port, progress)
    views = {n: AgentView(n, LogFollower(run_dir / f"{n}.jsonl")) for n in scenario.names}
    truth = Truth(run_dir / "world.jsonl")
    with running(swarm):
        run.start()
        run.loop(timeline(scenario), _real_lines(run, views, truth))
        progress.done()
    codes = {name: proc.popen.returncode for name, proc in swarm.procs.items()}
    return run.applied, codes


# ---------------------------------------------------------------- the command


def _real_mode_problem(scenario: Scenario) -> str | None:
    for a in scenario.agents:
        if a.sets:
            keys = ", ".join(k for k, _ in a.sets)
            return (f"{scenario.source}:{a.line}: agent {a.name}: settings ({keys}) can only be "
                    "applied in --lockstep (the agent command takes --fusion and "
                    "--no-reputation only)")
    return None


def main(args: argparse.Namespace) -> int:
    from tools.scenario import Kill, ScenarioError, find_scenario, load_scenario, timeline

    try:
        scenario = load_scenario(find_scenario(args.scenario))
        if args.seed is not None:
            scenario = scenario.with_seed(args.seed)
    except ScenarioError as exc:
        return _fail(str(exc))
    except ValueError as exc:
        return _fail(f"--seed: {exc}")
    if not args.lockstep:
        problem = _real_mode_problem(scenario)
        if problem is not None:
            return _fail(problem)
        if args.port is not None and not 1024 <= args.port <= 65535:
            return _fail("--port must be in 1024..65535")
    run_dir: Path = args.run_dir or default_run_dir(scenario, args.lockstep)
    problem = prepare_run_dir(run_dir, scenario)
    if problem is not None:
        return _fail(problem)
    mode = "lockstep" if args.lockstep else "real"
    ops = timeline(scenario)
    print(f"{PROG}: {scenario.name} ({mode}): {', '.join(scenario.names)} in "
          f"{scenario.arena.name}, {scenario.duration:g} s, seed {scenario.seed}, "
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
            applied, codes = run_real(scenario, run_dir, args.port, progress)
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
    if not any(run_dir.glob("*.jsonl")):
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
