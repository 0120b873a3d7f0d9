"""The render worker: its link, its frames (the world's own, byte for byte), its queue, its end,
and a car datagram's service time while two camera cars render."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import replace
from pathlib import Path

import pytest

from protocol.runlog import RunLog, log_path, read_run_log
from tests.worlds.rawcar import arena_text, free_subnet, world_process
from tools.bench.world import _drive_all, _start_driving, run_service
from tools.procs import RunLogs, wait_for
from worlds.arena import Arena, load_arena, shipped_arena
from worlds.render import (
    Job,
    Rendered,
    RenderError,
    SceneRenderer,
    decode_job,
    decode_reply,
    encode_frame,
    encode_job,
)
from worlds.render_host import MAX_PENDING, RenderHost, State
from worlds.sim import RenderJob, World


def _arena() -> Arena:
    """two_cars in camera mode with hazel right in front of walnut's camera, wheels in view."""
    arena = load_arena(shipped_arena("two_cars")).with_sensing("camera")
    walnut, hazel = arena.cars
    return replace(arena, cars=(walnut, replace(hazel, x=1.35, y=1.35, heading=-1.75)))


def _driven(arena: Arena, seconds: float = 1.0) -> tuple[World, float]:
    """A world whose cars have driven (and turned their wheels) for ``seconds``."""
    world = World(arena, t0=0.0)
    _start_driving(world, 0.001)
    t, k = 0.001, 0
    while t < seconds:
        t += 1 / 30
        world.advance_to(t)
        _drive_all(world, t, k)
        k += 1
    return world, t


def _job(world: World, car: int, t: float) -> RenderJob:
    job = world.frame_job(car, t)
    assert isinstance(job, RenderJob)
    return job


def test_a_job_crosses_the_link_intact_and_garbage_is_refused():
    world, t = _driven(_arena())
    try:
        job = _job(world, 1, t)
    finally:
        world.close()
    assert all(any(abs(a) > 0.1 for a in car.joints) for _, car in job.poses.cars)  # wheels
    data = encode_job(9, job)
    assert decode_job(data) == Job(9, job.eye, job.yaw, job.poses)
    for bad in (data[:-3], data + b"x", b"Z" + data[1:]):
        with pytest.raises(RenderError):
            decode_job(bad)
    assert decode_reply(encode_frame(3, 1.5, b"\xff\xd8jpeg")) == Rendered(3, 1.5, b"\xff\xd8jpeg")
    assert decode_reply(b"R") is None
    assert decode_reply(b"Eboom") == "boom"
    with pytest.raises(RenderError):
        decode_reply(b"Q")


def test_the_worker_scene_renders_the_world_frames_byte_for_byte():
    arena = _arena()
    world, t = _driven(arena)
    worker = SceneRenderer(arena, world.seed)  # the worker's side, in this process
    try:
        for car in (1, 2, 1, 2):
            t += 0.25
            world.advance_to(t)
            _drive_all(world, t, int(t * 30))
            job = _job(world, car, t)
            assert worker.render(Job(1, job.eye, job.yaw, job.poses)) == world.render(job)
        # the placed wheels matter: hazel's, turned further in walnut's view, change it
        still = World(arena, t0=0.0)
        try:
            job = _job(still, 1, 0.5)
        finally:
            still.close()
        cars = tuple((c, replace(s, joints=tuple(a + 0.4 for a in s.joints)))
                     for c, s in job.poses.cars)  # fmt: skip
        worker.scene.place(job.poses)
        before = worker.camera.render_pinhole(job.eye, job.yaw)
        worker.scene.place(replace(job.poses, cars=cars))
        assert (worker.camera.render_pinhole(job.eye, job.yaw) != before).any()
    finally:
        worker.close()
        world.close()


