"""The real-time driver: every virtual car's sockets, pacing, camera streams, control socket.

Each car binds UDP 4210 (commands in, telemetry out), UDP 4211 (clock
probe) and TCP 8080 (``GET /stream``) on its own loopback address. World
time is ``time.monotonic()``: a datagram is delivered at its receipt time,
and physics is stepped in the background to keep up with the clock. When
the machine cannot keep up, physics catches up in bounded batches and skips
what is older than ``MAX_LAG`` (logged as ``physics_skip``); firmware ticks
and sensors are never skipped. Camera frames are rendered by a worker process
(:mod:`worlds.render_host`): this loop only takes their poses, so a car's
datagram never waits behind a render.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocol.control import serve_control
from protocol.mjpeg import encode_part, response_head
from protocol.runlog import RunLog
from worlds.arena import SIM_NETWORKS
from worlds.control import (
    KEY_LABEL,
    control_path,
    parse_request,
    remove_world_key,
    write_world_key,
)
from worlds.render_host import RenderHost, State
from worlds.sim import (
    PORT_CAMERA,
    PORT_COMMAND,
    PORT_PROBE,
    Frame,
    RenderJob,
    Step,
    World,
    WorldError,
)
from worlds.sitl_host import SitlHost
from worlds.steps import BindError

MAX_LAG = 0.15  # s of physics the world may be behind the clock before it skips
RTF_PERIOD = 5.0  # s between `rtf` log events
STREAM_BUFFER_LIMIT = 64 * 1024  # a client with more unsent bytes skips frames
REQUEST_TIMEOUT = 5.0


def _same_sim_network(car: str, dst: str) -> bool:
    try:
        a, b = ipaddress.IPv4Address(car), ipaddress.IPv4Address(dst)
    except ValueError:
        return False
    return any(a in net and b in net for net in SIM_NETWORKS)


class _CarDatagrams(asyncio.DatagramProtocol):
    def __init__(self, server: WorldServer, car: int, port: int) -> None:
        self.server, self.car, self.port = server, car, port

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        self.server.on_datagram(self.car, self.port, data, (str(addr[0]), int(addr[1])))

    def error_received(self, exc: Exception) -> None:  # ICMP unreachable from a gone peer
        self.server.counters["udp_errors"] += 1


@dataclass
class _Stream:
    """A car's camera clients and the task that feeds them."""

    clients: set[asyncio.StreamWriter] = field(default_factory=set)
    boot: dict[asyncio.StreamWriter, int] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None
    frames_sent: int = 0
    frames_skipped: int = 0


