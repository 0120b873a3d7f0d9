"""A scenario as real processes: the world and every agent, the schedule on their sockets.

:func:`run_real` starts the world and the agents as processes
(:class:`~tools.procs.Swarm`), applies each scheduled operation at its time
(agents through their control sockets, the world through its own; ``kill`` is
SIGKILL, ``restart`` a new process) and shows the live view; every process is
stopped at the end, on an error or on Ctrl-C.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools.experiments.progress import AgentLine, Progress
from tools.experiments.scenario import Scenario
from tools.experiments.schedule import TimedOp

if TYPE_CHECKING:
    from tools.procs import Swarm

STARTUP = 60.0  # s an agent may take to start on a busy machine


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
        # Lifetimes are backstops: the runner stops every process when the schedule ends.
        self.swarm.start_world(s.duration + STARTUP + 15.0, ["--seed", str(s.seed)])
        for name in s.names:
            self.swarm.start_agent(name, s.duration + STARTUP + 5.0, self.agent_args(name))
        for name in s.names:  # the schedule's clock starts once every agent answers
            self._control(name, {"cmd": "status"}, patience=STARTUP)
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
        from tools.experiments.schedule import Kill, Restart, SetByzantine, SetLink, WorldFault
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
             progress: Progress, view_port: int | None = None
             ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Returns the applied schedule and the exit status of every process; with ``view_port``
    the live view runs beside the swarm (``stigmesh run --view``)."""
    from protocol.runlog import log_path
    from tools.experiments.schedule import timeline
    from tools.live import AgentView, LogFollower, Truth
    from tools.procs import Swarm, claim_loopback, running
    from tools.swarmkey import read_key, write_key

    key_file = run_dir / "swarm.key"
    if not key_file.exists():
        write_key(key_file)
    swarm = Swarm(Path(scenario.arena.source), scenario.arena, run_dir, key_file)
    port = claim_loopback(swarm, port)  # another run on this host keeps its own cars and port
    run = RealRun(scenario, swarm, read_key(key_file), port, progress)
    views = {n: AgentView(n, LogFollower(log_path(run_dir, n))) for n in scenario.names}
    truth = Truth(log_path(run_dir, "world"))
    with running(swarm):
        run.start()
        if view_port is not None:
            from tools.commands.view import start_view

            start_view(swarm, run.swarm_name, port, view_port, scenario.duration + 10.0)
        run.loop(timeline(scenario), _real_lines(run, views, truth))
        progress.done()
    codes = {name: proc.popen.returncode for name, proc in swarm.procs.items()}
    return run.applied, codes
