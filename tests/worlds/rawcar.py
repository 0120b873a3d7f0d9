"""Test helpers: a minimal raw MZ01 client and a world process fixture.

The client speaks the car protocol directly (HELLO, clock probes, ARM with
a good stamp, DRIVE), as any program following ``protocol/MZ01.md`` would.
"""

from __future__ import annotations

import contextlib
import os
import random
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from protocol.mz01 import (
    Command,
    Kind,
    ProbeRequest,
    Telemetry,
    TelemetryError,
    decode_probe_reply,
    encode_command,
    encode_probe_request,
    parse_telemetry,
)

REPO = Path(__file__).resolve().parents[2]


def free_subnet() -> str:
    """A loopback /24 prefix unlikely to collide with other tests running now."""
    return f"127.{random.randint(100, 250)}.{random.randint(1, 250)}"


class RawCar:
    """One controller of one car over real UDP sockets on loopback."""

    def __init__(self, address: str, robot_id: int) -> None:
        self.address = address
        self.robot_id = robot_id
        self.cmd = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.cmd.bind(("127.0.0.1", 0))
        self.probe_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.probe_sock.bind(("127.0.0.1", 0))
        self.offset: float | None = None  # car uptime (s) minus local monotonic (s)
        self.seq = 0
        self.probe_id = 0
        self.last: Telemetry | None = None
        self.last_drive_sent: float | None = None

    def close(self) -> None:
        self.cmd.close()
        self.probe_sock.close()

    def _send(self, kind: Kind, left: float = 0.0, right: float = 0.0, stamp: int = 0) -> None:
        last = self.last
        self.seq += 1
        cmd = Command(
            self.robot_id,
            kind,
            boot_nonce=last.boot if last else 0,
            session_token=last.token if last else 0,
            seq=self.seq,
            stamp_ms=stamp,
            left=left,
            right=right,
        )
        self.cmd.sendto(encode_command(cmd), (self.address, 4210))

    def telemetry(self, timeout: float = 1.0) -> Telemetry:
        """The next telemetry datagram (keeps the newest in ``last``)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no telemetry from {self.address}")
            ready, _, _ = select.select([self.cmd], [], [], left)
            if not ready:
                continue
            data, _ = self.cmd.recvfrom(9000)
            with contextlib.suppress(TelemetryError):
                self.last = parse_telemetry(data)
                return self.last

    def drain(self) -> Telemetry | None:
        """Read every queued telemetry datagram without waiting; the newest or None."""
        newest = None
        while select.select([self.cmd], [], [], 0)[0]:
            data, _ = self.cmd.recvfrom(9000)
            with contextlib.suppress(TelemetryError):
                newest = self.last = parse_telemetry(data)
        return newest

    def hello(self, timeout: float = 2.0) -> Telemetry:
        deadline = time.monotonic() + timeout
        while True:
            self._send(Kind.HELLO)
            try:
                return self.telemetry(min(0.3, max(0.01, deadline - time.monotonic())))
            except TimeoutError:
                if time.monotonic() > deadline:
                    raise

    def probe(self, timeout: float = 2.0) -> tuple[float, float, int]:
        """One clock probe: (sent, answered, car uptime in µs), local monotonic times."""
        self.probe_id += 1
        self.probe_sock.settimeout(timeout)
        t0 = time.monotonic()
        self.probe_sock.sendto(
            encode_probe_request(ProbeRequest(self.probe_id)), (self.address, 4211)
        )
        while True:
            data, _ = self.probe_sock.recvfrom(64)
            t1 = time.monotonic()
            reply = decode_probe_reply(data)
            if reply.request_id == self.probe_id:  # an older, late reply is skipped
                return t0, t1, reply.uptime_us

    def sync(self, samples: int = 8) -> float:
        """Map the car's uptime to the local clock from the probe with the best round trip."""
        best: tuple[float, float] | None = None
        for _ in range(samples):
            t0, t1, uptime_us = self.probe()
            offset = uptime_us / 1e6 - (t0 + t1) / 2
            if best is None or t1 - t0 < best[0]:
                best = (t1 - t0, offset)
        assert best is not None
        self.offset = best[1]
        return best[0]

    def uptime_ms(self, at: float | None = None) -> int:
        """The car's uptime at local monotonic time ``at`` (now), by the last sync()."""
        assert self.offset is not None, "sync() first"
        return int(((time.monotonic() if at is None else at) + self.offset) * 1000)

    def arm(self) -> Telemetry:
        """ARM with the current nonce, token and a fresh stamp; returns the armed telemetry."""
        self.drain()
        self._send(Kind.ARM, stamp=self.uptime_ms())
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            tel = self.telemetry(1.0)
            if tel.armed:
                return tel
        raise AssertionError(f"car {self.robot_id} did not arm: {self.last}")

    def drive(self, left: float, right: float) -> None:
        """DRIVE with a fresh stamp (MZ01.md: a DRIVE must be fresh too); sync() first.

        ``last_drive_sent`` is read before the datagram leaves (nobody can have it
        earlier) and is the moment its stamp gives, in the local clock."""
        sent = time.monotonic()
        self._send(Kind.DRIVE, left, right, stamp=self.uptime_ms(sent))
        self.last_drive_sent = sent

    def drive_for(self, left: float, right: float, seconds: float, rate: float = 30.0) -> None:
        start = time.monotonic()
        n = 0
        while True:
            due = start + n / rate
            if due - start > seconds:
                return
            time.sleep(max(0.0, due - time.monotonic()))
            self.drive(left, right)
            n += 1

    def wait_disarmed(self, timeout: float = 1.5) -> Telemetry:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            tel = self.telemetry(timeout)
            if not tel.armed:
                return tel
        raise AssertionError(f"car {self.robot_id} still armed")


