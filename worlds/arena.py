"""Arena files: a site plus what only the simulator knows (TOML, see worlds/ARENA.md).

An arena is a site (protocol/SITE.md: room, tags, obstacles, the target's
tag) and the simulation-only parts: physics, the car model, sensor noise, the
simulated camera, the cars and where they start, the target's motion. It
names its site file (``site = "lab.site.toml"``) or embeds the site's tables.
:func:`load_arena` reads and validates it into a frozen :class:`Arena`; every
problem is a :class:`~protocol.tomlfile.FileError` naming the file, the line
and the reason. Agents never read an arena, only its site.
"""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

from protocol import tomlfile
from protocol.site import (
    MAX_TAG_ID,
    SITE_KEYS,
    Obstacle,
    Room,
    Site,
    SiteTarget,
    TagSpec,
    load_site,
    read_site,
)
from protocol.tomlfile import FileError, PathKey, Table

ArenaError = FileError  # the one error of the project's files
CAR_RADIUS = 0.13  # clearance a car needs around its start position, m
SENSING_MODES = ("synthetic", "camera")
SIM_KEYS = ("name", "seed", "site", "physics", "car_model", "sensing", "camera", "cars")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")


# -- the model ---------------------------------------------------------------


@dataclass(frozen=True)
class Physics:
    rate_hz: float = 240.0


@dataclass(frozen=True)
class CarModel:
    """Car constants shared by every car of the arena (SI units)."""

    track: float = 0.13
    wheel_diameter: float = 0.065
    wheelbase: float = 0.11
    mast: float = 0.15
    camera_forward: float = 0.05
    max_wheel_speed: float = 0.7  # wheel rim speed at |duty| = 1, m/s
    # The FNK0053's minimum start duty, 1600/4095: below it the kit's motors stall, so
    # its firmware lifts every nonzero duty to it (firmware/README.md, "Wheel duty").
    duty_deadband: float = 0.3907
    mass: float = 0.6
    wheel_torque: float = 0.1  # velocity-control force limit per wheel, N·m
    friction: float = 0.8
    clock_drift_ppm: float = 20.0  # each car's crystal error is drawn in ±this
    gyro: bool = True
    # The firmware integrates the gyro (telemetry's gyro_angle); false: a firmware from
    # before it, whose telemetry has the rate alone. The model firmware only: a SITL car
    # runs the sketch as built.
    gyro_angle: bool = True
    gyro_noise: float = 0.02  # white noise std per sample, rad/s
    gyro_bias: float = 0.01  # std of the constant bias drawn at each boot, rad/s
    gyro_scale: float = 0.015  # std of the scale error drawn at each boot (MPU-6050: ±3 %)
    # Calibration handed to the agents, not used by the physics: the track width
    # that turns wheel speeds into the yaw rate a skid-steer car really achieves.
    # Measured on this world's cars by tests/worlds/test_sim.py (about 0.48 m).
    effective_track: float = 0.48

    @property
    def wheel_radius(self) -> float:
        return self.wheel_diameter / 2.0

    @property
    def chassis_z(self) -> float:
        """Height of the chassis centre above the floor."""
        return self.wheel_radius + 0.01

    @property
    def camera_height(self) -> float:
        """Camera optical centre above the floor: chassis top plus the mast."""
        return self.chassis_z + 0.02 + self.mast


@dataclass(frozen=True)
class Sensing:
    mode: str = "synthetic"
    range: float = 3.0
    hfov_deg: float = 62.0
    range_noise: float = 0.03  # m, std
    bearing_noise: float = 0.01  # rad, std
    rate_hz: float = 10.0
    max_incidence_deg: float = 70.0  # a wall tag seen more obliquely is not detected


@dataclass(frozen=True)
class Camera:
    width: int = 320
    height: int = 240
    fx: float = 250.0
    fy: float = 250.0
    cx: float = 160.0
    cy: float = 120.0
    k1: float = -0.12
    k2: float = 0.02
    fps: float = 12.0
    noise: float = 2.0  # Gaussian pixel noise std, grey levels
    jpeg_quality: int = 80


@dataclass(frozen=True)
class CarSpec:
    id: int
    name: str
    address: str
    x: float
    y: float
    heading: float  # rad, counter-clockwise from +x


@dataclass(frozen=True)
class Orbit:
    center: tuple[float, float]
    radius: float
    speed: float
    ccw: bool = True
    phase: float = 0.0  # rad, start angle on the circle


@dataclass(frozen=True)
class Waypoints:
    points: tuple[tuple[float, float], ...]
    speed: float
    loop: bool = True


