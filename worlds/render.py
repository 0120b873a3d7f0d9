"""The render worker: camera frames rendered in a process of their own, off the world's loop.

PyBullet's CPU renderer takes ~15 ms a frame, and a PyBullet client is not
thread-safe, so the world server (:mod:`worlds.render_host`) renders in a
worker process: ``python -m worlds.render FD PARENT_PID``. The worker builds
the arena's scene in its own PyBullet client (the same bodies, in the same
order, so the same ids), and for each job places the bodies that move (the
cars with their wheels, the target) where the world's scene had them when the
job was taken, renders the car's camera with the same lens, noise and JPEG
quality as :meth:`worlds.sim.World.render`, and answers the JPEG. Its noise is
drawn from the same seeded stream as the world's own renderer, so the same
jobs in the same order give the same bytes.

The link is one ``SOCK_SEQPACKET`` socket pair, one message per packet, the
first byte its type:

- world -> worker: ``I`` pickle of (arena, seed), once; ``J`` a job;
- worker -> world: ``R`` ready; ``F`` a frame (job id, render ms, JPEG);
  ``E`` an error's text (then it exits).

The worker exits when the world's end closes, and is killed if the world dies
(``PR_SET_PDEATHSIG``). Everything but :func:`main` is sans-IO.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pickle
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass

import pybullet as p

from worlds.arena import Arena
from worlds.bodies import Scene
from worlds.camera import CameraRenderer, frame_rng
from worlds.steps import BodyPose, Poses, RenderJob

MAX_MESSAGE = 256 * 1024  # a QVGA JPEG is 5-30 KB
INIT, JOB, READY, FRAME, ERROR = b"I", b"J", b"R", b"F", b"E"
_JOB = struct.Struct("<cI4dBB")  # type, id, eye x y z, yaw, cars, has target
_POSE = struct.Struct("<7dB")  # position, orientation (x y z w), joints
_CAR = struct.Struct("<I")
_FRAME = struct.Struct("<cIf")  # type, id, render ms
PR_SET_PDEATHSIG = 1


class RenderError(ValueError):
    """A malformed message on the render link."""


@dataclass(frozen=True)
class Job:
    """What the worker needs of a :class:`~worlds.steps.RenderJob`."""

    id: int
    eye: tuple[float, float, float]
    yaw: float
    poses: Poses


@dataclass(frozen=True)
class Rendered:
    id: int
    ms: float
    jpeg: bytes


# -- the codec ------------------------------------------------------------------------


def encode_init(arena: Arena, seed: int) -> bytes:
    return INIT + pickle.dumps((arena, seed))


def decode_init(data: bytes) -> tuple[Arena, int]:
    if data[:1] != INIT:
        raise RenderError(f"expected the init message, got {data[:1]!r}")
    arena, seed = pickle.loads(data[1:])  # from the parent, over a private socket pair
    if not isinstance(arena, Arena) or not isinstance(seed, int):
        raise RenderError("the init message holds no arena and seed")
    return arena, seed


def _pose(pose: BodyPose) -> bytes:
    return _POSE.pack(*pose.pos, *pose.orn, len(pose.joints)) + struct.pack(
        f"<{len(pose.joints)}d", *pose.joints
    )


def encode_job(job_id: int, job: RenderJob) -> bytes:
    poses = job.poses
    out = [_JOB.pack(JOB, job_id, *job.eye, job.yaw, len(poses.cars), poses.target is not None)]
    for car_id, pose in poses.cars:
        out += [_CAR.pack(car_id), _pose(pose)]
    if poses.target is not None:
        out.append(_pose(poses.target))
    return b"".join(out)


def _take_pose(data: bytes, at: int) -> tuple[BodyPose, int]:
    *values, joints = _POSE.unpack_from(data, at)
    at += _POSE.size
    angles = struct.unpack_from(f"<{joints}d", data, at)
    return BodyPose(tuple(values[:3]), tuple(values[3:7]), tuple(angles)), at + 8 * joints


def decode_job(data: bytes) -> Job:
    try:
        kind, job_id, x, y, z, yaw, n_cars, has_target = _JOB.unpack_from(data)
        if kind != JOB:
            raise RenderError(f"expected a job, got {kind!r}")
        at = _JOB.size
        cars: list[tuple[int, BodyPose]] = []
        for _ in range(n_cars):
            (car_id,) = _CAR.unpack_from(data, at)
            pose, at = _take_pose(data, at + _CAR.size)
            cars.append((car_id, pose))
        target = None
        if has_target:
            target, at = _take_pose(data, at)
    except struct.error as exc:
        raise RenderError(f"a truncated job: {exc}") from None
    if at != len(data):
        raise RenderError(f"a job with {len(data) - at} bytes too many")
    return Job(job_id, (x, y, z), yaw, Poses(tuple(cars), target))


def encode_frame(job_id: int, ms: float, jpeg: bytes) -> bytes:
    return _FRAME.pack(FRAME, job_id, ms) + jpeg


def decode_reply(data: bytes) -> Rendered | str | None:
    """A worker's message: a frame, an error's text, or None for ready."""
    kind = data[:1]
    if kind == READY and len(data) == 1:
        return None
    if kind == ERROR:
        return data[1:].decode("utf-8", "replace")
    if kind == FRAME and len(data) > _FRAME.size:
        _, job_id, ms = _FRAME.unpack_from(data)
        return Rendered(job_id, ms, data[_FRAME.size :])
    raise RenderError(f"a bad message from the render worker: {data[:8]!r}")


# -- the worker's side ------------------------------------------------------------------


class SceneRenderer:
    """The arena's scene in a PyBullet client of its own, rendered from placed poses."""

    def __init__(self, arena: Arena, seed: int) -> None:
        self.client = p.connect(p.DIRECT)
        try:
            self.scene = Scene(self.client, arena)
            self.camera = CameraRenderer(self.client, arena.camera, frame_rng(seed))
        except BaseException:
            self.close()
            raise

    def render(self, job: Job) -> bytes:
        self.scene.place(job.poses)
        return self.camera.encode(self.camera.render(job.eye, job.yaw))

    def close(self) -> None:
        p.disconnect(physicsClientId=self.client)


def _die_with(parent: int) -> None:
    """Be killed when the world dies, however it dies (Linux); exit if it already has."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(0)


def serve(sock: socket.socket) -> int:
    """Answer jobs until the world closes the link."""
    data = sock.recv(MAX_MESSAGE)
    if not data:
        return 0
    renderer = SceneRenderer(*decode_init(data))
    try:
        sock.send(READY)
        while data := sock.recv(MAX_MESSAGE):
            job = decode_job(data)
            start = time.perf_counter()
            jpeg = renderer.render(job)
            sock.send(encode_frame(job.id, (time.perf_counter() - start) * 1000, jpeg))
    finally:
        renderer.close()
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m worlds.render FD PARENT_PID", file=sys.stderr)
        return 2
    _die_with(int(argv[1]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C: the world closes the link
    sock = socket.socket(fileno=int(argv[0]))
    try:
        return serve(sock)
    except Exception as exc:  # told to the world, which logs it and renders itself
        with contextlib.suppress(OSError):
            sock.send(ERROR + f"{type(exc).__name__}: {exc}".encode()[: MAX_MESSAGE - 1])
        return 1
    finally:
        sock.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
