"""The world server as a real process on loopback: driving, the watchdog, camera, faults, errors."""

from __future__ import annotations

import itertools
import math
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from agents.perception.detect import safe_detector
from protocol.mjpeg import (
    FrameGate,
    FrameReason,
    FrameRejected,
    MjpegParser,
    parse_frame_headers,
    request,
)
from protocol.runlog import read_run_log
from tests.worlds.rawcar import REPO, RawCar, arena_text, free_subnet, world_process
from worlds.control import ControlError, WorldControl, send_control

pytestmark = pytest.mark.slow


def _write_arena(tmp_path: Path, subnet: str, **kw) -> Path:
    path = tmp_path / "arena.toml"
    path.write_text(arena_text(subnet, **kw))
    return path


def _truth(run_dir: Path) -> list[dict]:
    return [e for e in read_run_log(run_dir / "world.jsonl") if e["event"] == "truth"]


def _pose_at(truth: list[dict], t: float, car: int) -> tuple[float, float, float]:
    sample = min(truth, key=lambda e: abs(e["t"] - t))
    c = next(c for c in sample["cars"] if c["id"] == car)
    return c["x"], c["y"], c["yaw"]


def test_drive_forward_then_commands_stop(tmp_path: Path):
    subnet = free_subnet()
    arena = _write_arena(tmp_path, subnet)
    run_dir = tmp_path / "run"
    with world_process(arena, run_dir) as world:
        car = RawCar(f"{subnet}.1", 1)
        try:
            car.hello()
            rtt = car.sync()
            assert rtt < 0.05
            # -- one second forward --
            car.arm()
            t_start = time.monotonic()
            car.drive_for(0.8, 0.8, 1.0)
            t_end = time.monotonic()
            car.wait_disarmed()
            # -- the watchdog, over repeated trials --
            last_sent = []
            for _ in range(10):
                car.arm()
                car.drive_for(0.5, -0.5, 0.1)
                assert car.last_drive_sent is not None
                last_sent.append(car.last_drive_sent)
                tel = car.wait_disarmed()
                assert tel.reason == "watchdog"
            time.sleep(0.1)
            status = WorldControl(run_dir).status()
        finally:
            car.close()
        rc, out, err = world.stop()
    assert rc == 0, err
    assert "real-time factor" in out
    assert status["cars"][0]["counters"]["rejected"] == 0

    truth = _truth(run_dir)
    x0, y0, yaw0 = _pose_at(truth, t_start, 1)
    x1, y1, _ = _pose_at(truth, t_end + 0.5, 1)
    forward = (x1 - x0) * math.cos(yaw0) + (y1 - y0) * math.sin(yaw0)
    lateral = -(x1 - x0) * math.sin(yaw0) + (y1 - y0) * math.cos(yaw0)
    # duty 0.8 -> 0.525 m/s for 1 s, plus the coast to the watchdog
    assert 0.35 < forward < 0.8, forward
    assert abs(lateral) < 0.05, lateral
    assert _pose_at(truth, t_start, 2)[:2] == pytest.approx(
        _pose_at(truth, t_end + 0.5, 2)[:2], abs=0.005
    )

    events = list(read_run_log(run_dir / "world.jsonl"))
    disarms = [e for e in events if e["event"] == "disarm" and e["reason"] == "watchdog"]
    zeros = [e for e in events if e["event"] == "duty" and e["car"] == 1 and e["left"] == 0.0]
    assert len(disarms) == 11 and len(zeros) == 11
    trials = list(zip(disarms[1:], zeros[1:], last_sent, strict=True))
    from_feed = [(z["t"] - d["last_feed_t"]) * 1000 for d, z, _ in trials]
    from_send = [(z["t"] - s) * 1000 for _, z, s in trials]
    print(
        f"\nwheels zero after the last accepted DRIVE (ms): min {min(from_feed):.2f} "
        f"median {statistics.median(from_feed):.2f} max {max(from_feed):.2f}"
        f"\nwheels zero after the client sent it (ms):      min {min(from_send):.2f} "
        f"median {statistics.median(from_send):.2f} max {max(from_send):.2f}"
    )
    assert all(300.0 <= ms <= 305.0 + 1e-6 for ms in from_feed), from_feed
    # the DRIVE's trip through loopback and the event loop adds a little
    assert all(ms <= 305.0 + 10.0 for ms in from_send), from_send


def _read_frames(address: str, count: int, timeout: float = 5.0) -> list:
    sock = socket.create_connection((address, 8080), timeout=timeout)
    try:
        sock.sendall(request(address))
        parser = MjpegParser()
        frames: list = []
        deadline = time.monotonic() + timeout
        while len(frames) < count and time.monotonic() < deadline:
            data = sock.recv(65536)
            if not data:
                break
            for part in parser.feed(data):
                frames.append((parse_frame_headers(part), time.monotonic()))
        return frames
    finally:
        sock.close()