@dataclass(frozen=True)
class RandomWalk:
    bounds: tuple[float, float, float, float]  # xmin, ymin, xmax, ymax
    speed: float
    seed: int = 0


Motion = Orbit | Waypoints | RandomWalk


@dataclass(frozen=True)
class TargetSpec:
    """The site's target tag and, in the simulator only, how it moves."""

    tag_id: int
    size: float  # black square edge of the tag on each of its four faces
    height: float  # tag centre above the floor
    motion: Motion

    @property
    def body_side(self) -> float:
        """Side of the target's square column: the tag plus a one-cell white border."""
        return self.size * 10.0 / 8.0


@dataclass(frozen=True)
class Arena:
    name: str
    source: str
    seed: int
    site: Site
    physics: Physics
    car_model: CarModel
    sensing: Sensing
    camera: Camera
    cars: tuple[CarSpec, ...]
    target: TargetSpec | None = None

    @property
    def room(self) -> Room:
        return self.site.room

    @property
    def tags(self) -> tuple[TagSpec, ...]:
        return self.site.tags

    @property
    def obstacles(self) -> tuple[Obstacle, ...]:
        return self.site.obstacles

    def car(self, key: int | str) -> CarSpec:
        """A car by id or by name; KeyError if there is none."""
        for car in self.cars:
            if key in (car.id, car.name):
                return car
        raise KeyError(f"no car {key!r} in arena {self.name}")

    def with_cars_on(self, prefix: str) -> Arena:
        """The cars moved to the /24 ``prefix`` (e.g. ``127.41.7``), each keeping its last
        octet: two runs on one host each get their own block."""
        cars = tuple(replace(c, address=f"{prefix}.{c.address.rsplit('.', 1)[1]}")
                     for c in self.cars)
        for car in cars:
            ip = ipaddress.IPv4Address(car.address)  # raises ValueError on a bad prefix
            if ip.is_unspecified or ip.is_multicast:
                raise ValueError(f"{car.address} is not a host address")
        return replace(self, cars=cars)

    def with_sensing(self, mode: str) -> Arena:
        if mode not in SENSING_MODES:
            raise ValueError(f"sensing mode must be one of {SENSING_MODES}, got {mode!r}")
        return replace(self, sensing=replace(self.sensing, mode=mode))


# -- sections ----------------------------------------------------------------


def _physics(t: Table | None) -> Physics:
    if t is None:
        return Physics()
    physics = Physics(t.number("rate_hz", 240.0, 60.0, 2000.0))
    t.done()
    return physics


def _car_model(t: Table | None) -> CarModel:
    if t is None:
        return CarModel()
    d = CarModel()
    model = CarModel(
        track=t.number("track", d.track, 0.05, 1.0),
        wheel_diameter=t.number("wheel_diameter", d.wheel_diameter, 0.02, 0.5),
        wheelbase=t.number("wheelbase", d.wheelbase, 0.03, 1.0),
        mast=t.number("mast", d.mast, 0.0, 1.0),
        camera_forward=t.number("camera_forward", d.camera_forward, -0.2, 0.3),
        max_wheel_speed=t.number("max_wheel_speed", d.max_wheel_speed, 0.0, 5.0, low_open=True),
        duty_deadband=t.number("duty_deadband", d.duty_deadband, 0.0, 0.9),
        mass=t.number("mass", d.mass, 0.05, 20.0),
        wheel_torque=t.number("wheel_torque", d.wheel_torque, 0.0, 10.0, low_open=True),
        friction=t.number("friction", d.friction, 0.05, 3.0),
        clock_drift_ppm=t.number("clock_drift_ppm", d.clock_drift_ppm, 0.0, 1000.0),
        gyro=t.boolean("gyro", d.gyro),
        gyro_angle=t.boolean("gyro_angle", d.gyro_angle),
        gyro_noise=t.number("gyro_noise", d.gyro_noise, 0.0, 1.0),
        gyro_bias=t.number("gyro_bias", d.gyro_bias, 0.0, 1.0),
        gyro_scale=t.number("gyro_scale", d.gyro_scale, 0.0, 0.5),
        effective_track=t.number("effective_track", d.effective_track, 0.05, 5.0),
    )
    t.done()
    return model