class WorldProcess:
    """``python -m worlds`` as a child process; always stopped by :meth:`stop`."""

    def __init__(self, arena: Path, run_dir: Path, *extra: str) -> None:
        self.run_dir = run_dir
        env = dict(os.environ, PYTHONPATH=str(REPO))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "worlds", str(arena), "--run-dir", str(run_dir), *extra],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def wait_ready(self, timeout: float = 60.0) -> str:
        """Wait for the start banner (a generous deadline: a busy machine starts slowly)."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.1)
            if ready:
                line = self.proc.stdout.readline()
                if line.startswith("stigmesh world: arena"):
                    return line
                if not line and self.proc.poll() is not None:
                    break
        err = self.proc.stderr.read() if self.proc.poll() is not None and self.proc.stderr else ""
        raise AssertionError(f"world did not start: rc={self.proc.poll()} {err}")

    def stop(
        self, timeout: float = 10.0, sig: int | None = signal.SIGTERM
    ) -> tuple[int, str, str]:
        """Send ``sig`` (None: none, the world is stopping by itself), wait ``timeout`` s for
        the exit, then SIGKILL; (status, stdout, stderr)."""
        if sig is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate(timeout=5)
        return self.proc.returncode, out, err


@contextlib.contextmanager
def world_process(arena: Path, run_dir: Path, *extra: str) -> Iterator[WorldProcess]:
    world = WorldProcess(arena, run_dir, *extra)
    try:
        world.wait_ready()
        yield world
    finally:
        world.stop()


def arena_text(subnet: str, *, sensing: str = "synthetic", extra: str = "") -> str:
    """A 4 m x 4 m test arena: car 1 faces the west wall's two tags, car 2 sits apart."""
    return f"""\
name = "test_arena"
seed = 5

[room]
size = [4.0, 4.0]

[sensing]
mode = "{sensing}"

[[cars]]
id = 1
name = "walnut"
address = "{subnet}.1"
x = 1.3
y = 1.25
heading_deg = 180

[[cars]]
id = 2
name = "hazel"
address = "{subnet}.2"
x = 3.0
y = 3.0
heading_deg = 0

[[tags]]
id = 14
x = 0.0
y = 1.875
z = 0.21
yaw_deg = 0
size = 0.2

[[tags]]
id = 15
x = 0.0
y = 0.625
z = 0.21
yaw_deg = 0
size = 0.2

[[tags]]
id = 3
x = 4.0
y = 3.0
z = 0.21
yaw_deg = 180
size = 0.2

[target]
tag_id = 100
size = 0.12
height = 0.21

[target.motion]
kind = "orbit"
center = [2.6, 1.6]
radius = 0.5
speed = 0.5
{extra}"""
