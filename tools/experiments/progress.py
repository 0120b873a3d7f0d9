"""Progress on a terminal: a run's bar with a line per agent, and a batch of runs' bar.

:class:`Progress` rewrites one status line in place on a terminal (and prints
one now and then otherwise); :func:`progress_bar` is the line of a batch of
runs with its ETA.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

BAR = 24


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


def progress_bar(done: int, total: int, began: float, width: int = 24) -> str:
    elapsed = time.perf_counter() - began
    n = round(width * done / total) if total else width
    eta = elapsed / done * (total - done) if done else math.nan
    eta_text = "?" if not math.isfinite(eta) else f"{eta:.0f} s"
    return f"[{'#' * n}{'.' * (width - n)}] {done}/{total} runs, {elapsed:.0f} s, ETA {eta_text}"
