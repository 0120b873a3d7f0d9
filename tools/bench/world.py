"""World server benchmark: real-time factor without pacing, and the cost of a camera frame.

``run(quick)`` steps a :class:`worlds.sim.World` as fast as it can for a
number of simulated seconds, with every car armed and driven at 30 Hz
through its firmware (so ticks, telemetry, gyro and synthetic sensing all
run), and reports RTF = simulated seconds / wall seconds. The camera case
renders both cars of ``two_cars`` at 12 fps. Floors measured in the same
run: physics alone for the same cars (the share of the world that is
PyBullet) and one ``cv2.imencode`` of a frame (the cheapest part of a frame).
Targets on the 2-core reference machine: RTF >= 1 for 8 synthetic cars and
for 2 camera cars.

The service case (:func:`run_service`) runs a real world process whose two
camera cars both stream at 12 fps and measures a car datagram's service time:
clock probes to a car, request to reply, p50/p99/max, beside a raw UDP echo
over loopback probed in turn in the same run (the floor). Target: p99 within
5 ms.
"""

from __future__ import annotations

import json
import math
import os
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pybullet as p

from protocol.mz01 import (
    Command,
    Kind,
    ProbeRequest,
    decode_probe_reply,
    encode_command,
    encode_probe_request,
)
from worlds.arena import Arena, load_arena, shipped_arena
from worlds.control import WorldControl
from worlds.sim import PORT_COMMAND, World

CLIENT = ("127.0.0.1", 45000)
RTF_TARGET = 1.0


def _with_cars(arena: Arena, n: int, mode: str) -> Arena:
    return replace(arena.with_sensing(mode), cars=arena.cars[:n])


