"""Site files: what a robot may know about the place (TOML, see protocol/SITE.md).

A site is the room's extent, every tag's id, size and measured pose, the
known obstacles, the target's tag — and nothing about car physics, noise,
the target's motion or where the cars are. Agents read a site and never an
arena; the simulator's arena is a site plus what only the simulator knows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from protocol import tomlfile
from protocol.tomlfile import FileError, PathKey, Table

MAX_TAG_ID = 586  # tag36h11 has 587 codes
SITE_KEYS = ("name", "room", "tags", "wall_tags", "obstacles", "target", "robot_tags")


@dataclass(frozen=True)
class Room:
    size_x: float
    size_y: float
    wall_height: float = 0.5


@dataclass(frozen=True)
class TagSpec:
    """A wall tag: centre, the yaw of its facing normal, the black square's edge.

    ``measured`` false: the tag is there but its pose is not known (robots ignore it).
    """

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
class SiteTarget:
    """The target's tag (on each of the four faces of a square column)."""

    tag_id: int
    size: float  # black square edge
    height: float  # tag centre above the floor
    max_speed: float | None = None  # m/s, when declared
    max_accel: float | None = None  # m/s², when declared

    @property
    def body_side(self) -> float:
        """Side of the target's square column: the tag plus a one-cell white border."""
        return self.size * 10.0 / 8.0

    @property
    def axis_offset(self) -> float:
        """From a tag's plane to the column's axis."""
        return self.body_side / 2.0


@dataclass(frozen=True)
class RobotTag:
    """A tag carried by a robot, in its car frame (x forward, y left, z up)."""

    robot: str
    tag_id: int
    size: float
    forward: float
    left: float
    height: float
    yaw: float
    measured: bool = True


@dataclass(frozen=True)
class Site:
    name: str
    source: str
    room: Room
    tags: tuple[TagSpec, ...] = ()
    obstacles: tuple[Obstacle, ...] = ()
    target: SiteTarget | None = None
    robot_tags: tuple[RobotTag, ...] = ()

    @property
    def measured_tags(self) -> tuple[TagSpec, ...]:
        return tuple(t for t in self.tags if t.measured)


# -- sections ----------------------------------------------------------------


def read_room(t: Table) -> Room:
    sx, sy = t.vector("size", 2, 0.5, 100.0)
    room = Room(sx, sy, t.number("wall_height", 0.5, 0.1, 5.0))
    t.done()
    return room


def read_tag(t: Table) -> TagSpec:
    tag = TagSpec(
        id=t.integer("id", None, 0, MAX_TAG_ID),
        x=t.number("x"),
        y=t.number("y"),
        z=t.number("z", None, 0.0, 10.0),
        yaw=t.angle_deg("yaw_deg"),
        size=t.number("size", None, 0.02, 2.0),
        measured=t.boolean("measured", True),
    )
    t.done()
    return tag


def wall_tags(t: Table, room: Room) -> list[TagSpec]:
    """Tags every ``spacing`` m along the four walls, counter-clockwise from (0, 0).

    South wall (y = 0, facing +y) first, then east, north, west; ids count up
    from ``first_id``.
    """
    spacing = t.number("spacing", None, 0.2, 50.0)
    z = t.number("z", None, 0.0, room.wall_height)
    size = t.number("size", None, 0.02, 2.0)
    first = t.integer("first_id", 0, 0, MAX_TAG_ID)
    measured = t.boolean("measured", True)
    t.done()
    tags: list[TagSpec] = []
    walls = (
        (room.size_x, lambda s: (s, 0.0), 90.0),
        (room.size_y, lambda s: (room.size_x, s), 180.0),
        (room.size_x, lambda s: (room.size_x - s, room.size_y), -90.0),
        (room.size_y, lambda s: (0.0, room.size_y - s), 0.0),
    )
    for length, place, yaw in walls:
        count = max(1, int(length / spacing + 1e-9))
        offset = (length - (count - 1) * spacing) / 2.0
        for k in range(count):
            x, y = place(offset + k * spacing)
            tag_id = first + len(tags)
            if tag_id > MAX_TAG_ID:
                raise t.fail("first_id", f"wall tags would run past id {MAX_TAG_ID}")
            tags.append(TagSpec(tag_id, x, y, z, math.radians(yaw), size, measured))
    return tags


def read_obstacle(t: Table) -> Obstacle:
    sx, sy = t.vector("size", 2, 0.01, 100.0)
    obstacle = Obstacle(
        x=t.number("x"),
        y=t.number("y"),
        size_x=sx,
        size_y=sy,
        height=t.number("height", None, 0.01, 10.0),
        yaw=t.angle_deg("yaw_deg", 0.0),
    )
    t.done()
    return obstacle


def read_target(t: Table, room: Room) -> SiteTarget:
    """The site's part of ``[target]``; the caller calls ``t.done()`` (an arena adds motion)."""
    return SiteTarget(
        tag_id=t.integer("tag_id", None, 0, MAX_TAG_ID),
        size=t.number("size", 0.12, 0.02, 1.0),
        height=t.number("height", 0.21, 0.05, room.wall_height),
        max_speed=t.optional_number("max_speed", 0.01, 20.0),
        max_accel=t.optional_number("max_accel", 0.01, 100.0),
    )


