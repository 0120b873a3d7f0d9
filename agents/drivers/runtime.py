"""The agent process: a thin driver around the sans-IO :class:`~agents.agent.Agent`.

One event loop holds the swarm sockets, the car's socket and the agent's timer;
every input goes to the agent with ``now``, then whatever it has to send goes
out and its timer is armed again. Threads only feed the loop: the camera
worker (frames through perception), zeroconf (discovered addresses). A failure
of the agent's own code stops the car, says why and ends the process with
status 1; the car's firmware stops it anyway 300 ms after the last DRIVE.

Time is ``time.monotonic()`` everywhere (``loop.time()`` is the same clock).

Why one module of ~500 lines: it is one event loop and the handlers it runs;
the sockets, camera, discovery and control socket are the drivers beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.agent import Agent, Outgoing
from agents.config import AgentConfig
from agents.drivers.camera import CameraDriver
from agents.drivers.carlock import CarLock
from agents.drivers.console import status_line, summary_text
from agents.drivers.control import control_path, serve_control
from agents.drivers.discovery import Discovery, DuplicateAgentError
from agents.drivers.net import Interface, broadcast_socket, unicast_socket
from agents.faults import LinkFaults, parse_byzantine, parse_faults
from agents.health import Health
from agents.observations import ObservationBatch
from agents.perception.pipeline import Pipeline, PredictedPose
from agents.transport import Direction
from protocol.control import parse_address, serve_control_tcp
from protocol.mz01.session import (
    COMMAND_PORT,
    PROBE_PORT,
)
from protocol.mz01.telemetry import Telemetry
from protocol.runlog import RunLog, log_path
from protocol.swarm import Bye, swarm_id_from_name
from protocol.swarm.messages import DEFAULT_SWARM_PORT
from protocol.swarm.sender import next_epoch

Address = tuple[str, int]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_CAR, EXIT_LOCKED = 0, 1, 2, 3, 4


class StartupError(RuntimeError):
    """The agent cannot start; ``exit_code`` says why (see the EXIT_ constants)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class RuntimeOptions:
    config: AgentConfig
    car: str  # the car's IPv4 address
    iface: Interface
    key: bytes
    swarm: str
    run_dir: Path
    swarm_port: int = DEFAULT_SWARM_PORT
    static_peers: tuple[tuple[str, Address], ...] = ()
    mdns: bool = True
    limit: int = 1200
    duration: float | None = None
    car_timeout: float = 5.0
    lock_dir: Path | None = None
    epoch: int | None = None  # None: the next epoch of this name (see claim_epoch)
    pipeline: Pipeline | None = None  # camera sensing: the perception pipeline to run
    car_id: int | None = None  # the robot id the car must report
    status_every: float | None = None  # s between console status lines; None: quiet
    control_listen: str | None = None  # ADDRESS:PORT for control over TCP (off: None)
    recorded: Mapping[str, Any] | None = None  # what the log's start event keeps for replay


def claim_epoch(run_dir: Path, name: str, wall_seconds: float) -> int:
    """This start's epoch, above the last one this run directory saw for ``name``."""
    path = run_dir / f"{name}.epoch"
    previous: int | None = None
    with contextlib.suppress(OSError, ValueError):
        previous = int(path.read_text(encoding="ascii").strip())
    epoch = next_epoch(previous, wall_seconds)
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".epoch.tmp")
    tmp.write_text(f"{epoch}\n", encoding="ascii")
    tmp.replace(path)
    return epoch


class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, on: Callable[[bytes, Address], None]) -> None:
        self.on = on

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        self.on(data, (str(addr[0]), int(addr[1])))


