"""The agent process: thin drivers around the sans-IO pieces.

Two threads, two event loops, two failure domains:

- the **car link** thread runs the controller session (DRIVE at 30 Hz, clock
  probes, telemetry timeout) and holds only the newest wheel decision, with
  its 0.3 s lease; nothing on the swarm side can delay it;
- the **main** thread runs the swarm sockets, discovery callbacks, the 10 Hz
  core tick and the log, and hands each decision to the car thread.

Time is ``time.monotonic()`` everywhere (``loop.time()`` is the same clock).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.camera import CameraDriver
from agents.carlink.adapter import CarAdapter, CarUpdate
from agents.carlink.lock import CarLock
from agents.console import status_line, summary_text
from agents.control import control_path, serve_control
from agents.core import AgentConfig, AgentCore
from agents.discovery import Discovery, DuplicateAgentError
from agents.faults import LinkFaults, parse_byzantine, parse_faults
from agents.health import Health
from agents.net import Interface, broadcast_socket, unicast_socket
from agents.node import SwarmNode
from agents.observations import ObservationBatch
from agents.perception.pipeline import Pipeline, PredictedPose
from agents.transport import Direction, TransportFaults
from protocol.control import parse_address, serve_control_tcp
from protocol.mz01.session import (
    COMMAND_PORT,
    PROBE_PORT,
    ControllerSession,
    SessionConfig,
    SessionState,
)
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


class _CarProtocol(asyncio.DatagramProtocol):
    def __init__(self, link: CarLink) -> None:
        self.link = link

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        self.link.on_datagram(data, (str(addr[0]), int(addr[1])))

    def error_received(self, exc: Exception) -> None:
        self.link.log("car_socket_error", error=str(exc))


class CarLink:
    """The controller session on its own thread and event loop."""

    def __init__(
        self,
        car: str,
        bind: str,
        log: RunLog,
        on_update: Callable[[CarUpdate], None],
        config: SessionConfig | None = None,
    ) -> None:
        self.car, self.bind, self._runlog = car, bind, log
        self.on_update = on_update
        self.session = ControllerSession(config)
        self.adapter = CarAdapter(self.session)
        self.connected = threading.Event()
        # Read by other threads (the camera worker): replaced whole, never mutated.
        self.clock_view: tuple[float, float] | None = None  # (offset, valid_until), synced
        self.boot: int | None = None
        self.view: tuple[str, bool, int | None, str] = ("connecting", False, None, "")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._transport: asyncio.DatagramTransport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._thread = threading.Thread(target=self._main, name="car-link", daemon=True)
        self._ready = threading.Event()
        self._stopped = threading.Event()

    def log(self, event: str, t: float | None = None, **fields: object) -> None:
        self._runlog.log(event, t=t, **fields)

    # -- called from other threads ---------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(5.0)

    def set_decision(self, left: float, right: float) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._set_decision, left, right)

    def stop(self, timeout: float = 2.0) -> None:
        """STOP the car, close the session and the thread."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._close)
        self._stopped.wait(timeout)
        self._thread.join(timeout)

    # -- the car thread -----------------------------------------------------------------

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._open())
            self._ready.set()
            loop.run_forever()
        finally:
            if self._transport is not None:
                self._transport.close()
            loop.run_until_complete(asyncio.sleep(0))
            loop.close()
            self._stopped.set()

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setblocking(False)
        sock.bind((self.bind, 0))
        transport, _ = await loop.create_datagram_endpoint(lambda: _CarProtocol(self), sock=sock)
        self._transport = transport
        self._service()

    def _now(self) -> float:
        return time.monotonic()

    def on_datagram(self, data: bytes, addr: Address) -> None:
        if addr[0] != self.car or addr[1] not in (COMMAND_PORT, PROBE_PORT):
            self.session.rejects.count("wrong_source")
            return
        now = self._now()
        if addr[1] == COMMAND_PORT:
            self.log("car_rx", t=now, raw=data)
        update = self.adapter.receive_datagram(data, addr[1], now)
        self._publish(now)
        if update is not None:
            self.connected.set()
            self.on_update(update)
        self._service()

    def _publish(self, now: float) -> None:
        s = self.session
        t = s.telemetry
        self.boot = t.boot if t is not None else None
        synced = s.synchronized_at_time(now)
        if synced:
            self.clock_view = (s.clock.offset_at_time(now), now + 0.5)
        else:
            self.clock_view = None
        self.view = (s.state.value, synced, None if t is None else t.id,
                     "" if t is None else t.reason)

    def car_to_local(self, uptime_s: float) -> float | None:
        """Car uptime (s) to the local clock; None while the car clock is unsynchronised."""
        view = self.clock_view
        if view is None or time.monotonic() > view[1]:
            return None
        return uptime_s - view[0]

    def _set_decision(self, left: float, right: float) -> None:
        self.adapter.set_decision(left, right, self._now())
        self._service()

    def _close(self) -> None:
        now = self._now()
        if self.session.state is not SessionState.CLOSED:
            self.session.close(now)
        self._flush(now)
        if self._timer is not None:
            self._timer.cancel()
        assert self._loop is not None
        self._loop.stop()

    def _service(self) -> None:
        """Run due timers, send what the session queued, re-arm the timer."""
        now = self._now()
        timer = self.session.get_timer()
        if timer is not None and timer <= now:
            self.session.handle_timer(now)
        self._flush(now)
        if self._timer is not None:
            self._timer.cancel()
        timer = self.session.get_timer()
        if timer is not None and self._loop is not None:
            self._timer = self._loop.call_at(max(timer, now), self._service)

    def _flush(self, now: float) -> None:
        for change in self.session.events():
            self.log(
                "car_session", t=change.t, old=change.old.value, new=change.new.value,
                cause=change.event.value, reason=change.reason,
            )
        if self._transport is None:
            return
        for tx in self.session.datagrams_to_send():
            self._transport.sendto(tx.data, (self.car, tx.port))
            if tx.kind != "probe":
                self.log("car_tx", t=now, kind=tx.kind, raw=tx.data)


