"""The arena as PyBullet bodies: floor, walls, obstacles, wall tags, the target, cars.

Every call passes ``physicsClientId`` so that several worlds can live in one
process. Conventions: world x, y on the floor, z up, yaw counter-clockwise
from +x; a car's frame has x forward, y left.

Cars use real skid steering: four wheels on revolute joints driven by
``VELOCITY_CONTROL`` with a torque limit, turning by side slip of the wheels
(a test checks that a car drives straight and turns in place).
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pybullet as p

from worlds.arena import Arena, CarModel, CarSpec, Obstacle, TagSpec, TargetSpec
from worlds.camera import write_tag_texture
from worlds.motion import TargetState
from worlds.steps import BodyPose, Poses

WHEELS = (0, 1, 2, 3)  # a car's wheel joints (and links)

WALL_THICKNESS = 0.1
TAG_OFFSET = 0.003  # tag quads sit this far in front of their mounting surface
CHASSIS_HALF = (0.09, 0.045, 0.02)
WHEEL_WIDTH = 0.025
TARGET_GROUP = 2  # the target collides with nothing, but rays still see it

CAR_COLOURS = (
    (0.55, 0.35, 0.2, 1.0),
    (0.75, 0.6, 0.3, 1.0),
    (0.3, 0.5, 0.7, 1.0),
    (0.6, 0.3, 0.5, 1.0),
    (0.35, 0.6, 0.35, 1.0),
    (0.7, 0.4, 0.35, 1.0),
    (0.4, 0.4, 0.65, 1.0),
    (0.6, 0.6, 0.6, 1.0),
)


def _quat(yaw: float) -> tuple[float, float, float, float]:
    return (0.0, 0.0, math.sin(yaw / 2.0), math.cos(yaw / 2.0))


def duty_to_speed(duty: float, model: CarModel) -> float:
    """Wheel rim speed (m/s) for a duty: 0 inside the deadband, then linear up to the maximum."""
    magnitude = abs(duty)
    if magnitude < model.duty_deadband or magnitude == 0.0:
        return 0.0
    span = 1.0 - model.duty_deadband
    fraction = (min(magnitude, 1.0) - model.duty_deadband) / span if span > 0 else 1.0
    return math.copysign(fraction * model.max_wheel_speed, duty)


def _tag_quad(
    centre: tuple[float, float, float], normal_yaw: float, half: float, offset: float
) -> tuple[list[list[float]], list[list[float]], list[list[float]]]:
    """Vertices, uvs and normals of one textured square facing ``normal_yaw``.

    Order: bottom-left, bottom-right, top-right, top-left as a viewer facing
    the tag sees them, with uv (0,0) at bottom-left.
    """
    nx, ny = math.cos(normal_yaw), math.sin(normal_yaw)
    rx, ry = -ny, nx  # the viewer's right when facing the tag
    cx, cy, cz = centre[0] + offset * nx, centre[1] + offset * ny, centre[2]
    corners = ((-1, -1), (1, -1), (1, 1), (-1, 1))
    verts = [[cx + sx * half * rx, cy + sx * half * ry, cz + sz * half] for sx, sz in corners]
    uvs = [[(sx + 1) / 2.0, (sz + 1) / 2.0] for sx, sz in corners]
    normals = [[nx, ny, 0.0]] * 4
    return verts, uvs, normals


@dataclass
class CarBody:
    """One car's rigid body and its drive."""

    client: int
    body: int
    spec: CarSpec
    model: CarModel

    # wheel links: 0 front-left, 1 front-right, 2 rear-left, 3 rear-right
    def set_duty(self, left: float, right: float) -> tuple[float, float]:
        """Apply wheel duties; returns the commanded rim speeds (m/s) per side."""
        vl, vr = duty_to_speed(left, self.model), duty_to_speed(right, self.model)
        r = self.model.wheel_radius
        # the wheel joints' axis points to the car's right, so forward is negative
        p.setJointMotorControlArray(
            self.body,
            [0, 1, 2, 3],
            p.VELOCITY_CONTROL,
            targetVelocities=[-vl / r, -vr / r, -vl / r, -vr / r],
            forces=[self.model.wheel_torque] * 4,
            physicsClientId=self.client,
        )
        return vl, vr

    def state(self) -> BodyPose:
        """Everything that places the car's shapes: its base and its wheels' angles."""
        pos, orn = p.getBasePositionAndOrientation(self.body, physicsClientId=self.client)
        wheels = p.getJointStates(self.body, WHEELS, physicsClientId=self.client)
        return BodyPose(tuple(pos), tuple(orn), tuple(float(w[0]) for w in wheels))

    def place(self, state: BodyPose) -> None:
        """Put the car's shapes where ``state`` says (a render's scene, never stepped)."""
        c = self.client
        p.resetBasePositionAndOrientation(self.body, state.pos, state.orn, physicsClientId=c)
        for joint, angle in zip(WHEELS, state.joints, strict=True):
            p.resetJointState(self.body, joint, angle, physicsClientId=c)

    def pose(self) -> tuple[float, float, float]:
        (x, y, _), orn = p.getBasePositionAndOrientation(self.body, physicsClientId=self.client)
        yaw = p.getEulerFromQuaternion(orn)[2]
        return x, y, yaw

    def motion(self) -> tuple[float, float]:
        """Forward speed (m/s, signed) and yaw rate (rad/s)."""
        (vx, vy, _), (_, _, wz) = p.getBaseVelocity(self.body, physicsClientId=self.client)
        _, _, yaw = self.pose()
        return vx * math.cos(yaw) + vy * math.sin(yaw), wz

    def camera(self) -> tuple[tuple[float, float, float], float]:
        """The camera's optical centre (world) and heading.

        The camera is level and looks along the chassis heading; its position
        follows the chassis' full orientation (a tilted car moves its camera).
        """
        pos, orn = p.getBasePositionAndOrientation(self.body, physicsClientId=self.client)
        local = (self.model.camera_forward, 0.0, self.model.camera_height - self.model.chassis_z)
        eye, _ = p.multiplyTransforms(pos, orn, local, (0, 0, 0, 1))
        yaw = p.getEulerFromQuaternion(orn)[2]
        return (float(eye[0]), float(eye[1]), float(eye[2])), yaw


