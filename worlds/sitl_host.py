"""The world server's SITL cars (``--firmware sitl``): one firmware process per car and its link.

Each car's process (:func:`worlds.sitl.spawn`) binds the car's UDP 4210/4211
and TCP 8080 itself. Its PCA9685 outputs drive the car's body and its traced
core calls are logged as the model's would be, both at the car's own time of
them (at once when the world's timeline has passed it); its frame requests
are answered with renders of the car's camera (by the render worker, off the
loop: :mod:`worlds.render_host`), and every ``SENSOR_PERIOD`` it
gets the car's gyro reading and synthetic observation (the gyro reaches the sketch
through an MPU-6050 on its I2C bus, as on a real car with one: ``--imu 1`` for a car
whose ``car_model.gyro`` is true). A reboot kills the process
(the power is cut) and starts a new one at the new boot time; a process that
dies by itself (a panic, a crash) is a reset: the wheels keep their duties
until the new boot's setup() switches them off. Every process is stopped with
the server; each also exits when its link closes and is killed if the world
dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import time
from collections import deque
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.runlog import RunLog
from worlds.render_host import RenderHost
from worlds.sim import Frame, LogEvent, RenderJob, Step, World
from worlds.sitl import (
    MAX_PACKET,
    RESET_PANIC,
    RESET_POWERON,
    SITL_BINARY,
    Boot,
    Bound,
    FrameRequest,
    Message,
    Motors,
    Panic,
    SerialLine,
    SitlError,
    SitlFirmware,
    Trace,
    decode,
    encode_frame,
    encode_link,
    encode_no_frame,
    encode_sensors,
    spawn,
    wheel_duties,
)
from worlds.steps import BindError

SENSOR_PERIOD = 0.025  # s between sensor inputs to each car (telemetry goes out every 0.1 s)
READY_TIMEOUT = 15.0  # s for every car to bind its ports and report itself healthy
STOP_GRACE = 1.0  # s a car has to exit after its link closes, before SIGKILL
RESETS_ALLOWED = (3, 60.0)  # resets within this many s, beyond which the power stays off
PORTS = frozenset({("udp", 4210), ("udp", 4211), ("tcp", 8080)})


@dataclass
class _Car:
    """One car's current process and what it has reported since it started."""

    id: int
    firmware: SitlFirmware | None = None  # the boot the process runs
    proc: subprocess.Popen[bytes] | None = None
    sock: socket.socket | None = None
    bound: set[tuple[str, int]] = field(default_factory=set)
    bind_error: Bound | None = None
    frames: int = 0
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    resets: deque[float] = field(default_factory=deque)
    pending: asyncio.TimerHandle | None = None
    reset_reason: int = RESET_POWERON