class _SwarmProtocol(asyncio.DatagramProtocol):
    def __init__(self, runtime: AgentRuntime) -> None:
        self.runtime = runtime

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        self.runtime.on_swarm_datagram(data, (str(addr[0]), int(addr[1])))


class AgentRuntime:
    """One agent process; :meth:`run` until a signal, ``duration`` or a fatal error."""

    def __init__(self, options: RuntimeOptions) -> None:
        self.options = options
        o = options
        self.log = RunLog(log_path(o.run_dir, o.config.name), o.config.name, time.monotonic)
        self.core = AgentCore(o.config, time.monotonic())
        self.swarm_id = swarm_id_from_name(o.swarm)
        self.epoch = (
            o.epoch if o.epoch is not None else claim_epoch(o.run_dir, o.config.name, time.time())
        )
        self.node = SwarmNode(
            self.core, o.key, self.swarm_id, self.epoch, limit=o.limit, log=self.log.log
        )
        self.faults = TransportFaults(o.config.name, self.epoch, self._peer_name)
        self.fatal: str | None = None  # why the agent's own loop failed
        self.started = time.monotonic()
        self.health = Health(self.started, camera=o.pipeline is not None,
                             expect_car_id=o.car_id)
        self.warned: list[str] = []  # every warning of this run, for the summary
        self._next_status = self.started + (o.status_every or 0.0)
        self.lock = CarLock(o.car, o.lock_dir)
        self.car: CarLink | None = None
        self.camera: CameraDriver | None = None
        self._pose_view: PredictedPose | None = None  # for the camera worker, replaced whole
        self.discovery: Discovery | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tx: asyncio.DatagramTransport | None = None
        self._rx: asyncio.DatagramTransport | None = None
        self._stop: asyncio.Event | None = None
        self._control: asyncio.AbstractServer | None = None
        self._control_tcp: asyncio.AbstractServer | None = None

    # ------------------------------------------------------------------ inputs

    def now(self) -> float:
        return time.monotonic()

    def _peer_name(self, addr: Address) -> str | None:
        return self.core.peers.name_at(addr)

    def _fail(self, where: str, exc: BaseException) -> None:
        """The agent's own loop failed: say why, stop (the car is stopped on the way out)."""
        if self.fatal is None:
            self.fatal = f"{where} failed: {type(exc).__name__}: {exc}"
            self.log.log("fatal", where=where, error=f"{type(exc).__name__}: {exc}")
        if self._stop is not None:
            self._stop.set()

    def on_swarm_datagram(self, data: bytes, src: Address) -> None:
        copies = self.faults.incoming(data, src, self.now())
        self._log_faults()
        for copy in copies:
            if copy.delay <= 0:
                self._deliver(copy.data, src)
            elif self._loop is not None:
                self._loop.call_later(copy.delay, self._deliver, copy.data, src)

    def _deliver(self, data: bytes, src: Address) -> None:
        try:
            now = self.now()
            if self.node.receive_datagram(data, src, now) is None:
                rejection = self.node.receiver.last_rejection
                if rejection is not None and rejection.reason == "bad_mac":
                    self.health.bad_mac(src, now)
            self._flush()
        except Exception as exc:  # the core refuses bad input itself: this is our own bug
            self._fail("receiving a datagram", exc)

    def _log_faults(self) -> None:
        for record in self.faults.records():
            t = record.pop("t")
            self.log.log("fault", t=t, **record)

    def _on_car_update(self, update: CarUpdate) -> None:  # car thread
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._car_update, update)

    def _car_update(self, update: CarUpdate) -> None:
        now = self.now()
        if self.car is not None:
            self.health.car(now, self.car.view, self.car.boot)
        self.node.car_status(now, update.duty, update.gyro_z)
        if update.batch is not None:
            self.node.observations(update.batch, now)
        self._flush()

    def _on_camera_batch(self, batch: ObservationBatch, stages: dict[str, Any]) -> None:
        loop = self._loop  # camera worker thread
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._camera_batch, batch, stages)

    def _camera_batch(self, batch: ObservationBatch, stages: dict[str, Any]) -> None:
        now = self.now()
        names = {"t_capture": "capture", "t_receipt": "receipt", "t_decoded": "decode",
                 "t_detected": "detection", "t_posed": "pose"}  # RUNLOG.md stage names
        stamps = {names[k]: v for k, v in stages.items() if k in names}
        self.health.frame(now)
        if batch.tags:
            self.health.tag_seen(now)
        self.node.observations(batch, now, stages=stamps)
        self._flush()

    def _predicted(self, t: float) -> PredictedPose | None:
        return self._pose_view

    def _publish_pose(self) -> None:
        pose, cov = self.core.localizer.pose, self.core.localizer.cov
        self._pose_view = None if pose is None else PredictedPose(pose[0], pose[1], pose[2], cov)

    def _on_peer(self, name: str, addr: Address, epoch: int) -> None:  # zeroconf thread
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._discovered, name, addr, epoch)

    def _discovered(self, name: str, addr: Address, epoch: int) -> None:
        self.node.discovered(name, addr, epoch, self.now())
        self._flush()

    # ------------------------------------------------------------------ output

    def _flush(self) -> None:
        if self._tx is None:
            return
        bcast = (self.options.iface.broadcast, self.options.swarm_port)
        now = self.now()
        for dg in self.node.datagrams():
            dest = dg.to if dg.to is not None else bcast
            for copy in self.faults.outgoing(dg.data, dg.to, now):
                if copy.delay <= 0:
                    self._tx.sendto(copy.data, dest)
                elif self._loop is not None:
                    self._loop.call_later(copy.delay, self._send_later, copy.data, dest)
        self._log_faults()

    def _send_later(self, data: bytes, dest: Address) -> None:
        if self._tx is not None and not self._tx.is_closing():
            self._tx.sendto(data, dest)

    # ------------------------------------------------------------------ control

    def _control_request(self, req: dict[str, Any]) -> dict[str, Any]:
        now = self.now()
        cmd = req.get("cmd")
        if cmd == "status":
            return self.status(now)
        if cmd == "set":
            spec = parse_faults(str(req.get("faults", "")))
            direction = Direction(req.get("direction", "both"))
            change = self.faults.set(spec, direction, now)
            self.log.log("faults_set", **change)
            return {"faults": self.faults.status()}
        if cmd == "byzantine":
            byz = parse_byzantine(str(req.get("spec", "")))
            self.node.set_byzantine(byz, self.epoch, now)
            return {"byzantine": byz.to_mapping()}
        if cmd == "clear":
            self.faults.set(LinkFaults(), Direction.BOTH, now)
            self.node.set_byzantine(None, self.epoch, now)
            self.log.log("faults_set", direction="both", spec={})
            return {"faults": self.faults.status()}
        raise ValueError(f"unknown command {cmd!r} (status, set, byzantine, clear)")

    def status(self, now: float) -> dict[str, Any]:
        core = self.core
        car = self.car  # owned by the car thread: only what it publishes is read here
        decision = self.node.decision
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
                for name, p in sorted(core.peers.items())
            },
            "car": None if car is None else {
                "state": car.session.state.value,
                "synced": car.clock_view is not None,
                "boot": car.boot,
            },
            "rejected": self.node.receiver.counters.as_dict(),
            "core_counters": core.counters.as_dict(),
            "datagrams": {"in": self.node.datagrams_in, "out": self.node.datagrams_out},
            "bytes": {"in": self.node.bytes_in, "out": self.node.bytes_out},
            "faults": self.faults.status(),
            "warnings": [w.text for w in self.health.active],
            "byzantine": None if self.node.liar is None else self.node.liar.spec.to_mapping(),
        }

    # ------------------------------------------------------------------ running

    async def _ticker(self) -> None:
        assert self._stop is not None
        period = 1.0 / self.options.config.rates.tick
        next_at = self.now()
        while not self._stop.is_set():
            try:
                decision = self.node.tick(self.now())
                if decision is not None and self.car is not None:
                    self.car.set_decision(decision.duty_left, decision.duty_right)
                    self.log.log("decision_sent", mode=decision.mode.value)
                self._publish_pose()
                self._flush()
                self._watch(self.now())
            except Exception as exc:
                if self.car is not None:
                    self.car.set_decision(0.0, 0.0)
                self._fail("the decision loop", exc)
                return
            next_at += period
            delay = next_at - self.now()
            if delay < 0:  # fell behind: keep the cadence from now, never burst
                next_at, delay = self.now(), 0.0
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=delay)

    def _watch(self, now: float) -> None:
        """Warnings as they start and clear; the status line when due."""
        if self.car is not None:
            self.health.car(now, self.car.view, self.car.boot)
        self.health.peers(sum(1 for p in self.core.peers.active() if p.confirmed))
        started, cleared = self.health.check(now)
        name = self.options.config.name
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

    def _start_car(self) -> None:
        o = self.options
        try:
            self.lock.acquire()
        except Exception as exc:
            raise StartupError(str(exc), EXIT_LOCKED) from None
        self.car = CarLink(o.car, o.iface.address, self.log, self._on_car_update)
        self.car.start()
        if not self.car.connected.wait(o.car_timeout):
            raise StartupError(
                f"the car at {o.car} did not answer HELLO on UDP {COMMAND_PORT} within "
                f"{o.car_timeout:g} s (is it powered, on this network, and is the address right?)",
                EXIT_NO_CAR,
            )
        if o.pipeline is not None:
            car = self.car
            self.camera = CameraDriver(
                o.car, o.pipeline, lambda: car.boot, car.car_to_local, self._on_camera_batch,
                self.log.log, predict=self._predicted,
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
            key_id=hashlib.sha256(o.key).hexdigest()[:12], **(o.recorded or {}),
        )
        try:
            await asyncio.to_thread(self._start_car)
            tx_sock = unicast_socket(o.iface)
            rx_sock = broadcast_socket(o.iface, o.swarm_port)
            self._tx, _ = await self._loop.create_datagram_endpoint(
                lambda: _SwarmProtocol(self), sock=tx_sock
            )
            self._rx, _ = await self._loop.create_datagram_endpoint(
                lambda: _SwarmProtocol(self), sock=rx_sock
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
            # Tick (and so PING peers) from now on; mDNS registration probes the
            # network for about a second and must not hold that up.
            ticker = asyncio.create_task(self._ticker())
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
                    await ticker
                    raise StartupError(str(exc), EXIT_USAGE) from None
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), o.duration)
            finally:
                self._stop.set()
                await ticker
            return EXIT_OK if self.fatal is None else EXIT_FAILED
        finally:
            await self._shutdown()

    async def _shutdown(self) -> None:
        if self._control_tcp is not None:
            self._control_tcp.close()
        if self._control is not None:
            self._control.close()
            control_path(self.options.run_dir, self.options.config.name).unlink(missing_ok=True)
        if self._tx is not None:
            bye = self.node.sender.seal(Bye("shutdown"), self.now())
            self._tx.sendto(bye, (self.options.iface.broadcast, self.options.swarm_port))
            self.log.log("tx", to=None, kind="bye", raw=bye)
        if self.camera is not None:
            self.camera.stop()
            self.log.log("camera_stats", **self.camera.stats())
        if self.car is not None:
            self.car.stop()
        if self.discovery is not None:
            await asyncio.to_thread(self.discovery.close)
        for transport in (self._tx, self._rx):
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