def _sensing(t: Table | None) -> Sensing:
    if t is None:
        return Sensing()
    d = Sensing()
    mode = t.string("mode", d.mode)
    if mode not in SENSING_MODES:
        raise t.fail("mode", f"must be one of {', '.join(SENSING_MODES)}, got {mode!r}")
    sensing = Sensing(
        mode=mode,
        range=t.number("range", d.range, 0.0, 20.0, low_open=True),
        hfov_deg=t.number("hfov_deg", d.hfov_deg, 1.0, 179.0),
        range_noise=t.number("range_noise", d.range_noise, 0.0, 1.0),
        bearing_noise=t.number("bearing_noise", d.bearing_noise, 0.0, 0.5),
        rate_hz=t.number("rate_hz", d.rate_hz, 0.5, 10.0),
        max_incidence_deg=t.number("max_incidence_deg", d.max_incidence_deg, 1.0, 90.0),
    )
    t.done()
    return sensing


def _camera(t: Table | None) -> Camera:
    if t is None:
        return Camera()
    d = Camera()
    width = t.integer("width", d.width, 32, 1280)
    height = t.integer("height", d.height, 24, 960)
    camera = Camera(
        width=width,
        height=height,
        fx=t.number("fx", d.fx, 10.0, 5000.0),
        fy=t.number("fy", d.fy, 10.0, 5000.0),
        cx=t.number("cx", width / 2.0, 0.0, float(width)),
        cy=t.number("cy", height / 2.0, 0.0, float(height)),
        k1=t.number("k1", d.k1, -0.5, 0.5),
        k2=t.number("k2", d.k2, -0.5, 0.5),
        fps=t.number("fps", d.fps, 0.5, 12.0),
        noise=t.number("noise", d.noise, 0.0, 50.0),
        jpeg_quality=t.integer("jpeg_quality", d.jpeg_quality, 10, 100),
    )
    t.done()
    return camera


SIM_NETWORKS = (ipaddress.IPv4Network("127.0.0.0/8"), ipaddress.IPv4Network("198.18.0.0/15"))
"""Where tests and demos put simulated cars: loopback, or a test network (RFC 2544)
inside namespaces a test made. The world serves a car on any address of this machine."""


def _car(t: Table) -> CarSpec:
    car_id = t.integer("id", None, 1, 255)
    name = t.string("name")
    if not NAME_RE.match(name):
        raise t.fail("name", f"{name!r} must be 1-32 of a-z, 0-9, '_', '-'")
    address = t.string("address")
    try:
        ip = ipaddress.IPv4Address(address)
    except ipaddress.AddressValueError:
        raise t.fail("address", f"{address!r} is not an IPv4 address") from None
    if ip.is_unspecified or ip.is_multicast or str(ip).endswith(".255"):
        raise t.fail("address", f"{address} is not a host address a car can have")
    car = CarSpec(
        car_id,
        name,
        address,
        t.number("x"),
        t.number("y"),
        t.angle_deg("heading_deg", 0.0),
    )
    t.done()
    return car

def _motion(t: Table) -> Motion:
    kind = t.string("kind")
    motion: Motion
    if kind == "orbit":
        cx, cy = t.vector("center", 2)
        direction = t.string("direction", "ccw")
        if direction not in ("ccw", "cw"):
            raise t.fail("direction", f"must be 'ccw' or 'cw', got {direction!r}")
        motion = Orbit(
            (cx, cy),
            t.number("radius", None, 0.0, 100.0, low_open=True),
            t.number("speed", None, 0.0, 10.0),
            direction == "ccw",
            math.radians(t.number("phase_deg", 0.0, -360.0, 360.0)),
        )
    elif kind == "waypoints":
        motion = Waypoints(
            t.points("points"), t.number("speed", None, 0.0, 10.0), t.boolean("loop", True)
        )
    elif kind == "random_walk":
        xmin, ymin, xmax, ymax = t.vector("bounds", 4)
        if not (xmin < xmax and ymin < ymax):
            raise t.fail("bounds", "must be [xmin, ymin, xmax, ymax] with min < max")
        motion = RandomWalk(
            (xmin, ymin, xmax, ymax),
            t.number("speed", None, 0.0, 10.0, low_open=True),
            t.integer("seed", 0, 0, 2**32 - 1),
        )
    else:
        raise t.fail("kind", f"must be orbit, waypoints or random_walk, got {kind!r}")
    t.done()
    return motion


def _motion_extent(motion: Motion) -> tuple[float, float, float, float]:
    """Bounding box (xmin, ymin, xmax, ymax) of every point the motion can reach."""
    if isinstance(motion, Orbit):
        (cx, cy), r = motion.center, motion.radius
        return (cx - r, cy - r, cx + r, cy + r)
    if isinstance(motion, Waypoints):
        xs = [p[0] for p in motion.points]
        ys = [p[1] for p in motion.points]
        return (min(xs), min(ys), max(xs), max(ys))
    return motion.bounds


