"""``stigmesh bench carlink``: the MZ01 link's costs, each against a floor from the same run.

Cases: encode and decode of one command packet (floor: ``struct`` packing of
the same fields), one firmware-model step per datagram (floor: decode alone),
the loopback round trip of HELLO to telemetry through a model served on
its own thread (floor: a raw UDP echo on the same loopback, same thread setup),
and the differential fuzzer of the C core against the Python model (50 000
sequences, 2 000 with ``--quick``; its target is no mismatch; floor: the
Python model's side alone on the same sequences).
"""

from __future__ import annotations

import select
import socket
import statistics
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

from protocol.mz01.firmware import FirmwareModel
from protocol.mz01.packet import Command, Kind, decode_command, encode_command
from tools.vectors import difffuzz

_FIELDS = struct.Struct(">4sBBHIIIIff")


def _median_time(fn: Callable[[], object], reps: int, inner: int) -> float:
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def _case(name: str, median: float, floor: float, **extra: Any) -> dict[str, Any]:
    return {"case": name, "median_s": median, "floor_s": floor, "ratio": median / floor, **extra}


class _Server:
    """A thread answering datagrams on one socket with ``respond(data, src)``."""

    def __init__(self, address: str, port: int,
                 respond: Callable[[bytes, tuple[str, int]], list[bytes]]) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((address, port))
        self.respond = respond
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            readable, _, _ = select.select([self.sock], [], [], 0.05)
            if readable:
                data, src = self.sock.recvfrom(65536)
                for reply in self.respond(data, src):
                    self.sock.sendto(reply, src)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(1.0)
        self.sock.close()


def _round_trips(
    dests: tuple[tuple[str, int], ...], payload: bytes, n: int
) -> list[list[float]]:
    """Round trips to each destination, interleaved so both see the same machine load."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(1.0)
    out: list[list[float]] = [[] for _ in dests]
    try:
        for _ in range(n):
            for k, dest in enumerate(dests):
                t0 = time.perf_counter()
                sock.sendto(payload, dest)
                sock.recvfrom(65536)
                out[k].append(time.perf_counter() - t0)
    finally:
        sock.close()
    return out


def run(quick: bool) -> list[dict[str, Any]]:
    reps, inner = (5, 2000) if quick else (15, 20000)
    cmd = Command(7, Kind.DRIVE, 0, 0xC0FFEE01, 41, 12345, 999, 0.5, -0.25)
    raw = encode_command(cmd)
    floor_pack = _median_time(
        lambda: _FIELDS.pack(b"MZ01", 7, 3, 0, 0xC0FFEE01, 41, 12345, 999, 0.5, -0.25),
        reps, inner,
    )
    floor_unpack = _median_time(lambda: _FIELDS.unpack(raw), reps, inner)
    cases = [
        _case("encode_command", _median_time(lambda: encode_command(cmd), reps, inner),
              floor_pack),
        _case("decode_command", _median_time(lambda: decode_command(raw), reps, inner),
              floor_unpack),
    ]
    model = FirmwareModel(7, 0xC0FFEE01, 41)
    src = ("127.0.0.1", 5000)
    hello = encode_command(Command(7, Kind.HELLO))
    model.receive_datagram(hello, src, 1_000)
    arm = encode_command(Command(7, Kind.ARM, 0, 0xC0FFEE01, 41, 1, 1, 0.0, 0.0))
    model.receive_datagram(arm, src, 1_000)
    seq = [1]
    now = [1_000]

    def drive_step() -> None:
        seq[0] += 1
        now[0] += 1000
        stamp = now[0] // 1000
        data = encode_command(Command(7, Kind.DRIVE, 0, 0xC0FFEE01, 41, seq[0], stamp, 0.5, 0.5))
        model.receive_datagram(data, src, now[0])

    def decode_and_encode() -> None:
        seq[0] += 1
        decode_command(encode_command(Command(7, Kind.DRIVE, 0, 0xC0FFEE01, 41, seq[0], 0,
                                              0.5, 0.5)))

    step = _median_time(drive_step, reps, inner // 4)
    floor = _median_time(decode_and_encode, reps, inner // 4)
    cases.append(_case("model_step_per_datagram", step, floor, note="floor: encode+decode"))

    n = 200 if quick else 2000
    car_model = FirmwareModel(7, 0xC0FFEE01, 41)
    booted = time.monotonic()

    def car_respond(data: bytes, src: tuple[str, int]) -> list[bytes]:
        result = car_model.receive_datagram(data, src, int((time.monotonic() - booted) * 1e6))
        return [out.data for out in result.outgoing]

    car = _Server("127.0.0.61", 4210, car_respond)
    echo = _Server("127.0.0.62", 4210, lambda data, src: [data])
    try:
        dests = (("127.0.0.62", 4210), ("127.0.0.61", 4210))
        _round_trips(dests, hello, 20)  # warm-up
        echo_rtt, hello_rtt = _round_trips(dests, hello, n)
    finally:
        car.close()
        echo.close()
    hello_rtt.sort()
    echo_rtt.sort()
    cases.append(
        _case(
            "hello_to_telemetry_loopback",
            statistics.median(hello_rtt),
            statistics.median(echo_rtt),
            p99_s=hello_rtt[int(0.99 * (len(hello_rtt) - 1))],
            floor_p99_s=echo_rtt[int(0.99 * (len(echo_rtt) - 1))],
            samples=n,
            note="floor: raw UDP echo on loopback, same server thread",
        )
    )
    cases.append(_difffuzz_case(2_000 if quick else 50_000))
    return cases


def _difffuzz_case(sequences: int) -> dict[str, Any]:
    """The differential fuzzer's throughput, and whether it found any mismatch."""
    difffuzz.build(difffuzz.DEFAULT_BINARY)
    report = difffuzz.fuzz(difffuzz.DEFAULT_BINARY, sequences, seed=1)
    t0 = time.perf_counter()
    difffuzz.generate_only(sequences, seed=1)
    floor = time.perf_counter() - t0
    return _case(
        "difffuzz_c_vs_python", report.seconds / sequences, floor / sequences,
        sequences=report.sequences, steps=report.steps, sequences_per_s=report.sequences_per_s,
        mismatching_steps=report.mismatching_steps, meets_target=report.mismatching_steps == 0,
        note="per sequence; floor: generating and running the Python model alone",
    )  # fmt: skip