class WorldServer:
    """Runs one :class:`World` against the clock, behind real sockets."""

    def __init__(
        self,
        world: World,
        run_dir: Path,
        log: RunLog,
        clock: Callable[[], float] = time.monotonic,
        duration: float | None = None,
    ) -> None:
        self.world = world
        self.run_dir = run_dir
        self.log = log
        self.clock = clock
        self.duration = duration
        self.counters: dict[str, int] = {"udp_errors": 0, "non_loopback": 0}
        self._udp: dict[tuple[int, int], asyncio.DatagramTransport] = {}
        self._tcp: list[asyncio.Server] = []
        self._control: asyncio.Server | None = None
        self._streams: dict[int, _Stream] = {car: _Stream() for car in world.cars}
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._busy = 0.0  # wall seconds spent inside the world
        self._steps_at_start = 0
        self.started_at = 0.0
        self.rtf_total: float | None = None
        self.load_total: float | None = None
        # camera frames are rendered in a worker process, off this loop
        self._render = RenderHost(world, log)
        # SITL cars serve their own endpoints, from their own processes
        self._sitl = (
            SitlHost(world, self.emit, log, clock, render=self._render)
            if world.firmware == "sitl"
            else None
        )

    # -- output ------------------------------------------------------------------

    def emit(self, step: Step) -> None:
        for send in step.sends:
            transport = self._udp.get((send.car, send.port))
            if transport is None or transport.is_closing():
                continue
            # A car answers only inside its own simulated network: loopback, or the
            # 198.18.0.0/15 test network of namespaces a test made. Never beyond.
            if not _same_sim_network(self.world.cars[send.car].spec.address, send.dst[0]):
                self.counters["non_loopback"] += 1
                continue
            transport.sendto(send.data, send.dst)
        for ev in step.events:
            self.log.log(ev.event, t=ev.t, **ev.fields)
        if step.notices and self._sitl is not None:
            self._sitl.notice(step.notices)

    def _timed(self, fn: Callable[[], Step]) -> Step:
        start = time.perf_counter()
        try:
            return fn()
        finally:
            self._busy += time.perf_counter() - start

    def _now(self) -> float:
        """The clock; physics that would lag it by more than ``MAX_LAG`` is skipped first.

        Whoever moves the world to now (pacing, a datagram, a frame) runs at most
        ``MAX_LAG`` of physics to catch up, however long this process was kept waiting.
        """
        now = max(self.clock(), self.world.t)
        if now - self.world.t_phys > MAX_LAG:
            self.world.skip_physics(now - MAX_LAG)
        return now

    def on_datagram(self, car: int, port: int, data: bytes, src: tuple[str, int]) -> None:
        now = self._now()
        self.emit(self._timed(lambda: self.world.deliver(car, port, data, src, now)))

    # -- start and stop ------------------------------------------------------------

    async def _bind_cars(self) -> None:
        """The model's cars: their UDP 4210/4211 and TCP 8080, served here."""
        loop = asyncio.get_running_loop()
        for car in self.world.cars.values():
            address = car.spec.address
            for port in (PORT_COMMAND, PORT_PROBE):
                try:
                    transport, _ = await loop.create_datagram_endpoint(
                        functools.partial(_CarDatagrams, self, car.id, port),
                        local_addr=(address, port),
                    )
                except OSError as exc:
                    raise BindError(address, port, "UDP", exc) from exc
                self._udp[(car.id, port)] = transport
            try:
                server = await asyncio.start_server(
                    functools.partial(self._camera_client, car.id),
                    host=address,
                    port=PORT_CAMERA,
                    reuse_address=True,
                )
            except OSError as exc:
                raise BindError(address, PORT_CAMERA, "TCP", exc) from exc
            self._tcp.append(server)

    async def start(self) -> None:
        try:
            if self.world.arena.sensing.mode == "camera" or self._sitl is not None:
                self._render.start()  # it builds its scene while the cars start
            if self._sitl is None:
                await self._bind_cars()
            else:
                await self._sitl.start()
            if self._render.state is State.STARTING:
                await self._render.wait_ready()  # or frames are rendered here
            key = write_world_key(self.run_dir)  # before the socket: clients wait for that
            self._control = await serve_control(
                control_path(self.run_dir), "world", key, self.handle_control, KEY_LABEL
            )
        except BaseException:
            await self.close()
            raise
        now = self.clock()
        self.emit(self.world.advance_to(max(now, self.world.t)))  # the start-up backlog
        self.started_at = now
        self._steps_at_start = self.world.physics_steps
        self._busy = 0.0
        self._tasks.append(asyncio.create_task(self._pace()))
        if self.duration is not None:
            self._tasks.append(asyncio.create_task(self._stop_after(self.duration)))

    def request_stop(self) -> None:
        self._stop.set()

    async def _stop_after(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        self._stop.set()

    async def wait(self) -> None:
        await self._stop.wait()

    async def close(self) -> None:
        if self._sitl is not None:
            await self._sitl.close()
        for task in self._tasks:
            task.cancel()
        for stream in self._streams.values():
            if stream.task is not None:
                stream.task.cancel()
            for writer in list(stream.clients):
                writer.close()
        for task in [*self._tasks, *(s.task for s in self._streams.values() if s.task)]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self._render.close()  # after the streams: none renders here meanwhile
        for transport in self._udp.values():
            transport.close()
        servers = [*self._tcp, *([self._control] if self._control else [])]
        for server in servers:
            server.close()
        for server in servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 1.0)
        self._udp.clear()
        self._tcp.clear()
        self._control = None
        with contextlib.suppress(FileNotFoundError):
            control_path(self.run_dir).unlink()
        remove_world_key(self.run_dir)
        wall = self.clock() - self.started_at if self.started_at else 0.0
        if wall > 0:
            stepped = (self.world.physics_steps - self._steps_at_start) * self.world.dt
            self.rtf_total = stepped / wall
            self.load_total = self._busy / wall

    # -- pacing ------------------------------------------------------------------

    async def _pace(self) -> None:
        world = self.world
        window_start, steps_at_start, busy_at_start = self.clock(), world.physics_steps, 0.0
        while True:
            if self._sitl is not None:
                self._sitl.poll()  # their motor outputs up to now, before physics passes them
            now = self._now()
            self.emit(self._timed(functools.partial(world.advance_to, now)))
            if now - window_start >= RTF_PERIOD:
                wall = now - window_start
                stepped = (world.physics_steps - steps_at_start) * world.dt
                self.log.log(
                    "rtf", t=now, rtf=round(stepped / wall, 4),
                    load=round((self._busy - busy_at_start) / wall, 4),
                    skipped=round(world.physics_skipped, 4),
                )  # fmt: skip
                window_start, steps_at_start, busy_at_start = now, world.physics_steps, self._busy
            await asyncio.sleep(max(0.0, world.t_phys + world.dt - self.clock()))

    # -- camera --------------------------------------------------------------------

    async def _camera_client(
        self, car: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        stream = self._streams[car]
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT)
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            writer.close()
            return
        except ConnectionError:
            writer.close()
            return
        request_line = head.split(b"\r\n", 1)[0].split()
        if len(request_line) < 2 or request_line[0] != b"GET" or request_line[1] != b"/stream":
            writer.write(
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            writer.close()
            return
        writer.write(response_head())
        stream.clients.add(writer)
        stream.boot[writer] = self.world.cars[car].nonce
        if stream.task is None or stream.task.done():
            stream.task = asyncio.create_task(self._camera_loop(car))
        self.log.log("camera_client", car=car, clients=len(stream.clients))
        try:
            while await reader.read(4096):  # a client sends nothing more; EOF ends it
                pass
        except ConnectionError:
            pass
        finally:
            self._drop_client(car, writer)

    def _drop_client(self, car: int, writer: asyncio.StreamWriter) -> None:
        stream = self._streams[car]
        if writer in stream.clients:
            stream.clients.discard(writer)
            stream.boot.pop(writer, None)
            writer.close()

    async def _camera_loop(self, car: int) -> None:
        """Render at the camera's rate while anyone watches; the newest frame or nothing."""
        stream = self._streams[car]
        period = 1.0 / self.world.arena.camera.fps
        next_at = self.clock()
        while stream.clients:
            try:
                frame = await self._frame(car)
            except WorldError:
                return
            nonce = self.world.cars[car].nonce
            part = (
                encode_part(frame.jpeg, frame.capture_ms, frame.boot_id, frame.seq)
                if frame is not None
                else None
            )
            for writer in list(stream.clients):
                if stream.boot.get(writer) != nonce:  # the car rebooted: its sockets are gone
                    self._drop_client(car, writer)
                    continue
                if part is None:
                    continue
                if writer.transport.get_write_buffer_size() > STREAM_BUFFER_LIMIT:
                    stream.frames_skipped += 1
                    continue
                writer.write(part)
                stream.frames_sent += 1
            next_at = max(next_at + period, self.clock())
            await asyncio.sleep(max(0.0, next_at - self.clock()))

    async def _frame(self, car: int) -> Frame | None:
        """The car's frame now: its job is taken here, rendered by the worker meanwhile."""
        start = time.perf_counter()
        try:
            job = self.world.frame_job(car, self._now())
            rendered = self._render.request(job) if isinstance(job, RenderJob) else None
        finally:
            self._busy += time.perf_counter() - start
            self.emit(self.world.drain())
        if not isinstance(job, RenderJob) or rendered is None:
            return job if isinstance(job, Frame) else None
        jpeg = await rendered
        return self.world.frame_done(job, jpeg) if jpeg is not None else None

    # -- control -------------------------------------------------------------------

    def handle_control(self, request: dict[str, Any]) -> dict[str, Any]:
        """One authenticated control request (worlds/control.py); refusals raise."""
        req = parse_request(request)
        now = max(self.clock(), self.world.t)
        world = self.world
        if req.cmd == "status":
            status = world.status()
            status["server"] = {
                "counters": dict(self.counters),
                "render": self._render.status(),
                "streams": {
                    str(car): {
                        "clients": len(s.clients),
                        "frames_sent": s.frames_sent,
                        "frames_skipped": s.frames_skipped,
                    }
                    for car, s in self._streams.items()
                },
            }
            return {"status": status}
        if req.cmd == "stop":
            self.request_stop()
            return {}
        assert req.car is not None
        if req.cmd == "drop_link":
            self.emit(world.drop_link(req.car, req.duration, now))
        elif req.cmd == "freeze_camera":
            self.emit(world.freeze_camera(req.car, req.duration, now))
        else:
            self.emit(world.reboot(req.car, now, down=req.duration))
        car = world.car(req.car)
        return {"car": car.id, "boot": car.nonce, "t": now}


async def serve(
    world: World,
    run_dir: Path,
    log: RunLog,
    duration: float | None,
    banner: Callable[[WorldServer], None],
) -> WorldServer:
    """Run until SIGINT/SIGTERM, a ``stop`` request or ``duration``; returns the stopped server."""
    server = WorldServer(world, run_dir, log, duration=duration)
    await server.start()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, server.request_stop)
    banner(server)
    try:
        await server.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await server.close()
    return server
