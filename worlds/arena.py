"""Arena files: the room, cars, tags, target and sensor model of one world (TOML).

:func:`load_arena` reads and validates a file into a frozen :class:`Arena`;
every problem is an :class:`ArenaError` naming the file, the line and the
reason. The format is documented in ``worlds/ARENA.md``.
"""

from __future__ import annotations

import ipaddress
import math
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

PathKey = tuple[str | int, ...]

MAX_TAG_ID = 586  # tag36h11 has 587 codes
CAR_RADIUS = 0.13  # clearance a car needs around its start position, m
SENSING_MODES = ("synthetic", "camera")
TOP_KEYS = (
    "name", "seed", "room", "physics", "car_model", "sensing", "camera",
    "cars", "tags", "wall_tags", "obstacles", "target",
)  # fmt: skip
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")


class ArenaError(ValueError):
    """An arena file was refused: ``file``, ``line`` (0 when unknown) and ``reason``."""

    def __init__(self, file: str, line: int, reason: str) -> None:
        self.file = file
        self.line = line
        self.reason = reason
        where = f"{file}:{line}" if line else file
        super().__init__(f"{where}: {reason}")


# -- the model ---------------------------------------------------------------


@dataclass(frozen=True)
class Room:
    size_x: float
    size_y: float
    wall_height: float = 0.5


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
    gyro_noise: float = 0.02  # white noise std per sample, rad/s
    gyro_bias: float = 0.01  # std of the constant bias drawn at each boot, rad/s
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
class TagSpec:
    """A wall tag: centre, the yaw of its facing normal, the black square's edge."""

    id: int
    x: float
    y: float
    z: float
    yaw: float
    size: float
    measured: bool = True


@dataclass(frozen=True)
class Obstacle:
    x: float
    y: float
    size_x: float
    size_y: float
    height: float
    yaw: float = 0.0


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
    room: Room
    physics: Physics
    car_model: CarModel
    sensing: Sensing
    camera: Camera
    cars: tuple[CarSpec, ...]
    tags: tuple[TagSpec, ...] = ()
    obstacles: tuple[Obstacle, ...] = ()
    target: TargetSpec | None = None

    def car(self, key: int | str) -> CarSpec:
        """A car by id or by name; KeyError if there is none."""
        for car in self.cars:
            if key in (car.id, car.name):
                return car
        raise KeyError(f"no car {key!r} in arena {self.name}")

    def with_sensing(self, mode: str) -> Arena:
        if mode not in SENSING_MODES:
            raise ValueError(f"sensing mode must be one of {SENSING_MODES}, got {mode!r}")
        return replace(self, sensing=replace(self.sensing, mode=mode))


# -- line index ----------------------------------------------------------------

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-\.\"' ]+?)\s*=")


def _split_key(text: str) -> list[str]:
    return [part.strip().strip("\"'") for part in text.split(".")]


def line_index(text: str) -> dict[PathKey, int]:
    """Map key paths (``("cars", 1, "address")``) to their 1-based line numbers.

    Tables and arrays of tables map too (``("cars", 1)``). Good enough for
    the files this module accepts: keys on their own lines, no multi-line
    strings.
    """
    index: dict[PathKey, int] = {}
    counters: dict[tuple[str | int, ...], int] = {}
    table: PathKey = ()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        header = _HEADER.match(line)
        if header and line.startswith("["):
            names = _split_key(header.group(2))
            if header.group(1) == "[[":
                base = _resolve(names[:-1], counters)
                key = (*base, names[-1])
                count = counters.get(key, 0)
                counters[key] = count + 1
                table = (*key, count)
            else:
                table = _resolve(names, counters)
            index.setdefault(table, number)
            continue
        match = _KEY.match(raw)
        if match and not raw.lstrip().startswith(("[", "]", "{", "}", ",")):
            path = (*table, *_split_key(match.group(1)))
            index.setdefault(path, number)
    return index


def _resolve(names: list[str], counters: dict[tuple[str | int, ...], int]) -> PathKey:
    """A dotted header's path, entering the last element of arrays of tables."""
    path: PathKey = ()
    for name in names:
        path = (*path, name)
        if path in counters:
            path = (*path, counters[path] - 1)
    return path


# -- reading with positions ----------------------------------------------------


class _Ctx:
    def __init__(self, file: str, index: dict[PathKey, int]) -> None:
        self.file = file
        self.index = index

    def line(self, path: PathKey) -> int:
        while path:
            if path in self.index:
                return self.index[path]
            path = path[:-1]
        return 0

    def fail(self, path: PathKey, reason: str) -> ArenaError:
        return ArenaError(self.file, self.line(path), reason)


def _dotted(path: PathKey) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