@dataclass
class TargetBody:
    client: int
    body: int
    spec: TargetSpec

    def set_state(self, state: TargetState) -> None:
        p.resetBasePositionAndOrientation(
            self.body, (state.x, state.y, 0.0), _quat(state.yaw), physicsClientId=self.client
        )

    def state(self) -> BodyPose:
        pos, orn = p.getBasePositionAndOrientation(self.body, physicsClientId=self.client)
        return BodyPose(tuple(pos), tuple(orn))

    def place(self, state: BodyPose) -> None:
        p.resetBasePositionAndOrientation(
            self.body, state.pos, state.orn, physicsClientId=self.client
        )


class Scene:
    """All bodies of one arena in one PyBullet client."""

    def __init__(self, client: int, arena: Arena) -> None:
        self.client = client
        self.arena = arena
        self._textures: dict[int, int] = {}
        p.setGravity(0, 0, -9.81, physicsClientId=client)
        # Two bodies touch only if each one's group is in the other's mask. PyBullet's
        # default is "either", which let the kinematic target (mask 0) shove cars away.
        p.setPhysicsEngineParameter(collisionFilterMode=0, physicsClientId=client)
        p.setTimeStep(1.0 / arena.physics.rate_hz, physicsClientId=client)
        self.floor = self._floor()
        self.walls = self._walls()
        self.obstacles = [self._obstacle(o) for o in arena.obstacles]
        # PyBullet reads a texture when it is loaded: the PNGs live only while the
        # bodies are built, so a killed world leaves no directory behind.
        with tempfile.TemporaryDirectory(prefix="stigmesh-textures-") as texture_dir:
            self._texture_dir = Path(texture_dir)
            self.tags: dict[int, int] = {tag.id: self._tag(tag) for tag in arena.tags}
            self.target = self._target(arena.target) if arena.target is not None else None
            self.cars: dict[int, CarBody] = {
                car.id: self._car(car, i) for i, car in enumerate(arena.cars)
            }

    def poses(self) -> Poses:
        """What moves in the scene, as it is now: every car and the target."""
        cars = tuple((car_id, car.state()) for car_id, car in self.cars.items())
        return Poses(cars, self.target.state() if self.target is not None else None)

    def place(self, poses: Poses) -> None:
        """Move this scene's bodies to ``poses`` (another scene's, of the same arena)."""
        for car_id, state in poses.cars:
            self.cars[car_id].place(state)
        if self.target is not None and poses.target is not None:
            self.target.place(poses.target)

    def _texture(self, tag_id: int) -> int:
        if tag_id not in self._textures:
            path = write_tag_texture(tag_id, self._texture_dir)
            self._textures[tag_id] = p.loadTexture(str(path), physicsClientId=self.client)
        return self._textures[tag_id]

    def _box(
        self,
        half: tuple[float, float, float],
        pos: tuple[float, float, float],
        yaw: float,
        colour: tuple[float, float, float, float],
    ) -> int:
        c = self.client
        col = p.createCollisionShape(p.GEOM_BOX, halfExtents=half, physicsClientId=c)
        vis = p.createVisualShape(p.GEOM_BOX, halfExtents=half, rgbaColor=colour, physicsClientId=c)
        return int(
            p.createMultiBody(
                0, col, vis, basePosition=pos, baseOrientation=_quat(yaw), physicsClientId=c
            )
        )

    def _floor(self) -> int:
        c, room = self.client, self.arena.room
        col = p.createCollisionShape(p.GEOM_PLANE, physicsClientId=c)
        half = (room.size_x / 2 + WALL_THICKNESS, room.size_y / 2 + WALL_THICKNESS, 0.005)
        vis = p.createVisualShape(
            p.GEOM_BOX,
            halfExtents=half,
            rgbaColor=(0.45, 0.45, 0.42, 1.0),
            visualFramePosition=(room.size_x / 2, room.size_y / 2, -0.005),
            physicsClientId=c,
        )
        body = p.createMultiBody(0, col, vis, physicsClientId=c)
        p.changeDynamics(body, -1, lateralFriction=1.0, physicsClientId=c)
        return int(body)

    def _walls(self) -> list[int]:
        room, t = self.arena.room, WALL_THICKNESS
        h = room.wall_height / 2
        sx, sy = room.size_x, room.size_y
        colour = (0.85, 0.82, 0.75, 1.0)
        return [
            self._box((sx / 2 + t, t / 2, h), (sx / 2, -t / 2, h), 0.0, colour),
            self._box((sx / 2 + t, t / 2, h), (sx / 2, sy + t / 2, h), 0.0, colour),
            self._box((t / 2, sy / 2, h), (-t / 2, sy / 2, h), 0.0, colour),
            self._box((t / 2, sy / 2, h), (sx + t / 2, sy / 2, h), 0.0, colour),
        ]

    def _obstacle(self, o: Obstacle) -> int:
        half = (o.size_x / 2, o.size_y / 2, o.height / 2)
        return self._box(half, (o.x, o.y, o.height / 2), o.yaw, (0.5, 0.38, 0.28, 1.0))

    def _tag(self, tag: TagSpec) -> int:
        c = self.client
        half = tag.size * 10.0 / 8.0 / 2.0
        verts, uvs, normals = _tag_quad((0.0, 0.0, 0.0), 0.0, half, TAG_OFFSET)
        vis = p.createVisualShape(
            p.GEOM_MESH,
            vertices=verts,
            indices=[0, 1, 2, 0, 2, 3],
            uvs=uvs,
            normals=normals,
            physicsClientId=c,
        )
        body = p.createMultiBody(
            0, -1, vis, basePosition=(tag.x, tag.y, tag.z), baseOrientation=_quat(tag.yaw),
            physicsClientId=c,
        )  # fmt: skip
        p.changeVisualShape(
            body,
            -1,
            textureUniqueId=self._texture(tag.id),
            rgbaColor=(1, 1, 1, 1),
            physicsClientId=c,
        )
        return int(body)

    def _target(self, spec: TargetSpec) -> TargetBody:
        """A square column with the tag on its four sides; kinematic, touches nothing."""
        c = self.client
        half = spec.body_side / 2
        top = spec.height + half
        verts: list[list[float]] = []
        uvs: list[list[float]] = []
        normals: list[list[float]] = []
        indices: list[int] = []
        white_uv = [0.02, 0.02]  # inside the quiet zone

        def add(quad_v: list[list[float]], quad_uv: list[list[float]], n: list[float]) -> None:
            base = len(verts)
            verts.extend(quad_v)
            uvs.extend(quad_uv)
            normals.extend([n] * 4)
            indices.extend([base, base + 1, base + 2, base, base + 2, base + 3])

        for k in range(4):
            yaw = k * math.pi / 2
            nx, ny = math.cos(yaw), math.sin(yaw)
            centre = (half * nx, half * ny, spec.height)
            q_v, q_uv, q_n = _tag_quad(centre, yaw, half, 0.0)
            add(q_v, q_uv, q_n[0])
            below = spec.height - half
            if below > 1e-4:  # the plain column under the tag
                low = [[v[0], v[1], 0.0 if v[2] < spec.height else below] for v in q_v]
                add(low, [white_uv] * 4, q_n[0])
        add([[-half, -half, top], [half, -half, top], [half, half, top], [-half, half, top]],
            [white_uv] * 4, [0.0, 0.0, 1.0])  # fmt: skip
        vis = p.createVisualShape(
            p.GEOM_MESH,
            vertices=verts,
            indices=indices,
            uvs=uvs,
            normals=normals,
            physicsClientId=c,
        )
        col = p.createCollisionShape(
            p.GEOM_BOX,
            halfExtents=(half, half, top / 2),
            collisionFramePosition=(0, 0, top / 2),
            physicsClientId=c,
        )
        body = p.createMultiBody(0, col, vis, basePosition=(0, 0, 0), physicsClientId=c)
        p.setCollisionFilterGroupMask(body, -1, TARGET_GROUP, 0, physicsClientId=c)
        p.changeVisualShape(
            body, -1, textureUniqueId=self._texture(spec.tag_id), rgbaColor=(1, 1, 1, 1),
            physicsClientId=c,
        )  # fmt: skip
        return TargetBody(c, int(body), spec)

    def _car(self, spec: CarSpec, index: int) -> CarBody:
        c, m = self.client, self.arena.car_model
        r = m.wheel_radius
        colour = CAR_COLOURS[index % len(CAR_COLOURS)]
        mast_top = m.camera_height - m.chassis_z
        chassis_col = p.createCollisionShape(
            p.GEOM_BOX, halfExtents=CHASSIS_HALF, physicsClientId=c
        )
        chassis_vis = p.createVisualShapeArray(
            shapeTypes=[p.GEOM_BOX, p.GEOM_BOX, p.GEOM_BOX],
            halfExtents=[
                list(CHASSIS_HALF),
                [0.006, 0.006, max(m.mast, 0.001) / 2],
                [0.015, 0.02, 0.012],
            ],
            visualFramePositions=[
                [0, 0, 0],
                [m.camera_forward, 0, CHASSIS_HALF[2] + m.mast / 2],
                [m.camera_forward - 0.01, 0, mast_top],
            ],
            rgbaColors=[list(colour), [0.2, 0.2, 0.2, 1], [0.05, 0.05, 0.05, 1]],
            physicsClientId=c,
        )
        wheel_col = p.createCollisionShape(
            p.GEOM_CYLINDER, radius=r, height=WHEEL_WIDTH, physicsClientId=c
        )
        wheel_vis = p.createVisualShape(
            p.GEOM_CYLINDER, radius=r, length=WHEEL_WIDTH, rgbaColor=(0.08, 0.08, 0.08, 1),
            physicsClientId=c,
        )  # fmt: skip
        dz = r - m.chassis_z  # axle height relative to the chassis centre
        half_wb, half_track = m.wheelbase / 2, m.track / 2
        positions = [
            [half_wb, half_track, dz],
            [half_wb, -half_track, dz],
            [-half_wb, half_track, dz],
            [-half_wb, -half_track, dz],
        ]
        wheel_orn = p.getQuaternionFromEuler((math.pi / 2, 0, 0))
        wheel_mass = 0.04
        body = p.createMultiBody(
            baseMass=max(m.mass - 4 * wheel_mass, 0.01),
            baseCollisionShapeIndex=chassis_col,
            baseVisualShapeIndex=chassis_vis,
            basePosition=(spec.x, spec.y, m.chassis_z),
            baseOrientation=_quat(spec.heading),
            linkMasses=[wheel_mass] * 4,
            linkCollisionShapeIndices=[wheel_col] * 4,
            linkVisualShapeIndices=[wheel_vis] * 4,
            linkPositions=positions,
            linkOrientations=[wheel_orn] * 4,
            linkInertialFramePositions=[[0, 0, 0]] * 4,
            linkInertialFrameOrientations=[[0, 0, 0, 1]] * 4,
            linkParentIndices=[0] * 4,
            linkJointTypes=[p.JOINT_REVOLUTE] * 4,
            linkJointAxis=[[0, 0, 1]] * 4,
            physicsClientId=c,
        )
        for link in range(4):
            p.changeDynamics(body, link, lateralFriction=m.friction, physicsClientId=c)
        car = CarBody(c, int(body), spec, m)
        car.set_duty(0.0, 0.0)
        return car
