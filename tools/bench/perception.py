"""Perception benchmark: ms per 320x240 frame for decode, detection and pose, on one core.

``run(quick)`` renders frames of the ``two_cars`` arena in camera mode (the
world's JPEGs: lens distortion, noise, quality 80) from car poses facing the
walls at 0.5-2.5 m, so most frames hold one to three tags and some the
target. Rendering is not timed. Each case is the median over repetitions of
the mean ms per frame:

- ``decode``: ``cv2.imdecode`` to grey: the floor, measured in the same run;
- ``detect``: pupil-apriltags with the pipeline's settings (one thread);
- ``pose``: everything after detection (per-tag PnP, consensus, joint fit,
  target), as the pipeline's own stage stamps measure it;
- ``frame``: decode plus the whole pipeline, and the frames per second one
  core sustains at that cost.

OpenCV is held to one thread for the run. Ratios are against the decode floor.
"""

from __future__ import annotations

import math
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pybullet as p

from agents.drivers.camera import decode_gray
from agents.perception.pipeline import Pipeline
from tools.agent_config import simulated_tag_map
from worlds.arena import load_arena, shipped_arena
from worlds.sim import World


def render_frames(n: int, seed: int = 3) -> tuple[list[bytes], Pipeline]:
    """``n`` JPEG frames of car 1 at seeded poses facing a wall, and a pipeline for them."""
    arena = load_arena(shipped_arena("two_cars")).with_sensing("camera")
    world = World(arena, t0=0.0)
    try:
        body = world.scene.cars[1]
        rng = np.random.default_rng(seed)
        size = arena.room.size_x
        frames: list[bytes] = []
        t = 0.0
        for _ in range(n):
            wall = int(rng.integers(4))
            d, s = float(rng.uniform(0.5, 2.5)), float(rng.uniform(0.6, size - 0.6))
            x, y = [(s, d), (size - d, s), (s, size - d), (d, s)][wall]
            facing = [-math.pi / 2, 0.0, math.pi / 2, math.pi][wall]
            yaw = facing + float(rng.uniform(-0.6, 0.6))
            pos, _ = p.getBasePositionAndOrientation(body.body, physicsClientId=world.client)
            p.resetBasePositionAndOrientation(
                body.body, (x, y, pos[2]), p.getQuaternionFromEuler((0.0, 0.0, yaw)),
                physicsClientId=world.client,
            )  # fmt: skip
            t += 0.1
            frame = world.capture_frame(1, t)
            assert frame is not None
            frames.append(frame.jpeg)
        return frames, Pipeline(simulated_tag_map(arena))
    finally:
        world.close()


def _measure(frames: list[bytes], pipeline: Pipeline, reps: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"decode": [], "detect": [], "pose": [], "frame": []}
    images = [decode_gray(j) for j in frames]
    for _ in range(reps):
        t0 = time.perf_counter()
        for jpeg in frames:
            decode_gray(jpeg)
        out["decode"].append((time.perf_counter() - t0) * 1e3 / len(frames))
        detect = pose = 0.0
        t0 = time.perf_counter()
        for k, jpeg in enumerate(frames):
            image = decode_gray(jpeg)
            assert image is not None and images[k] is not None
            rec = pipeline.process(image, float(k), True).record
            detect += rec.detect_ms
            pose += rec.pose_ms
        out["frame"].append((time.perf_counter() - t0) * 1e3 / len(frames))
        out["detect"].append(detect / len(frames))
        out["pose"].append(pose / len(frames))
    return out


def run(quick: bool) -> list[dict[str, Any]]:
    n, reps = (12, 3) if quick else (48, 7)
    frames, pipeline = render_frames(n)
    threads = cv2.getNumThreads()
    cv2.setNumThreads(1)
    try:
        _measure(frames[:3], pipeline, 1)  # warm-up
        samples = _measure(frames, pipeline, reps)
    finally:
        cv2.setNumThreads(threads)
    floor = statistics.median(samples["decode"])
    fixes = targets = 0
    for k, jpeg in enumerate(frames):
        image = decode_gray(jpeg)
        assert image is not None
        batch = pipeline.process(image, float(k), True).batch
        if batch is not None:
            fixes += batch.pose_fix is not None
            targets += batch.target is not None
    cases: list[dict[str, Any]] = []
    for name in ("decode", "detect", "pose", "frame"):
        ms = statistics.median(samples[name])
        case: dict[str, Any] = {
            "case": name,
            "frames": n,
            "reps": reps,
            "ms_per_frame": round(ms, 4),
            "ratio": round(ms / floor, 2) if floor > 0 else None,
        }
        if name == "frame":
            case["fps_one_core"] = round(1e3 / ms, 1) if ms > 0 else None
            case["pose_fixes"] = fixes
            case["target_sightings"] = targets
        cases.append(case)
    if not quick:
        cases.append(capture_to_drive(seconds=40.0))
    return cases


def capture_to_drive(seconds: float) -> dict[str, Any]:
    """Two camera-mode agents as real processes; each frame's capture to the DRIVE
    that carries the decision made after it, per stage, from their logs."""
    from tools.procs import private_swarm, run_swarm
    from tools.replay.load import load_run
    from tools.replay.metrics import latency, latency_summary
    from worlds.arena import shipped_arena

    with tempfile.TemporaryDirectory(prefix="stigmesh-bench-") as tmp:
        swarm = private_swarm(Path(tmp), shipped_arena("two_cars"))
        run_swarm(swarm, ["walnut", "hazel"], seconds, ["--sensing", "camera"],
                  ["--sensing", "camera"])
        run = load_run(swarm.run_dir)
        budget = latency_summary(latency(run.agents.values()))
    stages = budget["stages"]
    total = stages.get("capture→drive", {})
    return {
        "case": "capture_to_drive_camera_mode",
        "median_ms": total.get("median_ms"),
        "p95_ms": total.get("p95_ms"),
        "frames": total.get("n"),
        "stages": {k: (v["median_ms"], v["p95_ms"]) for k, v in stages.items()},
        "note": f"2 agents + a camera-mode world, {seconds:g} s; (median, p95) ms per stage",
    }