def read_robot_tag(t: Table) -> RobotTag:
    tag = RobotTag(
        robot=t.string("robot"),
        tag_id=t.integer("tag_id", None, 0, MAX_TAG_ID),
        size=t.number("size", None, 0.005, 5.0),
        forward=t.number("forward", None, -2.0, 2.0),
        left=t.number("left", None, -2.0, 2.0),
        height=t.number("height", None, 0.0, 3.0),
        yaw=t.angle_deg("yaw_deg"),
        measured=t.boolean("measured", True),
    )
    t.done()
    return tag


def read_site(top: Table, name: str, *, target_done: bool = True) -> Site:
    """The site's tables of ``top`` (a site file, or an arena embedding one).

    ``target_done`` false leaves ``[target]`` open for the caller's extra keys.
    """
    room_table = top.table("room", required=True)
    assert room_table is not None
    room = read_room(room_table)
    tags: list[TagSpec] = []
    paths: list[PathKey] = []
    generator = top.table("wall_tags")
    if generator is not None:
        generated = wall_tags(generator, room)
        tags += generated
        paths += [("wall_tags",)] * len(generated)
    for t in top.tables("tags"):
        tags.append(read_tag(t))
        paths.append(t.path)
    obstacles = [read_obstacle(t) for t in top.tables("obstacles")]
    target_table = top.table("target")
    target = None
    if target_table is not None:
        target = read_target(target_table, room)
        if target_done:
            target_table.done()
    robot_tags = [read_robot_tag(t) for t in top.tables("robot_tags")]
    site = Site(name, top.file, room, tuple(tags), tuple(obstacles), target, tuple(robot_tags))
    _cross_check(top, site, paths)
    return site


def _cross_check(top: Table, site: Site, paths: list[PathKey]) -> None:
    src, room = top.source, site.room
    seen: dict[int, PathKey] = {}
    for tag, path in zip(site.tags, paths, strict=True):
        if tag.id in seen:
            raise src.fail((*path, "id"), f"tag id {tag.id} is used twice")
        seen[tag.id] = path
        if not (0 <= tag.x <= room.size_x and 0 <= tag.y <= room.size_y):
            raise src.fail((*path, "x"), f"tag {tag.id} is outside the room")
        if tag.z > room.wall_height:
            raise src.fail((*path, "z"), f"tag {tag.id} is above the walls")
    if site.target is not None and site.target.tag_id in seen:
        raise src.fail(("target", "tag_id"), f"tag id {site.target.tag_id} is also a wall tag")
    carried: set[int] = set()
    for i, rt in enumerate(site.robot_tags):
        if rt.tag_id in seen or rt.tag_id in carried or (
            site.target is not None and rt.tag_id == site.target.tag_id
        ):
            raise src.fail(("robot_tags", i, "tag_id"), f"tag id {rt.tag_id} is used twice")
        carried.add(rt.tag_id)
    for j, o in enumerate(site.obstacles):
        if not (0 < o.x < room.size_x and 0 < o.y < room.size_y):
            raise src.fail(("obstacles", j, "x"), "obstacle centre is outside the room")


def parse_site(text: str, source: str = "<site>", base: Path | None = None) -> Site:
    """Validate a site's TOML text; ``source`` names it in errors."""
    top = tomlfile.parse(text, source, base)
    top.only(SITE_KEYS)
    site = read_site(top, top.string("name", Path(source).stem or "site"))
    top.done()
    return site


def load_site(path: str | Path) -> Site:
    """Read and validate a site file; raises :class:`FileError`."""
    top = tomlfile.read(path)
    top.only(SITE_KEYS)
    site = read_site(top, top.string("name", Path(path).stem))
    top.done()
    return site


def site_to_toml(site: Site) -> str:
    """The site as a site file (every tag written out); :func:`parse_site` reads it back."""
    deg = math.degrees
    r = site.room
    out = [f"name = {_q(site.name)}", "", "[room]", f"size = [{r.size_x!r}, {r.size_y!r}]",
           f"wall_height = {r.wall_height!r}"]
    for t in site.tags:
        out += ["", "[[tags]]", f"id = {t.id}", f"x = {t.x!r}", f"y = {t.y!r}", f"z = {t.z!r}",
                f"yaw_deg = {deg(t.yaw)!r}", f"size = {t.size!r}",
                f"measured = {str(t.measured).lower()}"]
    for o in site.obstacles:
        out += ["", "[[obstacles]]", f"x = {o.x!r}", f"y = {o.y!r}",
                f"size = [{o.size_x!r}, {o.size_y!r}]", f"height = {o.height!r}",
                f"yaw_deg = {deg(o.yaw)!r}"]
    if site.target is not None:
        g = site.target
        out += ["", "[target]", f"tag_id = {g.tag_id}", f"size = {g.size!r}",
                f"height = {g.height!r}"]
        if g.max_speed is not None:
            out.append(f"max_speed = {g.max_speed!r}")
        if g.max_accel is not None:
            out.append(f"max_accel = {g.max_accel!r}")
    for rt in site.robot_tags:
        out += ["", "[[robot_tags]]", f"robot = {_q(rt.robot)}", f"tag_id = {rt.tag_id}",
                f"size = {rt.size!r}", f"forward = {rt.forward!r}", f"left = {rt.left!r}",
                f"height = {rt.height!r}", f"yaw_deg = {deg(rt.yaw)!r}",
                f"measured = {str(rt.measured).lower()}"]
    return "\n".join(out) + "\n"


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


__all__ = [
    "MAX_TAG_ID",
    "FileError",
    "Obstacle",
    "RobotTag",
    "Room",
    "Site",
    "SiteTarget",
    "TagSpec",
    "load_site",
    "parse_site",
    "read_site",
    "site_to_toml",
]
