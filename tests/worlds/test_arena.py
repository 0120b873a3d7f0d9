"""Arena files: parsing, defaults, and a refusal with file, line and reason for each check."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from protocol.tomlfile import line_index
from worlds.arena import (
    ARENA_DIR,
    ArenaError,
    Orbit,
    RandomWalk,
    Waypoints,
    load_arena,
    parse_arena,
)

BASE = """\
name = "unit"
seed = 3

[room]
size = [4.0, 3.0]

[[cars]]
id = 1
name = "walnut"
address = "127.0.2.1"
x = 1.0
y = 1.0
heading_deg = 90

[[cars]]
id = 2
name = "hazel"
address = "127.0.2.2"
x = 3.0
y = 2.0

[[tags]]
id = 0
x = 0.0
y = 1.5
z = 0.21
yaw_deg = 0
size = 0.2

[target]
tag_id = 100

[target.motion]
kind = "orbit"
center = [2.0, 1.5]
radius = 0.8
speed = 1.0
"""


def _line_of(text: str, needle: str) -> int:
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in text")


def _refused(text: str) -> ArenaError:
    with pytest.raises(ArenaError) as info:
        parse_arena(text, "bad.toml")
    return info.value


def test_base_parses_with_defaults():
    arena = parse_arena(BASE, "unit.toml")
    assert arena.name == "unit" and arena.seed == 3
    assert (arena.room.size_x, arena.room.size_y) == (4.0, 3.0)
    assert [c.name for c in arena.cars] == ["walnut", "hazel"]
    assert arena.cars[0].heading == pytest.approx(math.pi / 2)
    assert arena.car("hazel").id == 2 and arena.car(1).name == "walnut"
    assert arena.car_model.track == 0.13 and arena.car_model.wheel_diameter == 0.065
    assert arena.car_model.mast == 0.15
    assert arena.physics.rate_hz == 240.0
    assert arena.sensing.mode == "synthetic"
    assert arena.camera.width == 320 and arena.camera.height == 240
    assert arena.target is not None and isinstance(arena.target.motion, Orbit)
    assert arena.target.motion.ccw
    assert arena.with_sensing("camera").sensing.mode == "camera"
    with pytest.raises(ValueError):
        arena.with_sensing("lidar")


@pytest.mark.parametrize("name", ["two_cars", "three_cars", "eight_cars"])
def test_shipped_arenas_load(name):
    arena = load_arena(ARENA_DIR / f"{name}.toml")
    assert arena.target is not None
    assert len(arena.tags) >= 16
    assert len({c.address for c in arena.cars}) == len(arena.cars)


def test_two_cars_is_the_demo():
    arena = load_arena(ARENA_DIR / "two_cars.toml")
    assert (arena.room.size_x, arena.room.size_y) == (5.0, 5.0)
    assert [(c.name, c.address) for c in arena.cars] == [
        ("walnut", "127.0.2.1"),
        ("hazel", "127.0.2.2"),
    ]
    assert arena.target is not None
    assert isinstance(arena.target.motion, Orbit) and arena.target.motion.speed == 1.0
    assert arena.sensing.mode == "synthetic"


def test_line_index_maps_tables_arrays_and_keys():
    index = line_index(BASE)
    assert index[("cars", 1, "address")] == _line_of(BASE, 'address = "127.0.2.2"')
    assert index[("cars", 0)] == _line_of(BASE, "[[cars]]")
    assert index[("target", "motion", "radius")] == _line_of(BASE, "radius = 0.8")
    assert index[("tags", 0, "yaw_deg")] == _line_of(BASE, "yaw_deg = 0")


def test_syntax_error_names_the_line():
    text = BASE.replace("radius = 0.8", "radius = = 0.8")
    err = _refused(text)
    assert err.file == "bad.toml"
    assert err.line == _line_of(text, "radius = = 0.8")
    assert "syntax" in err.reason
    assert str(err).startswith(f"bad.toml:{err.line}: ")


# (old text, new text, the line to blame (a needle in the new text), words in the reason)
CASES = [
    ('address = "127.0.2.2"', 'address = "198.19.255.255"', '"198.19.255.255"', "host address"),
    ('address = "127.0.2.2"', 'address = "127.255.255.255"', "127.255.255.255", "host address"),
    ('address = "127.0.2.2"', 'address = "0.0.0.0"', "0.0.0.0", "host address"),
    ('address = "127.0.2.2"', 'address = "127.0.2.1"', 'address = "127.0.2.1"', "repeats"),
    ('address = "127.0.2.2"', 'address = "localhost"', "localhost", "IPv4"),
    ("id = 2\n", "id = 1\n", "id = 1", "repeats"),
    ("id = 2\n", "id = 256\n", "id = 256", "outside"),
    ("id = 2\n", 'id = "two"\n', 'id = "two"', "integer"),
    ('name = "hazel"', 'name = "walnut"', 'name = "walnut"', "repeats"),
    ('name = "hazel"', 'name = "Hazel Nut"', "Hazel Nut", "a-z"),
    ("x = 3.0\n", "x = 3.95\n", "x = 3.95", "inside the room"),
    ("x = 3.0\ny = 2.0", "x = 1.1\ny = 1.1", "x = 1.1", "on top of"),
    ("size = [4.0, 3.0]", "size = [4.0, -3.0]", "size = [4.0, -3.0]", "outside"),
    ("size = [4.0, 3.0]", "size = [4.0]", "size = [4.0]", "list of 2"),
    ("x = 0.0\ny = 1.5", "x = -0.5\ny = 1.5", "x = -0.5", "outside the room"),
    ("z = 0.21", "z = 0.9", "z = 0.9", "above the walls"),
    ("size = 0.2", "size = 0.0", "size = 0.0", "outside"),
    ("tag_id = 100", "tag_id = 0", "tag_id = 0", "also a wall tag"),
    ("tag_id = 100", "tag_id = 900", "tag_id = 900", "outside"),
    ('kind = "orbit"', 'kind = "teleport"', "teleport", "orbit, waypoints"),
    ("radius = 0.8", "radius = 1.6", 'kind = "orbit"', "leaves the room"),
    ("speed = 1.0", "speed = true", "speed = true", "number"),
    ("heading_deg = 90", "heading_deg = 90\ncolour = 3", "colour = 3", "unknown key"),
    ("[room]", "[rooom]", "[rooom]", "unknown key"),
]


@pytest.mark.parametrize(("old", "new", "blame", "words"), CASES)
def test_each_check_refuses_with_line_and_reason(old, new, blame, words):
    assert old in BASE
    text = BASE.replace(old, new, 1)
    err = _refused(text)
    assert words in err.reason, err.reason
    if blame in new:  # the line of the edited text itself
        line = BASE[: BASE.index(old)].count("\n") + 1 + new[: new.index(blame)].count("\n")
    else:
        line = _line_of(text, blame)
    assert err.line == line, str(err)


def test_missing_sections_are_refused():
    assert "room" in _refused('name = "x"\n').reason
    no_cars = BASE[: BASE.index("[[cars]]")]
    assert "cars" in _refused(no_cars).reason


def test_sensing_and_camera_validation():
    text = BASE + '\n[sensing]\nmode = "sonar"\n'
    err = _refused(text)
    assert "mode" in err.reason and err.line == _line_of(text, "sonar")
    text = BASE + "\n[camera]\nfps = 30\n"
    err = _refused(text)
    assert "fps" in err.reason and err.line == _line_of(text, "fps = 30")
    text = BASE + "\n[physics]\nrate_hz = 10\n"
    assert _refused(text).line == _line_of(text, "rate_hz = 10")


def test_obstacle_blocks_a_car_start():
    text = BASE + "\n[[obstacles]]\nx = 1.0\ny = 1.2\nsize = [0.3, 0.3]\nheight = 0.3\n"
    err = _refused(text)
    assert "inside obstacles[0]" in err.reason


def test_waypoints_and_random_walk():
    text = BASE.replace(
        'kind = "orbit"\ncenter = [2.0, 1.5]\nradius = 0.8\nspeed = 1.0',
        'kind = "waypoints"\npoints = [[1.0, 1.0], [3.0, 1.0], [3.0, 2.0]]\n'
        "speed = 0.5\nloop = false",
    )
    arena = parse_arena(text)
    assert arena.target is not None and isinstance(arena.target.motion, Waypoints)
    assert arena.target.motion.points[1] == (3.0, 1.0) and not arena.target.motion.loop
    text = BASE.replace(
        'kind = "orbit"\ncenter = [2.0, 1.5]\nradius = 0.8\nspeed = 1.0',
        'kind = "random_walk"\nbounds = [0.5, 0.5, 3.5, 2.5]\nspeed = 0.8\nseed = 9',
    )
    arena = parse_arena(text)
    assert arena.target is not None and isinstance(arena.target.motion, RandomWalk)
    bad = text.replace("bounds = [0.5, 0.5, 3.5, 2.5]", "bounds = [3.5, 0.5, 0.5, 2.5]")
    assert "min < max" in _refused(bad).reason


def test_wall_tag_generator():
    text = BASE + "\n[wall_tags]\nspacing = 1.0\nz = 0.21\nsize = 0.15\nfirst_id = 10\n"
    arena = parse_arena(text)
    generated = [t for t in arena.tags if t.id >= 10]
    assert len(generated) == 4 + 3 + 4 + 3  # 4 m and 3 m walls
    south = [t for t in generated if t.y == 0.0]
    assert all(t.yaw == pytest.approx(math.pi / 2) for t in south)
    west = [t for t in generated if t.x == 0.0]
    assert all(t.yaw == pytest.approx(0.0) for t in west)
    clash = text.replace("first_id = 10", "first_id = 0")
    assert "used twice" in _refused(clash).reason


def test_unreadable_file(tmp_path: Path):
    with pytest.raises(ArenaError) as info:
        load_arena(tmp_path / "missing.toml")
    assert "no such file" in info.value.reason


def test_a_car_may_have_any_host_address(tmp_path: Path):
    """A site or arena names real cars too; the world refuses at bind time what it cannot serve."""
    arena = parse_arena(BASE.replace('address = "127.0.2.2"', 'address = "192.168.1.50"'))
    assert arena.car("hazel").address == "192.168.1.50"


def test_cars_may_live_in_the_namespace_test_network() -> None:
    arena = parse_arena(BASE.replace('"127.0.2.2"', '"198.18.2.2"'), "test.toml")
    assert arena.car(2).address == "198.18.2.2"