class _Table:
    """One TOML table being read: typed getters that fail with a line number."""

    def __init__(self, ctx: _Ctx, path: PathKey, data: object) -> None:
        if not isinstance(data, dict):
            raise ctx.fail(path, f"{_dotted(path) or 'file'} must be a table")
        self.ctx = ctx
        self.path = path
        self.data: dict[str, Any] = data
        self.used: set[str] = set()

    def _get(self, key: str) -> Any:
        self.used.add(key)
        return self.data.get(key)

    def fail(self, key: str, reason: str) -> ArenaError:
        return self.ctx.fail((*self.path, key), f"{_dotted((*self.path, key))}: {reason}")

    def has(self, key: str) -> bool:
        return key in self.data

    def number(
        self,
        key: str,
        default: float | None = None,
        low: float = -math.inf,
        high: float = math.inf,
        low_open: bool = False,
    ) -> float:
        value = self._get(key)
        if value is None:
            if default is None:
                raise self.fail(key, "is required")
            return default
        return self._check_number(key, value, low, high, low_open)

    def _check_number(
        self, key: str, value: object, low: float, high: float, low_open: bool = False
    ) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(key, f"must be a number, got {type(value).__name__}")
        number = float(value)
        if not math.isfinite(number):
            raise self.fail(key, "must be finite")
        too_low = number <= low if low_open else number < low
        if too_low or number > high:
            bracket = "(" if low_open else "["
            raise self.fail(key, f"{number:g} is outside {bracket}{low:g}, {high:g}]")
        return number

    def integer(self, key: str, default: int | None = None, low: int = 0, high: int = 2**63) -> int:
        value = self._get(key)
        if value is None:
            if default is None:
                raise self.fail(key, "is required")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"must be an integer, got {type(value).__name__}")
        if not low <= value <= high:
            raise self.fail(key, f"{value} is outside [{low}, {high}]")
        return value

    def string(self, key: str, default: str | None = None) -> str:
        value = self._get(key)
        if value is None:
            if default is None:
                raise self.fail(key, "is required")
            return default
        if not isinstance(value, str):
            raise self.fail(key, f"must be a string, got {type(value).__name__}")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self._get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {type(value).__name__}")
        return value

    def vector(
        self, key: str, n: int, low: float = -math.inf, high: float = math.inf
    ) -> tuple[float, ...]:
        value = self._get(key)
        if value is None:
            raise self.fail(key, "is required")
        if not isinstance(value, list) or len(value) != n:
            raise self.fail(key, f"must be a list of {n} numbers")
        return tuple(self._check_number(key, v, low, high) for v in value)

    def points(self, key: str) -> tuple[tuple[float, float], ...]:
        value = self._get(key)
        if not isinstance(value, list) or len(value) < 2:
            raise self.fail(key, "must be a list of at least 2 [x, y] points")
        out: list[tuple[float, float]] = []
        for point in value:
            if not isinstance(point, list) or len(point) != 2:
                raise self.fail(key, "each point must be [x, y]")
            x, y = (self._check_number(key, v, -math.inf, math.inf) for v in point)
            out.append((x, y))
        return tuple(out)

    def table(self, key: str, required: bool = False) -> _Table | None:
        value = self._get(key)
        if value is None:
            if required:
                raise self.fail(key, "table is required")
            return None
        return _Table(self.ctx, (*self.path, key), value)

    def tables(self, key: str) -> Iterator[_Table]:
        value = self._get(key)
        if value is None:
            return
        if not isinstance(value, list):
            raise self.fail(key, "must be an array of tables ([[...]])")
        for i, item in enumerate(value):
            yield _Table(self.ctx, (*self.path, key, i), item)

    def only(self, allowed: tuple[str, ...]) -> None:
        """Refuse keys outside ``allowed`` before reading (a misspelt table name)."""
        for key in self.data:
            if key not in allowed:
                raise self.fail(key, f"unknown key (expected one of {', '.join(allowed)})")

    def done(self) -> None:
        """Refuse unknown keys: a typo must not silently fall back to a default."""
        for key in self.data:
            if key not in self.used:
                raise self.fail(key, "unknown key")


# -- sections ----------------------------------------------------------------


def _room(t: _Table) -> Room:
    sx, sy = t.vector("size", 2, 0.5, 100.0)
    room = Room(sx, sy, t.number("wall_height", 0.5, 0.1, 5.0))
    t.done()
    return room


def _physics(t: _Table | None) -> Physics:
    if t is None:
        return Physics()
    physics = Physics(t.number("rate_hz", 240.0, 60.0, 2000.0))
    t.done()
    return physics


