"""What the world produces and reads: datagrams, log events, steps, frames, render jobs, counters,
and the error of an endpoint it could not bind.

Plain values, shared by :mod:`worlds.sim` (which re-exports them), its cars and the server.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from typing import Any, Protocol

from protocol.mz01 import Address


@dataclass(frozen=True)
class Send:
    """A datagram a car sends from its ``port`` to ``dst``."""

    car: int
    port: int
    dst: Address
    data: bytes


@dataclass(frozen=True)
class LogEvent:
    t: float
    event: str
    fields: dict[str, Any]


@dataclass
class Step:
    sends: list[Send] = field(default_factory=list)
    events: list[LogEvent] = field(default_factory=list)
    # (car, "boot" | "link"): a SITL car (re)boots, or its link state changed
    notices: list[tuple[int, str]] = field(default_factory=list)


class CarFirmware(Protocol):
    """What the world reads of a car's firmware, the model's or a SITL car's mirror."""

    @property
    def boot_nonce(self) -> int: ...
    @property
    def token(self) -> int: ...
    @property
    def armed(self) -> bool: ...
    @property
    def estop(self) -> bool: ...
    @property
    def reason(self) -> str: ...
    @property
    def wheels(self) -> tuple[float, float]: ...


@dataclass(frozen=True)
class BodyPose:
    """A body's base position and orientation (x, y, z, w), and its joints' angles."""

    pos: tuple[float, ...]
    orn: tuple[float, ...]
    joints: tuple[float, ...] = ()


@dataclass(frozen=True)
class Poses:
    """Where everything that moves is: each car (by id) and the target."""

    cars: tuple[tuple[int, BodyPose], ...]
    target: BodyPose | None


@dataclass(frozen=True)
class RenderJob:
    """One camera frame to render: the scene and the camera as they were at ``t``.

    Taken by :meth:`worlds.sim.World.frame_job`; rendered in the world's process
    or by a render worker (:mod:`worlds.render`), then finished by
    :meth:`worlds.sim.World.frame_done`, which numbers it.
    """

    car: int
    eye: tuple[float, float, float]
    yaw: float
    poses: Poses
    capture_ms: int  # the car's uptime at t
    boot_id: int
    t: float


@dataclass(frozen=True)
class Frame:
    """One camera frame as the car's stream carries it."""

    car: int
    jpeg: bytes
    capture_ms: int
    boot_id: int
    seq: int
    t: float  # world time of capture
    repeated: bool = False  # a frozen camera repeats its last frame


class WorldError(ValueError):
    """A bad request to the world (unknown car, bad duration)."""


@dataclass
class Counters:
    rx: int = 0
    tx: int = 0
    dropped_in: int = 0
    dropped_out: int = 0
    rejected: int = 0
    probes: int = 0
    frames: int = 0


class BindError(OSError):
    """A car endpoint could not be bound; names the address and port."""

    def __init__(self, address: str, port: int, proto: str, cause: OSError) -> None:
        why = (
            "already in use" if cause.errno == errno.EADDRINUSE else (cause.strerror or str(cause))
        )
        super().__init__(cause.errno, f"cannot bind {proto} {address}:{port}: {why}")
        self.address, self.port, self.proto = address, port, proto
