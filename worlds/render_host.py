"""The world server's render worker (:mod:`worlds.render`): started, fed and stopped here.

The server takes a frame's job on its loop (:meth:`worlds.sim.World.frame_job`,
microseconds: the poses and the camera), hands it to :meth:`RenderHost.request`
and goes on serving datagrams; the future it got resolves with the JPEG when
the worker answers. One job is with the worker at a time, at most
``MAX_PENDING`` wait behind it: beyond that the oldest waiting one that need
not be kept is dropped (its future resolves with None) and counted. A job the
worker has not answered within ``RENDER_TIMEOUT``, an error it reports or its
exit end the worker: the jobs it had resolve with None, and every later job is
rendered in the world's own process (as :meth:`worlds.sim.World.capture_frame`
does), logged once.

The worker starts with the server (with model cars in synthetic mode, at the
first camera client) and builds its scene in its own process; until it is
ready, a job that can wait for the next frame gets None, one that must be kept
is rendered in the world's process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from protocol.runlog import RunLog
from worlds.link import spawn_linked
from worlds.render import MAX_MESSAGE, RenderError, decode_reply, encode_init, encode_job
from worlds.sim import RenderJob, World

REPO = Path(__file__).resolve().parents[1]
MAX_PENDING = 4  # jobs waiting behind the one being rendered
READY_TIMEOUT = 30.0  # s for the worker to build its scene (a busy machine starts slowly)
RENDER_TIMEOUT = 5.0  # s for one job, beyond which the worker is given up
STOP_GRACE = 2.0  # s for the worker to exit after its link closes, before SIGKILL


class State(Enum):
    IDLE = "idle"  # not started
    STARTING = "starting"
    READY = "ready"
    GONE = "gone"  # failed or exited: frames are rendered in the world's process


@dataclass
class RenderCounters:
    requested: int = 0
    rendered: int = 0
    dropped: int = 0  # waited behind MAX_PENDING newer jobs: the worker was behind
    lost: int = 0  # with the worker when it ended
    early: int = 0  # asked for before the worker was ready: no frame
    in_process: int = 0  # rendered in the world's process: no worker (yet, or any more)
    render_ms_total: float = 0.0
    render_ms_max: float = 0.0
    wait_ms_max: float = 0.0  # the longest a job waited for its frame, queue included


@dataclass
class _Pending:
    id: int
    data: bytes
    future: asyncio.Future[bytes | None]
    keep: bool
    since: float = field(default_factory=time.perf_counter)


class RenderHost:
    """One render worker for a :class:`World`'s camera frames."""

    def __init__(self, world: World, log: RunLog) -> None:
        self.world, self.log = world, log
        self.state = State.IDLE
        self.counters = RenderCounters()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._queue: deque[_Pending] = deque()
        self._busy: _Pending | None = None
        self._overdue: asyncio.TimerHandle | None = None
        self._ready = asyncio.Event()
        self._next_id = 0

    # -- start and stop -------------------------------------------------------------

    def start(self) -> None:
        """Spawn the worker (it builds its scene in its own time); at most once."""
        if self.state is not State.IDLE:
            return
        self._proc, ours = spawn_linked(
            lambda fd: [sys.executable, "-m", "worlds.render", str(fd), str(os.getpid())],
            MAX_MESSAGE, first=encode_init(self.world.arena, self.world.seed),
            stdout=subprocess.DEVNULL, cwd=REPO,
        )  # fmt: skip
        self._sock = ours
        self.state = State.STARTING
        asyncio.get_running_loop().add_reader(ours.fileno(), self._readable)
        self.log.log("render_worker_start", pid=self._proc.pid)

    async def wait_ready(self, timeout: float = READY_TIMEOUT) -> bool:
        """Whether the worker is ready within ``timeout`` s (if not, it is given up)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._ready.wait(), timeout)
        if self.state is State.STARTING:
            self._end(f"not ready within {timeout:g} s")
        return self.state is State.READY

    async def close(self) -> None:
        proc = self._proc
        self._end(None)
        if proc is None:
            return
        deadline = time.monotonic() + STOP_GRACE
        while proc.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        if proc.poll() is None:
            proc.kill()
            await asyncio.to_thread(proc.wait, 5.0)
        self.log.log("render_worker_stop", rc=proc.returncode, render=self.status())
        self._proc = None

    def status(self) -> dict[str, float | int | str]:
        c = self.counters
        mean = c.render_ms_total / c.rendered if c.rendered else 0.0
        return {
            "state": self.state.value, "requested": c.requested, "rendered": c.rendered,
            "dropped": c.dropped, "lost": c.lost, "early": c.early, "in_process": c.in_process,
            "render_ms_mean": round(mean, 3), "render_ms_max": round(c.render_ms_max, 3),
            "wait_ms_max": round(c.wait_ms_max, 3),
        }  # fmt: skip

    # -- jobs ---------------------------------------------------------------------------

    def request(self, job: RenderJob, keep: bool = False) -> asyncio.Future[bytes | None]:
        """The job's JPEG, when it is rendered (None: dropped, or the worker ended).

        ``keep``: never drop this job (a SITL car waits for its answer; none
        would end its stream). Call this as soon as the job is taken: the
        world's own scene renders it at once, and must not have moved since,
        once the worker has ended, or while it starts if the job is kept (one
        not kept gets no frame then).
        """
        future: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
        self.counters.requested += 1
        if self.state is State.IDLE:
            self.start()
        if self.state is State.STARTING and not keep:
            self.counters.early += 1  # no frame this time; the loop stays free
            future.set_result(None)
            return future
        if self.state is not State.READY:
            self.counters.in_process += 1
            future.set_result(self.world.render(job))
            return future
        self._next_id = (self._next_id + 1) & 0xFFFF_FFFF
        self._queue.append(_Pending(self._next_id, encode_job(self._next_id, job), future, keep))
        if len(self._queue) > MAX_PENDING:
            oldest = next((j for j in self._queue if not j.keep), None)
            if oldest is not None:
                self._queue.remove(oldest)
                self._resolve(oldest, None)
                self.counters.dropped += 1
        self._feed()
        return future

    def _resolve(self, job: _Pending, jpeg: bytes | None) -> None:
        if not job.future.done():
            job.future.set_result(jpeg)
        wait = (time.perf_counter() - job.since) * 1000
        self.counters.wait_ms_max = max(self.counters.wait_ms_max, wait)

    def _feed(self) -> None:
        if self._busy is not None or not self._queue or self._sock is None:
            return
        job = self._queue.popleft()
        try:
            self._sock.send(job.data)
        except OSError as exc:
            self._queue.appendleft(job)
            self._end(f"cannot send a job: {exc}")
            return
        self._busy = job
        self._overdue = asyncio.get_running_loop().call_later(
            RENDER_TIMEOUT, self._end, f"no frame within {RENDER_TIMEOUT:g} s"
        )

    def _readable(self) -> None:
        while self._sock is not None:
            try:
                data = self._sock.recv(MAX_MESSAGE)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._end("the worker exited")
                return
            try:
                reply = decode_reply(data)
            except RenderError as exc:
                self._end(str(exc))
                return
            if reply is None:
                self.state = State.READY
                self._ready.set()
                self.log.log("render_worker_ready", pid=self._proc.pid if self._proc else None)
            elif isinstance(reply, str):
                self._end(f"the worker failed: {reply}")
                return
            elif self._busy is not None and reply.id == self._busy.id:
                job, self._busy = self._busy, None
                if self._overdue is not None:
                    self._overdue.cancel()
                c = self.counters
                c.rendered += 1
                c.render_ms_total += reply.ms
                c.render_ms_max = max(c.render_ms_max, reply.ms)
                self._resolve(job, reply.jpeg)
            self._feed()

    def _end(self, why: str | None) -> None:
        """Stop using the worker (``why``: it failed; None: the server closes)."""
        if self._sock is not None:
            asyncio.get_running_loop().remove_reader(self._sock.fileno())
            self._sock.close()  # the worker exits when it sees the link close
            self._sock = None
        if self._overdue is not None:
            self._overdue.cancel()
            self._overdue = None
        jobs = [*([self._busy] if self._busy else []), *self._queue]
        self._busy = None
        self._queue.clear()
        for job in jobs:
            self._resolve(job, None)
        self.counters.lost += len(jobs)
        if self.state is not State.GONE and why is not None:
            self.log.log("render_worker_failed", error=why, lost=len(jobs))
            if self._proc is not None and self._proc.poll() is None:
                self._proc.kill()
        self.state = State.GONE
        self._ready.set()