def _car_model(t: _Table | None) -> CarModel:
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
        gyro_noise=t.number("gyro_noise", d.gyro_noise, 0.0, 1.0),
        gyro_bias=t.number("gyro_bias", d.gyro_bias, 0.0, 1.0),
        effective_track=t.number("effective_track", d.effective_track, 0.05, 5.0),
    )
    t.done()
    return model


def _sensing(t: _Table | None) -> Sensing:
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


def _camera(t: _Table | None) -> Camera:
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


def _car(t: _Table) -> CarSpec:
    car_id = t.integer("id", None, 1, 255)
    name = t.string("name")
    if not NAME_RE.match(name):
        raise t.fail("name", f"{name!r} must be 1-32 of a-z, 0-9, '_', '-'")
    address = t.string("address")
    try:
        ip = ipaddress.IPv4Address(address)
    except ipaddress.AddressValueError:
        raise t.fail("address", f"{address!r} is not an IPv4 address") from None
    # A simulated car lives on loopback, or in a test network (198.18.0.0/15, RFC 2544)
    # inside namespaces a test made: never on the machine's own networks.
    net = next((n for n in SIM_NETWORKS if ip in n), None)
    if net is None or ip in (net.network_address, net.broadcast_address):
        raise t.fail(
            "address",
            f"{address} is not a host address in 127.0.0.0/8 (loopback) or 198.18.0.0/15 "
            "(a test network inside network namespaces)",
        )
    car = CarSpec(
        car_id,
        name,
        address,
        t.number("x"),
        t.number("y"),
        math.radians(t.number("heading_deg", 0.0, -360.0, 360.0)),
    )
    t.done()
    return car


def _tag(t: _Table) -> TagSpec:
    tag = TagSpec(
        id=t.integer("id", None, 0, MAX_TAG_ID),
        x=t.number("x"),
        y=t.number("y"),
        z=t.number("z", None, 0.0, 10.0),
        yaw=math.radians(t.number("yaw_deg", None, -360.0, 360.0)),
        size=t.number("size", None, 0.02, 2.0),
        measured=t.boolean("measured", True),
    )
    t.done()
    return tag


def _wall_tags(t: _Table, room: Room) -> list[TagSpec]:
    """Tags every ``spacing`` m along the four walls, counter-clockwise from (0, 0).

    South wall (y = 0, facing +y) first, then east, north, west; ids count up
    from ``first_id``.
    """
    spacing = t.number("spacing", None, 0.2, 50.0)
    z = t.number("z", None, 0.0, room.wall_height)
    size = t.number("size", None, 0.02, 2.0)
    first = t.integer("first_id", 0, 0, MAX_TAG_ID)
    inset = 0.0  # on the wall's inner face (the quad itself sits 3 mm proud)
    t.done()
    tags: list[TagSpec] = []
    walls = (
        (room.size_x, lambda s: (s, inset), 90.0),
        (room.size_y, lambda s: (room.size_x - inset, s), 180.0),
        (room.size_x, lambda s: (room.size_x - s, room.size_y - inset), -90.0),
        (room.size_y, lambda s: (inset, room.size_y - s), 0.0),
    )
    for length, place, yaw in walls:
        count = max(1, int(length / spacing + 1e-9))
        offset = (length - (count - 1) * spacing) / 2.0
        for k in range(count):
            x, y = place(offset + k * spacing)
            tag_id = first + len(tags)
            if tag_id > MAX_TAG_ID:
                raise t.fail("first_id", f"wall tags would run past id {MAX_TAG_ID}")
            tags.append(TagSpec(tag_id, x, y, z, math.radians(yaw), size))
    return tags


def _obstacle(t: _Table) -> Obstacle:
    sx, sy = t.vector("size", 2, 0.01, 100.0)
    obstacle = Obstacle(
        x=t.number("x"),
        y=t.number("y"),
        size_x=sx,
        size_y=sy,
        height=t.number("height", None, 0.01, 10.0),
        yaw=math.radians(t.number("yaw_deg", 0.0, -360.0, 360.0)),
    )
    t.done()
    return obstacle


def _motion(t: _Table) -> Motion:
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


def _target(t: _Table, room: Room) -> TargetSpec:
    motion_table = t.table("motion", required=True)
    assert motion_table is not None
    target = TargetSpec(
        tag_id=t.integer("tag_id", None, 0, MAX_TAG_ID),
        size=t.number("size", 0.12, 0.02, 1.0),
        height=t.number("height", 0.21, 0.05, room.wall_height),
        motion=_motion(motion_table),
    )
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