def test_camera_stream_decodes_and_reboot_changes_boot(tmp_path: Path):
    subnet = free_subnet()
    arena = _write_arena(tmp_path, subnet, sensing="camera")
    run_dir = tmp_path / "run"
    with world_process(arena, run_dir) as world:
        car = RawCar(f"{subnet}.1", 1)
        try:
            tel = car.hello()
            assert tel.sim is None  # camera mode: no synthetic observations
            car.sync()
            frames = _read_frames(f"{subnet}.1", 6)
            assert len(frames) == 6
            captures = [f.capture_ms for f, _ in frames]
            assert captures == sorted(set(captures))
            assert all(f.boot_id == tel.boot for f, _ in frames)
            assert [f.seq for f, _ in frames] == sorted({f.seq for f, _ in frames})
            # the capture time is the car's uptime at capture, a little before receipt
            assert car.offset is not None
            for f, received in frames:
                age = received - (f.capture_ms / 1000 - car.offset)
                assert -0.005 < age < 0.2, age
            detector = safe_detector()
            image = cv2.imdecode(np.frombuffer(frames[-1][0].jpeg, np.uint8), cv2.IMREAD_GRAYSCALE)
            assert image is not None and image.shape == (240, 320)
            assert {d.tag_id for d in detector.detect(image)} == {14, 15}

            control = WorldControl(run_dir)
            with pytest.raises(ControlError):
                control.reboot("nosuchcar")
            reply = send_control(control.path, {"cmd": "freeze_camera", "car": 1})
            assert not reply["ok"] and "duration" in reply["error"]
            reply = control.reboot("walnut")
            assert reply["boot"] != tel.boot
            car.drain()  # telemetry the old boot sent before the reboot
            new = car.hello()
            assert new.boot == reply["boot"] and not new.armed
            gate = FrameGate()
            old_frame = frames[-1][0]
            with pytest.raises(FrameRejected) as info:
                gate.check(old_frame, new.boot, time.monotonic(), None)
            assert info.value.reason == FrameReason.WRONG_BOOT
            fresh = _read_frames(f"{subnet}.1", 2)
            assert fresh and all(f.boot_id == new.boot for f, _ in fresh)
            gate.check(fresh[-1][0], new.boot, fresh[-1][1], None)
        finally:
            car.close()
        rc, _, err = world.stop()
    assert rc == 0, err
    faults = [e for e in read_run_log(run_dir / "world.jsonl") if e["event"] == "fault"]
    assert [(f["kind"], f["car"]) for f in faults] == [("reboot", 1)]


def test_synthetic_telemetry_over_the_wire(tmp_path: Path):
    subnet = free_subnet()
    arena = _write_arena(tmp_path, subnet)
    run_dir = tmp_path / "run"
    with world_process(arena, run_dir, "--duration", "30") as world:
        car = RawCar(f"{subnet}.1", 1)
        try:
            car.hello()
            tels = [car.telemetry(0.5) for _ in range(5)]
            WorldControl(run_dir).drop_link(1, 0.4)
            car.drain()
            with pytest.raises(TimeoutError):
                car.telemetry(0.3)
            assert car.telemetry(0.5) is not None  # back after the drop
        finally:
            car.close()
        rc, out, err = world.stop(sig=signal.SIGINT)
    assert rc == 0, err
    assert "stopped" in out and not (run_dir / "world.sock").exists()
    events = list(read_run_log(run_dir / "world.jsonl"))
    assert events[-1]["event"] == "stop" and events[-1]["rtf"] > 0.5
    assert [e["kind"] for e in events if e["event"] == "fault"] == ["drop_link"]
    for tel in tels:
        assert tel.sim is not None and tel.gyro_z is not None
        assert {t[0] for t in tel.sim["tags"]} == {14, 15}
        assert tel.sim["sigma"] == [0.03, 0.01]
    gaps = [b.uptime_ms - a.uptime_ms for a, b in itertools.pairwise(tels)]
    assert all(95 <= g <= 110 for g in gaps), gaps


def _run_world(*args: str, timeout: float = 20.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "worlds", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_malformed_arena_exits_2_naming_file_and_line(tmp_path: Path):
    bad = tmp_path / "bad.toml"
    bad.write_text(arena_text("127.0.9").replace('address = "127.0.9.2"', 'address = "10.1.1.2"'))
    result = _run_world(str(bad), "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 2
    line = arena_text("127.0.9").splitlines().index('address = "127.0.9.2"') + 1
    assert f"{bad}:{line}:" in result.stderr and "loopback" in result.stderr
    syntax = tmp_path / "syntax.toml"
    syntax.write_text("[room\nsize = 1\n")
    result = _run_world(str(syntax), "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 2 and f"{syntax}:1:" in result.stderr


def test_port_in_use_exits_2_naming_address_and_port(tmp_path: Path):
    subnet = free_subnet()
    arena = _write_arena(tmp_path, subnet)
    blocker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    blocker.bind((f"{subnet}.2", 4211))
    try:
        result = _run_world(str(arena), "--run-dir", str(tmp_path / "run"))
    finally:
        blocker.close()
    assert result.returncode == 2, result.stderr
    assert f"{subnet}.2:4211" in result.stderr and "in use" in result.stderr


def test_duration_ends_the_run(tmp_path: Path):
    arena = _write_arena(tmp_path, free_subnet())
    result = _run_world(str(arena), "--run-dir", str(tmp_path / "run"), "--duration", "0.5")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("stigmesh world: arena test_arena (synthetic)")
    assert "real-time factor" in result.stdout