def _target(t: Table, site: SiteTarget, room: Room) -> TargetSpec:
    motion_table = t.table("motion", required=True)
    assert motion_table is not None
    target = TargetSpec(site.tag_id, site.size, site.height, _motion(motion_table))
    t.done()
    half = target.body_side / 2.0
    xmin, ymin, xmax, ymax = _motion_extent(target.motion)
    if xmin < half or ymin < half or xmax > room.size_x - half or ymax > room.size_y - half:
        raise motion_table.fail("kind", "the target's path leaves the room")
    return target


# -- cross checks ----------------------------------------------------------------


def _inside_obstacle(x: float, y: float, o: Obstacle, margin: float) -> bool:
    c, s = math.cos(-o.yaw), math.sin(-o.yaw)
    dx, dy = x - o.x, y - o.y
    lx, ly = c * dx - s * dy, s * dx + c * dy
    return abs(lx) < o.size_x / 2 + margin and abs(ly) < o.size_y / 2 + margin


def _cross_check(top: Table, site: Site, cars: list[CarSpec]) -> None:
    src, room = top.source, site.room
    if not cars:
        raise src.fail(("cars",), "an arena needs at least one [[cars]] entry")
    seen: dict[str, dict[object, int]] = {"id": {}, "name": {}, "address": {}}
    for i, car in enumerate(cars):
        path: PathKey = ("cars", i)
        for key in ("id", "name", "address"):
            value = getattr(car, key)
            if value in seen[key]:
                first = seen[key][value]
                raise src.fail((*path, key), f"cars[{i}].{key} {value!r} repeats cars[{first}]")
            seen[key][value] = i
        m = CAR_RADIUS
        if not (m <= car.x <= room.size_x - m and m <= car.y <= room.size_y - m):
            raise src.fail(
                (*path, "x"), f"car {car.name} must start at least {m} m inside the room"
            )
        for j, other in enumerate(cars[:i]):
            if math.hypot(car.x - other.x, car.y - other.y) < 2 * m:
                raise src.fail((*path, "x"), f"car {car.name} starts on top of cars[{j}]")
        for j, obstacle in enumerate(site.obstacles):
            if _inside_obstacle(car.x, car.y, obstacle, m):
                raise src.fail((*path, "x"), f"car {car.name} starts inside obstacles[{j}]")


def read_arena(top: Table) -> Arena:
    """An arena from its top table (``site = FILE``, or the site's tables embedded)."""
    name = top.string("name", Path(top.file).stem or "arena")
    site_file = top.raw("site")
    if site_file is not None:
        top.only((*SIM_KEYS, "target"))
        site = load_site(top.file_path("site"))
        target_table = top.table("target")
        if (target_table is None) != (site.target is None):
            raise top.fail("target", "an arena gives [target.motion] exactly when its site "
                           "has a [target]")
    else:
        top.only((*SIM_KEYS, *SITE_KEYS))
        site = read_site(top, name, target_done=False)
        target_table = top.table("target")
    target = None
    if target_table is not None and site.target is not None:
        target = _target(target_table, site.target, site.room)
    arena = Arena(
        name=name,
        source=top.file,
        seed=top.integer("seed", 0, 0, 2**32 - 1),
        site=site,
        physics=_physics(top.table("physics")),
        car_model=_car_model(top.table("car_model")),
        sensing=_sensing(top.table("sensing")),
        camera=_camera(top.table("camera")),
        cars=tuple(_car(t) for t in top.tables("cars")),
        target=target,
    )
    top.done()
    _cross_check(top, site, list(arena.cars))
    return arena


def parse_arena(text: str, source: str = "<arena>", base: Path | None = None) -> Arena:
    """Validate TOML text; ``source`` names it in errors, ``base`` anchors a site file."""
    return read_arena(tomlfile.parse(text, source, base))


def load_arena(path: str | Path) -> Arena:
    """Read and validate an arena file; raises :class:`FileError`."""
    return read_arena(tomlfile.read(path))


ARENA_DIR = Path(__file__).resolve().parent / "arenas"


def shipped_arena(name: str) -> Path:
    """The path of a shipped arena, e.g. ``shipped_arena("two_cars")``."""
    return ARENA_DIR / f"{name}.toml"


__all__ = [
    "ARENA_DIR", "CAR_RADIUS", "MAX_TAG_ID", "SENSING_MODES", "SIM_NETWORKS", "Arena",
    "ArenaError", "Camera", "CarModel", "CarSpec", "FileError", "Motion", "Obstacle", "Orbit",
    "Physics", "RandomWalk", "Room", "Sensing", "Site", "TagSpec", "TargetSpec", "Waypoints",
    "load_arena", "parse_arena", "read_arena", "shipped_arena",
]  # fmt: skip
