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
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from typing import Any

import cv2
import numpy as np
import pybullet as p

from protocol.mz01 import Command, Kind, encode_command
from worlds.arena import Arena, load_arena, shipped_arena
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
    return results


def main(argv: list[str] | None = None) -> int:
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    for result in run(quick):
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