class SitlHost:
    """Runs the SITL process of every car of ``world`` for a world server."""

    def __init__(
        self,
        world: World,
        emit: Callable[[Step], None],
        log: RunLog,
        clock: Callable[[], float] = time.monotonic,
        binary: Path = SITL_BINARY,
        *,
        render: RenderHost | None = None,
    ) -> None:
        self.world, self.emit, self.log, self.clock, self.binary = world, emit, log, clock, binary
        self.render = render  # renders frames off the loop (None: here, at once)
        self._cars = {car_id: _Car(car_id) for car_id in world.cars}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self._polling = False
        self.dropped = 0  # messages to a car it could not take

    # -- start and stop ----------------------------------------------------------------

    async def start(self) -> None:
        """Start every car; returns once each has bound its ports and is healthy."""

        self.emit(self.world.drain())  # the cars' boots: their notices start the processes
        self._task(self._sensors())
        waits = [asyncio.create_task(c.ready.wait()) for c in self._cars.values()]
        try:
            await asyncio.wait_for(asyncio.gather(*waits), READY_TIMEOUT)
        except TimeoutError:
            late = [c.id for c in self._cars.values() if not c.ready.is_set()]
            raise RuntimeError(f"SITL cars {late} not up within {READY_TIMEOUT:g} s") from None
        for car in self._cars.values():
            if car.bind_error is not None:
                b, address = car.bind_error, self.world.cars[car.id].spec.address
                raise BindError(address, b.port, b.proto.upper(), OSError(b.errno, b.error))

    async def close(self) -> None:
        self._closing = True
        for task in self._tasks:
            task.cancel()
        procs = [self._stop(car) for car in self._cars.values()]
        await asyncio.gather(*(self._reap(p) for p in procs if p is not None))
        if self.dropped:
            self.log.log("firmware_link_dropped", count=self.dropped)
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # -- the processes ---------------------------------------------------------------------

    def _task(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _boot(self, car: _Car) -> None:
        """Stop the running boot (power cut) and start the world's current one at its time."""
        fw = self.world.cars[car.id].firmware
        if not isinstance(fw, SitlFirmware) or fw is car.firmware:
            return
        proc = self._stop(car)
        if proc is not None:
            self._task(self._reap(proc))
        car.firmware = fw
        delay = self.world.cars[car.id].boot_time - self.clock()
        if delay < float("inf"):
            car.pending = asyncio.get_running_loop().call_later(max(0.0, delay), self._spawn, car)

    def _spawn(self, car: _Car) -> None:
        car.pending = None
        vcar, fw = self.world.cars[car.id], car.firmware
        if self._closing or fw is None or vcar.firmware is not fw:
            return
        boot = Boot(
            vcar.spec.address, car.id, vcar.boot_time, vcar.drift,
            (fw.boot_nonce, fw.token), car.reset_reason, imu=vcar.gyro is not None,
        )  # fmt: skip
        car.reset_reason = RESET_POWERON
        car.bound, car.bind_error, car.frames = set(), None, 0
        car.proc, car.sock = spawn(self.binary, boot)
        asyncio.get_running_loop().add_reader(car.sock.fileno(), self.poll)
        self.log.log("firmware_start", car=car.id, pid=car.proc.pid, nonce=fw.boot_nonce)
        if not vcar.link_up(self.clock()) and vcar.online(self.clock()):
            self._send(car, encode_link(vcar.uptime_us(vcar.link_down_until)))

    def _stop(self, car: _Car) -> subprocess.Popen[bytes] | None:
        """Cut the car's power: no more messages from it, it is killed. Returns it to reap."""
        if car.pending is not None:
            car.pending.cancel()
            car.pending = None
        if car.sock is not None:
            asyncio.get_running_loop().remove_reader(car.sock.fileno())
            car.sock.close()
            car.sock = None
        proc, car.proc = car.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
        return proc

    async def _reap(self, proc: subprocess.Popen[bytes]) -> int:
        deadline = time.monotonic() + STOP_GRACE
        while proc.poll() is None:
            if time.monotonic() > deadline:
                proc.kill()
                return await asyncio.to_thread(proc.wait, 5.0)
            await asyncio.sleep(0.01)
        return proc.returncode

    async def _died(self, car: _Car, proc: subprocess.Popen[bytes]) -> None:
        """The process exited by itself: the ESP32 resets (or, too often, stays off)."""
        rc = await self._reap(proc)
        now = self.clock()
        self.log.log("firmware_exit", t=now, car=car.id, rc=rc)
        if self._closing:
            return
        car.firmware = None
        car.resets.append(now)
        while car.resets and car.resets[0] < now - RESETS_ALLOWED[1]:
            car.resets.popleft()
        if len(car.resets) > RESETS_ALLOWED[0]:
            self.emit(self.world.power_off(car.id, now, f"{len(car.resets)} resets"))
            return
        car.reset_reason = RESET_PANIC
        self.emit(self.world.firmware_reset(car.id, now, f"exit {rc}"))

    # -- messages ------------------------------------------------------------------------

    def _send(self, car: _Car, data: bytes) -> None:
        if car.sock is None:
            return
        try:
            car.sock.send(data)
        except (BlockingIOError, ConnectionError):
            self.dropped += 1

    def poll(self) -> None:
        """Read every car's link, then act on what came.

        Motor outputs and traced calls take effect at the car's own time of
        them, in that order across the cars; frame requests are rendered at
        now, after them. So whoever polls before moving the world to now (the
        server's pacing, the sensor inputs, a car's readable link) never lets
        it pass an output that is waiting to be read.
        """
        if self._polling:
            return
        self._polling = True
        try:
            timed: list[tuple[float, int, _Car, Motors | Trace]] = []
            other: list[tuple[_Car, Message]] = []
            for car in self._cars.values():
                for msg in self._read(car):
                    us = _uptime_us(msg)
                    if us is not None and isinstance(msg, Motors | Trace):
                        at = self.world.cars[car.id].world_time(us)
                        timed.append((at, len(timed), car, msg))
                    else:
                        other.append((car, msg))
            for at, _, car, msg in sorted(timed, key=lambda m: (m[0], m[1])):
                self._on_timed(car, msg, max(self.world.t, at))
            for car, msg in other:
                self._on(car, msg)
        finally:
            self._polling = False

    def _read(self, car: _Car) -> list[Message]:
        """Every message waiting on the car's link; notices its end."""
        out: list[Message] = []
        sock = car.sock
        while sock is not None and car.sock is sock:
            try:
                packet = sock.recv(MAX_PACKET)
            except BlockingIOError:
                break
            except OSError:
                packet = b""
            if not packet:  # the process is gone
                proc = self._stop(car)
                if proc is not None:
                    self._task(self._died(car, proc))
                break
            try:
                out.append(decode(packet))
            except SitlError as exc:
                self.log.log("firmware_bad_message", car=car.id, error=str(exc))
        return out

    def _on_timed(self, car: _Car, msg: Motors | Trace, at: float) -> None:
        if isinstance(msg, Motors):
            self.emit(self.world.firmware_motors(car.id, wheel_duties(msg.pwm), at))
        else:
            self.emit(self.world.firmware_trace(car.id, msg, at))
        self._check_ready(car)

    def _on(self, car: _Car, msg: Message) -> None:
        now = max(self.clock(), self.world.t)
        if isinstance(msg, FrameRequest):
            job = self.world.frame_job(car.id, now, on_board=True)
            self.emit(self.world.drain())
            if isinstance(job, RenderJob) and self.render is not None:
                rendered = self.render.request(job, keep=True)  # its stream ends without one
                self._task(self._answer_rendered(car, msg.id, job, rendered))
            elif isinstance(job, RenderJob):
                self._answer(car, msg.id, self.world.frame_done(job, self.world.render(job)))
            else:
                self._answer(car, msg.id, job)
        elif isinstance(msg, Trace):  # one without a time
            self.emit(self.world.firmware_trace(car.id, msg, now))
        elif isinstance(msg, Bound):
            car.bound.add((msg.proto, msg.port))
            if msg.errno != 0 and car.bind_error is None:
                car.bind_error = msg
                car.ready.set()
        elif isinstance(msg, SerialLine | Panic):
            kind = "serial" if isinstance(msg, SerialLine) else "panic"
            text = msg.line if isinstance(msg, SerialLine) else msg.why
            self.emit(Step(events=[LogEvent(now, kind, {"car": car.id, "line": text})]))
        self._check_ready(car)

    async def _answer_rendered(
        self, car: _Car, request: int, job: RenderJob, rendered: asyncio.Future[bytes | None]
    ) -> None:
        sock = car.sock
        jpeg = await rendered
        if car.sock is not sock:  # the power was cut meanwhile: another process, or none
            return
        if jpeg is None:  # the render worker ended: a frame of now, rendered here
            now = max(self.clock(), self.world.t)
            again = self.world.frame_job(car.id, now, on_board=True)
            self.emit(self.world.drain())
            if isinstance(again, RenderJob):
                job, jpeg = again, self.world.render(again)
            else:
                self._answer(car, request, again)
                return
        self._answer(car, request, self.world.frame_done(job, jpeg))

    def _answer(self, car: _Car, request: int, frame: Frame | None) -> None:
        if frame is None:
            self._send(car, encode_no_frame(request))
        else:
            capture_us = self.world.cars[car.id].uptime_us(frame.t)
            self._send(car, encode_frame(request, capture_us, frame.jpeg))
            car.frames += 1
        self._check_ready(car)

    def _check_ready(self, car: _Car) -> None:
        fw = car.firmware
        if car.ready.is_set() or fw is None:
            return
        if car.bound >= PORTS and car.frames > 0 and fw.ticked and fw.motor_ok and fw.camera_ok:
            car.ready.set()

    def notice(self, notices: Iterable[tuple[int, str]]) -> None:
        """The world's news: a car (re)boots, or its link state changed."""
        for car_id, what in notices:
            car = self._cars[car_id]
            if what == "boot":
                self._boot(car)
            elif what == "link":
                vcar = self.world.cars[car_id]
                self._send(car, encode_link(vcar.uptime_us(vcar.link_down_until)))

    async def _sensors(self) -> None:
        while True:
            self.poll()
            now = max(self.clock(), self.world.t)
            for car in self._cars.values():
                if car.sock is not None:
                    gyro, sim = self.world.firmware_inputs(car.id, now)
                    self._send(car, encode_sensors(gyro, sim))
            await asyncio.sleep(SENSOR_PERIOD)


def check_binary(binary: Path = SITL_BINARY) -> str | None:
    """Why the SITL car cannot be started (None when it can)."""
    if not binary.is_file():
        return f"no SITL car at {binary}: build it with `make -C firmware sitl`"
    return None


def _uptime_us(msg: Message) -> int | None:
    """The car's uptime at a motor output or traced call (None for anything else)."""
    if isinstance(msg, Motors):
        return msg.us
    if isinstance(msg, Trace) and "us" in msg.fields:
        return int(msg.fields["us"])
    return None
