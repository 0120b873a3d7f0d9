"""A controller session and a reference firmware model wired together in virtual time.

The car's uptime clock starts at its own boot (``boot_at`` on the world clock)
and may run fast or slow (``drift_ppm``), so the session's clock mapping is
really exercised. Datagrams take ``latency`` seconds each way; a
``route_packet`` hook may drop or delay them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from protocol.eventqueue import EventQueue
from protocol.mz01.firmware import Event, FirmwareModel
from protocol.mz01.session import COMMAND_PORT, PROBE_PORT, ControllerSession, StateChange

TICK = 0.005
Address = tuple[str, int]
CAR: Address = ("127.0.2.1", COMMAND_PORT)
CONTROLLER: Address = ("127.0.0.1", 50000)


@dataclass
class SimCar:
    model: FirmwareModel
    boot_at: float = -12.345
    drift_ppm: float = 0.0

    def uptime_us(self, t: float) -> int:
        return int((t - self.boot_at) * (1.0 + self.drift_ppm * 1e-6) * 1e6)


@dataclass
class Bench:
    car: SimCar
    latency: float = 0.002
    drop: Callable[[str, bytes], bool] = lambda direction, data: False
    now: float = 0.0
    controllers: dict[Address, ControllerSession] = field(default_factory=dict)
    car_events: list[tuple[float, Event]] = field(default_factory=list)
    session_events: list[tuple[Address, StateChange]] = field(default_factory=list)
    wheel_log: list[tuple[float, tuple[float, float]]] = field(default_factory=list)
    sent_log: list[tuple[float, Address, str, bytes]] = field(default_factory=list)
    _queue: EventQueue[Callable[[], None]] = field(default_factory=EventQueue)
    _next_tick: float = 0.0

    def add_controller(self, session: ControllerSession, addr: Address = CONTROLLER) -> None:
        self.controllers[addr] = session

    def _schedule(self, at: float, action: Callable[[], None]) -> None:
        self._queue.push(at, action)

    def _to_car(self, src: Address, port: int, data: bytes) -> None:
        if self.drop("up", data):
            return

        def deliver() -> None:
            up = self.car.uptime_us(self.now)
            if port == PROBE_PORT:
                reply = self.car.model.receive_probe(data, src, up)
                if reply is not None:
                    self._to_controller(reply.dst, PROBE_PORT, reply.data)
                return
            before = self.car.model.wheels
            result = self.car.model.receive_datagram(data, src, up)
            self.car_events += [(self.now, e) for e in result.events]
            for out in result.outgoing:
                self._to_controller(out.dst, COMMAND_PORT, out.data)
            if self.car.model.wheels != before:
                self.wheel_log.append((self.now, self.car.model.wheels))

        self._schedule(self.now + self.latency, deliver)

    def _to_controller(self, dst: Address, port: int, data: bytes) -> None:
        if self.drop("down", data):
            return
        session = self.controllers.get(dst)
        if session is not None:
            self._schedule(
                self.now + self.latency, lambda: session.receive_datagram(data, port, self.now)
            )

    def _flush(self) -> None:
        for addr, session in self.controllers.items():
            for tx in session.datagrams_to_send():
                self.sent_log.append((self.now, addr, tx.kind, tx.data))
                self._to_car(addr, tx.port, tx.data)
            self.session_events += [(addr, e) for e in session.events()]

    def run_until(self, t_end: float, step: Callable[[float], None] | None = None) -> None:
        """Advance virtual time; ``step(now)`` runs every millisecond (e.g. set decisions)."""
        while self.now < t_end - 1e-12:
            self.now = round(self.now + 0.001, 9)
            if step is not None:
                step(self.now)
            for action in self._queue.due(self.now):
                action()
            if self.now >= self._next_tick - 1e-12:
                before = self.car.model.wheels
                result = self.car.model.tick(self.car.uptime_us(self.now))
                self.car_events += [(self.now, e) for e in result.events]
                for out in result.outgoing:
                    self._to_controller(out.dst, COMMAND_PORT, out.data)
                if self.car.model.wheels != before:
                    self.wheel_log.append((self.now, self.car.model.wheels))
                self._next_tick += TICK
            for session in self.controllers.values():
                timer = session.get_timer()
                if timer is not None and timer <= self.now:
                    session.handle_timer(self.now)
            self._flush()
