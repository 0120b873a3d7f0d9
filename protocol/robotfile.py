"""Robot config files: one robot's agent, its car, its site and its swarm (protocol/ROBOT.md).

One schema, :data:`KEYS`, says every setting once: its TOML key, its type and
range, its default and its help. The file reader, the command line flags
(``stigmesh agent --car …``: every key is also a flag, and flags win) and
``--print-config`` are all made from it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from protocol import tomlfile
from protocol.swarm.messages import DEFAULT_SWARM_PORT
from protocol.tomlfile import FileError, Table

SENSING = ("synthetic", "camera")
FUSIONS = ("ci", "naive", "max_confidence", "none")


@dataclass(frozen=True)
class Key:
    """One setting: ``name`` is its TOML key (``table.key`` inside a table)."""

    name: str
    kind: type  # str, int, float, bool, Path or list (of str)
    default: Any
    help: str
    low: float = -math.inf
    high: float = math.inf
    choices: tuple[str, ...] = ()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace(".", "-").replace("_", "-")

    @property
    def dest(self) -> str:
        return self.name.replace(".", "_")


KEYS: tuple[Key, ...] = (
    Key("name", str, None, "this robot's agent name, unique in the swarm (A-Z a-z 0-9 . _ -)"),
    Key("car", str, None, "the car's address: IPv4 on any interface, or a host name"),
    Key("site", Path, None, "the site file: room, tags, obstacles, target (protocol/SITE.md)"),
    Key("swarm", str, "stigmesh", "swarm name; every member uses the same"),
    Key("swarm_key", Path, None, "file holding the swarm key (`stigmesh keygen`, mode 0600)"),
    Key("iface", str, "lo", "network interface (wlan0) or its IPv4 address; lo on one machine"),
    Key("port", int, DEFAULT_SWARM_PORT, "swarm UDP port; every member uses the same", 0, 65535),
    Key("sensing", str, "synthetic", "camera on a real car; synthetic only with the simulator",
        choices=SENSING),
    Key("intrinsics", Path, None, "camera intrinsics file from `stigmesh calibrate`"),
    Key("run_dir", Path, Path("runs"), "where NAME.jsonl and the control socket go"),
    Key("fusion", str, "ci", "how peers' beliefs are fused", choices=FUSIONS),
    Key("reputation", bool, True, "weigh peers by reputation (false: fuse every peer)"),
    Key("mdns", bool, True, "discover peers over mDNS on the interface"),
    Key("peers", list, [], "static peers NAME=ADDRESS:PORT, where broadcast does not reach"),
    Key("control_listen", str, None, "ADDRESS:PORT: also take control requests over TCP "
        "(key-authenticated); off by default"),
    Key("car_timeout", float, 5.0, "seconds to wait for the car's first telemetry", 0.1, 600.0),
    Key("car_id", int, None, "the robot id the car must report (warn when it differs)", 1, 255),
    Key("status_every", float, 5.0, "seconds between status lines on the console", 0.5, 3600.0),
    Key("quiet", bool, False, "no periodic status lines (warnings and the summary still print)"),
    Key("duration", float, None, "stop after this many seconds", 0.0, 1e9),
    Key("mount.forward", float, None, "camera: m ahead of the car's rotation centre", -2.0, 2.0),
    Key("mount.height", float, None, "camera: optical centre above the floor, m", 0.0, 3.0),
    Key("mount.yaw_deg", float, 0.0, "camera: yaw on the car, degrees", -360.0, 360.0),
    Key("mount.pitch_deg", float, 0.0, "camera: pitch (positive looks down), degrees",
        -90.0, 90.0),
    Key("mount.roll_deg", float, 0.0, "camera: roll, degrees", -180.0, 180.0),
    Key("mount.measured", bool, False, "the mount above was measured (camera sensing needs it)"),
    Key("drive.effective_track", float, 0.48, "calibrated skid-steer track width, m",
        0.05, 5.0),
    Key("drive.max_wheel_speed", float, 0.7, "wheel rim speed at duty 1, m/s", 0.01, 5.0),
    Key("drive.deadband", float, 0.3907, "minimum duty that moves the wheels (FNK0053: "
        "1600/4095)", 0.0, 0.9),
    Key("view.range", float, 3.0, "how far the camera detects the target, m", 0.1, 20.0),
    Key("view.hfov_deg", float, 62.0, "the camera's horizontal field of view, degrees",
        1.0, 179.0),
)
BY_NAME: dict[str, Key] = {k.name: k for k in KEYS}
TABLES = ("mount", "drive", "view")
REQUIRED = ("name", "car", "site", "swarm_key")


def read_robot(path: str | Path) -> dict[str, Any]:
    """The settings a robot file gives (only those it states); raises :class:`FileError`."""
    top = tomlfile.read(path)
    top.only([k for k in BY_NAME if "." not in k] + list(TABLES))
    tables = {name: top.table(name) for name in TABLES}
    out: dict[str, Any] = {}
    for key in KEYS:
        table, _, leaf = key.name.rpartition(".")
        where = tables[table] if table else top
        if where is None:
            continue
        if where.has(leaf):
            out[key.name] = _value(where, leaf, key)
        else:
            where.raw(leaf)  # a known key, absent: "did you mean" may name it
    for t in tables.values():
        if t is not None:
            t.done()
    top.done()
    return out


def _value(t: Table, leaf: str, key: Key) -> Any:
    if key.kind is float:
        return t.number(leaf, None, key.low, key.high)
    if key.kind is int:
        return t.integer(leaf, None, int(max(key.low, -(2**63))), int(min(key.high, 2**63)))
    if key.kind is bool:
        return t.boolean(leaf, False)
    if key.kind is Path:
        return t.file_path(leaf)
    if key.kind is list:
        value = t.raw(leaf)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise t.fail(leaf, "must be a list of strings")
        return list(value)
    if key.choices:
        return t.choice(leaf, key.choices)
    return t.string(leaf)


def merge(file: Mapping[str, Any], flags: Mapping[str, Any]) -> dict[str, Any]:
    """Effective settings: a flag given wins, then the file, then the default."""
    out = {}
    for key in KEYS:
        if flags.get(key.name) is not None:
            out[key.name] = flags[key.name]
        elif key.name in file:
            out[key.name] = file[key.name]
        else:
            out[key.name] = key.default
    return out


def missing(settings: Mapping[str, Any]) -> list[str]:
    """Required settings still unset, as their flags."""
    return [BY_NAME[name].flag for name in REQUIRED if settings.get(name) is None]


def to_toml(settings: Mapping[str, Any]) -> str:
    """The settings as a robot file (``--print-config``); unset ones as comments."""
    lines: list[str] = []
    current = ""
    for key in KEYS:
        table, _, leaf = key.name.rpartition(".")
        if table != current:
            lines += ["", f"[{table}]"]
            current = table
        value = settings.get(key.name)
        text = _toml_value(value)
        prefix = "# " if value is None else ""
        lines.append(f"{prefix}{leaf} = {text}  # {key.help}")
    return "\n".join(lines).lstrip("\n") + "\n"


def _toml_value(value: Any) -> str:
    if value is None:
        return '""'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Path):
        value = value.absolute()  # the printed file may live elsewhere
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


__all__ = ["BY_NAME", "KEYS", "FileError", "Key", "merge", "missing", "read_robot", "to_toml"]