def test_the_host_renders_in_order_drops_the_oldest_and_falls_back_when_the_worker_dies(
    tmp_path: Path,
):
    arena = _arena()
    world, t = _driven(arena)
    log = RunLog(log_path(tmp_path, "world"), "world", time.monotonic)

    async def run() -> None:
        host = RenderHost(world, log)
        host.start()
        assert await host.wait_ready()
        try:
            # the worker's frames are the world's own (the same noise, in the same order)
            for car in (1, 2, 2):
                job = _job(world, car, t)
                rendered = host.request(job)
                assert await rendered == world.render(job)
            assert host.counters.rendered == 3 and host.counters.in_process == 0
            # behind: one job with the worker, MAX_PENDING waiting, the oldest waiting dropped
            jobs = [host.request(_job(world, 1, t)) for _ in range(MAX_PENDING + 4)]
            got = [f is not None for f in await asyncio.gather(*jobs)]
            assert got == [True] + [False] * 3 + [True] * MAX_PENDING
            assert host.counters.dropped == 3
            # a job that must be kept (a SITL car's) is never dropped
            kept = [host.request(_job(world, 2, t), keep=True) for _ in range(MAX_PENDING + 2)]
            assert all(f is not None for f in await asyncio.gather(*kept))
            assert host.counters.dropped == 3
            # the worker dies: what it had is lost, later frames are rendered here
            assert host._proc is not None
            host._proc.kill()
            deadline = time.monotonic() + 10
            while host.state is not State.GONE and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            job = _job(world, 1, t)
            assert await host.request(job) is not None
            assert host.counters.in_process == 1
        finally:
            await host.close()
        assert host._proc is None

    try:
        asyncio.run(run())
    finally:
        world.close()
        log.close()
    events = [e["event"] for e in read_run_log(log_path(tmp_path, "world"))]
    assert events[:2] == ["render_worker_start", "render_worker_ready"]
    assert "render_worker_failed" in events and events[-1] == "render_worker_stop"


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")  # exited; whoever adopted it has not reaped it yet


@pytest.mark.slow
def test_the_worker_dies_with_the_world(tmp_path: Path):
    subnet = free_subnet()
    arena = tmp_path / "arena.toml"
    arena.write_text(arena_text(subnet, sensing="camera"))
    run_dir = tmp_path / "run"
    with world_process(arena, run_dir) as world:
        logs = RunLogs(run_dir)  # the log shows an event when its chunk closes: wait for it
        wait_for(lambda: logs.events("world", "render_worker_start"), 30,
                 "the render worker's start in the world's log")
        starts = logs.events("world", "render_worker_start")
        assert len(starts) == 1
        worker = starts[0]["pid"]
        assert not _gone(worker)
        os.kill(world.proc.pid, signal.SIGKILL)  # no goodbye: the kernel tells the worker
        deadline = time.monotonic() + 10
        while not _gone(worker) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _gone(worker)


@pytest.mark.slow
@pytest.mark.timeout(180)  # a busy machine starts the processes slowly
def test_a_car_datagram_is_answered_while_two_camera_cars_render():
    """Clock probes to a car of a world process whose two camera cars both stream, beside a
    raw UDP echo over loopback probed in turn (the floor).

    A datagram that waited behind a render would be late by a render's time: the world's
    99th percentile must stay within the floor's plus the render time the worker measured in
    this run (on an idle machine it is within 5 ms: ``stigmesh bench world``).
    """
    seconds = 3.0
    s = run_service(seconds)
    fps = load_arena(shipped_arena("two_cars")).camera.fps
    render = s["render"]
    print(
        f"\ncar datagram service (ms): p50 {s['service_p50_ms']} p99 {s['service_p99_ms']} "
        f"max {s['service_max_ms']}; floor (UDP echo): p50 {s['floor_p50_ms']} p99 "
        f"{s['floor_p99_ms']} max {s['floor_max_ms']}; {s['samples']} probes, {s['lost']} lost"
        f"\nstreams {s['stream_fps']} fps; render worker {render}"
    )
    assert s["samples"] >= 0.9 * seconds * 100 and s["lost"] == 0
    assert len(s["stream_fps"]) == 2 and all(f >= fps / 2 for f in s["stream_fps"])
    assert render["state"] == "ready" and render["in_process"] == 0
    bound = s["floor_p99_ms"] + render["render_ms_mean"]
    assert s["service_p99_ms"] <= bound, (s["service_p99_ms"], bound)
