"""What one agent may know: a site and its robot's settings, never the truth.

:func:`config_from_site` makes an agent's configuration from a site
(protocol/SITE.md: walls, obstacles, measured tags, the target's tag) and a
robot's settings (protocol/ROBOT.md: drive calibration, camera view). It is
the only way an agent is configured; the simulator's robots go through it too,
with :func:`simulated_robot` giving what a robot file would say of a simulated
car (its model's constants, its camera). Nothing of the ground truth passes:
no start poses, no target motion, no other car's position.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from agents.config import AgentConfig, Sensing, track_for_target
from agents.drive_model import DriveModel
from agents.localizer_params import LocalizerParams
from agents.perception.tagmap import (
    CameraMount,
    Intrinsics,
    TagMap,
    intrinsics_toml,
    map_from_site,
)
from agents.room import Box, Room
from protocol.robotfile import KEYS, merge, to_toml
from protocol.site import Site, site_to_toml
from worlds.arena import Arena


class ConfigError(ValueError):
    """The site and settings cannot make an agent; the message says what to add."""


def room_of(site: Site) -> Room:
    boxes = []
    for ob in site.obstacles:
        # A rotated box is planned around by its axis-aligned bounding box.
        c, s = abs(math.cos(ob.yaw)), abs(math.sin(ob.yaw))
        sx = c * ob.size_x + s * ob.size_y
        sy = s * ob.size_x + c * ob.size_y
        boxes.append(Box(ob.x, ob.y, sx, sy))
    return Room(site.room.size_x, site.room.size_y, tuple(boxes))


def defaults() -> dict[str, Any]:
    return {k.name: k.default for k in KEYS}


def config_from_site(
    site: Site, settings: Mapping[str, Any], **overrides: Any
) -> AgentConfig:
    """The agent of ``settings["name"]`` in ``site``; ``overrides`` replace AgentConfig fields."""
    s = {**defaults(), **settings}
    if site.target is None:
        raise ConfigError(f"site {site.source} has no [target]: an agent needs the target's "
                          "tag_id and size (protocol/SITE.md)")
    forward = s["mount.forward"]
    config = AgentConfig(
        name=s["name"],
        room=room_of(site),
        landmarks={t.id: (t.x, t.y) for t in site.tags if t.measured},
        target_tag=site.target.tag_id,
        drive=DriveModel(
            track=s["drive.effective_track"],
            max_wheel_speed=s["drive.max_wheel_speed"],
            deadband=s["drive.deadband"],
        ),
        sensing=Sensing(range=s["view.range"], fov=math.radians(s["view.hfov_deg"])),
        # The gyro's own error (the default); the rate's change between the 10 Hz telemetry
        # samples is the localizer's to model (it ramps between samples).
        localizer=LocalizerParams(camera_forward=0.0 if forward is None else forward),
        track=track_for_target(site.target.max_speed, site.target.max_accel,
                               site.target.axis_offset),
        fusion=s["fusion"],
        use_reputation=s["reputation"],
    )
    # One target speed for the track and the search map: the site's declared max_speed,
    # else the track's default (the map spreads at it, and late looks are walked by it).
    config = replace(config, search=replace(config.search, target_speed=config.track.max_speed))
    return replace(config, **overrides) if overrides else config


def mount_of(settings: Mapping[str, Any]) -> CameraMount:
    s = {**defaults(), **settings}
    if s["mount.forward"] is None or s["mount.height"] is None:
        raise ConfigError("camera sensing needs the camera's mount: set mount.forward and "
                          "mount.height (and mount.measured = true) in the robot file")
    return CameraMount(
        s["mount.forward"], s["mount.height"], math.radians(s["mount.yaw_deg"]),
        math.radians(s["mount.pitch_deg"]), math.radians(s["mount.roll_deg"]),
        measured=s["mount.measured"],
    )


# ------------------------------------------------------------------ simulated robots


def simulated_intrinsics(arena: Arena) -> Intrinsics:
    cam = arena.camera
    return Intrinsics(cam.width, cam.height, cam.fx, cam.fy, cam.cx, cam.cy,
                      (cam.k1, cam.k2, 0.0, 0.0))


def simulated_robot(
    arena: Arena, name: str, *, intrinsics: Path | None = None
) -> dict[str, Any]:
    """What the robot file of simulated car ``name`` says: the arena's car model and sensor
    (exact in simulation, so measured), its address, the arena's site."""
    car, cm = arena.car(name), arena.car_model
    return {
        "name": car.name,
        "car": car.address,
        "car_id": car.id,
        "mount.forward": cm.camera_forward,
        "mount.height": cm.camera_height,
        "mount.measured": True,
        "drive.effective_track": cm.effective_track,
        "drive.max_wheel_speed": cm.max_wheel_speed,
        "drive.deadband": cm.duty_deadband,
        "view.range": arena.sensing.range,
        "view.hfov_deg": arena.sensing.hfov_deg,
        "intrinsics": intrinsics,
        "sensing": arena.sensing.mode,
    }


def agent_config(arena: Arena, name: str, **overrides: Any) -> AgentConfig:
    """The configuration of simulated car ``name``'s agent: its site and simulated robot."""
    return config_from_site(arena.site, simulated_robot(arena, name), **overrides)


def write_simulated_robot(
    arena: Arena, name: str, run_dir: Path, **settings: Any
) -> Path:
    """Write what a simulated robot's agent reads (``RUN/site.toml``, ``RUN/camera.toml``,
    ``RUN/NAME.robot.toml``) and return its robot file: the simulator's robots start from
    files exactly as real ones do. ``settings`` add or replace robot file keys."""
    run_dir.mkdir(parents=True, exist_ok=True)
    site, camera = run_dir / "site.toml", run_dir / "camera.toml"
    _write_if_changed(site, site_to_toml(arena.site))
    _write_if_changed(camera, intrinsics_toml(simulated_intrinsics(arena)))
    robot = {**simulated_robot(arena, name, intrinsics=camera), "site": site,
             "run_dir": run_dir, **settings}
    path = run_dir / f"{name}.robot.toml"
    _write_if_changed(path, to_toml(merge({}, robot)))
    return path


def _write_if_changed(path: Path, text: str) -> None:
    if not (path.exists() and path.read_text(encoding="utf-8") == text):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)


def simulated_tag_map(arena: Arena) -> TagMap:
    """The camera map of a simulated robot: the arena's site, exact lens and mount."""
    settings = simulated_robot(arena, arena.cars[0].name)
    return map_from_site(arena.site, simulated_intrinsics(arena), mount_of(settings))