def _cross_check(
    ctx: _Ctx,
    *,
    room: Room,
    cars: list[CarSpec],
    tags: list[TagSpec],
    obstacles: list[Obstacle],
    target: TargetSpec | None,
    tag_paths: list[PathKey],
) -> None:
    if not cars:
        raise ctx.fail(("cars",), "an arena needs at least one [[cars]] entry")
    seen: dict[str, dict[object, int]] = {"id": {}, "name": {}, "address": {}}
    for i, car in enumerate(cars):
        path: PathKey = ("cars", i)
        for key in ("id", "name", "address"):
            value = getattr(car, key)
            if value in seen[key]:
                first = seen[key][value]
                raise ctx.fail((*path, key), f"cars[{i}].{key} {value!r} repeats cars[{first}]")
            seen[key][value] = i
        m = CAR_RADIUS
        if not (m <= car.x <= room.size_x - m and m <= car.y <= room.size_y - m):
            raise ctx.fail(
                (*path, "x"), f"car {car.name} must start at least {m} m inside the room"
            )
        for j, other in enumerate(cars[:i]):
            if math.hypot(car.x - other.x, car.y - other.y) < 2 * m:
                raise ctx.fail((*path, "x"), f"car {car.name} starts on top of cars[{j}]")
        for j, obstacle in enumerate(obstacles):
            if _inside_obstacle(car.x, car.y, obstacle, m):
                raise ctx.fail((*path, "x"), f"car {car.name} starts inside obstacles[{j}]")
    tag_ids: dict[int, PathKey] = {}
    for tag, path in zip(tags, tag_paths, strict=True):
        if tag.id in tag_ids:
            raise ctx.fail((*path, "id"), f"tag id {tag.id} is used twice")
        tag_ids[tag.id] = path
        if not (0 <= tag.x <= room.size_x and 0 <= tag.y <= room.size_y):
            raise ctx.fail((*path, "x"), f"tag {tag.id} is outside the room")
        if tag.z > room.wall_height:
            raise ctx.fail((*path, "z"), f"tag {tag.id} is above the walls")
    if target is not None and target.tag_id in tag_ids:
        raise ctx.fail(("target", "tag_id"), f"tag id {target.tag_id} is also a wall tag")
    for j, o in enumerate(obstacles):
        if not (0 < o.x < room.size_x and 0 < o.y < room.size_y):
            raise ctx.fail(("obstacles", j, "x"), "obstacle centre is outside the room")


def parse_arena(text: str, source: str = "<arena>") -> Arena:
    """Validate TOML text; ``source`` names it in errors."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"at line (\d+)", str(exc))
        line = int(match.group(1)) if match else 0
        reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise ArenaError(source, line, f"TOML syntax: {reason}") from None
    ctx = _Ctx(source, line_index(text))
    top = _Table(ctx, (), data)
    top.only(TOP_KEYS)
    name = top.string("name", Path(source).stem or "arena")
    seed = top.integer("seed", 0, 0, 2**32 - 1)
    room_table = top.table("room", required=True)
    assert room_table is not None
    room = _room(room_table)
    physics = _physics(top.table("physics"))
    car_model = _car_model(top.table("car_model"))
    sensing = _sensing(top.table("sensing"))
    camera = _camera(top.table("camera"))
    cars = [_car(t) for t in top.tables("cars")]
    tags: list[TagSpec] = []
    tag_paths: list[PathKey] = []
    wall_table = top.table("wall_tags")
    if wall_table is not None:
        generated = _wall_tags(wall_table, room)
        tags += generated
        tag_paths += [("wall_tags",)] * len(generated)
    for t in top.tables("tags"):
        tags.append(_tag(t))
        tag_paths.append(t.path)
    obstacles = [_obstacle(t) for t in top.tables("obstacles")]
    target_table = top.table("target")
    target = _target(target_table, room) if target_table is not None else None
    top.done()
    _cross_check(
        ctx, room=room, cars=cars, tags=tags, obstacles=obstacles, target=target,
        tag_paths=tag_paths,
    )  # fmt: skip
    return Arena(
        name=name,
        source=source,
        seed=seed,
        room=room,
        physics=physics,
        car_model=car_model,
        sensing=sensing,
        camera=camera,
        cars=tuple(cars),
        tags=tuple(tags),
        obstacles=tuple(obstacles),
        target=target,
    )


def load_arena(path: str | Path) -> Arena:
    """Read and validate an arena file; raises :class:`ArenaError`."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ArenaError(str(p), 0, f"cannot read: {exc}") from None
    return parse_arena(text, str(p))


ARENA_DIR = Path(__file__).resolve().parent / "arenas"


def shipped_arena(name: str) -> Path:
    """The path of a shipped arena, e.g. ``shipped_arena("two_cars")``."""
    return ARENA_DIR / f"{name}.toml"
