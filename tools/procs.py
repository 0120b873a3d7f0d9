"""Starting and stopping stigmesh processes: the world server and agents.

Used by ``stigmesh demo``, ``stigmesh run`` and the multi-process tests, so
every process started is bounded in time and stopped: SIGTERM first, SIGKILL
after a grace period, never left behind.

Tests wait on events, not on the clock: :func:`wait_for` polls a condition (a
line in a run log, an answer on a control socket) until a generous deadline and
fails at once, with the process's output, if a process it depends on has exited.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.drivers.carlock import CarLock, CarLockedError
from agents.drivers.net import LOOPBACK_BROADCAST
from protocol.runlog import LogReader, log_path
from protocol.swarm.messages import DEFAULT_SWARM_PORT
from tools.agent_config import write_simulated_robot
from tools.swarmkey import write_key
from worlds.arena import Arena, load_arena


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    output: Path
    started: float = field(default_factory=time.monotonic)  # when it was spawned
    terminated: bool = field(default=False, repr=False)  # SIGTERM already sent

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(sig)
                self.terminated |= sig == signal.SIGTERM

    def stop(self, grace: float = 5.0) -> int:
        """SIGTERM (once: a second one could land after the process restored the default
        action while shutting down), wait ``grace`` seconds, then SIGKILL; returns the exit
        status."""
        if not self.terminated:
            self.signal(signal.SIGTERM)
        try:
            return self.popen.wait(grace)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            return self.popen.wait(5.0)

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.output.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _spawn(name: str, args: Sequence[str], run_dir: Path) -> Proc:
    out = run_dir / f"{name}.out"
    handle = out.open("wb")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    popen = subprocess.Popen(
        [sys.executable, "-m", "tools.cli", *args],
        stdout=handle,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=Path(__file__).resolve().parents[1],
    )
    handle.close()
    return Proc(name, popen, out)


@dataclass
class Swarm:
    """A world server and its agents for one run directory."""

    arena_path: Path
    arena: Arena
    run_dir: Path
    key_file: Path
    procs: dict[str, Proc] = field(default_factory=dict)
    cars_on: str | None = None  # the cars' /24 when moved off the arena's (see claim_loopback)
    claims: list[CarLock] = field(default_factory=list)  # held for this process's life

    def __post_init__(self) -> None:
        # The processes run from the repository's root: a relative path given here (the
        # demo's default runs/demo-DATE, from wherever it was started) must name the same
        # file for them as for this process.
        self.arena_path = self.arena_path.absolute()
        self.run_dir = self.run_dir.absolute()
        self.key_file = self.key_file.absolute()

    def start_world(self, duration: float | None, extra: Sequence[str] = (),
                    ready_within: float = 60.0) -> Proc:
        """Start the world server and wait (``ready_within`` s at most) for its socket."""
        args = ["world", str(self.arena_path), "--run-dir", str(self.run_dir), *extra]
        if self.cars_on is not None:
            args += ["--cars-on", self.cars_on]
        if duration is not None:
            args += ["--duration", f"{duration:g}"]
        proc = _spawn("world", args, self.run_dir)
        self.procs["world"] = proc
        deadline = time.monotonic() + ready_within
        while not (self.run_dir / "world.sock").exists():
            if not proc.alive():
                raise RuntimeError(f"the world server exited:\n{proc.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the world server did not start:\n{proc.tail()}")
            time.sleep(0.05)
        return proc

    def start_agent(self, name: str, duration: float | None, extra: Sequence[str] = ()) -> Proc:
        robot = write_simulated_robot(
            self.arena, name, self.run_dir, swarm_key=self.key_file, status_every=2.0
        )
        args = ["agent", "--config", str(robot), *extra]
        if duration is not None:
            args += ["--duration", f"{duration:g}"]
        proc = _spawn(name, args, self.run_dir)
        self.procs[name] = proc
        return proc

    def start_process(self, name: str, args: Sequence[str]) -> Proc:
        """Any other ``stigmesh`` process beside the swarm (the live view), stopped with it."""
        proc = _spawn(name, args, self.run_dir)
        self.procs[name] = proc
        return proc

    def stop_all(self, grace: float = 5.0) -> dict[str, int]:
        """Agents first (they STOP their cars and say BYE), then the world."""
        codes = {}
        for name, proc in self.procs.items():
            if name != "world":
                proc.signal(signal.SIGTERM)
        for name, proc in self.procs.items():
            if name != "world":
                codes[name] = proc.stop(grace)
        if "world" in self.procs:
            codes["world"] = self.procs["world"].stop(grace)
        return codes

    def stop(self, *names: str, grace: float = 15.0) -> dict[str, int]:
        """SIGTERM these processes together, then wait for each; their exit statuses."""
        for name in names:
            self.procs[name].signal(signal.SIGTERM)
        return {name: self.procs[name].stop(grace) for name in names}


class RunLogs:
    """The run logs of a run directory, read incrementally while they are written.

    ``lines(name)`` is every event ``name``'s log holds so far (complete chunks only, so
    at most protocol.runlog.FLUSH_EVERY late); each call reads just what was appended
    since the last one, so polling is cheap.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._followers: dict[str, LogReader] = {}
        self._lines: dict[str, list[dict[str, Any]]] = {}

    def lines(self, name: str) -> list[dict[str, Any]]:
        follower = self._followers.get(name)
        if follower is None:
            follower = self._followers[name] = LogReader(log_path(self.run_dir, name))
            self._lines[name] = []
        self._lines[name].extend(line for line in follower.read()
                                 if "event" in line and "t" in line)
        return self._lines[name]

    def events(self, name: str, *events: str) -> list[dict[str, Any]]:
        return [line for line in self.lines(name) if line["event"] in events]

    def forget(self, name: str) -> None:
        """Start over on ``name`` (its log was moved away and a new one begins)."""
        self._followers.pop(name, None)
        self._lines.pop(name, None)


