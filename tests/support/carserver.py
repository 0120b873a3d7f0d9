"""The reference firmware model served on real loopback sockets, for end-to-end tests.

``ModelCar`` binds UDP 4210 and 4211 on its own loopback address (Linux routes
all of 127.0.0.0/8 to ``lo``) and runs the model's 5 ms tick on a thread, so a
test can talk to it exactly as to a real car.
"""

from __future__ import annotations

import random
import select
import socket
import threading
import time

from protocol.mz01.firmware import FirmwareModel

TICK = 0.005


def free_address() -> str:
    """A loopback address unlikely to collide with other tests running now."""
    return f"127.{random.randint(100, 250)}.{random.randint(1, 250)}.{random.randint(2, 250)}"


class ModelCar:
    def __init__(self, address: str, robot_id: int = 1, nonce: int = 0xB0071D00) -> None:
        self.address = address
        self.model = FirmwareModel(robot_id, nonce, token=77)
        self.booted = time.monotonic() - 42.0  # the car has been up for a while
        self.cmd = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.cmd.bind((address, 4210))
        self.probe.bind((address, 4211))
        self.lock = threading.Lock()
        self.wheel_log: list[tuple[float, tuple[float, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def firmware(self) -> FirmwareModel:
        """The car's firmware state (as ``SitlCar.firmware`` for the SITL car)."""
        return self.model

    def uptime_us(self) -> int:
        return int((time.monotonic() - self.booted) * 1e6)

    def __enter__(self) -> ModelCar:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(2.0)
        self.cmd.close()
        self.probe.close()

    def _record(self, before: tuple[float, float]) -> None:
        if self.model.wheels != before:
            self.wheel_log.append((time.monotonic(), self.model.wheels))

    def _run(self) -> None:
        next_tick = time.monotonic()
        while not self._stop.is_set():
            wait = max(0.0, next_tick - time.monotonic())
            readable, _, _ = select.select([self.cmd, self.probe], [], [], wait)
            with self.lock:
                for sock in readable:
                    data, src = sock.recvfrom(65536)
                    if sock is self.probe:
                        reply = self.model.receive_probe(data, src, self.uptime_us())
                        if reply is not None:
                            self.probe.sendto(reply.data, reply.dst)
                        continue
                    before = self.model.wheels
                    result = self.model.receive_datagram(data, src, self.uptime_us())
                    for out in result.outgoing:
                        self.cmd.sendto(out.data, out.dst)
                    self._record(before)
                if time.monotonic() >= next_tick:
                    before = self.model.wheels
                    result = self.model.tick(self.uptime_us())
                    for out in result.outgoing:
                        self.cmd.sendto(out.data, out.dst)
                    self._record(before)
                    next_tick += TICK
