"""Starting and stopping stigmesh processes: the world server and agents.

Used by ``stigmesh demo``, ``stigmesh run`` and the multi-process tests, so
every process started is bounded in time and stopped: SIGTERM first, SIGKILL
after a grace period, never left behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from worlds.arena import Arena


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    output: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(sig)

    def stop(self, grace: float = 5.0) -> int:
        """SIGTERM, wait ``grace`` seconds, then SIGKILL; returns the exit status."""
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

    def start_world(self, duration: float | None, extra: Sequence[str] = ()) -> Proc:
        args = ["world", str(self.arena_path), "--run-dir", str(self.run_dir), *extra]
        if duration is not None:
            args += ["--duration", f"{duration:g}"]
        proc = _spawn("world", args, self.run_dir)
        self.procs["world"] = proc
        deadline = time.monotonic() + 20.0
        while not (self.run_dir / "world.sock").exists():
            if not proc.alive():
                raise RuntimeError(f"the world server exited:\n{proc.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the world server did not start:\n{proc.tail()}")
            time.sleep(0.05)
        return proc

    def start_agent(self, name: str, duration: float | None, extra: Sequence[str] = ()) -> Proc:
        car = self.arena.car(name)
        args = [
            "agent", "--name", name, "--car", car.address, "--arena", str(self.arena_path),
            "--swarm-key", str(self.key_file), "--run-dir", str(self.run_dir), *extra,
        ]
        if duration is not None:
            args += ["--duration", f"{duration:g}"]
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


@contextlib.contextmanager
def running(swarm: Swarm) -> Iterator[Swarm]:
    """Whatever happens inside, every process is stopped on the way out."""
    try:
        yield swarm
    finally:
        swarm.stop_all()
