"""One virtual car: its body's id, its firmware from its current boot, its clock and its faults."""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

from protocol.mz01 import FirmwareModel
from worlds.arena import Arena, CarSpec
from worlds.sensors import Gyro
from worlds.sitl import SitlFirmware
from worlds.steps import Counters, Frame


class CarsWorld(Protocol):
    """What a car asks of the world it runs in (:class:`worlds.sim.World`)."""

    arena: Arena
    firmware: str
    t0: float
    t: float

    def notice(self, car: int, what: str) -> None: ...

BOOT_AGE = (2.0, 600.0)  # at world start each car has been up this long (uniform), s
U32 = 0xFFFF_FFFF


class VirtualCar:
    """One car: its body, its firmware from its current boot, its clock and its faults."""

    def __init__(self, spec: CarSpec, world: CarsWorld, rng: np.random.Generator) -> None:
        self.spec = spec
        self.id = spec.id
        self.rng = rng
        self.world = world
        model = world.arena.car_model
        self.drift = float(rng.uniform(-1, 1)) * model.clock_drift_ppm * 1e-6
        self.counters = Counters()
        self.link_down_until = -math.inf
        self.camera_frozen_until = -math.inf
        self.fed_t: float | None = None  # world time of the last accepted ARM/DRIVE
        self.duty = (0.0, 0.0)
        self.firmware: FirmwareModel | SitlFirmware
        self.boot(world.t0 - float(rng.uniform(*BOOT_AGE)))

    def boot(self, boot_time: float, wheels: tuple[float, float] = (0.0, 0.0)) -> None:
        """A new firmware boot at ``boot_time``; a SITL car's wheels keep ``wheels`` until then."""
        model = self.world.arena.car_model
        self.boot_time = boot_time
        nonce, token = int(self.rng.integers(0, U32 + 1)), int(self.rng.integers(0, U32 + 1))
        start = max(boot_time, self.world.t)
        if self.world.firmware == "sitl":
            self.firmware = SitlFirmware(self.id, nonce, token, wheels=wheels)
            self.next_tick = math.inf  # it ticks itself, in its own process
            self.world.notice(self.id, "boot")
        else:
            self.firmware = FirmwareModel(self.id, nonce, token)
            self.next_tick = start
        self.gyro = (Gyro(model.gyro_noise, model.gyro_bias, self.rng, model.gyro_scale)
                     if model.gyro else None)
        synthetic = self.world.arena.sensing.mode == "synthetic"
        self.next_obs = start if synthetic else math.inf
        self.sim_obs: dict[str, Any] | None = None
        self.frame_seq = 0
        self.last_frame: Frame | None = None
        self.fed_t = None

    @property
    def nonce(self) -> int:
        return self.firmware.boot_nonce

    def uptime_us(self, t: float) -> int:
        return max(0, int((t - self.boot_time) * (1.0 + self.drift) * 1e6))

    def world_time(self, uptime_us: int) -> float:
        return self.boot_time + uptime_us / 1e6 / (1.0 + self.drift)

    def online(self, t: float) -> bool:
        return t >= self.boot_time

    def link_up(self, t: float) -> bool:
        return t >= self.link_down_until and self.online(t)

    def camera_frozen(self, t: float) -> bool:
        return t < self.camera_frozen_until