class AgentRuntime:
    """One agent process; :meth:`run` until a signal, ``duration`` or a fatal error."""

    def __init__(self, options: RuntimeOptions) -> None:
        self.options = o = options
        self.log = RunLog(log_path(o.run_dir, o.config.name), o.config.name, time.monotonic)
        self.swarm_id = swarm_id_from_name(o.swarm)
        self.epoch = (
            o.epoch if o.epoch is not None else claim_epoch(o.run_dir, o.config.name, time.time())
        )
        self.started = time.monotonic()
        self.agent = Agent(
            o.config, key=o.key, swarm_id=self.swarm_id, epoch=self.epoch, t0=self.started,
            limit=o.limit, log=self.log.log, robot_id=o.car_id or 0,
        )  # fmt: skip
        self.core, self.node = self.agent.core, self.agent.node
        self.fatal: str | None = None  # why the agent's own loop failed
        self.health = Health(self.started, camera=o.pipeline is not None,
                             expect_car_id=o.car_id)
        self.warned: list[str] = []  # every warning of this run, for the summary
        self._next_status = self.started + (o.status_every or 0.0)
        self.lock = CarLock(o.car, o.lock_dir)
        self.camera: CameraDriver | None = None
        self.discovery: Discovery | None = None
        # Read by other threads (the camera worker): replaced whole, never mutated.
        self._pose_view: PredictedPose | None = None
        self._clock_view: tuple[float, float] | None = None  # car offset, valid until
        self._boot: int | None = None
        self._telemetry_seen: Telemetry | None = None  # the newest the health has seen
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tx: asyncio.DatagramTransport | None = None
        self._rx: asyncio.DatagramTransport | None = None
        self._car: asyncio.DatagramTransport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._stop: asyncio.Event | None = None
        self._car_heard: asyncio.Event | None = None
        self._control: asyncio.AbstractServer | None = None
        self._control_tcp: asyncio.AbstractServer | None = None

    def now(self) -> float:
        return time.monotonic()

    # ------------------------------------------------------------------ inputs

    def _guard(self, where: str, action: Callable[[float], None]) -> None:
        """Run one input through the agent, then service it; a failure here is fatal."""
        if self.fatal is not None:
            return
        now = self.now()
        try:
            action(now)
        except Exception as exc:  # the core refuses bad input itself: this is our own bug
            self._fail(where, exc)
            return
        try:  # the agent's timer: its beat, decisions, the car session
            self._service(now)
        except Exception as exc:
            self._fail("the decision loop", exc)
            return
        if self.log.error is not None:  # a robot that cannot keep its record stops
            self._fail("writing the log", OSError(self.log.error))

    def on_swarm_datagram(self, data: bytes, src: Address) -> None:
        def take(now: float) -> None:
            before = self.node.receiver.counters["bad_mac"]
            self.agent.receive_datagram(data, src, now)
            if self.node.receiver.counters["bad_mac"] > before:
                self.health.bad_mac(src, now)

        self._guard("receiving a datagram", take)

    def on_car_datagram(self, data: bytes, src: Address) -> None:
        if src[0] != self.options.car or src[1] not in (COMMAND_PORT, PROBE_PORT):
            self.agent.session.rejects.count("wrong_source")
            return

        def take(now: float) -> None:
            if src[1] == COMMAND_PORT:
                self.log.log("car_rx", t=now, raw=data)
            self.agent.receive_car(data, src[1], now)
            self._publish_car(now)

        self._guard("the car link", take)

    def _publish_car(self, now: float) -> None:
        s = self.agent.session
        t = s.telemetry
        if t is not None:
            self._boot = t.boot
            if t is not self._telemetry_seen:  # a new object: does the car have a gyro?
                self._telemetry_seen = t
                self.health.telemetry(now, t.gyro_z is not None, t.gyro_angle is not None)
            if self._car_heard is not None:
                self._car_heard.set()
        synced = s.synchronized_at_time(now)
        self._clock_view = (s.clock.offset_at_time(now), now + 0.5) if synced else None
        view = (s.state.value, synced, None if t is None else t.id, "" if t is None else t.reason)
        self.health.car(now, view, self._boot)
        self.health.car_clock(s.clock.fastest_round_trip_at_time(now),
                              s.clock.round_trip_limit())

    def car_to_local(self, uptime_s: float) -> float | None:
        """Car uptime (s) to the local clock, for the camera worker; None while unsynced."""
        view = self._clock_view
        if view is None or time.monotonic() > view[1]:
            return None
        return uptime_s - view[0]

    def _on_camera_batch(self, batch: ObservationBatch, stages: dict[str, Any]) -> None:
        self._threadsafe(self._camera_batch, batch, stages)  # from the camera worker

    def _camera_batch(self, batch: ObservationBatch, stages: dict[str, Any]) -> None:
        names = {"t_capture": "capture", "t_receipt": "receipt", "t_decoded": "decode",
                 "t_detected": "detection", "t_posed": "pose"}  # RUNLOG.md stage names
        stamps = {names[k]: v for k, v in stages.items() if k in names}

        def take(now: float) -> None:
            self.health.frame(now)
            if batch.tags:
                self.health.tag_seen(now)
            self.agent.receive_frame(batch, now, stamps)

        self._guard("a camera frame", take)

    def _predicted(self, t: float) -> PredictedPose | None:
        return self._pose_view

    def _on_peer(self, name: str, addr: Address, epoch: int) -> None:  # zeroconf thread
        self._threadsafe(self._discovered, name, addr, epoch)

    def _discovered(self, name: str, addr: Address, epoch: int) -> None:
        self._guard("discovery", lambda now: self.agent.discovered(name, addr, epoch, now))

    def _threadsafe(self, fn: Callable[..., None], *args: Any) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(fn, *args)

    # ------------------------------------------------------------------ the timer, output

    def _on_timer(self) -> None:
        self._timer = None
        self._guard("the decision loop", lambda now: None)

    def _service(self, now: float) -> None:
        """Run what is due, send what the agent has, arm the timer for its next deadline."""
        self._send(now, self.agent.service(now))
        timer = self.agent.get_timer()
        pose, cov = self.core.localizer.pose, self.core.localizer.cov
        self._pose_view = None if pose is None else PredictedPose(pose[0], pose[1], pose[2], cov)
        if self._loop is not None and timer is not None:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self._loop.call_at(max(timer, now), self._on_timer)

    def _flush(self, now: float) -> None:
        self._send(now, self.agent.datagrams_to_send(now))

    def _send(self, now: float, outgoing: list[Outgoing]) -> None:
        for change in self.agent.session_events():
            self.log.log("car_session", t=change.t, old=change.old.value, new=change.new.value,
                         cause=change.event.value, reason=change.reason)
        bcast = (self.options.iface.broadcast, self.options.swarm_port)
        for out in outgoing:
            if out.car:
                if self._car is not None:
                    self._car.sendto(out.data, (self.options.car, out.port))
                if out.kind != "probe":
                    self.log.log("car_tx", t=now, kind=out.kind, raw=out.data)
            elif self._tx is not None and not self._tx.is_closing():
                self._tx.sendto(out.data, out.to if out.to is not None else bcast)

    def _fail(self, where: str, exc: BaseException) -> None:
        """The agent's own code failed: say why and stop; the car is stopped on the way out."""
        if self.fatal is None:
            self.fatal = f"{where} failed: {type(exc).__name__}: {exc}"
            self.log.log("fatal", where=where, error=f"{type(exc).__name__}: {exc}")
        with contextlib.suppress(Exception):
            now = self.now()
            self.agent.stop_car(now)
            self.agent.session.stop(now)
            self._flush(now)
        if self._stop is not None:
            self._stop.set()

    # ------------------------------------------------------------------ control

    def _control_request(self, req: dict[str, Any]) -> dict[str, Any]:
        now = self.now()
        cmd = req.get("cmd")
        agent = self.agent
        if cmd == "status":
            return self.status(now)
        if cmd == "set":
            spec = parse_faults(str(req.get("faults", "")))
            agent.set_faults(spec, Direction(req.get("direction", "both")), now)
            return {"faults": agent.faults.status()}
        if cmd == "byzantine":
            byz = parse_byzantine(str(req.get("spec", "")))
            agent.set_byzantine(byz, now)
            return {"byzantine": byz.to_mapping()}
        if cmd == "clear":
            agent.set_faults(LinkFaults(), Direction.BOTH, now)
            agent.set_byzantine(None, now)
            return {"faults": agent.faults.status()}
        raise ValueError(f"unknown command {cmd!r} (status, set, byzantine, clear)")

    def status(self, now: float) -> dict[str, Any]:
        core, agent = self.core, self.agent
        decision = agent.decision
        return {
            "agent": core.config.name,
            "epoch": self.epoch,
            "mode": None if decision is None else decision.mode.value,
            "pose": core.localizer.pose,
            "track": None if not core.track.initialised else {
                "x": core.track.state[:2].tolist(),
                "uncertainty": core.track.uncertainty,
                "confident": core.track_confident(now),
            },
            "peers": {
                name: {
                    "lost": p.lost,
                    "addr": list(p.addr),
                    "silent_s": (
                        round(now - p.last_heard, 3) if math.isfinite(p.last_heard) else None
                    ),
                    "score": core.reputation.score(name),
                    "fused": core.reputation.fusable(name),
                    "clock_synced": p.clock.synchronized_at_time(now),
                }
                for name, p in core.peers.items()
            },
            "car": {
                "state": agent.session.state.value,
                "synced": agent.session.synchronized_at_time(now),
                "boot": self._boot,
            },
            "rejected": self.node.receiver.counters.as_dict(),
            "core_counters": core.counters.as_dict(),
            "datagrams": {"in": self.node.datagrams_in, "out": self.node.datagrams_out},
            "bytes": {"in": self.node.bytes_in, "out": self.node.bytes_out},
            "faults": agent.faults.status(),
            "warnings": [w.text for w in self.health.active],
            "byzantine": None if self.node.liar is None else self.node.liar.spec.to_mapping(),
        }

    # ------------------------------------------------------------------ running

    async def _watcher(self) -> None:
        """Warnings as they start and clear, and the status line when due (2 Hz)."""
        assert self._stop is not None
        name = self.options.config.name
        while not self._stop.is_set():
            now = self.now()
            self.health.peers(sum(1 for p in self.core.peers.active() if p.confirmed))
            started, cleared = self.health.check(now)
            for w in started:
                self.warned.append(w.text)
                self.log.log("warning", key=w.key, text=w.text)
                print(f"{name}: warning: {w.text}", file=sys.stderr, flush=True)
            for w in cleared:
                self.log.log("warning_cleared", key=w.key)
                print(f"{name}: ok again: {w.key}", file=sys.stderr, flush=True)
            every = self.options.status_every
            if every is not None and now >= self._next_status:
                self._next_status = max(self._next_status + every, now)
                print(status_line(self.status(now), now - self.started), flush=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=0.5)

    async def _open_car(self) -> None:
        o = self.options
        assert self._loop is not None
        try:
            await asyncio.to_thread(self.lock.acquire)
        except Exception as exc:
            raise StartupError(str(exc), EXIT_LOCKED) from None
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setblocking(False)
        sock.bind((o.iface.address, 0))
        self._car, _ = await self._loop.create_datagram_endpoint(
            lambda: _Datagrams(self.on_car_datagram), sock=sock
        )
        self._car_heard = asyncio.Event()
        self._service(self.now())  # the session's first HELLO and probe
        try:
            await asyncio.wait_for(self._car_heard.wait(), o.car_timeout)
        except TimeoutError:
            wrong = self.agent.session.rejects["wrong_robot"]
            why = (f"it answers as another robot than id {o.car_id}" if wrong else
                   "is it powered, on this network, and is the address right?")
            raise StartupError(
                f"the car at {o.car} did not answer HELLO on UDP {COMMAND_PORT} within "
                f"{o.car_timeout:g} s ({why})", EXIT_NO_CAR,
            ) from None
        if o.pipeline is not None:
            self.camera = CameraDriver(
                o.car, o.pipeline, lambda: self._boot, self.car_to_local,
                self._on_camera_batch, self.log.log, predict=self._predicted,
            )
            self.camera.start()

    async def run(self) -> int:
        o = self.options
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                self._loop.add_signal_handler(sig, self._stop.set)
        self.log.log(
            "start", name=o.config.name, swarm=o.swarm, swarm_id=self.swarm_id, epoch=self.epoch,
            car=o.car, iface=o.iface.name, address=o.iface.address, broadcast=o.iface.broadcast,
            port=o.swarm_port, fusion=o.config.fusion, reputation=o.config.use_reputation,
            key_id=hashlib.sha256(o.key).hexdigest()[:12], t0=self.started,
            **(o.recorded or {}),
        )
        try:
            await self._open_car()
            tx_sock = unicast_socket(o.iface)
            rx_sock = broadcast_socket(o.iface, o.swarm_port)
            self._tx, _ = await self._loop.create_datagram_endpoint(
                lambda: _Datagrams(self.on_swarm_datagram), sock=tx_sock
            )
            self._rx, _ = await self._loop.create_datagram_endpoint(
                lambda: _Datagrams(self.on_swarm_datagram), sock=rx_sock
            )
            port = tx_sock.getsockname()[1]
            self._control = await serve_control(
                control_path(o.run_dir, o.config.name), o.config.name, o.key,
                self._control_request,
            )
            control_tcp = None
            if o.control_listen is not None:
                where = parse_address(o.control_listen)
                try:
                    self._control_tcp = await serve_control_tcp(
                        where, o.config.name, o.key, self._control_request, "swarm key"
                    )
                except OSError as exc:
                    why = exc.strerror or str(exc)
                    raise StartupError(f"--control-listen {o.control_listen}: {why}",
                                       EXIT_USAGE) from None
                control_tcp = list(where)
            self.log.log("listening", unicast=[o.iface.address, port], broadcast=o.swarm_port,
                         control_tcp=control_tcp)
            for name, addr in o.static_peers:
                self._discovered(name, addr, 0)
            watcher = asyncio.create_task(self._watcher())
            # The agent runs (and PINGs peers) from now on; mDNS registration probes the
            # network for about a second and must not hold that up.
            if o.mdns:
                self.discovery = Discovery(
                    o.iface, name=o.config.name, swarm=o.swarm, epoch=self.epoch, port=port,
                    on_peer=self._on_peer,
                )
                try:
                    await asyncio.to_thread(self.discovery.start)
                except DuplicateAgentError as exc:
                    self.discovery = None
                    self._stop.set()
                    await watcher
                    raise StartupError(str(exc), EXIT_USAGE) from None
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), o.duration)
            finally:
                self._stop.set()
                await watcher
            return EXIT_OK if self.fatal is None else EXIT_FAILED
        finally:
            await self._shutdown()

    async def _shutdown(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._control_tcp is not None:
            self._control_tcp.close()
        if self._control is not None:
            self._control.close()
            control_path(self.options.run_dir, self.options.config.name).unlink(missing_ok=True)
        now = self.now()
        if self._tx is not None:
            bye = self.node.sender.seal(Bye("shutdown"), now)
            self._tx.sendto(bye, (self.options.iface.broadcast, self.options.swarm_port))
            self.log.log("tx", to=None, kind="bye", raw=bye)
        if self.camera is not None:
            self.camera.stop()
            self.log.log("camera_stats", **self.camera.stats())
        if self._car is not None:  # STOP the car, close the session
            with contextlib.suppress(Exception):
                self.agent.session.close(now)
                self._flush(now)
            await asyncio.sleep(0)  # let the STOP leave before the socket closes
        if self.discovery is not None:
            await asyncio.to_thread(self.discovery.close)
        for transport in (self._tx, self._rx, self._car):
            if transport is not None:
                transport.close()
        self.lock.release()
        self.node.flush_rejections(self.now(), final=True)
        self.log.log("stop", counters=self.node.receiver.counters.as_dict(),
                     refused=self.core.counters.as_dict(), fatal=self.fatal)
        if self.options.status_every is not None or self.warned:
            print(summary_text(self.status(self.now()), self.now() - self.started, self.warned),
                  flush=True)
        self.log.close()