def _start_driving(world: World, t: float) -> None:
    for car in world.cars.values():
        world.deliver(car.id, PORT_COMMAND, encode_command(Command(car.id, Kind.HELLO)), CLIENT, t)
        fw = car.firmware
        arm = Command(
            car.id, Kind.ARM, boot_nonce=fw.boot_nonce, session_token=fw.token, seq=1,
            stamp_ms=(car.uptime_us(t) // 1000) & 0xFFFF_FFFF,
        )  # fmt: skip
        world.deliver(car.id, PORT_COMMAND, encode_command(arm), CLIENT, t)


def _drive_all(world: World, t: float, k: int) -> None:
    for car in world.cars.values():
        fw = car.firmware
        turn = 0.3 if (k // 60 + car.id) % 2 else -0.3  # weave so cars meet walls less
        cmd = Command(
            car.id, Kind.DRIVE, boot_nonce=fw.boot_nonce, session_token=fw.token,
            seq=fw.last_seq + 1, left=0.6 - turn, right=0.6 + turn,
            stamp_ms=(car.uptime_us(t) // 1000) & 0xFFFF_FFFF,  # a DRIVE must be fresh
        )  # fmt: skip
        world.deliver(car.id, PORT_COMMAND, encode_command(cmd), CLIENT, t)


def _physics_floor(world: World, seconds: float) -> float:
    """Wall seconds per simulated second of bare stepSimulation in this world."""
    steps = max(1, int(seconds * world.arena.physics.rate_hz))
    start = time.perf_counter()
    for _ in range(steps):
        p.stepSimulation(physicsClientId=world.client)
    return (time.perf_counter() - start) / (steps * world.dt)


def run_world(arena: Arena, sim_seconds: float, fps: float = 0.0) -> dict[str, Any]:
    """Step ``arena`` for ``sim_seconds`` unpaced; render every car at ``fps`` if > 0."""
    world = World(arena, t0=0.0)
    try:
        _start_driving(world, 0.001)
        drive_period = 1.0 / 30.0
        frame_period = 1.0 / fps if fps > 0 else float("inf")
        next_drive, next_frame, k = drive_period, frame_period, 0
        frames, frame_wall, sends = 0, 0.0, 0
        start = time.perf_counter()
        while True:
            t = min(next_drive, next_frame)
            if t > sim_seconds:
                break
            if t == next_drive:
                sends += len(world.advance_to(t).sends)
                _drive_all(world, t, k)
                k += 1
                next_drive += drive_period
            else:
                f0 = time.perf_counter()
                for car in world.cars.values():
                    if world.capture_frame(car.id, t) is not None:
                        frames += 1
                frame_wall += time.perf_counter() - f0
                next_frame += frame_period
        sends += len(world.advance_to(sim_seconds).sends)
        wall = time.perf_counter() - start
        floor = _physics_floor(world, min(sim_seconds, 2.0))
        moved = [c["pose"] for c in world.status()["cars"]]
        return {
            "cars": len(arena.cars),
            "sensing": arena.sensing.mode,
            "sim_s": sim_seconds,
            "wall_s": round(wall, 4),
            "rtf": round(sim_seconds / wall, 3),
            "physics_only_rtf": round(1.0 / floor, 3),
            "telemetry_datagrams": sends,
            "frames": frames,
            "ms_per_frame": round(frame_wall / frames * 1000, 3) if frames else None,
            "final_poses": moved,
        }
    finally:
        world.close()


def _jpeg_floor_ms(quality: int, repeats: int = 20) -> float:
    rng = np.random.default_rng(0)
    image = cv2.GaussianBlur(rng.integers(0, 256, (240, 320, 3), dtype=np.uint8), (5, 5), 2)
    start = time.perf_counter()
    for _ in range(repeats):
        cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, quality])
    return (time.perf_counter() - start) / repeats * 1000


# -- the car datagram service time while camera cars render -------------------------

SERVICE_TARGET_MS = 5.0  # p99 of a car datagram's request -> reply, two camera cars rendering
ECHO_PORT_LINE = "echo port "

# A raw UDP echo over loopback, the floor: the same trip without the world. It stops by
# itself when its parent (the bench) is gone or its time is up.
_ECHO = """
import os, select, socket, sys
parent, lifetime = int(sys.argv[1]), float(sys.argv[2])
import time
end = time.monotonic() + lifetime
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
print("echo port", s.getsockname()[1], flush=True)
while os.getppid() == parent and time.monotonic() < end:
    if select.select([s], [], [], 0.2)[0]:
        data, src = s.recvfrom(2048)
        s.sendto(data, src)
"""

# Watches every car's camera stream (so each renders at its rate) and counts the frames;
# a line on stdin starts the count, EOF prints it (JSON) and exits. Bounded like the echo.
_STREAMS = """
import json, os, select, socket, sys, time
parent, lifetime, addresses = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]
end = time.monotonic() + lifetime
mark = b"--stigmeshframe\\r\\n"
socks = {}
for a in addresses:
    s = socket.create_connection((a, 8080), timeout=10)
    s.sendall(f"GET /stream HTTP/1.1\\r\\nHost: {a}\\r\\n\\r\\n".encode())
    s.setblocking(False)
    socks[s] = a
frames = {a: 0 for a in addresses}
tails = {a: b"" for a in addresses}
ready, counting, since = False, False, 0.0
while os.getppid() == parent and time.monotonic() < end:
    readable = select.select([*socks, sys.stdin], [], [], 0.2)[0]
    for s in readable:
        if s is sys.stdin:
            if not sys.stdin.readline():
                seconds = time.monotonic() - since if counting else 0.0
                print(json.dumps({"frames": frames, "seconds": seconds}), flush=True)
                sys.exit(0)
            frames, counting, since = {a: 0 for a in addresses}, True, time.monotonic()
            continue
        a = socks[s]
        data = s.recv(1 << 16)
        if not data:
            sys.exit(1)
        chunk = tails[a] + data
        frames[a] += chunk.count(mark)
        tails[a] = chunk[-(len(mark) - 1):]
    if not ready and all(frames.values()):
        ready = True
        print("streaming", flush=True)
"""


def _helper(code: str, *args: str, stdin: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, str(os.getpid()), *args], text=True,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, stdout=subprocess.PIPE,
    )  # fmt: skip


def _line(proc: subprocess.Popen[str], timeout: float, what: str) -> str:
    assert proc.stdout is not None
    if not select.select([proc.stdout], [], [], timeout)[0]:
        raise RuntimeError(f"no {what} within {timeout:g} s")
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"{what}: the helper exited (status {proc.wait(5)})")
    return line.strip()


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def _spread(ms: list[float]) -> dict[str, float | None]:
    if not ms:
        return {"p50": None, "p99": None, "max": None}
    return {"p50": round(statistics.median(ms), 3), "p99": round(_percentile(ms, 0.99), 3),
            "max": round(max(ms), 3)}  # fmt: skip