def wait_for(
    condition: Callable[[], object],
    timeout: float,
    what: str,
    watch: Sequence[Proc] = (),
    every: float = 0.1,
) -> float:
    """Poll ``condition`` until it is true; returns the seconds it took.

    Fails with an AssertionError naming ``what`` after ``timeout`` seconds, or as soon
    as a process in ``watch`` has exited (with the end of its output). The timeout is a
    bound for a broken system, not a measurement: make it generous.
    """
    began = time.monotonic()
    deadline = began + timeout
    while not condition():
        for proc in watch:
            if not proc.alive():
                raise AssertionError(
                    f"{proc.name} exited (status {proc.popen.returncode}) while waiting for "
                    f"{what}:\n{proc.tail()}")
        if time.monotonic() > deadline:
            tails = "".join(f"\n--- {p.name}:\n{p.tail(8)}" for p in watch)
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}{tails}")
        time.sleep(every)
    return time.monotonic() - began


@contextlib.contextmanager
def running(swarm: Swarm, grace: float = 5.0) -> Iterator[Swarm]:
    """Whatever happens inside, every process is stopped on the way out (each given
    ``grace`` seconds after SIGTERM before SIGKILL)."""
    try:
        yield swarm
    finally:
        swarm.stop_all(grace)


def private_swarm(tmp: Path, arena_source: Path, run_name: str = "run") -> Swarm:
    """A run directory with a fresh key, and a copy of the arena whose cars live on a
    loopback /24 no other run on this machine is likely to use."""
    prefix = f"127.{random.randint(100, 250)}.{random.randint(1, 250)}."
    path = tmp / arena_source.name
    path.write_text(arena_source.read_text().replace("127.0.2.", prefix))
    run_dir = tmp / run_name
    run_dir.mkdir()
    write_key(run_dir / "swarm.key")
    return Swarm(path, load_arena(path), run_dir, run_dir / "swarm.key")


def _claim(swarm: Swarm, key: str, free: Callable[[], bool]) -> bool:
    """Hold a host-wide lock on ``key`` for this process's life if ``free()`` then holds:
    two runs starting at once cannot both pick the same block or port."""
    lock = CarLock(key)
    try:
        lock.acquire()
    except CarLockedError:
        return False
    if not free():
        lock.release()
        return False
    swarm.claims.append(lock)
    return True


def _free(address: str, port: int, kind: int) -> bool:
    """Whether nothing holds ``address:port`` now (no reuse flags: a shared bind is busy too)."""
    with socket.socket(socket.AF_INET, kind) as s:
        try:
            s.bind((address, port))
        except OSError:
            return False
    return True


def _cars_free(arena: Arena) -> bool:
    return all(_free(c.address, p, k) for c in arena.cars for p, k in
               ((4210, socket.SOCK_DGRAM), (4211, socket.SOCK_DGRAM), (8080, socket.SOCK_STREAM)))


def claim_loopback(
    swarm: Swarm, port: int | None, tries: int = 64, ports: Sequence[int] | None = None
) -> int:
    """Move ``swarm``'s loopback cars to a /24 nobody serves (the arena's own first) and
    return a free swarm port: ``port`` if given, else the first free of ``ports`` (47000,
    then random ones above it); ``RuntimeError`` saying why if there is none."""
    cars = [c.address for c in swarm.arena.cars]
    if all(ipaddress.IPv4Address(a).is_loopback for a in cars):
        rng = random.Random()
        blocks = [cars[0].rsplit(".", 1)[0]] + [
            f"127.{rng.randint(100, 250)}.{rng.randint(1, 250)}" for _ in range(tries)]
        for prefix in blocks:
            moved = swarm.arena.with_cars_on(prefix)
            if _claim(swarm, f"block-{prefix}", functools.partial(_cars_free, moved)):
                if moved.cars != swarm.arena.cars:
                    swarm.arena, swarm.cars_on = moved, prefix
                break
        else:
            raise RuntimeError(f"no free loopback block for {len(cars)} cars in {tries} tries")
    if port is not None:
        return port
    if ports is None:
        ports = (DEFAULT_SWARM_PORT, *random.sample(range(47001, 48000), tries))
    for candidate in ports:
        free = functools.partial(_free, LOOPBACK_BROADCAST, candidate, socket.SOCK_DGRAM)
        if _claim(swarm, f"port-{candidate}", free):
            return candidate
    raise RuntimeError(f"no free swarm port near {DEFAULT_SWARM_PORT}; give --port")


def private_swarm_args() -> list[str]:
    """A swarm name and broadcast port of its own, so parallel runs never mix."""
    return ["--swarm", f"run-{random.getrandbits(32):08x}",
            "--port", str(random.randint(20000, 40000))]


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of a live process, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_swarm(
    swarm: Swarm,
    names: Sequence[str],
    seconds: float,
    agent_extra: Sequence[str] = (),
    world_extra: Sequence[str] = (),
) -> dict[str, float]:
    """Run the world and agents for ``seconds``; CPU seconds per agent, sampled until exit."""
    args = [*private_swarm_args(), *agent_extra]
    cpu: dict[str, float] = {}
    try:
        swarm.start_world(seconds + 20, world_extra)
        for name in names:
            swarm.start_agent(name, seconds, args)
        deadline = time.monotonic() + seconds + 30
        while time.monotonic() < deadline and any(swarm.procs[n].alive() for n in names):
            for name in names:
                used = cpu_seconds(swarm.procs[name].pid)
                if used is not None:
                    cpu[name] = used
            time.sleep(0.5)
    finally:
        swarm.stop_all()
    return cpu
