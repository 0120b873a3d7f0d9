"""Rendered camera frames with known ground truth, from ``worlds.sim.World`` in camera mode."""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np
import pybullet as p

from worlds.arena import Arena, load_arena, parse_arena, shipped_arena
from worlds.sim import World

# A 4 m x 4 m room with three close tags on the west wall (facing +x) and a
# fourth on the east wall; the target parks in the south-east corner.
WALL_ARENA = """\
name = "perception_wall"
seed = 11

[room]
size = [4.0, 4.0]

[sensing]
mode = "camera"

[[cars]]
id = 1
name = "walnut"
address = "127.0.0.1"
x = 1.2
y = 2.0
heading_deg = 180

[[tags]]
id = 20
x = 0.0
y = 1.55
z = 0.21
yaw_deg = 0
size = 0.15

[[tags]]
id = 21
x = 0.0
y = 2.0
z = 0.21
yaw_deg = 0
size = 0.15
{measured21}

[[tags]]
id = 22
x = 0.0
y = 2.45
z = 0.21
yaw_deg = 0
size = 0.15

[[tags]]
id = 23
x = 4.0
y = 2.0
z = 0.21
yaw_deg = 180
size = 0.2

[target]
tag_id = 100
size = 0.12
height = 0.21

[target.motion]
kind = "waypoints"
points = [[3.3, 0.7], [3.3, 0.7001]]
speed = 0.001
loop = true
"""


def wall_arena(tag21_measured: bool = True) -> Arena:
    measured = "" if tag21_measured else "measured = false"
    return parse_arena(WALL_ARENA.format(measured21=measured), "perception_wall.toml")


def two_cars_camera() -> Arena:
    return load_arena(shipped_arena("two_cars")).with_sensing("camera")


@dataclass(frozen=True)
class Shot:
    gray: np.ndarray
    truth: tuple[float, float, float]  # the car's x, y, heading
    eye: tuple[float, float, float]  # the camera's optical centre
    t: float


class Studio:
    """One world; put car 1 anywhere and take its picture."""

    def __init__(self, arena: Arena) -> None:
        self.arena = arena
        self.world = World(arena, t0=0.0)
        self.t = 0.0

    def close(self) -> None:
        self.world.close()

    def shoot(self, x: float, y: float, heading: float, car: int = 1) -> Shot:
        body = self.world.scene.cars[car]
        pos, _ = p.getBasePositionAndOrientation(body.body, physicsClientId=self.world.client)
        p.resetBasePositionAndOrientation(
            body.body, (x, y, pos[2]), p.getQuaternionFromEuler((0.0, 0.0, heading)),
            physicsClientId=self.world.client,
        )  # fmt: skip
        p.resetBaseVelocity(body.body, (0, 0, 0), (0, 0, 0), physicsClientId=self.world.client)
        self.t += 0.05
        frame = self.world.capture_frame(car, self.t)
        assert frame is not None
        gray = cv2.imdecode(np.frombuffer(frame.jpeg, np.uint8), cv2.IMREAD_GRAYSCALE)
        assert gray is not None
        eye, _ = body.camera()
        return Shot(gray, body.pose(), eye, self.t)


def pose_error(
    fix_xyt: tuple[float, float, float], truth: tuple[float, float, float]
) -> tuple[float, float]:
    """(position error m, heading error deg)."""
    dx, dy = fix_xyt[0] - truth[0], fix_xyt[1] - truth[1]
    return math.hypot(dx, dy), abs(math.degrees(math.remainder(fix_xyt[2] - truth[2], math.tau)))
