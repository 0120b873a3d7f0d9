"""Differential fuzzer: the C firmware core against the Python reference model.

Seeded random step sequences (valid, nearly valid and broken datagrams,
ticks on the watchdog and telemetry edges, health changes, probes, clocks
near the wraps of ``uptime_ms`` and of u64, now and then a clock that runs
backwards, gyro readings for the telemetry) go through
:class:`~protocol.mz01.firmware.FirmwareModel` here and through
``firmware/test/mz01_diff`` (one process per batch); after every step the
verdict, reason, whole car state, telemetry destinations, telemetry object
and probe reply must be the same. ``python -m tools.vectors.difffuzz`` runs it
(``make -C firmware fuzz``: 50 000 sequences).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import struct
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from protocol.mz01.firmware import U64_MAX, WATCHDOG_US, Address, FirmwareModel, Outgoing
from protocol.mz01.packet import U32_MAX, to_binary32
from protocol.mz01.telemetry import Telemetry, TelemetryError, parse_telemetry

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BINARY = ROOT / "firmware" / "build" / "plain" / "mz01_diff"
SOURCES: tuple[Address, ...] = (
    ("127.0.0.10", 40000), ("127.0.0.10", 40001), ("127.0.0.11", 40000), ("10.1.2.3", 65535),
)  # fmt: skip
WHEEL_BITS = (
    0x00000000, 0x80000000, 0x3F800000, 0xBF800000, 0x3F800001, 0xBF800001, 0x3F7FFFFF,
    0x00000001, 0x80000001, 0x007FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
    0x7F800001, 0x3F000000, 0xBE800000, 0x3DCCCCCD,
)  # fmt: skip
# gyro_z: any finite binary32; gyro_angle: within the reader's bound (0x40490FF9, 3.14159989)
GYRO_Z_BITS = (0x00000000, 0x80000000, 0x00000001, 0x80800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000)
GYRO_ANGLE_BITS = (
    0x00000000, 0x80000000, 0x00000001, 0x80800000, 0x40490FDB, 0xC0490FDB, 0x40490FF9,
    0xC0490FF9, 0x3DCCCCCD,
)  # fmt: skip
STAMP_OFFSETS = (0, 0, 0, -1, 1, -100, -101, 30, 31, -300, 2**31, 2**31 - 1)
U32 = 2**32


@dataclass(frozen=True)
class Mismatch:
    sequence: int
    step: int
    input: str
    python: str
    c: str


@dataclass(frozen=True)
class FuzzReport:
    sequences: int
    steps: int
    seconds: float
    mismatches: tuple[Mismatch, ...]  # the first ones, up to ``keep``
    mismatching_steps: int
    accepted: int
    disarms: int

    @property
    def sequences_per_s(self) -> float:
        return self.sequences / self.seconds if self.seconds > 0 else 0.0


# -- rendering the model's side in the driver's line format ---------------------------


def _bits(x: float) -> str:
    return f"{struct.unpack('>I', struct.pack('>f', x))[0]:08x}"


def _f32(bits: int) -> float:
    return float(struct.unpack(">f", struct.pack(">I", bits))[0])


def _addr(a: Address | None) -> str:
    return "-" if a is None else f"{a[0]}:{a[1]}"


def _state(car: FirmwareModel) -> str:
    s = car.state
    return " ".join([
        str(int(s.armed)), str(int(s.estop)), str(s.token), _bits(s.left), _bits(s.right),
        _addr(s.bound), _addr(s.telemetry_to), str(s.last_seq), str(s.last_feed_us),
        str(s.last_telemetry_us), str(int(s.motor_ok)), str(int(s.camera_ok)), s.reason or "-",
    ])  # fmt: skip


def _sent(outgoing: tuple[Outgoing, ...]) -> str:
    if not outgoing:
        return "- -"
    return ",".join(_addr(o.dst) for o in outgoing) + " " + outgoing[0].data.decode()


# -- generating a sequence ------------------------------------------------------------


class _Sequence:
    """One random sequence: its input lines and the model's expected output lines."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lines: list[str] = []
        self.expected: list[str] = []
        self.accepted = 0
        self.disarms = 0
        rid = rng.choice([7, 7, 1, 255, rng.randint(1, 255)])
        token = rng.choice([4242, U32_MAX, U32_MAX - 1, 0, rng.getrandbits(32)])
        nonce = rng.getrandbits(32)
        motor, camera = rng.random() > 0.05, rng.random() > 0.05
        self.car = FirmwareModel(rid, nonce, token, motor, camera)
        self.now = rng.choice([
            0, rng.randint(0, 10**7), (U32 - rng.randint(0, 3000)) * 1000 + rng.randint(0, 999),
            U64_MAX - rng.randint(10**6, 10**9), rng.getrandbits(52),
        ])  # fmt: skip
        self.emit(f"boot {rid} {nonce} {token} {int(motor)} {int(camera)}",
                  f"boot {_state(self.car)}")

    def emit(self, line: str, expected: str) -> None:
        self.lines.append(line)
        self.expected.append(expected)

    def advance(self) -> None:
        rng, s = self.rng, self.car.state
        choice = rng.random()
        if choice < 0.35:
            step = rng.choice([0, 1, 999, 1000, 4999, 5000, 5000, 33_333])
        elif choice < 0.7:
            step = rng.randint(0, 60_000)
        elif choice < 0.8 and s.armed:  # the watchdog's edge
            step = s.last_feed_us + WATCHDOG_US - rng.choice([1, 0, 0, -1]) - self.now
        elif choice < 0.88:  # the telemetry period's edge
            step = s.last_telemetry_us + 100_000 - rng.choice([1, 0]) - self.now
        elif choice < 0.99:
            step = rng.randint(0, 400_000)
        else:  # the clock runs backwards
            step = -rng.randint(1, 2_000_000)
        self.now = min(U64_MAX, max(0, self.now + step))

    def _wheel(self, kind: int) -> int:
        rng = self.rng
        if kind == 2 and rng.random() < 0.8:
            return rng.choice([0, 0x80000000])
        if rng.random() < 0.75:
            return int(struct.unpack(">I", struct.pack(">f", rng.uniform(-1, 1)))[0])
        return rng.choice(WHEEL_BITS) if rng.random() < 0.8 else rng.getrandbits(32)

    def datagram(self) -> bytes:
        rng, s, car = self.rng, self.car.state, self.car
        if rng.random() < 0.05:
            return rng.randbytes(rng.choice([0, 8, 31, 32, 32, 33, 40]))
        weights = [5, 8, 78, 4, 2, 3] if s.armed else [15, 45, 30, 4, 2, 4]
        kind = rng.choices([1, 2, 3, 4, 5, rng.randint(0, 255)], weights)[0]
        rid = rng.choices([s.robot_id, 0, rng.randint(0, 255)], [90, 6, 4])[0]
        reset = kind == 1 and rng.random() < (0.6 if s.estop else 0.2)
        flags = 1 if reset else rng.choices([0, 1, rng.getrandbits(16)], [92, 4, 4])[0]
        nonce = car.boot_nonce if rng.random() < 0.95 else rng.getrandbits(32)
        token = rng.choices([s.token, (s.token - 1) % U32, (s.token + 1) % U32], [92, 6, 2])[0]
        seq = rng.choices(
            [s.last_seq + 1, s.last_seq, s.last_seq + 1000, 0, U32_MAX, rng.getrandbits(32)],
            [80, 6, 5, 3, 3, 3],
        )[0] % U32
        stamp = (self.now // 1000 + rng.choice((*STAMP_OFFSETS, rng.randint(-200, 100)))) % U32
        left = self._wheel(kind)
        right = left if rng.random() < 0.3 else self._wheel(kind)
        data = bytearray(struct.pack(">4sBBHIIIIII", b"MZ01", rid, kind & 0xFF, flags, nonce,
                                     token, seq, stamp, left, right))  # fmt: skip
        for _ in range(rng.choices([0, 1, 2], [90, 7, 3])[0]):
            data[rng.randrange(32)] = rng.getrandbits(8)
        return bytes(data)

    def _gyro(self, special: tuple[int, ...], low: float, high: float) -> int | None:
        rng = self.rng
        pick = rng.random()
        if pick < 0.25:
            return None
        if pick < 0.5:
            return rng.choice(special)
        return int(struct.unpack(">I", struct.pack(">f", rng.uniform(low, high)))[0])

    def step(self) -> None:
        rng, car = self.rng, self.car
        self.advance()
        now = self.now
        action = rng.random()
        if action < 0.55:
            data = self.datagram()
            s = car.state
            home = [a for a in (s.bound, s.telemetry_to) if a is not None] or [SOURCES[0]]
            src = rng.choice(home * 3 + list(SOURCES))
            r = car.receive_datagram(data, src, now)
            self.accepted += r.accepted
            self.disarms += sum(e.kind == "disarmed" for e in r.events)
            verdict = "accept" if r.accepted else "reject"
            self.emit(f"rx {now} {src[0]} {src[1]} {data.hex() or '-'}",
                      f"rx {verdict} {r.reason or '-'} {_state(car)} {_sent(r.outgoing)}")
        elif action < 0.88:
            r = car.tick(now)
            self.disarms += sum(e.kind == "disarmed" for e in r.events)
            self.emit(f"tick {now}", f"tick {_state(car)} {_sent(r.outgoing)}")
        elif action < 0.95:
            motor, camera = rng.random() > 0.15, rng.random() > 0.15
            car.set_health(motor, camera)
            self.emit(f"health {now} {int(motor)} {int(camera)}", f"health {_state(car)}")
        elif action < 0.97:
            z = self._gyro(GYRO_Z_BITS, -10.0, 10.0)
            angle = self._gyro(GYRO_ANGLE_BITS, -math.pi, math.pi)
            car.set_sensors(gyro_z=None if z is None else _f32(z),
                            gyro_angle=None if angle is None else _f32(angle))  # fmt: skip
            hexes = ["-" if b is None else f"{b:08x}" for b in (z, angle)]
            self.emit(f"sensors {now} {hexes[0]} {hexes[1]}", f"sensors {_state(car)}")
        else:
            request = b"MZC1" + rng.randbytes(4)
            if rng.random() < 0.3:
                request = rng.choice([request[:7], request + b"\0", b"MZC2" + request[4:]])
            out = car.receive_probe(request, SOURCES[0], now)
            reply = "-" if out is None else out.data.hex()
            self.emit(f"probe {now} {request.hex() or '-'}", f"probe {reply} {_state(car)}")


# -- comparing ---------------------------------------------------------------------


def _normal(t: Telemetry) -> Telemetry:
    """Duties and gyro as binary32: the C text is %.9g, exact only after rounding to binary32."""
    return dataclasses.replace(
        t, duty=(to_binary32(t.duty[0]), to_binary32(t.duty[1])),
        gyro_z=None if t.gyro_z is None else to_binary32(t.gyro_z),
        gyro_angle=None if t.gyro_angle is None else to_binary32(t.gyro_angle),
    )  # fmt: skip


def same_line(python: str, c: str) -> bool:
    """Equal up to the telemetry JSON, which must describe the same object."""
    if python == c:
        return True
    p_head, _, p_json = python.rpartition(" ")
    c_head, _, c_json = c.rpartition(" ")
    if p_head != c_head or "-" in (p_json, c_json):
        return False
    try:
        return _normal(parse_telemetry(p_json.encode())) == _normal(
            parse_telemetry(c_json.encode())
        )
    except TelemetryError:
        return False


def run_batch(binary: Path, lines: Sequence[str]) -> list[str]:
    """Runs the C driver on ``lines``; its output lines."""
    proc = subprocess.run(
        [str(binary)], input="\n".join(lines) + "\n", capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{binary} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout.splitlines()


def fuzz(binary: Path, sequences: int, seed: int, *, max_steps: int = 40, batch: int = 500,
         keep: int = 20) -> FuzzReport:
    """``sequences`` seeded sequences through both implementations; the mismatches found."""
    started = time.perf_counter()
    mismatches: list[Mismatch] = []
    steps = accepted = disarms = bad = 0
    for first in range(0, sequences, batch):
        made: list[_Sequence] = []
        for k in range(first, min(first + batch, sequences)):
            seq = _Sequence(random.Random(f"{seed}:{k}"))
            for _ in range(seq.rng.randint(1, max_steps)):
                seq.step()
            made.append(seq)
        lines = [line for s in made for line in s.lines]
        got = iter(run_batch(binary, lines))
        for k, s in enumerate(made, start=first):
            steps += len(s.lines)
            accepted += s.accepted
            disarms += s.disarms
            for i, (line, want) in enumerate(zip(s.lines, s.expected, strict=True)):
                c_line = next(got, "<no output>")
                if not same_line(want, c_line):
                    bad += 1
                    if len(mismatches) < keep:
                        mismatches.append(Mismatch(k, i, line, want, c_line))
    return FuzzReport(sequences, steps, time.perf_counter() - started, tuple(mismatches),
                      bad, accepted, disarms)  # fmt: skip


def generate_only(sequences: int, seed: int, max_steps: int = 40) -> int:
    """The Python side of :func:`fuzz` alone (a benchmark floor); the steps made."""
    steps = 0
    for k in range(sequences):
        steps += len(reproducer(seed, k, max_steps))
    return steps


def reproducer(seed: int, sequence: int, max_steps: int = 40) -> list[str]:
    """The input lines of one sequence, to feed ``mz01_diff`` by hand."""
    s = _Sequence(random.Random(f"{seed}:{sequence}"))
    for _ in range(s.rng.randint(1, max_steps)):
        s.step()
    return s.lines


def build(binary: Path) -> None:
    """``make`` the driver when it is the default one."""
    if binary == DEFAULT_BINARY:
        subprocess.run(["make", "-s", "-C", str(ROOT / "firmware"), "build/plain/mz01_diff"],
                       check=True)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", type=Path, default=DEFAULT_BINARY)
    parser.add_argument("--sequences", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    build(args.binary)
    report = fuzz(args.binary, args.sequences, args.seed)
    print(f"difffuzz: {report.sequences} sequences, {report.steps} steps "
          f"({report.accepted} datagrams accepted, {report.disarms} disarms) in "
          f"{report.seconds:.1f} s = {report.sequences_per_s:.0f} sequences/s; "
          f"{report.mismatching_steps} mismatching steps")  # fmt: skip
    for m in report.mismatches[:5]:
        print(f"MISMATCH sequence {m.sequence} step {m.step}: {m.input}\n"
              f"  python: {m.python}\n  c:      {m.c}")  # fmt: skip
    return 1 if report.mismatching_steps else 0


if __name__ == "__main__":
    sys.exit(main())
