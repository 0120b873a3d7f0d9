"""Site files and the one TOML reader: every refusal names the file, the line and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.robotfile import KEYS, merge, read_robot, to_toml
from protocol.site import load_site, parse_site, site_to_toml
from protocol.tomlfile import FileError
from worlds.arena import load_arena, shipped_arena

SITE = """\
name = "lab"

[room]
size = [5.0, 4.0]

[[tags]]
id = 0
x = 0.625
y = 0.0
z = 0.21
yaw_deg = 90
size = 0.2

[[obstacles]]
x = 2.5
y = 1.0
size = [0.4, 0.6]
height = 0.3

[target]
tag_id = 100
size = 0.12
max_speed = 1.0
max_accel = 0.67
"""


def test_a_site_reads_and_writes_back() -> None:
    site = parse_site(SITE, "lab.toml")
    assert (site.room.size_x, site.room.size_y) == (5.0, 4.0)
    assert site.tags[0].measured and site.target is not None and site.target.max_speed == 1.0
    assert site.target.max_accel == 0.67
    again = parse_site(site_to_toml(site), "lab.toml")
    assert again.room == site.room and again.obstacles == site.obstacles
    assert again.target == site.target and [t.id for t in again.tags] == [0]


def test_every_shipped_arena_site_round_trips() -> None:
    for name in ("two_cars", "three_cars", "eight_cars"):
        site = load_arena(shipped_arena(name)).site
        again = parse_site(site_to_toml(site), site.source)
        assert [(t.id, t.x, t.y, t.z, t.size, t.measured) for t in again.tags] == [
            (t.id, t.x, t.y, t.z, t.size, t.measured) for t in site.tags]
        assert again.target == site.target and again.room == site.room


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        ("yaw_deg = 90", "yaw_dg = 90",
         ":11: tags[0].yaw_dg: unknown key (did you mean 'yaw_deg'?)"),
        ("[target]", "[targt]", ":20: targt: unknown key (did you mean 'target'?)"),
        ("x = 0.625", "x = 7.0", ":8: tag 0 is outside the room"),
        ("tag_id = 100", "tag_id = 0", ":21: tag id 0 is also a wall tag"),
        ("size = 0.2", "size = 'big'", ":12: tags[0].size: must be a number, got str"),
        ("size = [5.0, 4.0]", "size = [5.0]", ":4: room.size: must be a list of 2 numbers"),
        ("x = 2.5", "x = 9.5", ":15: obstacle centre is outside the room"),
    ],
)
def test_refusals_name_the_line_and_key(old: str, new: str, where: str) -> None:
    with pytest.raises(FileError) as info:
        parse_site(SITE.replace(old, new, 1), "lab.toml")
    assert str(info.value) == "lab.toml" + where


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(FileError, match="no such file"):
        load_site(tmp_path / "nope.toml")


def test_robot_file_keys_round_trip_through_print_config(tmp_path: Path) -> None:
    path = tmp_path / "walnut.robot.toml"
    path.write_text('name = "walnut"\ncar = "car1.local"\nsite = "lab.toml"\n'
                    'peers = ["hazel=10.0.0.2:4000"]\n[mount]\nforward = 0.05\n')
    given = read_robot(path)
    assert given["site"] == tmp_path / "lab.toml" and given["mount.forward"] == 0.05
    settings = merge(given, {"name": "hazel"})
    assert settings["name"] == "hazel" and settings["port"] == 47000
    (tmp_path / "printed.toml").write_text(to_toml(settings))
    again = read_robot(tmp_path / "printed.toml")
    def absolute(v: object) -> object:
        return v.absolute() if isinstance(v, Path) else v

    assert again == {k.name: absolute(settings[k.name]) for k in KEYS
                     if settings[k.name] is not None}