def _round_trips(
    car: tuple[str, int], echo: tuple[str, int], seconds: float, rate_hz: float
) -> tuple[list[float], list[float], int]:
    """Clock probes to ``car`` and the same datagram to ``echo``, alternately at ``rate_hz``;
    each one's request -> reply in ms, and how many got no reply within 0.5 s."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(0.5)
    world_ms: list[float] = []
    echo_ms: list[float] = []
    lost, k = 0, 0
    start = time.perf_counter()
    try:
        while (due := start + k / rate_hz) < start + seconds:
            time.sleep(max(0.0, due - time.perf_counter()))
            k += 1
            data = encode_probe_request(ProbeRequest(k))
            to_world = k % 2 == 0
            sent = time.perf_counter()
            sock.sendto(data, car if to_world else echo)
            while True:
                try:
                    reply, _ = sock.recvfrom(256)
                except TimeoutError:
                    lost += 1
                    break
                back = time.perf_counter()
                if to_world and len(reply) > 8 and decode_probe_reply(reply).request_id == k:
                    world_ms.append((back - sent) * 1000)
                    break
                if not to_world and reply == data:
                    echo_ms.append((back - sent) * 1000)
                    break  # anything else is a late reply to an earlier one
    finally:
        sock.close()
    return world_ms, echo_ms, lost


def run_service(seconds: float, rate_hz: float = 200.0) -> dict[str, Any]:
    """A world process serving two camera cars whose streams are watched (both render at
    the camera's rate) answers clock probes to one car: request -> reply latencies, beside a
    raw UDP echo over loopback (the floor) probed alternately in the same run."""
    from tools.procs import claim_loopback, private_swarm  # the agents' side: only here

    with tempfile.TemporaryDirectory(prefix="stigmesh-bench-") as tmp:
        swarm = private_swarm(Path(tmp), shipped_arena("two_cars"))
        helpers: list[subprocess.Popen[str]] = []
        try:
            claim_loopback(swarm, port=0)  # a free /24 for the cars (no swarm port needed)
            swarm.start_world(seconds + 90, ["--sensing", "camera"])
            lifetime = f"{seconds + 90:g}"
            echo = _helper(_ECHO, lifetime)
            helpers.append(echo)
            port = int(_line(echo, 30, "echo port").rsplit(" ", 1)[1])
            addresses = [c.address for c in swarm.arena.cars]
            streams = _helper(_STREAMS, lifetime, *addresses, stdin=True)
            helpers.append(streams)
            _line(streams, 60, "frames from every car")
            _round_trips((addresses[0], 4211), ("127.0.0.1", port), 0.5, rate_hz)  # warm-up
            assert streams.stdin is not None
            streams.stdin.write("count\n")
            streams.stdin.flush()
            world_ms, echo_ms, lost = _round_trips(
                (addresses[0], 4211), ("127.0.0.1", port), seconds, rate_hz
            )
            streams.stdin.close()
            counted = json.loads(_line(streams, 10, "the frame count"))
            status = WorldControl(swarm.run_dir).status()
        finally:
            for proc in helpers:
                _stop(proc)
            swarm.stop_all()
            for claim in swarm.claims:
                claim.release()
    fps = [n / counted["seconds"] for n in counted["frames"].values()] if counted["seconds"] else []
    render = status.get("server", {}).get("render", {})
    return {
        "samples": len(world_ms), "lost": lost,
        **{f"service_{k}_ms": v for k, v in _spread(world_ms).items()},
        **{f"floor_{k}_ms": v for k, v in _spread(echo_ms).items()},
        "stream_fps": [round(f, 2) for f in fps],
        "render": render,
    }  # fmt: skip


def run(quick: bool) -> list[dict[str, Any]]:
    sim_seconds = 3.0 if quick else 15.0
    results: list[dict[str, Any]] = []
    eight = load_arena(shipped_arena("eight_cars"))
    for n in (2, 4, 8):
        r = run_world(_with_cars(eight, n, "synthetic"), sim_seconds)
        r.pop("final_poses")
        results.append({
            "suite": "world", "case": f"synthetic_{n}_cars", **r,
            "target_rtf": RTF_TARGET if n == 8 else None,
            "meets_target": r["rtf"] >= RTF_TARGET if n == 8 else None,
        })  # fmt: skip
    two = load_arena(shipped_arena("two_cars"))
    fps = two.camera.fps
    r = run_world(_with_cars(two, 2, "camera"), sim_seconds / 1.5, fps=fps)
    r.pop("final_poses")
    floor = _jpeg_floor_ms(two.camera.jpeg_quality)
    results.append({
        "suite": "world", "case": f"camera_2_cars_{fps:g}fps", **r,
        "jpeg_floor_ms": round(floor, 3),
        "frame_over_jpeg": round(r["ms_per_frame"] / floor, 2) if r["ms_per_frame"] else None,
        "target_rtf": RTF_TARGET, "meets_target": r["rtf"] >= RTF_TARGET,
    })  # fmt: skip
    s = run_service(sim_seconds if quick else 10.0)
    p99, echo_p99 = s["service_p99_ms"], s["floor_p99_ms"]
    results.append({
        "suite": "world", "case": "camera_2_cars_datagram_service", **s,
        "p99_over_floor": round(p99 / echo_p99, 2) if p99 and echo_p99 else None,
        "target_p99_ms": SERVICE_TARGET_MS,
        "meets_target": p99 is not None and p99 <= SERVICE_TARGET_MS,
    })  # fmt: skip
    return results


def main(argv: list[str] | None = None) -> int:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    for result in run(quick):
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
